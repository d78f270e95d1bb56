"""`octet bench` and `octet compare` (issue 20): the commands on the bundled default model and
on a QDQ model with a planted rounding tie, their JSON, exit statuses and errors, the HTML
report opened in headless Chromium, and the session API they are built on
(keep_intermediates, the kernel profile) and the measurement code the tools share. No test
asserts on a timing."""

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import octet

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OCTET = os.path.join(os.path.dirname(sys.executable), "octet")
ARTIFACTS = os.path.join(ROOT, "build", "test-artifacts")
DEFAULT_MODEL = os.path.join(ROOT, "build", "models", "default_mlp.int8.onnx")
DEFAULT_INPUT = os.path.join(ROOT, "build", "models", "default_mlp.input.npy")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
BENCH_OPTIONS = ["--input", "--shape", "--threads", "--vs-ort", "--repeat", "--time",
                 "--warmup", "--seed", "--json", "--report", "--no-rss", "--quiet"]
COMPARE_OPTIONS = ["--input", "--shape", "--seed", "--vs-ort", "--vs-float", "--ort-level",
                   "--threads", "--show", "--json", "--quiet"]


def run(*args, timeout=300, env=None):
    return subprocess.run([OCTET, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)


def call(capsys, command, *args):
    """The command run in this process (as the console script runs it), for the many error
    cases: (exit status, stdout, stderr) like subprocess.run's."""
    from octet import bench, compare
    code = {"bench": bench, "compare": compare}[command].cli([str(a) for a in args])
    captured = capsys.readouterr()
    return subprocess.CompletedProcess([command, *args], code, captured.out, captured.err)


def assert_one_line_error(result, *needles, code=1):
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    lines = [line for line in result.stderr.strip().splitlines()
             if not line.startswith("octet bench: ") and not line.startswith("octet compare: ")]
    assert len(lines) == 1 and lines[0].startswith("octet: error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture(scope="module")
def default_model():
    if not (os.path.exists(DEFAULT_MODEL) and os.path.exists(DEFAULT_INPUT)):
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "models",
                                                     "make_default_model.py")],
                       check=True, capture_output=True, timeout=300)
    return DEFAULT_MODEL


