"""`octet bench --report OUT.html`: one self-contained page (no network, no script): the
results table, a bar chart of latency per engine and thread count, the latency of every
round, octet's operator-time breakdown and the groups its rewrites fused or refused. The
charts are drawn by matplotlib and inlined as SVG."""

import html
import io
import re

from . import bench

COLORS = {"octet": "#1f77b4", "ort": "#ff7f0e"}  # matplotlib's first two cycle colors
MAX_POINTS = 500  # per series in the rounds chart; more are thinned to every k-th round


def _ordinal(n):
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return "%d%s" % (n, suffix)


_STYLE = """
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 3px 8px; font-size: 0.9em; }
th { background: #f0f0f0; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.meta { color: #555; font-size: 0.9em; } .chart svg { max-width: 100%; height: auto; }
code { font-size: 0.9em; }
"""


def _svg(figure):
    import matplotlib.pyplot as plt
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(figure)
    text = buffer.getvalue()
    text = text[text.index("<svg"):]  # drop the XML declaration and DOCTYPE
    return re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams["svg.fonttype"] = "none"  # text stays text
    plt.rcParams["svg.hashsalt"] = "octet"  # the same ids on every run
    return plt


def latency_chart(results):
    """Grouped bars: median latency per thread count, one bar per engine; whiskers from the
    min to the p90."""
    plt = _pyplot()
    threads = sorted({r["threads"] for r in results})
    engines = [e for e in ("octet", "ort") if any(r["engine"] == e for r in results)]
    width = 0.8 / len(engines)
    figure, axes = plt.subplots(figsize=(7, 3.6))
    for j, engine in enumerate(engines):
        xs, medians, low, high = [], [], [], []
        for i, t in enumerate(threads):
            row = next((r for r in results if r["engine"] == engine and r["threads"] == t), None)
            if row is None:
                continue
            lat = row["latency_s"]
            xs.append(i + (j - (len(engines) - 1) / 2) * width)
            medians.append(lat["median"] * 1e3)
            low.append((lat["median"] - lat["min"]) * 1e3)
            high.append((lat["p90"] - lat["median"]) * 1e3)
        bars = axes.bar(xs, medians, width * 0.95, yerr=[low, high], capsize=4,
                        color=COLORS[engine], label=bench.ENGINE_LABEL[engine])
        axes.bar_label(bars, labels=["%.3g" % m for m in medians], padding=2, fontsize=8)
    axes.set_xticks(range(len(threads)), ["%d thread%s" % (t, "" if t == 1 else "s")
                                          for t in threads])
    axes.set_ylabel("latency, ms (median; whiskers min..p90)")
    axes.set_ylim(0, max(r["latency_s"]["p90"] for r in results) * 1e3 * 1.15)
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes.set_title("Latency per engine and thread count")
    axes.grid(axis="y", alpha=0.3)
    return _svg(figure)


def rounds_chart(results):
    """Every timed round's latency, per engine and thread count."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator
    figure, axes = plt.subplots(figsize=(7, 2.8))
    styles = ["-", "--", ":", "-."]
    threads = sorted({r["threads"] for r in results})
    step = max(1, max(len(r["samples_s"]) for r in results) // MAX_POINTS)
    for r in results:
        samples = r["samples_s"]
        axes.plot(range(1, len(samples) + 1, step), [s * 1e3 for s in samples[::step]],
                  styles[threads.index(r["threads"]) % len(styles)], color=COLORS[r["engine"]],
                  marker=".", markersize=3, linewidth=1,
                  label="%s, %d thr" % (bench.ENGINE_LABEL[r["engine"]], r["threads"]))
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_xlabel("round")
    axes.set_ylabel("latency, ms")
    axes.set_ylim(bottom=0)
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes.set_title("Latency of every %sround (rounds alternate between engines)"
                   % ("" if step == 1 else "%s " % _ordinal(step)))
    axes.grid(alpha=0.3)
    return _svg(figure)


def ops_chart(profile, top=12):
    """Horizontal bars: octet's kernel time per op type, most first."""
    plt = _pyplot()
    ops = profile["ops"][:top]
    figure, axes = plt.subplots(figsize=(7, 0.5 + 0.32 * max(len(ops), 1)))
    names = [op["op"] for op in ops][::-1]
    values = [op["ms_per_run"] for op in ops][::-1]
    bars = axes.barh(names, values, color=COLORS["octet"])
    axes.bar_label(bars, labels=["%.3g ms (%.0f%%)" % (op["ms_per_run"], op["percent"])
                                 for op in ops][::-1], padding=3, fontsize=8)
    axes.set_xlabel("kernel time per run, ms (threads=%d, %d runs)"
                    % (profile["threads"], profile["runs"]))
    axes.set_xlim(0, (max(values) if values else 1) * 1.3)
    axes.set_title("octet's operators by time")
    axes.tick_params(axis="y", labelsize=8)
    return _svg(figure)


def _table(header, rows, numeric=()):
    out = ["<table><tr>%s</tr>" % "".join("<th>%s</th>" % html.escape(str(h)) for h in header)]
    for row in rows:
        out.append("<tr>%s</tr>" % "".join(
            '<td class="num">%s</td>' % html.escape(str(c)) if i in numeric
            else "<td>%s</td>" % html.escape(str(c)) for i, c in enumerate(row)))
    out.append("</table>")
    return "\n".join(out)


