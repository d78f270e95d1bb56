"""The measurement code of `octet bench`, shared with the benchmark scripts under tools/.

One timer (`time_round`: wall clock and process CPU time per call), one alternation scheme
(`alternate`: every round runs each engine once, in the same order, after a warm-up), one
peak-RSS probe (`peak_rss`: a fresh process per engine), one statistics summary (`summary`),
one ONNX Runtime configuration (`ort_session`) and the host line (`host_line`).

This module imports neither octet's engine nor onnxruntime at import time, so the scripts
under tools/ can load it by path (tools/measure.py) whichever octet they time.
"""

import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

# ---------------------------------------------------------------- host

_FLAGS = ("avx2", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "avx_vnni_int8", "amx_int8")


def cpu_model():
    """The CPU's model name and family/model numbers, from /proc/cpuinfo when there is one."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        return platform.processor() or platform.machine()
    name = fields.get("model name", platform.machine())
    if "cpu family" in fields and "model" in fields:
        name += " (family %s model %s)" % (fields["cpu family"], fields["model"])
    return name


def cpuid_masked_to_avx2():
    """Whether tools/avx2_host.sh's library answers this process's cpuid as an AVX2-only
    CPU's (/proc/cpuinfo then still lists the host's extensions)."""
    try:
        with open("/proc/self/maps") as f:
            return any(line.rstrip().endswith("/cpuid_avx2.so") for line in f)
    except OSError:
        return False


def isa_flags():
    """The vector extensions of _FLAGS this CPU reports (to this process)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    if cpuid_masked_to_avx2():
                        flags &= {"avx2"}
                    return [flag for flag in _FLAGS if flag in flags]
    except OSError:
        pass
    return []


def ort_u8s8_saturates():
    """Whether ONNX Runtime's x86 u8 x s8 kernels saturate here: without VNNI they sum
    pairs of products in 16 bits (vpmaddubsw)."""
    return platform.machine().lower() in ("x86_64", "amd64") and \
        not {"avx512_vnni", "avx_vnni"} & set(isa_flags())


def host_line(octet_module=None):
    """'<cpu>, <n> cores, flags <...>; octet path <isa>': the CPU a measurement ran on, its
    x86 vector extensions and octet's active instruction-set path (OCTET_ISA or the best)."""
    text = "%s, %d cores, flags %s" % (cpu_model(), os.cpu_count() or 1,
                                       " ".join(isa_flags()) or "none of " + ",".join(_FLAGS))
    if cpuid_masked_to_avx2():
        text += " (cpuid masked to AVX2 by tools/avx2_host.sh)"
    if octet_module is not None:
        text += "; octet path %s" % octet_module.active_isa()
    return text


def load_average():
    try:
        return tuple(round(v, 2) for v in os.getloadavg())
    except OSError:
        return None


# ---------------------------------------------------------------- engines