def save_model(nodes, inputs, outputs, initializers, path):
    graph = helper.make_graph(nodes, "test", inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    onnx.save(model, str(path))
    return str(path)


def const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


# ---------------------------------------------------------------- help and dispatch


def test_help_lists_the_python_commands():
    main = run("--help")
    assert main.returncode == 0
    for command in ["run", "inspect", "list-ops", "bench", "compare", "generate"]:
        assert "\n  %s " % command in main.stdout, main.stdout
    for command, options in (("bench", BENCH_OPTIONS), ("compare", COMPARE_OPTIONS)):
        result = run(command, "--help")
        assert result.returncode == 0, result.stderr
        for option in options:
            assert option in result.stdout, (command, option)
    # The C++ binary alone says where bench lives instead of failing obscurely.
    binary = os.path.join(os.path.dirname(octet.__file__), "bin", "octet")
    alone = subprocess.run([binary, "bench", "x.onnx"], capture_output=True, text=True)
    assert alone.returncode == 2 and "is Python" in alone.stderr


# ---------------------------------------------------------------- octet bench


@pytest.fixture(scope="module")
def bench_run(default_model, tmp_path_factory):
    """One full bench: --vs-ort at 1 and 2 threads, peak RSS, JSON and the HTML report."""
    folder = tmp_path_factory.mktemp("bench")
    result = run("bench", default_model, "--vs-ort", "--threads", "1,2", "--repeat", 5,
                 "--json", folder / "bench.json", "--report", folder / "bench.html")
    assert result.returncode == 0, result.stderr
    with open(folder / "bench.json") as f:
        report = json.load(f)
    return result, report, folder / "bench.html"


def test_bench_prints_the_table(bench_run):
    result, report, _ = bench_run
    out = result.stdout
    assert "host: " in out and "octet path %s" % octet.active_isa() in out
    header = next(line for line in out.splitlines() if line.startswith("engine "))
    for column in ["threads", "rounds", "min ms", "median ms", "p90 ms", "runs/s",
                   "peak RSS MiB", "create ms", "time/octet"]:
        assert column in header
    rows = [parts for parts in map(str.split, out.splitlines())
            if len(parts) > 8 and parts[0] in ("octet", "onnxruntime") and parts[1].isdigit()]
    assert [(r[0], r[1], r[2]) for r in rows] == [
        ("octet", "1", "5"), ("onnxruntime", "1", "5"), ("octet", "2", "5"),
        ("onnxruntime", "2", "5")]
    assert all(r[-1] == "1.00" for r in rows if r[0] == "octet")
    assert "outputs, octet against onnxruntime:" in out and "logits: float32 [1, 10]" in out
    assert "top operators in octet" in out and "octet.QLinearMatMulFused" in out
    assert "octet's rewrites" in out and "fused 6 group(s)" in out
    # The progress line names each phase (stderr is not a terminal here).
    for phase in ["threads=1: warm-up done", "threads=2: 5 rounds timed", "peak RSS of"]:
        assert phase in result.stderr


def test_bench_json_schema(bench_run, default_model):
    _, report, _ = bench_run
    assert report["schema"] == "octet-bench/1"
    assert set(report) >= {"model", "host", "versions", "load_before", "load_after", "inputs",
                           "settings", "results", "agreement", "octet_thread_invariant",
                           "profile", "rewrites"}
    assert report["host"]["octet_isa"] == octet.active_isa()
    assert report["inputs"] == [{"name": "input",
                                 "source": "float32 [1,64] invented: normal(0, 1)"}]
    assert report["settings"]["threads"] == [1, 2] and report["settings"]["repeat"] == 5
    assert [(r["engine"], r["threads"]) for r in report["results"]] == [
        ("octet", 1), ("ort", 1), ("octet", 2), ("ort", 2)]
    for r in report["results"]:
        lat = r["latency_s"]
        assert r["rounds"] == len(r["samples_s"]) == 5
        assert 0 < lat["min"] <= lat["median"] <= lat["p90"] <= max(r["samples_s"])
        assert r["throughput_per_s"] == pytest.approx(1 / lat["median"])
        assert r["peak_rss_mib"] > r["rss_above_imports_mib"] >= 0
        assert r["create_s"] > 0 and r["vs_octet_median"] > 0
    assert report["octet_thread_invariant"] is True
    (agreement,) = report["agreement"]
    assert agreement["output"] == "logits" and agreement["total"] == 10
    assert agreement["comparable"] and not agreement["eight_bit"]
    profile = report["profile"]
    assert profile["threads"] == 1 and profile["runs"] >= 3
    ops = {op["op"]: op for op in profile["ops"]}
    assert ops["octet.QLinearMatMulFused"]["calls_per_run"] == 3
    assert sum(op["percent"] for op in profile["ops"]) == pytest.approx(100)
    listing = octet.inspect(default_model)
    assert len(report["rewrites"]["fused"]) == listing.count("\nfused ") + listing.startswith(
        "fused ")
    assert report["rewrites"]["summary"] == "qdq_groups=6 claimed=6"


def test_bench_reads_inputs_from_files(default_model, tmp_path):
    result = run("bench", default_model, "--input", "input=%s" % DEFAULT_INPUT, "--repeat", 2,
                 "--no-rss", "--json", tmp_path / "b.json")
    assert result.returncode == 0, result.stderr
    assert "input input: float32 [4,64] from file" in result.stdout
    report = json.load(open(tmp_path / "b.json"))
    assert report["agreement"] is None  # no --vs-ort
    assert [r["engine"] for r in report["results"]] == ["octet"]
    assert report["results"][0]["peak_rss_mib"] is None
    np.savez(tmp_path / "in.npz", input=np.load(DEFAULT_INPUT)[:2])
    result = run("bench", default_model, "--input", tmp_path / "in.npz", "--time", "0.05",
                 "--no-rss")
    assert result.returncode == 0 and "float32 [2,64] from file" in result.stdout


def embedding_model(path):
    """ids (int64 [batch, seq]) -> Gather from a [50, 4] table; mask (int64, same dims) and
    count (int64 [1], not an index) feed arithmetic."""
    table = np.arange(200, dtype=np.float32).reshape(50, 4)
    nodes = [helper.make_node("Gather", ["table", "ids"], ["emb"]),
             helper.make_node("Cast", ["mask"], ["mask_f"], to=TensorProto.FLOAT),
             helper.make_node("Unsqueeze", ["mask_f", "axes"], ["mask_3d"]),
             helper.make_node("Mul", ["emb", "mask_3d"], ["out"])]
    inputs = [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"]),
              helper.make_tensor_value_info("mask", TensorProto.INT64, ["batch", "seq"])]
    outputs = [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", "seq", 4])]
    return save_model(nodes, inputs, outputs, [const("table", table),
                                               const("axes", np.array([2], np.int64))], path)


def test_invented_token_ids_stay_in_the_table(tmp_path):
    path = embedding_model(tmp_path / "emb.onnx")
    session = octet.InferenceSession(path)
    from octet import feeds as feeds_mod
    feeds, notes = feeds_mod.make_feeds(path, feeds_mod.declared_inputs(session), {},
                                        {"ids": (3, 7)}, seed=1)
    assert feeds["ids"].shape == (3, 7) and feeds["ids"].dtype == np.int64
    assert feeds["ids"].min() >= 0 and feeds["ids"].max() < 50 and len(set(
        feeds["ids"].ravel())) > 5
    assert feeds["mask"].shape == (3, 7) and np.all(feeds["mask"] == 1)  # shares the symbols
    assert dict(notes)["ids"] == "int64 [3,7] invented: ids in [0, 50) (the table it indexes)"
    result = run("bench", path, "--shape", "ids=2x6", "--repeat", 1, "--no-rss")
    assert result.returncode == 0, result.stderr
    assert "input ids: int64 [2,6] invented: ids in [0, 50)" in result.stdout
    assert "input mask: int64 [2,6] invented: all ones (a mask)" in result.stdout


def test_bench_errors(default_model, tmp_path, capsys):
    # An integer input that indexes no table, is no quantized data and no mask.
    nodes = [helper.make_node("Cast", ["count"], ["count_f"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["count_f", "one"], ["out"])]
    odd = save_model(nodes, [helper.make_tensor_value_info("count", TensorProto.INT64, [1])],
                     [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1])],
                     [const("one", np.array([1], np.float32))], tmp_path / "odd.onnx")
    # Through the console script: the exit statuses as a shell sees them.
    assert_one_line_error(run("bench", odd, "--repeat", 1), "cannot invent values for input "
                          "'count'", "--input count=FILE.npy")
    assert_one_line_error(run("bench", default_model, "--shape", "input=4xQ"), "--shape takes "
                          "NAME=DIMS", code=2)

    def bench(*args):
        return call(capsys, "bench", *args)

    assert_one_line_error(bench(default_model, "--shape", "input=4x64x2"), "rank 2")
    assert_one_line_error(bench(default_model, "--shape", "input=4x65"),
                          "dim 1 of input 'input' is 64")
    assert_one_line_error(bench(default_model, "--shape", "nope=1x64"), "no input 'nope'")
    assert_one_line_error(bench(default_model, "--input", "nope=%s" % DEFAULT_INPUT),
                          "no input 'nope'")
    assert_one_line_error(bench(default_model, "--input", "input=%s" % (
        tmp_path / "missing.npy")), "no such file")
    np.save(tmp_path / "x64.npy", np.load(DEFAULT_INPUT).astype(np.float64))
    assert_one_line_error(bench(default_model, "--input", "input=%s" % (tmp_path / "x64.npy"),
                                "--repeat", 1, "--no-rss"), "input 'input' must be tensor(float)")
    assert_one_line_error(bench(tmp_path / "missing.onnx"), "missing.onnx")
    assert_one_line_error(bench(default_model, "--repeat", 0), "--repeat", code=2)
    assert_one_line_error(bench(default_model, "--repeat", 2, "--time", 1), "--time", code=2)
    assert_one_line_error(bench(default_model, "--threads", "one"), "--threads", code=2)
    assert_one_line_error(bench(default_model, "--frobnicate"), "--frobnicate", code=2)
    assert_one_line_error(bench(), "MODEL", code=2)


# ---------------------------------------------------------------- the HTML report


def chromium(*args, user_data_dir):
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking",
               "--disable-component-update", "--disable-sync",
               "--user-data-dir=%s" % user_data_dir, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=180)


@pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                    reason="chromium is not installed (scripts/setup.sh installs it)")
def test_report_opens_in_chromium(bench_run, tmp_path):
    _, report, page = bench_run
    text = page.read_text()
    # Self-contained: the only URLs are XML namespace names, which nothing fetches.
    assert re.findall(r'([\w:]+)="https?://', text) and all(
        attribute.startswith("xmlns") for attribute in re.findall(r'([\w:]+)="https?://', text))
    assert not re.search(r"url\((?!#)|<script|<link|<img", text)  # url(#id): a local clip
    url = "file://%s" % page
    dom = chromium("--dump-dom", url, user_data_dir=tmp_path / "profile-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert '<div id="results"><table>' in html and html.count("<tr>") >= 5
    for engine in ("octet", "onnxruntime"):
        assert "<td>%s</td>" % engine in html
    for chart in ("chart-latency", "chart-rounds", "chart-ops"):
        start = html.index('id="%s"' % chart)
        assert "<svg" in html[start:start + 400], chart
    assert "octet.QLinearMatMulFused" in html and '<div id="fused">' in html
    os.makedirs(ARTIFACTS, exist_ok=True)
    screenshot = os.path.join(ARTIFACTS, "bench_report.png")
    if os.path.exists(screenshot):
        os.remove(screenshot)
    shot = chromium("--window-size=1200,2400", "--screenshot=%s" % screenshot, url,
                    user_data_dir=tmp_path / "profile-shot")
    assert shot.returncode == 0 and os.path.exists(screenshot), shot.stderr[-2000:]
    from PIL import Image
    pixels = np.asarray(Image.open(screenshot).convert("RGB")).reshape(-1, 3).astype(int)

    def count(rgb):
        return int((np.abs(pixels - np.array(rgb)).sum(axis=1) <= 12).sum())

    # The bars in matplotlib's first two colors (octet, ONNX Runtime), the table's header.
    assert count((31, 119, 180)) > 3000, "no octet bars in the screenshot"
    assert count((255, 127, 14)) > 3000, "no ONNX Runtime bars in the screenshot"
    assert count((240, 240, 240)) > 3000, "no table header in the screenshot"


# ---------------------------------------------------------------- octet compare

# Scales where one product lands the float path exactly on a rounding tie (seed 000): the
# exact value 121 * 49 * SX * SW / SY = 49.499998 rounds to 49, ORT's float path
# fl(fl(fl(121 * SX) * fl(49 * SW)) / SY) = 49.500000 rounds half to even to 50.
SX, SW, SY = np.float32(0.019032415), np.float32(0.02404969), np.float32(0.054825127)


def tie_model(path):
    """x (int8 [2, 1]) -> DQ -> MatMul (K = 1, so ORT's float MatMul is one product) -> Q ->
    h_q; h_q -> DQ -> MatMul -> Q -> z_q. ORT runs the first group in float."""
    w1 = np.array([[49, 2, 5]], np.int8)
    w2 = np.array([[60, 1], [1, 1], [1, 1]], np.int8)
    nodes = [helper.make_node("DequantizeLinear", ["x", "sx", "zero"], ["x_dq"]),
             helper.make_node("DequantizeLinear", ["w1", "sw", "zero"], ["w1_dq"]),
             helper.make_node("MatMul", ["x_dq", "w1_dq"], ["h"], name="layer1"),
             helper.make_node("QuantizeLinear", ["h", "sy", "zero"], ["h_q"], name="layer1_q"),
             helper.make_node("DequantizeLinear", ["h_q", "sy", "zero"], ["h_dq"]),
             helper.make_node("DequantizeLinear", ["w2", "sw2", "zero"], ["w2_dq"]),
             helper.make_node("MatMul", ["h_dq", "w2_dq"], ["z"], name="layer2"),
             helper.make_node("QuantizeLinear", ["z", "sz", "zz"], ["z_q"], name="layer2_q")]
    inits = [const("sx", SX), const("zero", np.int8(0)), const("w1", w1), const("sw", SW),
             const("sy", SY), const("w2", w2), const("sw2", np.float32(0.01)),
             const("sz", np.float32(0.011)), const("zz", np.int8(-100))]
    return save_model(nodes, [helper.make_tensor_value_info("x", TensorProto.INT8, [2, 1])],
                      [helper.make_tensor_value_info("z_q", TensorProto.INT8, [2, 2])], inits,
                      path)


def test_compare_names_the_planted_tie(tmp_path):
    # The premise, in numpy's float32: the float path lands on the tie, the exact value not.
    f = np.float32
    assert f(f(f(121) * SX) * f(f(49) * SW)) / SY == f(49.5)
    assert 121 * 49 * float(SX) * float(SW) / float(SY) < 49.5
    model = tie_model(tmp_path / "tie.onnx")
    np.save(tmp_path / "x.npy", np.array([[121], [3]], np.int8))
    result = run("compare", model, "--input", "x=%s" % (tmp_path / "x.npy"), "--json",
                 tmp_path / "c.json")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "its outputs equal the plain session's" in out
    assert ("The first in graph order: 'h_q' (QuantizeLinear 'layer1_q', int8 [2, 3]): 1 of 6 "
            "differ, max |d| 1") in out
    assert "its compared inputs agree: this is where the engines part" in out
    assert ("1 rounding tie of the float path; e.g. [0, 0]: accumulator 5929, exact 49.499998 "
            "-> 49, octet's epilogue 49.499996 -> 49; ORT's float path 49.500000 -> 50 (half "
            "to even)") in out
    report = json.load(open(tmp_path / "c.json"))
    assert report["schema"] == "octet-compare/1" and report["ort_faithful"] is True
    rows = {r["name"]: r for r in report["rows"]}
    assert list(rows) == ["h_q", "z_q"]
    h = rows["h_q"]
    assert (h["differing"], h["total"], h["inputs"]) == (1, 6, "agree")
    assert h["ties"]["counts"]["tie"] == 1 and h["ties"]["example"]["index"] == [0, 0]
    assert h["ties"]["example"]["accumulator"] == 121 * 49
    assert h["ties"]["example"]["ort_float"] == 49.5
    z = rows["z_q"]
    assert z["differing"] >= 1 and z["inputs"] == "differ" and "ties" not in z  # inherited
    # Without the tie the two engines agree on every value.
    np.save(tmp_path / "x2.npy", np.array([[7], [3]], np.int8))
    same = run("compare", model, "--input", "x=%s" % (tmp_path / "x2.npy"))
    assert same.returncode == 0 and "every compared value is equal, bit for bit" in same.stdout


def test_exact_conv_recomputes_the_accumulator(tmp_path):
    """compare's exact Conv (strides, pads, dilations, groups, per-channel weights, int32
    bias) against a direct int64 loop."""
    from octet import compare
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (1, 4, 7, 6), dtype=np.int8)
    w = rng.integers(-128, 128, (6, 2, 3, 2), dtype=np.int8)
    bias = rng.integers(-500, 500, 6).astype(np.int32)
    sx, sw = np.float32(0.02), rng.uniform(0.001, 0.01, 6).astype(np.float32)
    nodes = [helper.make_node("DequantizeLinear", ["x", "sx", "zx"], ["xf"]),
             helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wf"], axis=0),
             helper.make_node("DequantizeLinear", ["b", "sb", "zb"], ["bf"], axis=0),
             helper.make_node("Conv", ["xf", "wf", "bf"], ["y"], group=2, strides=[2, 1],
                              pads=[1, 0, 2, 1], dilations=[1, 2]),
             helper.make_node("QuantizeLinear", ["y", "sy", "zy"], ["yq"])]
    inits = [const("sx", sx), const("zx", np.int8(3)), const("w", w), const("sw", sw),
             const("zw", np.zeros(6, np.int8)), const("b", bias), const("sb", sx * sw),
             const("zb", np.zeros(6, np.int32)), const("sy", np.float32(0.05)),
             const("zy", np.int8(-2))]
    path = save_model(nodes, [helper.make_tensor_value_info("x", TensorProto.INT8, x.shape)],
                      [helper.make_tensor_value_info("yq", TensorProto.INT8, None)], inits,
                      tmp_path / "conv.onnx")
    graph = compare.Graph(path)
    exact = compare.ExactConv(graph, graph.producer["yq"], {"x": x, "w": w}.get)
    assert exact.ok
    xp = np.pad(x.astype(np.int64) - 3, ((0, 0), (0, 0), (1, 2), (0, 1)))
    for o, oh, ow in [(0, 0, 0), (4, 3, 2), (5, 3, 4), (2, 1, 0)]:  # y is [1, 6, 4, 5]
        g = o // 3
        acc = sum(int(xp[0, g * 2 + c, oh * 2 + i, ow + 2 * j]) * int(w[o, c, i, j])
                  for c in range(2) for i in range(3) for j in range(2))
        got, real, epilogue, bound = exact.at((0, o, oh, ow), np.float32(0.05))
        assert got == acc
        assert real == pytest.approx((acc * float(sx) * float(sw[o]) + float(
            np.float32(bias[o]) * np.float32(sx * sw[o]))) / 0.05)
        assert epilogue == pytest.approx(real, abs=1e-4) and 0 < bound < 1e-2


