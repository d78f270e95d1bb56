"""Runs ONNX's own backend node tests for the quantization operators through octet.

The onnx 1.23.2 wheel ships the node-test *generators* (onnx/backend/test/case/node/*.py)
but not their serialized data (onnx/backend/test/data/node is absent from the wheel).
The data is produced here with the same code ONNX uses to produce its repository's
data (`collect_testcases()`, seeded per export) and written once in the usual layout,
model.onnx + test_data_set_0/{input,output}_N.pb, under
build/onnx_node_tests/onnx-<version>/. A wheel that does ship data/node is used as is.

A test is selected when every node of its model is one of the operators octet
implements for issue 2 (the ops are read from model.onnx, not guessed from the name).
Each selected test runs through octet and every output must equal the expected one
bit for bit (dtype, shape and bits; NaN positions included).

A test may only be skipped when octet refuses, with an octet.OctetError whose message
names the dtype, a model that uses a dtype outside issue 2's scope (DESIGNED_REFUSALS).
Any other refusal, a crash or a wrong value is a failure.

    .venv/bin/python tools/onnx_backend_runner.py [--filter SUBSTR] [--threads N]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import sys
import warnings
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

REPO_ROOT = Path(__file__).resolve().parents[1]
GENERATED_ROOT = REPO_ROOT / "build" / "onnx_node_tests"

# (domain, op_type) pairs octet implements for issue 2; "" is ai.onnx.
SUPPORTED_OPS = frozenset({
    ("", "QuantizeLinear"),
    ("", "DequantizeLinear"),
    ("", "DynamicQuantizeLinear"),
    ("", "QLinearMatMul"),
    ("", "MatMulInteger"),
    ("", "QLinearConv"),
    ("", "ConvInteger"),
    ("com.microsoft", "QuantizeLinear"),
    ("com.microsoft", "DequantizeLinear"),
})

# Element types that issue 2 does not ask octet to support. octet may refuse them
# (with an error naming the type); a test using one is then skipped, not failed.
DESIGNED_REFUSALS = {
    onnx.TensorProto.FLOAT4E2M1: "float4e2m1",
    onnx.TensorProto.FLOAT8E8M0: "float8e8m0",
    onnx.TensorProto.UINT2: "uint2",
    onnx.TensorProto.INT2: "int2",
}
for _name in ("FLOAT6E2M3", "FLOAT6E3M2"):
    if hasattr(onnx.TensorProto, _name):
        DESIGNED_REFUSALS[getattr(onnx.TensorProto, _name)] = _name.lower()


@dataclasses.dataclass
class NodeTest:
    name: str
    directory: Path
    ops: list[str]
    opsets: dict[str, int]
    ir_version: int
    elem_types: list[int]  # every element type in inputs, outputs and initializers

    def refused_dtypes(self) -> dict[int, str]:
        return {t: DESIGNED_REFUSALS[t] for t in self.elem_types if t in DESIGNED_REFUSALS}


@dataclasses.dataclass
class Outcome:
    name: str
    status: str  # "passed" | "failed" | "skipped"
    detail: str = ""


def _normalized_domain(domain: str) -> str:
    return "" if domain in ("", "ai.onnx") else domain


def _model_ops(model: onnx.ModelProto) -> set[tuple[str, str]]:
    return {(_normalized_domain(n.domain), n.op_type) for n in model.graph.node}


def _elem_types(model: onnx.ModelProto) -> list[int]:
    types = {vi.type.tensor_type.elem_type for vi in list(model.graph.input) +
             list(model.graph.output)}
    types |= {init.data_type for init in model.graph.initializer}
    return sorted(types)


def _shipped_data_dir() -> Path:
    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "node"


def _write_case(case, directory: Path) -> None:
    """Same layout and serialization as onnx's own data (onnx/backend/test/cmd_tools.py)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "model.onnx").write_bytes(case.model.SerializeToString())
    for index, (inputs, outputs) in enumerate(case.data_sets):
        data_dir = directory / f"test_data_set_{index}"
        data_dir.mkdir(exist_ok=True)
        for kind, values, infos in (("input", inputs, case.model.graph.input),
                                    ("output", outputs, case.model.graph.output)):
            for j, value in enumerate(values):
                tensor = value if isinstance(value, onnx.TensorProto) else \
                    numpy_helper.from_array(np.asarray(value), infos[j].name)
                (data_dir / f"{kind}_{j}.pb").write_bytes(tensor.SerializeToString())


