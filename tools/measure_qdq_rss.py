#!/usr/bin/env python3
"""Peak RSS growth around `run` for one 256x1024x1024 DequantizeLinear -> MatMul ->
QuantizeLinear group, fused and with OCTET_QDQ=0 (issue 4; docs/qdq.md, "Memory").

Each measurement runs in a fresh process: create the session and the input, reset the
kernel's high-water mark (`echo 5 > /proc/self/clear_refs`), then run once and read
VmHWM - VmRSS(before run) from /proc/self/status.

    .venv/bin/python tools/measure_qdq_rss.py [--m 256 --k 1024 --n 1024] [--x-type s8|u8]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import sys, numpy as np, octet
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])  # kB
model, m, k, dtype = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
session = octet.InferenceSession(model, threads=1)
info = np.iinfo(dtype)
x = np.random.default_rng(0).integers(info.min, info.max + 1, (m, k)).astype(dtype)
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
before = status("VmRSS")
session.run(None, {"x": x})
print(status("VmHWM") - before)
"""


def build_model(path, m, k, n, x_type):
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper, save
    code = TensorProto.UINT8 if x_type == "uint8" else TensorProto.INT8
    rng = np.random.default_rng(1)
    w = rng.integers(-128, 128, (k, n)).astype(np.int8)
    inits = [numpy_helper.from_array(np.array(0.02, np.float32), "sx"),
             numpy_helper.from_array(np.array(3, x_type), "zx"),
             numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(np.array(0.01, np.float32), "sw"),
             numpy_helper.from_array(np.array(0.5, np.float32), "sy"),
             numpy_helper.from_array(np.array(0, x_type), "zy")]
    nodes = [helper.make_node("DequantizeLinear", ["x", "sx", "zx"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "sw"], ["wd"]),
             helper.make_node("MatMul", ["xd", "wd"], ["p"]),
             helper.make_node("QuantizeLinear", ["p", "sy", "zy"], ["y"])]
    graph = helper.make_graph(nodes, "rss", [helper.make_tensor_value_info("x", code, [m, k])],
                              [helper.make_tensor_value_info("y", code, [m, n])], inits)
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10),
         path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=256)
    parser.add_argument("--k", type=int, default=1024)
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--x-type", choices=["s8", "u8"], default="s8")
    args = parser.parse_args()
    x_type = "int8" if args.x_type == "s8" else "uint8"
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "group.onnx")
        build_model(model, args.m, args.k, args.n, x_type)
        result = {"m": args.m, "k": args.k, "n": args.n, "x_type": x_type}
        for label, qdq in (("fused", "1"), ("unfused_OCTET_QDQ=0", "0")):
            env = dict(os.environ, OCTET_QDQ=qdq)
            out = subprocess.run([sys.executable, "-c", CHILD, model, str(args.m), str(args.k),
                                  x_type], env=env, check=True, capture_output=True, text=True)
            result[label + "_peak_rss_growth_kib"] = int(out.stdout.split()[-1])
    print(json.dumps(result))


if __name__ == "__main__":
    main()