def test_compare_vs_float(default_model, tmp_path):
    sys.path.insert(0, os.path.join(ROOT, "tools", "models"))
    import make_default_model
    float_model = tmp_path / "default_mlp.fp32.onnx"
    onnx.save(make_default_model.build_float_model(np.random.default_rng(
        make_default_model.SEED)), str(float_model))
    result = run("compare", default_model, "--vs-float", float_model, "--input",
                 "input=%s" % DEFAULT_INPUT, "--json", tmp_path / "f.json")
    assert result.returncode == 0, result.stderr
    assert "against the float model" in result.stdout and "output logits: cosine" in \
        result.stdout
    report = json.load(open(tmp_path / "f.json"))
    rows = {r["name"]: r for r in report["rows"]}
    assert rows["mm0_QuantizeLinear_Output"]["float_name"] == "mm0"
    assert rows["mm0_QuantizeLinear_Output"]["how"] == "dequantized"
    # The quantized input against the float input: within its own rounding (clipped values
    # aside, which the calibration range may leave).
    first = rows["input_QuantizeLinear_Output"]
    assert first["float_name"] == "input" and first["cosine"] > 0.999
    assert rows["logits"]["cosine"] > 0.99


def test_compare_errors(default_model, tmp_path, capsys):
    def compare(*args):
        return call(capsys, "compare", *args)

    assert_one_line_error(compare(default_model, "--vs-ort", "--vs-float", "x.onnx"),
                          "--vs-float", code=2)
    assert_one_line_error(compare(default_model, "--shape", "input=abc"), "--shape", code=2)
    assert_one_line_error(compare(default_model, "--vs-float", tmp_path / "no.onnx"), "no.onnx")
    assert_one_line_error(compare(default_model, "--ort-level", "max"), "--ort-level", code=2)
    assert_one_line_error(compare(tmp_path / "none.onnx"), "none.onnx")


