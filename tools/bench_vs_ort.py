"""octet against ONNX Runtime 1.31.1 on single-node int8 matmul models, in one process.

For each model kind, shape (M, K, N) and thread count, both engines get the same
model bytes (B a constant initializer) and the same input. The outputs are compared
bit for bit first; then the two engines are timed alternately (warm-up, then
`--repeat` rounds of octet / ONNX Runtime, each round a loop long enough to be timed
reliably; the timer and the alternation are `octet bench`'s, python/octet/measure.py)
and the table gives the min and median per-run time, the ratio ONNX
Runtime / octet (> 1: octet is faster), GOPS (2*M*K*N per run) and the percentage of
the int8 peak of the cores used (--peak-gops per core, or measured by
int8_peak_bench from the build folder). On a shared machine the wall-clock
numbers include time the threads waited for a core, so the table also gives the
process CPU time per run (all threads summed; both engines idle without spinning
between runs) and its ratio, which is less sensitive to other processes.

ONNX Runtime: CPU EP, ORT_ENABLE_ALL, intra_op_num_threads=T, inter_op_num_threads=1,
spinning off (its spinning workers would otherwise burn the other core while octet
runs; --ort-spinning turns it on). octet: octet.InferenceSession(model, threads=T).

Kinds: MatMulInteger (u8 A, s8 B), QLinearMatMul (u8 A, s8 B, u8 Y), DQ->MatMul->Q with
int8 activations (s8 x/W/y) and with uint8 activations (u8 x/y, s8 W).
--check-only runs the exactness checks without timing, adding com.microsoft
MatMulIntegerToFloat and DynamicQuantizeMatMul (at ORT_DISABLE_ALL and ORT_ENABLE_ALL)
and the DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul form of quantize_dynamic.

Whole real models (MiniLM, the detector; time and peak RSS): tools/bench_models.py, also
reached as `tools/bench_vs_ort.py --whole-models [its options]`.

    .venv/bin/python tools/bench_vs_ort.py --octet-build build/wire [--threads 1,2]
        [--shapes 1x1024x1024,128x1024x1024] [--kinds matmulinteger,qlinearmatmul]
        [--repeat 7] [--quick] [--check-only]
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
import host  # noqa: E402
import measure  # noqa: E402
DEFAULT_SHAPES = [(1, 1024, 1024), (16, 1024, 1024), (128, 1024, 1024), (512, 1024, 1024),
                  (128, 1024, 4096), (128, 4096, 1024), (1, 4096, 4096)]
KINDS = ["matmulinteger", "qlinearmatmul", "qdq_s8", "qdq_u8"]
ORT_OPSET = 21
IR_VERSION = 10  # ONNX Runtime 1.31.1 reads IR <= 13; onnx 1.23 would write 14


def import_octet(build: str | None):
    """octet from a build folder (python/octet + the _octet module built there), or installed."""
    if build is None:
        return importlib.import_module("octet")
    build_dir = Path(build).resolve()
    modules = list(build_dir.glob("_octet*.so"))
    if not modules:
        sys.exit(f"bench_vs_ort: no _octet*.so in {build_dir} (configure with -DOCTET_BUILD_PYTHON=ON)")
    package = Path(tempfile.mkdtemp(prefix="octet_bench_")) / "octet"
    package.mkdir()
    for source in (REPO_ROOT / "python" / "octet").glob("*.py"):
        shutil.copy(source, package / source.name)
    shutil.copy(modules[0], package / modules[0].name)
    sys.path.insert(0, str(package.parent))
    return importlib.import_module("octet")


def const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def make_model(nodes, inputs, outputs, initializers, ms_domain=False):
    opsets = [helper.make_opsetid("", ORT_OPSET)]
    if ms_domain:
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    graph = helper.make_graph(nodes, "bench", inputs, outputs, initializers)
    return helper.make_model(graph, opset_imports=opsets, ir_version=IR_VERSION).SerializeToString()


def tensor_info(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, list(shape))


class Case:
    """One single-node (or one-group) model with its input."""

    def __init__(self, kind, m, k, n, rng):
        self.kind, self.m, self.k, self.n = kind, m, k, n
        u8, s8 = TensorProto.UINT8, TensorProto.INT8
        a_scale, b_scale = np.float32(0.02), np.float32(0.005)
        # Outputs spread over the 8-bit range (the product's spread grows as sqrt(K)).
        y_scale = np.float32(a_scale * b_scale * 40.0 * np.sqrt(k))
        w = rng.integers(-128, 128, (k, n), dtype=np.int8)
        if kind in ("matmulinteger", "qlinearmatmul"):
            self.feeds = {"A": rng.integers(0, 256, (m, k), dtype=np.uint8)}
            inputs = [tensor_info("A", u8, (m, k))]
            if kind == "matmulinteger":
                nodes = [helper.make_node("MatMulInteger", ["A", "B", "za", "zb"], ["Y"])]
                inits = [const("B", w), const("za", np.uint8(131)), const("zb", np.int8(-3))]
                outputs = [tensor_info("Y", TensorProto.INT32, (m, n))]
            else:
                nodes = [helper.make_node("QLinearMatMul",
                                          ["A", "as", "za", "B", "bs", "zb", "ys", "zy"], ["Y"])]
                inits = [const("as", a_scale), const("za", np.uint8(131)), const("B", w),
                         const("bs", b_scale), const("zb", np.int8(0)), const("ys", y_scale),
                         const("zy", np.uint8(128))]
                outputs = [tensor_info("Y", u8, (m, n))]
        else:
            signed = kind == "qdq_s8"
            x_type = s8 if signed else u8
            x = (rng.integers(-128, 128, (m, k), dtype=np.int8) if signed
                 else rng.integers(0, 256, (m, k), dtype=np.uint8))
            x_zero = np.int8(-5) if signed else np.uint8(131)
            y_zero = np.int8(3) if signed else np.uint8(128)
            self.feeds = {"X": x}
            inputs = [tensor_info("X", x_type, (m, k))]
            nodes = [helper.make_node("DequantizeLinear", ["X", "xs", "xz"], ["Xf"]),
                     helper.make_node("DequantizeLinear", ["W", "ws", "wz"], ["Wf"]),
                     helper.make_node("MatMul", ["Xf", "Wf"], ["Yf"]),
                     helper.make_node("QuantizeLinear", ["Yf", "ys", "yz"], ["Y"])]
            inits = [const("xs", a_scale), const("xz", x_zero), const("W", w),
                     const("ws", b_scale), const("wz", np.int8(0)),
                     const("ys", np.float32(a_scale * b_scale * 40.0 * np.sqrt(k))),
                     const("yz", y_zero)]
            outputs = [tensor_info("Y", x_type, (m, n))]
        self.model = make_model(nodes, inputs, outputs, inits)

    @property
    def ops(self):
        return 2 * self.m * self.k * self.n


def ort_session(model, threads, level="all", spinning=False):
    return measure.ort_session(model, threads, level=level, spinning=spinning)


def mismatches(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"shape/dtype {a.shape} {a.dtype} vs {b.shape} {b.dtype}"
    bits_a = a.view(np.uint8) if a.dtype.itemsize == 1 else a.view(f"u{a.dtype.itemsize}")
    bits_b = b.view(np.uint8) if b.dtype.itemsize == 1 else b.view(f"u{b.dtype.itemsize}")
    return int((bits_a != bits_b).sum())


def measure_peak(build, fallback):
    """Per-core int8 peak in GOPS from int8_peak_bench (vpdpbusd zmm), else fallback."""
    exe = Path(build).resolve() / "int8_peak_bench" if build else None
    if exe is None or not exe.exists():
        return fallback, f"{fallback:.0f} GOPS/core (given)"
    out = subprocess.run([str(exe)], capture_output=True, text=True).stdout
    best = 0.0
    for line in out.splitlines():  # "vpdpbusd zmm (AVX-512 VNNI)   <1 core>   <all cores> ..."
        if line.startswith("vpdpbusd zmm"):
            found = re.search(r"\)\s+([0-9.]+)", line)
            if found:
                best = float(found.group(1))
    if best <= 0:
        return fallback, f"{fallback:.0f} GOPS/core (int8_peak_bench output not parsed)"
    return best, f"{best:.0f} GOPS/core (int8_peak_bench, vpdpbusd zmm, this run)"


def bench(args, octet):
    rng = np.random.default_rng(7)
    peak, peak_note = (args.peak_gops, f"{args.peak_gops:.0f} GOPS/core (given)") \
        if args.peak_gops else measure_peak(args.octet_build, 467.0)
    print(f"# load before: {os.getloadavg()}; peak {peak_note}")
    print("| kind | M x K x N | threads | octet min / median (us) | ORT min / median (us) |"
          " ORT/octet (min) | octet GOPS | % of peak | CPU us octet / ORT (min) |"
          " ORT/octet (CPU) | equal |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for kind in args.kinds:
        for (m, k, n) in args.shapes:
            case = Case(kind, m, k, n, rng)
            for threads in args.threads:
                sess_o = octet.InferenceSession(case.model, threads=threads)
                sess_r = ort_session(case.model, threads, spinning=args.ort_spinning)
                y_o = sess_o.run(None, case.feeds)[0]
                y_r = sess_r.run(None, case.feeds)[0]
                diff = mismatches(y_o, y_r)
                runs = {"octet": lambda: sess_o.run(None, case.feeds),
                        "ort": lambda: sess_r.run(None, case.feeds)}
                # A round times each engine in a loop of at least --loop-s.
                samples = measure.alternate(runs, rounds=args.repeat, warmup=3,
                                            min_seconds=args.loop_s)
                times_o = [s.wall for s in samples["octet"]]
                times_r = [s.wall for s in samples["ort"]]
                cpu_o = [s.cpu for s in samples["octet"]]
                cpu_r = [s.cpu for s in samples["ort"]]
                o_min, r_min = min(times_o), min(times_r)
                gops = case.ops / o_min / 1e9
                print(f"| {kind} | {m}x{k}x{n} | {threads} | {o_min * 1e6:.1f} / "
                      f"{statistics.median(times_o) * 1e6:.1f} | {r_min * 1e6:.1f} / "
                      f"{statistics.median(times_r) * 1e6:.1f} | {r_min / o_min:.2f} | "
                      f"{gops:.0f} | {100 * gops / (peak * threads):.0f}% | "
                      f"{min(cpu_o) * 1e6:.1f} / {min(cpu_r) * 1e6:.1f} | "
                      f"{min(cpu_r) / min(cpu_o):.2f} | "
                      f"{'yes' if diff == 0 else f'NO ({diff})'} |", flush=True)
    print(f"# load after: {os.getloadavg()}")


# ---------------------------------------------------------------- exactness checks


def float_models(rng, m, k, n, b_signed, per_column, with_bias, batch):
    """MatMulIntegerToFloat, DynamicQuantizeMatMul and the unfused quantize_dynamic form."""
    b_type = np.int8 if b_signed else np.uint8
    lo, hi = (-128, 128) if b_signed else (0, 256)
    w = rng.integers(lo, hi, (k, n)).astype(b_type)
    b_scale = (rng.uniform(0.001, 0.02, n) if per_column else rng.uniform(0.001, 0.02, 1)).astype(
        np.float32).reshape(-1 if per_column else ())
    b_zero = (rng.integers(lo, hi, n) if per_column else rng.integers(lo, hi, 1)).astype(
        b_type).reshape(-1 if per_column else ())
    bias = (rng.standard_normal(n) * 3).astype(np.float32)
    a_shape = (batch, m, k) if batch else (m, k)  # a batch of A against one 2-D B
    x = (rng.standard_normal(a_shape) * 2 - 0.3).astype(np.float32)
    a_u8 = rng.integers(0, 256, a_shape).astype(np.uint8)
    y_shape = (batch, m, n) if batch else (m, n)
    models = {}
    bias_inputs = ["bias"] if with_bias else []
    inits = [const("B", w), const("bs", b_scale), const("bz", b_zero)] + (
        [const("bias", bias)] if with_bias else [])
    models["DynamicQuantizeMatMul"] = (make_model(
        [helper.make_node("DynamicQuantizeMatMul", ["X", "B", "bs", "bz"] + bias_inputs, ["Y"],
                          domain="com.microsoft")],
        [tensor_info("X", TensorProto.FLOAT, a_shape)],
        [tensor_info("Y", TensorProto.FLOAT, y_shape)], inits, ms_domain=True), {"X": x})
    models["MatMulIntegerToFloat"] = (make_model(
        [helper.make_node("MatMulIntegerToFloat", ["A", "B", "as", "bs", "az", "bz"] + bias_inputs,
                          ["Y"], domain="com.microsoft")],
        [tensor_info("A", TensorProto.UINT8, a_shape)],
        [tensor_info("Y", TensorProto.FLOAT, y_shape)],
        inits + [const("as", np.float32(0.0173)), const("az", np.uint8(119))], ms_domain=True),
        {"A": a_u8})
    # quantize_dynamic's form: DynamicQuantizeLinear, MatMulInteger, Cast, Mul(scales), Mul (+ Add).
    nodes = [helper.make_node("DynamicQuantizeLinear", ["X"], ["Xq", "Xs", "Xz"]),
             helper.make_node("MatMulInteger", ["Xq", "B", "Xz", "bz"], ["Acc"]),
             helper.make_node("Cast", ["Acc"], ["AccF"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["Xs", "bs"], ["S"]),
             helper.make_node("Mul", ["AccF", "S"], ["Y0" if with_bias else "Y"])]
    if with_bias:
        nodes.append(helper.make_node("Add", ["Y0", "bias"], ["Y"]))
    models["DynamicQuantizeLinear+MatMulInteger+Cast+Mul"] = (make_model(
        nodes, [tensor_info("X", TensorProto.FLOAT, a_shape)],
        [tensor_info("Y", TensorProto.FLOAT, y_shape)], inits), {"X": x})
    return models


def check(args, octet):
    rng = np.random.default_rng(3)
    failures = 0
    levels = {"DISABLE_ALL": "disable", "ENABLE_ALL": "all"}
    configs = [(m, k, n, b_signed, per_column, with_bias, batch)
               for (m, k, n) in [(1, 64, 48), (37, 300, 129), (128, 1024, 256)]
               for b_signed in (False, True) for per_column in (False, True)
               for with_bias in (False, True) for batch in (0, 3)]
    tally = {}
    for (m, k, n, b_signed, per_column, with_bias, batch) in configs:
        if batch and k > 300:
            continue
        for name, (model, feeds) in float_models(rng, m, k, n, b_signed, per_column, with_bias,
                                                 batch).items():
            label = (f"{name} {m}x{k}x{n} B={'s8' if b_signed else 'u8'} "
                     f"{'per-column' if per_column else 'per-tensor'}"
                     f"{' bias' if with_bias else ''}{' batch' if batch else ''}")
            outs = {}
            for level_name, level in levels.items():
                try:
                    outs[level_name] = ort_session(model, 1, level).run(None, feeds)[0]
                except Exception as e:  # noqa: BLE001 - ORT refusing a form is a result
                    outs[level_name] = f"ORT error: {str(e).splitlines()[0][:100]}"
            try:
                y = octet.InferenceSession(model, threads=args.threads[-1]).run(None, feeds)[0]
            except Exception as e:  # noqa: BLE001
                y = f"octet error: {str(e)[:160]}"
            results = []
            for level_name, ref in outs.items():
                if isinstance(ref, str) or isinstance(y, str):
                    results.append(f"{level_name}: {ref if isinstance(ref, str) else y}")
                    continue
                diff = mismatches(y, ref)
                results.append(f"{level_name}: {'equal' if diff == 0 else f'{diff} differ'}")
            between = ""
            if all(not isinstance(v, str) for v in outs.values()):
                d = mismatches(outs["DISABLE_ALL"], outs["ENABLE_ALL"])
                if d:
                    between = f"; ORT levels disagree on {d} values"
            ok = all(r.endswith("equal") for r in results)
            key = (name, ok, between != "")
            tally[key] = tally.get(key, 0) + 1
            if not ok or between or args.verbose:
                print(f"{'ok ' if ok else 'BAD'} {label}: {', '.join(results)}{between}")
            failures += not ok
    for (name, ok, levels_differ), count in sorted(tally.items()):
        print(f"# {name}: {count} cases {'equal to ORT at both levels' if ok else 'NOT equal'}"
              f"{' (ORT levels disagree)' if levels_differ else ''}")
    return failures


def parse_shapes(text):
    return [tuple(int(v) for v in s.split("x")) for s in text.split(",")]


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--whole-models":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import bench_models
        sys.exit(bench_models.main(sys.argv[2:]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--octet-build", help="build folder with _octet*.so (default: installed octet)")
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--shapes", type=parse_shapes, default=DEFAULT_SHAPES,
                        help="comma-separated MxKxN")
    parser.add_argument("--kinds", default=",".join(KINDS), help=",".join(KINDS))
    parser.add_argument("--repeat", type=int, default=7, help="timed rounds per engine")
    parser.add_argument("--loop-s", type=float, default=0.05, help="seconds per timed round")
    parser.add_argument("--quick", action="store_true", help="3 rounds of 20 ms, M in {1, 128}")
    parser.add_argument("--peak-gops", type=float, help="per-core int8 peak (default: measure)")
    parser.add_argument("--ort-spinning", action="store_true")
    parser.add_argument("--check-only", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--whole-models", action="store_true",
                        help="(first argument) whole real models instead: the other arguments "
                        "go to tools/bench_models.py")
    args = parser.parse_args()
    args.threads = [int(t) for t in args.threads.split(",")]
    args.kinds = args.kinds.split(",")
    if args.quick:
        args.repeat, args.loop_s = 3, 0.02
        args.shapes = [s for s in args.shapes if s[0] in (1, 128)][:3]
    octet = import_octet(args.octet_build)
    print(f"# onnxruntime {ort.__version__}, numpy {np.__version__}")
    print(f"# host: {host.describe(octet)}")
    if args.check_only:
        sys.exit(1 if check(args, octet) else 0)
    bench(args, octet)


if __name__ == "__main__":
    main()
