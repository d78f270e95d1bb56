"""octet as an ONNX Runtime plugin EP against the other ways to run the same model
(issue 17; docs/benchmarks.md, "ONNX Runtime plugin EP").

Engines, each on the same model and inputs, in one process, warmed up, then --repeat rounds
that alternate the engines (one run each), min and median per engine:
  ep      ONNX Runtime 1.31.1 + octet's plugin EP (onnxruntime_ep_octet.session_options:
          EP threads = ORT intra-op threads = T, ORT_ENABLE_ALL, spinning off)
  ort     ONNX Runtime alone (CPU EP, ORT_ENABLE_ALL, intra_op_num_threads=T, spinning off)
  ov      OpenVINO standalone (pip openvino; CPU device, INFERENCE_NUM_THREADS=T, one stream,
          LATENCY hint). The onnxruntime-ep-openvino wheel registers on AMD CPUs but offers no
          device, so the OpenVINO EP row is OpenVINO itself (the tool says which it used).
  octet   octet standalone (octet.InferenceSession(model, threads=T))
Rows: all-MiniLM-L6-v2 in its four quantized forms (tools/models/build_minilm.py) at batch 1
(and --batches) x seq 128 on the bundled sentences, the detector (tools/models/build_cnn.py,
416x416) QDQ and QOperator on one synthetic image; 1 and 2 threads.

Peak RSS: a child process per engine, model and thread count (imports, session, two runs;
VmHWM, and the part above the RSS after the imports), as tools/bench_models.py does.

--forward: the forward route (EP option float_matmul=int8) on the float models: the EP's time
against ONNX Runtime's float run and the relative error of the first output
(max |ep - ort| / max |ort|; seed 000's gate is 2%).

--memory: seed 000's memory figure: peak RSS growth around one run of one 256x1024x1024
DequantizeLinear -> MatMul -> QuantizeLinear group (s8), through the EP and on the CPU EP
(fresh process each; the high-water mark reset after a warm-up run).

    .venv/bin/python -m pip install openvino            # for the ov column
    .venv/bin/python tools/bench_ep.py [--models minilm,det] [--threads 1,2] [--repeat 7]
        [--batches 1] [--engines ep,ort,ov,octet] [--no-rss] [--forward] [--memory]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

TOOLS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(TOOLS, "models"))
sys.path.insert(0, TOOLS)

SEQ = 128
ENGINES = ("ep", "ort", "ov", "octet")


def proc_status_kib(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise SystemExit("bench_ep: no %s in /proc/self/status" % field)


def ort_options(ort, threads):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return so


def make_session(engine, path, threads, **ep_options):
    """A callable feeds -> list of outputs."""
    if engine == "octet":
        import octet
        session = octet.InferenceSession(path, threads=threads,
                                         float_matmul=ep_options.get("float_matmul", "float"))
        return lambda feeds: session.run(None, feeds)
    if engine in ("ep", "ort"):
        import onnxruntime as ort
        so = ort_options(ort, threads)
        if engine == "ep":
            import onnxruntime_ep_octet as octet_ep
            so = octet_ep.session_options(threads=threads, sess_options=so, **ep_options)
        session = ort.InferenceSession(path, so, providers=None if engine == "ep" else
                                       ["CPUExecutionProvider"], enable_fallback=0)
        return lambda feeds: session.run(None, feeds)
    if engine == "ov":
        import openvino as ov
        core = ov.Core()
        compiled = core.compile_model(path, "CPU", {"INFERENCE_NUM_THREADS": str(threads),
                                                    "NUM_STREAMS": "1",
                                                    "PERFORMANCE_HINT": "LATENCY"})
        request = compiled.create_infer_request()
        names = [o.get_any_name() for o in compiled.outputs]

        def run(feeds):
            result = request.infer(feeds)
            return [np.asarray(result[compiled.output(n)]) for n in names]
        return run
    raise SystemExit("bench_ep: unknown engine %s" % engine)


def openvino_ep_note():
    """Whether the OpenVINO plugin EP offers a device here (it does not on AMD CPUs)."""
    try:
        import onnxruntime as ort
        import onnxruntime_ep_openvino as ov_ep
    except ImportError:
        return "onnxruntime-ep-openvino not installed"
    ort.register_execution_provider_library("openvino_ep", ov_ep.get_library_path())
    devices = [d for d in ort.get_ep_devices() if d.ep_name == ov_ep.get_ep_name()]
    return "OpenVINO EP devices: %s" % ([dict(d.ep_metadata).get("ov_device") for d in devices]
                                        or "none")


def rss_child(engine, path, threads, feeds_path, options_json):
    feeds = dict(np.load(feeds_path))
    if engine == "octet":
        import octet  # noqa: F401
    elif engine == "ov":
        import openvino  # noqa: F401
    else:
        import onnxruntime  # noqa: F401
        if engine == "ep":
            import onnxruntime_ep_octet  # noqa: F401
    base = proc_status_kib("VmRSS")
    run = make_session(engine, path, threads, **json.loads(options_json))
    for _ in range(2):
        run(feeds)
    print(json.dumps({"base": base, "peak": proc_status_kib("VmHWM")}))


def measure_rss(engine, path, threads, feeds_path, options=None):
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--rss-child", engine, path,
                          str(threads), feeds_path, json.dumps(options or {})],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


MEMORY_CHILD = r"""
import sys, ctypes, numpy as np
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
engine, model, m, k = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
sys.path.insert(0, sys.argv[5])
import bench_ep
run = bench_ep.make_session(engine, model, 1)
x = np.random.default_rng(0).integers(-128, 128, (m, k)).astype(np.int8)
growth = []
for _ in range(2):  # the first run, then a run after it (seed 000: warm-up, malloc_trim)
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = status("VmRSS")
    run({"x": x})
    growth.append(status("VmHWM") - before)
