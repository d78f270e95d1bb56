"""ONNX backend node tests for the quantization operators, run through octet.

One pytest test per ONNX node test; outputs must equal ONNX's expected outputs bit for
bit. Selection, data generation and the skip policy live in tools/onnx_backend_runner.py.
Run with -rs to see every skip and its reason; the session summary line also prints
how many passed.
"""

import numpy as np
import pytest

import onnx_backend_runner as runner

SELECTED, _ = runner.discover()


def test_selection_covers_every_operator():
    """Each op of issue 2 with node tests in onnx is reached (guards the selection)."""
    ops = {op for test in SELECTED for op in test.ops}
    assert ops >= {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear",
                   "QLinearMatMul", "MatMulInteger", "QLinearConv", "ConvInteger"}
    assert len(SELECTED) >= 40


@pytest.mark.parametrize("test", SELECTED, ids=[t.name for t in SELECTED])
def test_node(test):
    outcome = runner.run_test(test)
    if outcome.status == "skipped":
        pytest.skip(outcome.detail)
    assert outcome.status == "passed", outcome.detail


@pytest.mark.parametrize("expected, actual", [
    (np.array([np.nan, 1.0], np.float32), np.array([1.0, np.nan], np.float32)),
    (np.array([0.0], np.float32), np.array([-0.0], np.float32)),
    (np.array([np.nan], np.float32), np.array([-np.nan], np.float32)),
    (np.array([1, 2], np.uint8), np.array([1, 2], np.int8)),
    (np.array([[1, 2]], np.uint8), np.array([1, 2], np.uint8)),
], ids=["nan-position", "signed-zero", "nan-sign", "dtype", "shape"])
def test_comparison_detects(expected, actual):
    """The comparison used above is bitwise: these near-misses must be reported."""
    assert runner.compare_exact(actual, expected, "y") is not None
    assert runner.compare_exact(expected, expected, "y") is None