# ---------------------------------------------------------------- the API underneath


def test_keep_intermediates_and_profile(default_model):
    x = np.load(DEFAULT_INPUT)
    plain = octet.InferenceSession(default_model)
    kept = octet.InferenceSession(default_model, keep_intermediates=True)
    names = [v.name for v in kept.get_intermediates()]
    assert names == [v.name for v in plain.get_intermediates()]
    assert "mm0_QuantizeLinear_Output" in names and "mm0" not in names  # folded
    (logits,) = plain.run(None, {"input": x})
    h, logits_kept = kept.run(["mm0_QuantizeLinear_Output", "logits"], {"input": x})
    assert h.dtype == np.int8 and h.shape == (4, 128)
    np.testing.assert_array_equal(logits, logits_kept)
    with pytest.raises(octet.OctetError, match="keep_intermediates"):
        plain.run(["mm0_QuantizeLinear_Output"], {"input": x})
    with pytest.raises(octet.OctetError, match="folded it into a fused node"):
        kept.run(["mm0"], {"input": x})
    assert plain.profile() == {"runs": 0, "ops": []}
    plain.set_profiling(True)
    for _ in range(3):
        plain.run(None, {"input": x})
    plain.set_profiling(False)
    plain.run(None, {"input": x})
    profile = plain.profile()
    assert profile["runs"] == 3
    ops = {op["op"]: op for op in profile["ops"]}
    assert ops["octet.QLinearMatMulFused"]["calls"] == 9
    assert [op["seconds"] for op in profile["ops"]] == sorted(
        (op["seconds"] for op in profile["ops"]), reverse=True)
    # OCTET_PROFILE=1 still prints the totals when the session ends.
    out = subprocess.run([sys.executable, "-c", "import numpy, octet; s = octet."
                          "InferenceSession(%r); s.run(None, {'input': numpy.load(%r)}); del s"
                          % (default_model, DEFAULT_INPUT)], capture_output=True, text=True,
                         env=dict(os.environ, OCTET_PROFILE="1"), timeout=60)
    assert out.returncode == 0 and "octet profile: 1 runs" in out.stderr