def render(report):
    e = html.escape
    s = report["settings"]
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             "<title>octet bench: %s</title>" % e(report["model"]),
             "<style>%s</style></head><body>" % _STYLE,
             "<h1>octet bench: <code>%s</code></h1>" % e(report["model"])]
    versions = report["versions"]
    meta = ["host: %s" % report["host"]["line"],
            "octet %s, numpy %s%s, Python %s" % (
                versions["octet"], versions["numpy"],
                ", onnxruntime %s (%s)" % (versions["onnxruntime"], s["ort"])
                if s["vs_ort"] else "", versions["python"]),
            "load average before / after: %s / %s"
            % (report["load_before"], report.get("load_after"))]
    meta += ["input %s: %s" % (i["name"], i["source"]) for i in report["inputs"]]
    meta += ["inputs: %s" % note for note in report["input_notes"]]
    how = "%d rounds" % s["repeat"] if s["repeat"] else "%g s of rounds" % s["time_s"]
    meta.append("timing: %d warm-up run(s), then %s per thread count; a round runs each "
                "engine once" % (s["warmup"], how))
    parts.append('<p class="meta">%s</p>' % "<br>".join(e(m) for m in meta))

    parts.append("<h2>Results</h2>")
    rows = []
    for r in report["results"]:
        lat = r["latency_s"]
        rows.append([bench.ENGINE_LABEL[r["engine"]], r["threads"], r["rounds"],
                     "%.4g" % (lat["min"] * 1e3), "%.4g" % (lat["median"] * 1e3),
                     "%.4g" % (lat["p90"] * 1e3), "%.1f" % r["throughput_per_s"],
                     "-" if r["peak_rss_mib"] is None else "%.1f" % r["peak_rss_mib"],
                     "-" if r["rss_above_imports_mib"] is None
                     else "%.1f" % r["rss_above_imports_mib"],
                     "%.1f" % (r["create_s"] * 1e3), "%.2f" % r["vs_octet_median"]])
    parts.append('<div id="results">' + _table(
        ["engine", "threads", "rounds", "min ms", "median ms", "p90 ms", "runs/s",
         "peak RSS MiB", "RSS above imports MiB", "session creation ms", "time / octet"],
        rows, numeric=range(1, 11)) + "</div>")
    parts.append('<p class="meta">time / octet: the engine\'s median latency over octet\'s at '
                 "the same thread count (&gt; 1: octet is faster). Peak RSS: a fresh process "
                 "per row that imports the engine, creates the session and runs the inputs "
                 "twice.</p>")
    parts.append('<div class="chart" id="chart-latency">%s</div>'
                 % latency_chart(report["results"]))
    parts.append('<div class="chart" id="chart-rounds">%s</div>'
                 % rounds_chart(report["results"]))

    if report["agreement"] is not None:
        parts.append("<h2>Outputs, octet against ONNX Runtime</h2>")
        rows = [[a["output"], a["dtype"], a["shape"],
                 "%d of %d" % (a["differing"], a["total"]) if a["comparable"] else a["note"],
                 "%.6g" % a["max_abs_diff"] if a["comparable"] else "-"]
                for a in report["agreement"]]
        parts.append(_table(["output", "dtype", "shape", "values that differ", "max |d|"],
                            rows))

    p = report["profile"]
    parts.append("<h2>octet's operators by time</h2>")
    if p and p["ops"]:
        parts.append('<div class="chart" id="chart-ops">%s</div>' % ops_chart(p))
        parts.append(_table(["op", "ms per run", "share", "calls per run"],
                            [[o["op"], "%.4f" % o["ms_per_run"], "%.1f%%" % o["percent"],
                              "%g" % o["calls_per_run"]] for o in p["ops"]],
                            numeric=(1, 2, 3)))
        parts.append('<p class="meta">OCTET_PROFILE\'s counters: kernel time per op type over '
                     "%d runs at %d thread(s), %.3f ms per run in kernels.</p>"
                     % (p["runs"], p["threads"], p["kernel_ms_per_run"]))

    rw = report["rewrites"]
    parts.append("<h2>What octet's rewrites fused and refused</h2>")
    parts.append('<p class="meta">%s</p>' % "<br>".join(e(x) for x in bench.rewrite_lines(rw)))
    if rw["fused"]:
        parts.append('<div id="fused"><h3>fused</h3>' + _table(
            ["op", "node", "became"], [[f["op"], f["node"], f["detail"]] for f in rw["fused"]])
            + "</div>")
    if rw["refused"]:
        parts.append('<div id="refused"><h3>refused</h3>' + _table(
            ["op", "node", "why"], [[f["op"], f["node"], f["detail"]] for f in rw["refused"]])
            + "</div>")
    parts.append("</body></html>")
    page = "\n".join(parts)
    if re.search(r"(?:src|href)\s*=\s*[\"']?(?:https?:|//)", page):
        raise RuntimeError("internal: the report refers to the network")
    return page


def write(report, path):
    with open(path, "w", encoding="utf-8") as f:
        f.write(render(report))
