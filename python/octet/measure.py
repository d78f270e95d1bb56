"""The measurement code of `octet bench`, shared with the benchmark scripts under tools/.

One timer (`time_round`: wall clock and process CPU time per call), one alternation scheme
(`alternate`: every round runs each engine once, in the same order, after a warm-up), one
peak-RSS probe (`peak_rss`: a fresh process per engine), one statistics summary (`summary`),
one ONNX Runtime configuration (`ort_session`) and the host line (`host_line`), with the CPU
as this process's cpuid reports it (`cpu_features`: what picks ONNX Runtime's and octet's
kernels, under an emulator or tools/avx2_host.sh too).

This module imports neither octet's engine nor onnxruntime at import time, so the scripts
under tools/ can load it by path (tools/measure.py) whichever octet they time.
"""

import ctypes
import functools
import json
import mmap
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




_CPUID_CODE = bytes([
    0x53,                    # push rbx
    0x89, 0xF8,              # mov eax, edi      (leaf)
    0x89, 0xF1,              # mov ecx, esi      (subleaf)
    0x49, 0x89, 0xD0,        # mov r8, rdx       (out)
    0x0F, 0xA2,              # cpuid
    0x41, 0x89, 0x00,        # mov [r8], eax
    0x41, 0x89, 0x58, 0x04,  # mov [r8+4], ebx
    0x41, 0x89, 0x48, 0x08,  # mov [r8+8], ecx
    0x41, 0x89, 0x50, 0x0C,  # mov [r8+12], edx
    0x5B,                    # pop rbx
    0xC3,                    # ret
])
_XGETBV_CODE = bytes([
    0x89, 0xF9,              # mov ecx, edi
    0x0F, 0x01, 0xD0,        # xgetbv
    0x48, 0xC1, 0xE2, 0x20,  # shl rdx, 32
    0x48, 0x09, 0xD0,        # or rax, rdx
    0xC3,                    # ret
])


@functools.lru_cache(maxsize=None)
def _machine_code():
    """(cpuid, xgetbv) callables from an executable page, or None where that is refused."""
    try:
        page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE |
                         mmap.PROT_EXEC)
    except (OSError, AttributeError):
        return None
    page.write(_CPUID_CODE + _XGETBV_CODE)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    cpuid = ctypes.CFUNCTYPE(None, ctypes.c_uint32, ctypes.c_uint32,
                             ctypes.POINTER(ctypes.c_uint32))(address)
    xgetbv = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_uint32)(address + len(_CPUID_CODE))
    return page, cpuid, xgetbv


def _cpuid(leaf, subleaf=0):
    _, call, _ = _machine_code()
    out = (ctypes.c_uint32 * 4)()
    call(leaf, subleaf, out)
    return tuple(out)


def _cpu_brand():
    if _cpuid(0x80000000)[0] < 0x80000004:
        return ""
    raw = b"".join(int(r).to_bytes(4, "little") for leaf in range(0x80000002, 0x80000005)
                   for r in _cpuid(leaf))
    return raw.split(b"\0")[0].decode("ascii", "replace").strip()


@functools.lru_cache(maxsize=None)
def cpu_features() -> dict:
    """The x86 features that decide ONNX Runtime's and octet's integer kernels, from cpuid
    and XCR0 in this process: {"source", "cpu", "isa": [...]}. Off x86-64, or where no
    executable page can be mapped, the flags of /proc/cpuinfo (source says which)."""
    if platform.machine() not in ("x86_64", "AMD64") or _machine_code() is None:
        return _cpuinfo_features()
    _, _, ecx1, _ = _cpuid(1)
    flags = []
    if ecx1 & (1 << 27) and ecx1 & (1 << 28):  # OSXSAVE, AVX
        flags += [f for f, bit in (("fma", 12), ("f16c", 29)) if ecx1 & (1 << bit)]
        xcr0 = _machine_code()[2](0)
        os_ymm, os_zmm = (xcr0 & 0x6) == 0x6, (xcr0 & 0xE6) == 0xE6
        if _cpuid(0)[0] >= 7:
            max_subleaf, ebx7, ecx7, edx7 = _cpuid(7, 0)
            eax71, _, _, edx71 = _cpuid(7, 1) if max_subleaf >= 1 else (0, 0, 0, 0)
            bits = {"avx2": ebx7 >> 5, "avx512f": ebx7 >> 16, "avx512dq": ebx7 >> 17,
                    "avx512bw": ebx7 >> 30, "avx512vl": ebx7 >> 31, "avx512_vnni": ecx7 >> 11,
                    "avx_vnni": eax71 >> 4, "avx_vnni_int8": edx71 >> 4, "amx_int8": edx7 >> 25}
            have = {k for k, v in bits.items() if v & 1}
            if os_ymm:
                flags += [f for f in ("avx2", "avx_vnni", "avx_vnni_int8") if f in have]
            if os_zmm:
                flags += [f for f in ("avx512f", "avx512bw", "avx512dq", "avx512vl",
                                      "avx512_vnni") if f in have]
            if (xcr0 & 0x60000) == 0x60000 and "amx_int8" in have:  # XTILECFG, XTILEDATA
                flags.append("amx_int8")
    return {"source": "cpuid", "machine": platform.machine(), "cpu": _cpu_brand(),
            "isa": [f for f in _ORDER if f in flags]}