def test_tools_use_the_measurement_code():
    import measure  # tools/measure.py (conftest puts tools/ on the path)
    import host
    assert measure.alternate.__code__.co_filename == os.path.join(
        ROOT, "python", "octet", "measure.py")
    assert host.describe(octet) == measure.host_line(octet)
    calls = {"a": 0, "b": 0}
    seen = []

    def engine(name):
        def fn():
            calls[name] += 1
            seen.append(name)
        return fn

    samples = measure.alternate({"a": engine("a"), "b": engine("b")}, rounds=4, warmup=2)
    assert calls == {"a": 6, "b": 6} and seen[4:] == ["a", "b"] * 4
    assert [len(samples["a"]), len(samples["b"])] == [4, 4]
    samples = measure.alternate({"a": engine("a")}, seconds=0.0, warmup=0, min_rounds=3)
    assert len(samples["a"]) == 3
    assert measure.summary([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]) == {
        "min": 1.0, "median": 5.5, "p90": pytest.approx(9.1), "mean": 5.5}
    with pytest.raises(ValueError):
        measure.alternate({"a": engine("a")})


def test_ab_bench_runs_each_line_with_its_settings(tmp_path):
    """tools/ab_bench.py: a binary given with settings first runs with them (a fake
    Google Benchmark binary reports a CPU time set by FAKE_US), and the ratio is base / other."""
    fake = tmp_path / "fake_bench"
    fake.write_text("#!" + sys.executable + "\n"
                    "import json, os\n"
                    "print(json.dumps({'benchmarks': [{'name': 'BM_X', 'run_type': 'iteration',"
                    " 'time_unit': 'us', 'cpu_time': float(os.environ.get('FAKE_US', 7))}]}))\n")
    fake.chmod(0o755)
    out = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "ab_bench.py"),
                          "--rounds", "2", "--filter", "BM_X", f"FAKE_US=30 {fake}", str(fake)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "BM_X | 30.0 | 7.0 | 4.286" in out.stdout