def ort_session(model, threads, level="all", spinning=False, optimized_path=None, quiet=False):
    """An onnxruntime session as every octet benchmark configures it: CPU execution provider,
    graph optimization `level` ("all", "extended", "basic", "disable"), intra_op_num_threads =
    threads, inter_op_num_threads = 1, spinning off unless asked (spinning workers would take
    the core the other engine needs between its runs). model: a path or serialized bytes.
    optimized_path: where ORT writes the graph it optimized. quiet: errors only in ORT's log."""
    import onnxruntime as ort
    levels = {"all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
              "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
              "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
              "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL}
    options = ort.SessionOptions()
    options.graph_optimization_level = levels[level]
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    if optimized_path:
        options.optimized_model_filepath = str(optimized_path)
    if quiet:
        options.log_severity_level = 3
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def make_session(engine, model, threads):
    """A session of `engine` ("octet" or "ort") on model (path or bytes)."""
    if engine == "octet":
        import octet
        return octet.InferenceSession(model, threads=threads)
    return ort_session(model, threads)


# ---------------------------------------------------------------- timing


class Sample:
    """One timed round of one engine: seconds per call, wall clock and process CPU time (all
    threads of this process summed; an idle engine does not spin between runs)."""

    __slots__ = ("wall", "cpu", "calls")

    def __init__(self, wall, cpu, calls):
        self.wall, self.cpu, self.calls = wall, cpu, calls


def time_round(fn, calls=1, min_seconds=0.0):
    """Calls fn `calls` times, and then again until min_seconds have passed: the Sample."""
    done, start, cpu_start = 0, time.perf_counter(), time.process_time()
    while True:
        fn()
        done += 1
        elapsed = time.perf_counter() - start
        if done >= calls and elapsed >= min_seconds:
            return Sample(elapsed / done, (time.process_time() - cpu_start) / done, done)


def alternate(engines, rounds=None, seconds=None, warmup=1, min_rounds=3, max_rounds=100000,
              calls=1, min_seconds=0.0, progress=None):
    """Times the callables of `engines` ({name: fn}) in alternating rounds: `warmup` untimed
    calls of each, then rounds in which each engine in turn gets one time_round(fn, calls,
    min_seconds). With `rounds` that many rounds; otherwise rounds until `seconds` have
    passed in them (at least min_rounds, at most max_rounds). progress(phase, round, samples)
    is called after the warm-up ("warm-up", 0) and after each round ("round", i).
    Returns {name: [Sample, ...]}."""
    if (rounds is None) == (seconds is None):
        raise ValueError("alternate needs exactly one of rounds and seconds")
    for _ in range(warmup):
        for fn in engines.values():
            fn()
    samples = {name: [] for name in engines}
    if progress:
        progress("warm-up", 0, samples)
    start = time.perf_counter()
    done = 0
    while True:
        if rounds is not None and done >= rounds:
            break
        if rounds is None and done >= min_rounds and (
                done >= max_rounds or time.perf_counter() - start >= seconds):
            break
        for name, fn in engines.items():
            samples[name].append(time_round(fn, calls, min_seconds))
        done += 1
        if progress:
            progress("round", done, samples)
    return samples


def summary(values):
    """min / median / p90 / mean of a list of numbers (p90: numpy's linear interpolation
    between the sorted values)."""
    a = np.asarray(values, dtype=np.float64)
    return {"min": float(a.min()), "median": float(np.median(a)),
            "p90": float(np.percentile(a, 90)), "mean": float(a.mean())}


# ---------------------------------------------------------------- memory


def proc_status_kib(field):
    """VmRSS (now) or VmHWM (peak) of this process in KiB, or None where /proc has no such
    line. Not ru_maxrss: Linux carries the parent's high-water mark into a forked child across
    exec, so a child started from a big parent would report the parent's peak."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _rss_child(engine, model_path, threads, feeds_path):
    """Runs in the child: prints {"base": KiB, "peak": KiB} as JSON."""
    with np.load(feeds_path) as saved:
        feeds = {name: saved[name] for name in saved.files}
    if engine == "octet":
        import octet  # noqa: F401
    else:
        import onnxruntime  # noqa: F401
    base = proc_status_kib("VmRSS")
    session = make_session(engine, model_path, threads)
    for _ in range(2):
        session.run(None, feeds)
    print(json.dumps({"base": base, "peak": proc_status_kib("VmHWM")}))


def peak_rss(engine, model_path, threads, feeds_path, env=None):
    """Peak RSS of a fresh process that imports numpy and one engine ("octet" or "ort"),
    creates a session on model_path with `threads` and runs the feeds saved in feeds_path
    (np.savez) twice: {"peak_kib": VmHWM, "base_kib": VmRSS after the imports, before the
    session}. A shared process cannot tell two engines' memory apart, hence the child.
    Raises RuntimeError with the child's last error line when it fails."""
    command = [sys.executable, os.path.abspath(__file__), "--rss-child", engine,
               str(model_path), str(threads), str(feeds_path)]
    out = subprocess.run(command, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        lines = out.stderr.strip().splitlines() or ["exit status %d" % out.returncode]
        raise RuntimeError("the peak-RSS process for %s failed: %s" % (engine, lines[-1]))
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result["peak"] is None:
        raise RuntimeError("this system has no /proc/self/status VmHWM")
    return {"peak_kib": result["peak"], "base_kib": result["base"]}


if __name__ == "__main__":
    # Run as a file (peak_rss): this folder must not shadow the installed octet package.
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]
    if len(sys.argv) == 6 and sys.argv[1] == "--rss-child":
        _rss_child(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    else:
        sys.exit("usage: measure.py --rss-child ENGINE MODEL THREADS FEEDS.npz")