_ORDER = ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512_vnni",
          "avx_vnni", "avx_vnni_int8", "amx_int8")


def _cpuinfo_features():
    flags, cpu = set(), platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
                elif line.startswith("model name") and not cpu:
                    cpu = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return {"source": "/proc/cpuinfo", "machine": platform.machine(), "cpu": cpu,
            "isa": [f for f in _ORDER if f in flags]}


def isa_flags(features: dict | None = None):
    """The vector extensions of _FLAGS this process's cpuid reports: what picks ONNX
    Runtime's and octet's kernels here (an emulator's or tools/avx2_host.sh's CPU, not the
    host's, when either answers cpuid)."""
    isa = set((features or cpu_features())["isa"])
    return [flag for flag in _FLAGS if flag in isa]


def flags_cpuid_hides():
    """Extensions /proc/cpuinfo lists that this process's cpuid does not report."""
    listed = set(_cpuinfo_features()["isa"])
    return [flag for flag in _FLAGS if flag in listed and flag not in isa_flags()]


def ort_u8s8_saturates(features: dict | None = None):
    """Whether ONNX Runtime's x86 u8 x s8 kernels saturate here: without AVX-512 VNNI (with
    the AVX-512 core set MLAS requires) or AVX-VNNI they sum pairs of products in 16 bits
    (vpmaddubsw). Off x86 (Arm SDOT, portable C) they are exact."""
    features = features or cpu_features()
    if features.get("machine") not in ("x86_64", "AMD64"):
        return False
    isa = set(features.get("isa", []))
    return not ({"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512_vnni"} <= isa or
                "avx_vnni" in isa)


def host_line(octet_module=None):
    """'<cpu>, <n> cores, flags <...>; octet path <isa>': the CPU a measurement ran on, its
    x86 vector extensions and octet's active instruction-set path (OCTET_ISA or the best)."""
    text = "%s, %d cores, flags %s" % (cpu_model(), os.cpu_count() or 1,
                                       " ".join(isa_flags()) or "none of " + ",".join(_FLAGS))
    if hidden := flags_cpuid_hides():
        text += " (cpuid here hides %s, which /proc/cpuinfo lists)" % " ".join(hidden)
    if octet_module is not None:
        text += "; octet path %s" % octet_module.active_isa()
    return text


def load_average():
    try:
        return tuple(round(v, 2) for v in os.getloadavg())
    except OSError:
        return None


# ---------------------------------------------------------------- engines


def ort_session(model, threads, level="all", spinning=False, optimized_path=None, quiet=False,
                profile_prefix=None):
    """An onnxruntime session as every octet benchmark configures it: CPU execution provider,
    graph optimization `level` ("all", "extended", "basic", "disable"), intra_op_num_threads =
    threads, inter_op_num_threads = 1, spinning off unless asked (spinning workers would take
    the core the other engine needs between its runs). model: a path or serialized bytes.
    optimized_path: where ORT writes the graph it optimized. quiet: errors only in ORT's log.
    profile_prefix: ORT's profiler on, its JSON written from that path prefix
    (session.end_profiling() returns the file)."""
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
    if profile_prefix:
        options.enable_profiling = True
        options.profile_file_prefix = str(profile_prefix)
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
