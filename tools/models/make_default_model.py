#!/usr/bin/env python3
"""Builds octet's bundled default model, deterministically.

A small float MLP classifier (64 -> 128 -> 64 -> 10, Relu) with weights from a
seeded numpy generator, quantized by onnxruntime's own static quantizer in QDQ
format with its defaults (int8 activations, int8 weights; per-channel weights),
which is what users of that tool get. Writes:

    build/models/default_mlp.int8.onnx   the quantized model
    build/models/default_mlp.input.npy   a deterministic input batch

Existing files are kept unless --force is given.
"""

import argparse
import logging
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEED = 20261130
LAYERS = [64, 128, 64, 10]
BATCH = 4
OPSET = 21
IR_VERSION = 10  # onnxruntime 1.31.1 reads IR versions up to 13
# Ops the quantized graph may contain: the ones octet implements for it.
EXPECTED_OPS = {"QuantizeLinear", "DequantizeLinear", "MatMul", "Add", "Relu"}

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_DIR = os.path.join(ROOT, "build", "models")


def build_float_model(rng):
    nodes, initializers = [], []
    current = "input"
    for i, (fan_in, fan_out) in enumerate(zip(LAYERS, LAYERS[1:])):
        weight = (rng.standard_normal((fan_in, fan_out)) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        bias = (rng.standard_normal(fan_out) * 0.1).astype(np.float32)
        initializers += [numpy_helper.from_array(weight, "w%d" % i),
                         numpy_helper.from_array(bias, "b%d" % i)]
        last = i == len(LAYERS) - 2
        nodes.append(helper.make_node("MatMul", [current, "w%d" % i], ["mm%d" % i], name="matmul%d" % i))
        add_out = "logits" if last else "add%d" % i
        nodes.append(helper.make_node("Add", ["mm%d" % i, "b%d" % i], [add_out], name="add%d" % i))
        if not last:
            nodes.append(helper.make_node("Relu", [add_out], ["relu%d" % i], name="relu%d" % i))
            current = "relu%d" % i
    graph = helper.make_graph(
        nodes, "default_mlp",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", LAYERS[0]])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", LAYERS[-1]])],
        initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              ir_version=IR_VERSION, producer_name="octet make_default_model")
    onnx.checker.check_model(model)
    return model


def make_inputs(rng, count):
    return rng.standard_normal((count, BATCH, LAYERS[0])).astype(np.float32)


def quantize(float_path, out_path, calibration):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    logging.getLogger().setLevel(logging.ERROR)  # its "consider pre-processing" advice

    class Reader(CalibrationDataReader):
        def __init__(self):
            self._batches = iter(calibration)

        def get_next(self):
            batch = next(self._batches, None)
            return None if batch is None else {"input": batch}

    quantize_static(float_path, out_path, Reader(), quant_format=QuantFormat.QDQ,
                    per_channel=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out-dir", default=DEFAULT_DIR, help="where to write (default %(default)s)")
    parser.add_argument("--force", action="store_true", help="rebuild even if the files exist")
    args = parser.parse_args()

    model_path = os.path.join(args.out_dir, "default_mlp.int8.onnx")
    input_path = os.path.join(args.out_dir, "default_mlp.input.npy")
    if not args.force and os.path.exists(model_path) and os.path.exists(input_path):
        print("default model present: %s (use --force to rebuild)" % model_path)
        return 0
    os.makedirs(args.out_dir, exist_ok=True)

    rng = np.random.default_rng(SEED)
    float_model = build_float_model(rng)
    calibration = make_inputs(rng, 16)
    with tempfile.TemporaryDirectory() as tmp:
        float_path = os.path.join(tmp, "default_mlp.float.onnx")
        onnx.save(float_model, float_path)
        quantize(float_path, os.path.join(tmp, "quantized.onnx"), calibration)
        quantized = onnx.load(os.path.join(tmp, "quantized.onnx"))

    ops = {node.op_type for node in quantized.graph.node}
    if not ops <= EXPECTED_OPS:
        sys.exit("error: the quantized graph has ops octet's default model does not expect: %s"
                 % sorted(ops - EXPECTED_OPS))
    onnx.save(quantized, model_path)
    np.save(input_path, make_inputs(rng, 1)[0])
    print("wrote %s (ops: %s)" % (model_path, ", ".join(sorted(ops))))
    print("wrote %s" % input_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
