#!/usr/bin/env python3
"""Builds the third model family: captcha-whisperer's CRNN (`captcha_crnn.onnx`, MIT, 19 MB
of trained float weights shipped in the PyPI package captcha-whisperer 0.1.0: a DenseNet-like
trunk of 24 Conv, a bidirectional LSTM unrolled into 80 Gemm with Sigmoid/Tanh, greedy CTC
over 20 time steps and 37 classes), quantized with onnxruntime.quantization. Its inputs are
drawn by the PyPI `captcha` package (0.7.1) from known text, so task accuracy is measured
against ground truth. Deterministic; nothing is downloaded beyond the pip packages.

Writes into build/models/ (kept unless --force):
    crnn.fp32.onnx       the packaged model as shipped (opset 17, input [batch, 3, 60, 160]
                         BGR 0..255, output logits [20, batch, 37])
    crnn.pre.onnx        onnxruntime.quantization.quant_pre_process of it (ONNX shape
                         inference and ORT's basic graph optimizations), what the quantizer
                         is documented to want
    crnn.dynamic.onnx    quantize_dynamic, int8 weights (DynamicQuantizeLinear + ConvInteger /
                         MatMulInteger); each Gemm(transB=1) is first written as MatMul with
                         the transposed weight + Add, because quantize_dynamic 1.31.1 turns
                         these Gemms (one weight shared by 20 time steps) into a graph ORT
                         refuses to load ("Incompatible dimensions")
    crnn.qdq_pc.onnx     quantize_static QDQ, ORT's defaults: S8S8, per-channel weights, MinMax
    crnn.qdq_u8.onnx     quantize_static QDQ, uint8 activations (ORT fuses these groups on
                         x86), per-channel weights, Percentile 99.999
Calibration: 64 captchas (seeds apart from the evaluation set's).

The `captcha` package draws with `secrets`, which cannot be seeded; the builder hands its
module a seeded stand-in (randbelow, choice, randbits from random.Random) so that every image
is repeatable. Text: 4 characters from 1-9 and A-Z without O (the package's decoder never
emits class 0, the digit 0, and O/0 are one glyph in this font), font sizes 36-44 px.
"""

import argparse
import os
import random
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

PACKAGE = "captcha_whisperer"
VARIANTS = ("fp32", "dynamic", "qdq_pc", "qdq_u8")
QUANTIZED = VARIANTS[1:]
ALPHABET = "123456789ABCDEFGHIJKLMNPQRSTUVWXYZ"
TEXT_LENGTH = 4
FONT_SIZES = (36, 40, 44)
CALIBRATION_SEED, EVAL_SEED = 500, 600
CALIBRATION_IMAGES = 64
HEIGHT, WIDTH = 60, 160
RECIPES = {
    "qdq_pc": dict(fmt="QDQ", per_channel=True, act="QInt8", weight="QInt8"),
    "qdq_u8": dict(fmt="QDQ", per_channel=True, act="QUInt8", weight="QInt8",
                   method="Percentile", extra={"CalibPercentile": 99.999}),
}


class _SeededSecrets:
    """What captcha.image takes from `secrets`, from a seeded random.Random."""

    def __init__(self, seed):
        self._random = random.Random(seed)

    def randbelow(self, n):
        return self._random.randrange(n)

    def choice(self, items):
        return self._random.choice(items)

    def randbits(self, k):
        return self._random.getrandbits(k)


def captchas(seed, count):
    """(texts, images): `count` captchas drawn by the captcha package, as the model's input
    float32 [count, 3, 60, 160] (BGR, 0..255, the package's own preprocessing)."""
    import captcha.image
    from captcha_whisperer.preprocess import _to_bgr_chw
    texts_rng = random.Random(seed)
    texts = ["".join(texts_rng.choice(ALPHABET) for _ in range(TEXT_LENGTH))
             for _ in range(count)]
    saved = captcha.image.secrets
    captcha.image.secrets = _SeededSecrets(seed + 1)
    try:
        generator = captcha.image.ImageCaptcha(width=WIDTH, height=HEIGHT, font_sizes=FONT_SIZES)
        images = np.stack([_to_bgr_chw(generator.generate_image(t), HEIGHT, WIDTH)
                           for t in texts]).astype(np.float32)
    finally:
        captcha.image.secrets = saved
    return texts, images


