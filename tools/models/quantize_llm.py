"""Quantized forms of the decoder models (tools/models/decoder.py), all made by onnxruntime
1.31.1's own quantizers:

  a8w8            quantize_static, QDQ, S8S8, per-channel weights, only the weight MatMuls
                  (q/k/v/o, gate/up/down, LM head), their inputs quantized and their outputs
                  float (OpTypesToExcludeOutputQuantization), Q/DQ in ai.onnx; MinMax
                  calibration on tools/models/data/llm_prompts.txt
  a8w8_ms         the same with Q/DQ in the com.microsoft domain, as AMD Quark writes them
                  (extra option UseQDQContribOps)
  q4_qdq_b32      MatMulNBitsQuantizer QDQ form: DequantizeLinear(uint4 + zero points,
  q4_qdq_b128       axis 0, block_size 32 / 128) -> MatMul
  q4s_qdq_b32     the same with int4 and no zero points (is_symmetric)
  nbits_b32_acc4  MatMulNBitsQuantizer QOperator form: com.microsoft MatMulNBits (uint4 with
  nbits_b32_acc1    zero points, block 32 / 128, accuracy_level 4 = int8 activations, 1 =
  nbits_b128_acc4   float) and the embedding Gather as com.microsoft GatherBlockQuantized
  nbits_b128_acc1   (uint4, blocks along hidden)

The attention MatMuls (scores, context) and the rotary MatMul are never quantized: they have
no weight, and an 8-bit scale on the positions would move every RoPE angle."""

import os

import onnx

import common

A8W8 = {"a8w8": False, "a8w8_ms": True}  # variant -> UseQDQContribOps
# variant -> (quant_format, block_size, is_symmetric, accuracy_level)
NBITS = {
    "q4_qdq_b32": ("QDQ", 32, False, None),
    "q4_qdq_b128": ("QDQ", 128, False, None),
    "q4s_qdq_b32": ("QDQ", 32, True, None),
    "nbits_b32_acc4": ("QOperator", 32, False, 4),
    "nbits_b32_acc1": ("QOperator", 32, False, 1),
    "nbits_b128_acc4": ("QOperator", 128, False, 4),
    "nbits_b128_acc1": ("QOperator", 128, False, 1),
}
VARIANTS = tuple(A8W8) + tuple(NBITS)


def activation_matmuls(model):
    """MatMul nodes whose second input is not an initializer, and the rotary MatMul (its
    constant is the first input): the ones A8W8 leaves float."""
    inits = {t.name for t in model.graph.initializer}
    return [n.name for n in model.graph.node if n.op_type == "MatMul" and
            (n.input[1] not in inits or n.input[0] in inits)]


def _external(float_path):
    return os.path.exists(float_path + ".data")


def calibration_feeds(cfg, sequences, cached):
    import decoder
    feeds = []
    for s in sequences:
        feed = decoder.batch_feeds([s])
        if cached:
            feed.update(decoder.empty_past(cfg, 1))
        feeds.append(feed)
    return feeds


def quantize(cfg, float_path, out_path, variant, cached, sequences):
    model = onnx.load(float_path, load_external_data=False)
    if variant in A8W8:
        recipe = dict(fmt="QDQ", per_channel=True, act="QInt8", weight="QInt8",
                      op_types=["MatMul"],
                      extra={"UseQDQContribOps": A8W8[variant],
                             "OpTypesToExcludeOutputQuantization": ["MatMul"]})
        common.quantize_recipe(float_path, out_path, recipe,
                               calibration_feeds(cfg, sequences, cached),
                               activation_matmuls(model), external_data=_external(float_path))
        return
    from onnxruntime.quantization import QuantFormat
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    fmt, block, symmetric, level = NBITS[variant]
    ops = ("MatMul", "Gather") if fmt == "QOperator" else ("MatMul",)
    with common._quiet():
        quantizer = MatMulNBitsQuantizer(onnx.load(float_path), block_size=block,
                                         is_symmetric=symmetric, accuracy_level=level,
                                         quant_format=getattr(QuantFormat, fmt),
                                         op_types_to_quantize=ops)
        quantizer.process()
    tmp = out_path + ".tmp"
    external = _external(float_path) or quantizer.model.model.ByteSize() > (1 << 30)
    if external and os.path.exists(tmp + ".data"):
        os.remove(tmp + ".data")
    quantizer.model.save_model_to_file(tmp, external)
    if external:
        os.replace(tmp + ".data", out_path + ".data")
        common._relocate_external_data(tmp, os.path.basename(tmp) + ".data",
                                       os.path.basename(out_path) + ".data")
    os.replace(tmp, out_path)