def node_test_root() -> Path:
    """Folder with one sub-folder per node test; generated on first use."""
    shipped = _shipped_data_dir()
    if shipped.is_dir():
        return shipped
    root = GENERATED_ROOT / f"onnx-{onnx.__version__}"
    stamp = root / "COMPLETE"
    if stamp.exists():
        return root
    from onnx.backend.test.case import node as node_cases  # slow import: runs every export

    # Written beside the final folder and renamed, so concurrent runs never see half a tree.
    staging = root.with_name(f"{root.name}.tmp{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generators of unrelated ops warn on overflow
        cases = node_cases.collect_testcases()
    written = []
    for case in cases:
        if case.kind == "node" and _model_ops(case.model) & SUPPORTED_OPS:
            _write_case(case, staging / case.name)
            written.append(case.name)
    (staging / "COMPLETE").write_text(json.dumps({"onnx": onnx.__version__, "tests": written},
                                                 indent=1))
    if stamp.exists():  # another process finished first
        shutil.rmtree(staging)
        return root
    shutil.rmtree(root, ignore_errors=True)
    staging.rename(root)
    return root


def discover(root: Path | None = None) -> tuple[list[NodeTest], dict[str, list[str]]]:
    """Selected tests, and the tests that use a supported op next to unsupported ones."""
    root = root or node_test_root()
    selected, partial = [], {}
    for directory in sorted(p for p in root.iterdir() if (p / "model.onnx").is_file()):
        model = onnx.load(str(directory / "model.onnx"), load_external_data=False)
        ops = _model_ops(model)
        if not ops & SUPPORTED_OPS:
            continue
        op_names = sorted(f"{d}::{o}" if d else o for d, o in ops)
        if not ops <= SUPPORTED_OPS:
            partial[directory.name] = op_names
            continue
        opsets = {_normalized_domain(o.domain) or "ai.onnx": o.version for o in model.opset_import}
        selected.append(NodeTest(directory.name, directory, op_names, opsets, model.ir_version,
                                 _elem_types(model)))
    return selected, partial


def _read_tensors(data_dir: Path, kind: str) -> list[tuple[str, np.ndarray]]:
    result = []
    index = 0
    while (path := data_dir / f"{kind}_{index}.pb").exists():
        tensor = onnx.TensorProto()
        tensor.ParseFromString(path.read_bytes())
        result.append((tensor.name, numpy_helper.to_array(tensor)))
        index += 1
    return result


def bit_pattern(array: np.ndarray) -> np.ndarray:
    """Integers that are equal exactly when the elements are bitwise equal."""
    array = np.asarray(array)
    if array.dtype.name in ("int4", "uint4", "int2", "uint2"):
        return array.astype(np.int16)  # ml_dtypes sub-byte ints: compare values
    if array.dtype.kind in "iub":
        return array
    # float32/16/64, bfloat16, float8: compare the raw bits (NaN payloads included)
    return array.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[array.dtype.itemsize])


def compare_exact(actual: np.ndarray, expected: np.ndarray, what: str) -> str | None:
    """None when bitwise equal, else a one-paragraph description of the first differences."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.dtype != expected.dtype:
        return f"{what}: dtype {actual.dtype} != expected {expected.dtype}"
    if actual.shape != expected.shape:
        return f"{what}: shape {actual.shape} != expected {expected.shape}"
    got, want = bit_pattern(actual), bit_pattern(expected)
    differ = np.argwhere(got != want)
    if differ.size == 0:
        return None
    shown = []
    for index in differ[:6]:
        index = tuple(int(i) for i in index)
        shown.append(f"{list(index)}: got {actual[index]!r} (bits {int(got[index]):#x}) "
                     f"want {expected[index]!r} (bits {int(want[index]):#x})")
    return (f"{what}: {len(differ)} of {expected.size} elements differ; " + "; ".join(shown))


def _message_names_dtype(message: str, dtypes: dict[int, str]) -> bool:
    lowered = message.lower()
    for number, name in dtypes.items():
        if name in lowered or re.search(rf"\b{number}\b", lowered):
            return True
    return False


def run_test(test: NodeTest, threads: int = 1) -> Outcome:
    import octet

    refused = test.refused_dtypes()
    try:
        session = octet.InferenceSession(str(test.directory / "model.onnx"), threads=threads)
        output_names = [o.name for o in session.get_outputs()]
        problems = []
        for data_dir in sorted(test.directory.glob("test_data_set_*")):
            feeds = dict(_read_tensors(data_dir, "input"))
            expected = _read_tensors(data_dir, "output")
            results = session.run(None, feeds)
            if len(results) != len(expected):
                problems.append(f"{data_dir.name}: {len(results)} outputs, expected "
                                f"{len(expected)}")
                continue
            for name, got, (_, want) in zip(output_names, results, expected):
                problem = compare_exact(got, want, f"{data_dir.name} output {name!r}")
                if problem:
                    problems.append(problem)
    except octet.OctetError as error:
        message = str(error)
        if refused and _message_names_dtype(message, refused):
            names = ", ".join(sorted(refused.values()))
            return Outcome(test.name, "skipped",
                           f"{test.name}: octet refuses {names} by design (not in issue 2's "
                           f"dtype scope): {message}")
        return Outcome(test.name, "failed", f"octet.OctetError: {message}")
    if problems:
        return Outcome(test.name, "failed", " | ".join(problems))
    if refused:
        return Outcome(test.name, "passed", "runs although outside issue 2's dtype scope")
    return Outcome(test.name, "passed")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--filter", default="", help="only tests whose name contains this")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--list", action="store_true", help="list the selected tests and exit")
    args = parser.parse_args(argv)

    root = node_test_root()
    tests, partial = discover(root)
    tests = [t for t in tests if args.filter in t.name]
    print(f"node tests from {root}")
    if args.list:
        for test in tests:
            opsets = ",".join(f"{d}={v}" for d, v in test.opsets.items())
            print(f"  {test.name:48s} {'+'.join(test.ops):22s} {opsets}")
        print(f"{len(tests)} selected; not selected (other ops in the model):")
        for name, ops in partial.items():
            print(f"  {name}: {' '.join(ops)}")
        return 0

    outcomes = [run_test(t, args.threads) for t in tests]
    width = max((len(t.name) for t in tests), default=10)
    print(f"{'test':{width}s}  {'op':22s} {'opset':>5s}  status")
    for test, outcome in zip(tests, outcomes):
        opset = test.opsets.get("ai.onnx", test.opsets.get("com.microsoft", 0))
        line = f"{test.name:{width}s}  {'+'.join(test.ops):22s} {opset:5d}  {outcome.status}"
        if outcome.detail:
            line += f"  ({outcome.detail})"
        print(line)
    counts = {s: sum(o.status == s for o in outcomes) for s in ("passed", "failed", "skipped")}
    print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped "
          f"of {len(outcomes)} selected node tests")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