def eval_set(count):
    """The check's input: (texts, feed) for `count` captchas."""
    texts, images = captchas(EVAL_SEED, count)
    return texts, {"image": images}


def calibration_feeds():
    _, images = captchas(CALIBRATION_SEED, CALIBRATION_IMAGES)
    return [{"image": images[i:i + 8]} for i in range(0, len(images), 8)]


def decode(logits):
    """The package's greedy CTC decoding (captcha_whisperer.recognizer.decode)."""
    from captcha_whisperer.recognizer import decode as package_decode
    return package_decode(logits)[0]


def gemm_as_matmul(model):
    """Gemm(x, W, b, transB=1, alpha=beta=1) -> Add(MatMul(x, W^T), b), W^T stored once per
    weight (the LSTM cell's weights are shared by all time steps)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    inits = {t.name: t for t in model.graph.initializer}
    transposed, nodes = {}, []
    for node in model.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type != "Gemm" or attrs.get("transA", 0) or not attrs.get("transB", 0) or \
                attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0 or \
                node.input[1] not in inits:
            nodes.append(node)
            continue
        weight = node.input[1]
        if weight not in transposed:
            transposed[weight] = weight + "_T"
            model.graph.initializer.append(numpy_helper.from_array(
                np.ascontiguousarray(numpy_helper.to_array(inits[weight]).T), weight + "_T"))
        product = node.output[0] + "_matmul"
        nodes.append(helper.make_node("MatMul", [node.input[0], transposed[weight]], [product],
                                      name=node.name + "_matmul"))
        nodes.append(helper.make_node("Add", [product, node.input[2]], [node.output[0]],
                                      name=node.name + "_bias"))
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    used = {i for n in model.graph.node for i in n.input}
    for name in transposed:
        if name not in used:
            model.graph.initializer.remove(inits[name])
    return model


def model_path(variant):
    return os.path.join(common.MODELS_DIR, "crnn.%s.onnx" % variant)


def build(variants=VARIANTS, force=False, log=lambda *a: None):
    from onnxruntime.quantization.shape_inference import quant_pre_process
    float_path, pre_path = model_path("fp32"), model_path("pre")
    if force or not os.path.exists(float_path):
        common.save(onnx.load(common.package_file(PACKAGE, "models", "captcha_crnn.onnx")),
                    float_path)
        log("wrote", float_path)
    if any(v != "fp32" for v in variants) and (force or not os.path.exists(pre_path)):
        with common._quiet():
            quant_pre_process(float_path, pre_path + ".tmp", skip_symbolic_shape=True)
        os.replace(pre_path + ".tmp", pre_path)
        log("wrote", pre_path)
    paths = {"fp32": float_path}
    for variant in variants:
        path = model_path(variant)
        paths[variant] = path
        if variant == "fp32" or (os.path.exists(path) and not force):
            continue
        if variant == "dynamic":
            matmul_path = model_path("pre_matmul")
            common.save(gemm_as_matmul(onnx.load(pre_path)), matmul_path)
            common.quantize(matmul_path, path, "dynamic",
                            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
            os.remove(matmul_path)
        else:
            common.quantize_recipe(pre_path, path, RECIPES[variant], calibration_feeds())
        log("wrote", path)
    return paths


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--force", action="store_true", help="rebuild models already cached")
    parser.add_argument("--accuracy", type=int, metavar="N",
                        help="print the float model's exact-match rate on N captchas")
    args = parser.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        parser.error("unknown variants %s (known: %s)" % (sorted(unknown), ", ".join(VARIANTS)))
    paths = build(variants, args.force, log=print)
    for variant in variants:
        print("%-8s %s  sha256 %s" % (variant, paths[variant], common.sha256(paths[variant])[:16]))
    if args.accuracy:
        import onnxruntime as ort
        texts, feed = eval_set(args.accuracy)
        logits = ort.InferenceSession(paths["fp32"], providers=["CPUExecutionProvider"]).run(
            None, feed)[0]
        read = decode(logits)
        print("float model: %d of %d read exactly" % (sum(a == b for a, b in zip(read, texts)),
                                                      len(texts)))


if __name__ == "__main__":
    main()