print(*growth)
"""


def memory_figure(repeat):
    import measure_qdq_rss
    m, k, n = 256, 1024, 1024
    with tempfile.TemporaryDirectory(prefix="octet_bench_ep_") as tmp:
        model = os.path.join(tmp, "group.onnx")
        measure_qdq_rss.build_model(model, m, k, n, "int8")
        print("\n# peak RSS growth around one run, one %dx%dx%d s8 DQ -> MatMul -> Q group "
              "(KiB; %d fresh processes each)" % (m, k, n, repeat))
        print("| engine | first run (KiB, each process) | second run (KiB, each process) |")
        print("|---|---|---|")
        for engine in ("ep", "ort", "octet"):
            first, second = [], []
            for _ in range(repeat):
                out = subprocess.run([sys.executable, "-c", MEMORY_CHILD, engine, model, str(m),
                                      str(k), TOOLS], capture_output=True, text=True, check=True)
                a, b = out.stdout.split()[-2:]
                first.append(a)
                second.append(b)
            print("| %s | %s | %s |" % (engine, ", ".join(first), ", ".join(second)), flush=True)


def rows(args):
    result = []
    if "minilm" in args.models:
        import build_minilm
        variants = ["fp32"] if args.forward else args.minilm_variants
        paths = build_minilm.build(6, SEQ, variants, log=print)
        for batch in args.batches:
            feeds = build_minilm.eval_feeds(SEQ, batch)
            for variant in variants:
                result.append(("minilm-L6 %s b%d s%d" % (variant, batch, SEQ), paths[variant],
                               feeds))
    if "det" in args.models:
        import build_cnn
        variants = ["fp32"] if args.forward else args.det_variants
        paths = build_cnn.build(args.det_size, variants)
        feeds = build_cnn.eval_feeds(args.det_size)[0]
        for variant in variants:
            result.append(("det-%d %s 1 image" % (args.det_size, variant), paths[variant], feeds))
    return result


def claimed_summary(path, threads, options):
    """The EP's claimed= line for this model (a child process: the line goes to stderr)."""
    code = ("import sys, json, onnxruntime as ort, onnxruntime_ep_octet as e\n"
            "so = e.session_options(threads=%d, debug=1, **json.loads(sys.argv[2]))\n"
            "ort.InferenceSession(sys.argv[1], so, enable_fallback=0)\n" % threads)
    out = subprocess.run([sys.executable, "-c", code, path, json.dumps(options)],
                         capture_output=True, text=True)
    for line in (out.stdout + out.stderr).splitlines():
        if "claimed=" in line and "subgraphs=" in line:
            return line.split("octet_ep] ")[-1].replace("\x1b[m", "").strip()
    return "?"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="minilm,det")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--batches", default="1")
    parser.add_argument("--minilm-variants", default="dynamic,qdq_pc,qdq_pt,qop")
    parser.add_argument("--det-size", type=int, default=416)
    parser.add_argument("--det-variants", default="qdq_pc,qop")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--no-rss", action="store_true")
    parser.add_argument("--forward", action="store_true",
                        help="the forward route (float_matmul=int8) on the float models")
    parser.add_argument("--memory", action="store_true",
                        help="only seed 000's memory figure (one 256x1024x1024 group)")
    parser.add_argument("--rss-child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rss_child:
        engine, path, threads, feeds_path, options = args.rss_child
        rss_child(engine, path, int(threads), feeds_path, options)
        return 0
    import onnxruntime as ort
    print("# onnxruntime %s, %s, %d cores, %s; load before %s" % (
        ort.__version__, platform.machine(), os.cpu_count(), time.strftime("%Y-%m-%d %H:%M UTC",
                                                                           time.gmtime()),
        tuple(round(v, 2) for v in os.getloadavg())))
    if args.memory:
        memory_figure(args.repeat)
        return 0
    args.models = args.models.split(",")
    args.threads = [int(t) for t in args.threads.split(",")]
    args.batches = [int(b) for b in args.batches.split(",")]
    args.minilm_variants = args.minilm_variants.split(",")
    args.det_variants = args.det_variants.split(",")
    engines = ["ep", "ort"] if args.forward else args.engines.split(",")
    options = {"float_matmul": "int8"} if args.forward else {}
    if "ov" in engines:
        try:
            import openvino
            print("# OpenVINO %s standalone (%s)" % (openvino.__version__, openvino_ep_note()))
        except ImportError:
            print("# openvino not installed: no ov column (pip install openvino)")
            engines.remove("ov")
    columns = ["model", "threads"] + ["%s min / med (ms)" % e for e in engines]
    columns += ["ep / octet (min)", "ep / octet (CPU min)", "ort / ep (min)"] + (["ov / ep (min)"] if "ov" in engines
                                                         else [])
    columns += ["peak RSS %s (MiB)" % " / ".join(engines), "EP claimed"]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns), flush=True)
    with tempfile.TemporaryDirectory(prefix="octet_bench_ep_") as scratch:
        for label, path, feeds in rows(args):
            feeds_path = os.path.join(scratch, "feeds.npz")
            np.savez(feeds_path, **feeds)
            for threads in args.threads:
                runs, refused = {}, {}
                for engine in engines:
                    try:
                        runs[engine] = make_session(engine, path, threads,
                                                    **(options if engine in ("ep", "octet")
                                                       else {}))
                    except Exception as error:
                        refused[engine] = str(error).splitlines()[0][:100]
                outputs = {e: run(feeds) for e, run in runs.items()}  # warm-up
                times = {e: [] for e in runs}
                cpu = {e: [] for e in runs}
                for _ in range(args.repeat):
                    for e, run in runs.items():
                        start, start_cpu = time.perf_counter(), time.process_time()
                        run(feeds)
                        times[e].append(time.perf_counter() - start)
                        cpu[e].append(time.process_time() - start_cpu)
                cells = []
                for e in engines:
                    cells.append("%.1f / %.1f" % (min(times[e]) * 1e3,
                                                  statistics.median(times[e]) * 1e3)
                                 if e in times else "refused: " + refused[e])
                mins = {e: min(t) for e, t in times.items()}
                ratio = lambda a, b: "%.3f" % (mins[a] / mins[b]) if a in mins and b in mins else "—"  # noqa
                extra = ""
                if args.forward and "ep" in outputs and "ort" in outputs:
                    # Per output: max |ep - ort| / max |ort|, and the lowest cosine of a row.
                    for i, (a, b) in enumerate(zip(outputs["ep"], outputs["ort"])):
                        a64, b64 = a.astype(np.float64), b.astype(np.float64)
                        rel = np.abs(a64 - b64).max() / max(np.abs(b64).max(), 1e-30)
                        a2, b2 = a64.reshape(-1, a64.shape[-1]), b64.reshape(-1, b64.shape[-1])
                        cos = (a2 * b2).sum(1) / np.maximum(
                            np.linalg.norm(a2, axis=1) * np.linalg.norm(b2, axis=1), 1e-30)
                        extra += "; out%d rel %.2e, min row cos %.4f" % (i, rel, cos.min())
                rss = "—"
                if not args.no_rss:
                    values = []
                    for e in engines:
                        r = measure_rss(e, path, threads, feeds_path,
                                        options if e in ("ep", "octet") else {})
                        values.append("%.0f" % (r["peak"] / 1024) if r else "—")
                    rss = " / ".join(values)
                cpu_ratio = ("%.3f" % (min(cpu["ep"]) / min(cpu["octet"]))
                             if "ep" in cpu and "octet" in cpu else "—")
                print("| %s | %d | %s | %s | %s | %s | %s%s | %s%s |" % (
                    label, threads, " | ".join(cells), ratio("ep", "octet"), cpu_ratio,
                    ratio("ort", "ep"),
                    (ratio("ov", "ep") + " | ") if "ov" in engines else "", rss,
                    claimed_summary(path, threads, options), extra), flush=True)
                del runs, outputs
    print("# load after %s" % (tuple(round(v, 2) for v in os.getloadavg()),))
    return 0


if __name__ == "__main__":
    sys.exit(main())
