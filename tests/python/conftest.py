"""Shared set-up for the Python test tiers: makes tools/ importable and prints a summary
of the two oracle tiers (backend node tests, ORT oracle) at the end of the run."""

import sys
from collections import Counter, defaultdict
from pathlib import Path

TOOLS_DIR = Path(__file__).resolve().parents[2] / "tools"
if str(TOOLS_DIR) not in sys.path:
    sys.path.insert(0, str(TOOLS_DIR))

# tier title -> (test file, parametrized test function)
_TIERS = {
    "ONNX backend node tests": ("test_onnx_backend.py", "test_node["),
    "ONNX Runtime oracle": ("test_oracle.py", "test_case["),
}
_outcomes = defaultdict(list)  # tier -> [(param id, outcome, skip reason)]


def pytest_runtest_logreport(report):
    if not (report.when == "call" or (report.when == "setup" and not report.passed)):
        return
    for tier, (filename, function) in _TIERS.items():
        if filename in report.nodeid and function in report.nodeid:
            param = report.nodeid.split(function, 1)[1][:-1]
            reason = report.longrepr[2].removeprefix("Skipped: ") if report.skipped and \
                isinstance(report.longrepr, tuple) else ""
            refused = dict(report.user_properties).get("oracle_status") == "refused"
            _outcomes[tier].append((param, "refused" if refused else report.outcome, reason))


def pytest_terminal_summary(terminalreporter):
    for tier, results in _outcomes.items():
        counts = Counter(outcome for _, outcome, _ in results)
        terminalreporter.section(tier)
        terminalreporter.line(f"{counts['passed']} passed, {counts['refused']} refused (by design), "
                              f"{counts['failed']} failed, {counts['skipped']} skipped "
                              f"of {len(results)}")
        if tier == "ONNX Runtime oracle":
            by_op = defaultdict(Counter)
            for param, outcome, _ in results:
                by_op[param.split("/", 1)[0]][outcome] += 1
            for op in sorted(by_op):
                row = by_op[op]
                terminalreporter.line(f"  {op:34s} {row['passed']:5d} passed "
                                      f"{row['refused']:5d} refused (by design) "
                                      f"{row['failed']:5d} failed {row['skipped']:5d} skipped")
        for param, outcome, reason in results:
            if outcome == "skipped":
                terminalreporter.line(f"  skipped: {reason}")