def test_bench_llm_profile_counts_only_its_own_runs():
    """tools/bench_llm.py --profile: per-op ms and nodes per run from the session's
    cumulative counters, less what they held before (a fake session adds 2 ms and 3 runs of
    op A per run)."""
    import bench_llm

    class FakeSession:
        seconds, calls, profiling = 5.0, 7, None

        def set_profiling(self, on):
            self.profiling = on

        def profile(self):
            return {"runs": 0, "ops": [{"op": "A", "seconds": self.seconds,
                                        "calls": self.calls}]}

    session = FakeSession()

    def run():
        assert session.profiling
        session.seconds += 0.002
        session.calls += 3
    got = bench_llm.op_profile(session, run, 4)
    assert session.profiling is False
    assert list(got) == ["A"] and abs(got["A"][0] - 2.0) < 1e-9 and got["A"][1] == 3


def test_bench_llm_ort_profile_counts_only_the_timed_runs(tmp_path):
    """tools/bench_llm.py --profile's ONNX Runtime side: per op type the nodes per run of the
    timed runs (the warm-up run left out) and a positive time."""
    import bench_llm
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "x"], ["s"]),
             helper.make_node("Add", ["s", "r"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    feeds = {"x": np.ones((4, 8), np.float32)}
    got = bench_llm.ort_op_profile(str(path), 1, feeds, 3)
    assert set(got) == {"Relu", "Add"}
    assert got["Relu"][1] == pytest.approx(1) and got["Add"][1] == pytest.approx(2)
    assert all(ms > 0 for ms, _ in got.values())
