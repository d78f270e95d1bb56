"""octet against ONNX Runtime 1.31.1 on the generated operator cases, bit for bit.

One test per case of tools/ops_quant_oracle.py (ids are the case ids, e.g.
"QuantizeLinear/q21_float32_int8_axis-1_ties"). Models, inputs and ORT outputs come from
build/oracle_cache/ (generated on the first run). Integer matmul and convolution cases
also run octet with 2 threads: results must not depend on the thread count.
"""

import pytest

import ops_quant_oracle as oracle

CASES = oracle.all_cases()
THREADED_OPS = {"MatMulInteger", "QLinearMatMul", "ConvInteger", "QLinearConv", "qdq_matmul"}


def test_case_count():
    assert len(CASES) >= 400
    ops = {case.op for case in CASES}
    assert ops >= {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear",
                   "MatMulInteger", "QLinearMatMul", "ConvInteger", "QLinearConv",
                   "com.microsoft.QuantizeLinear", "com.microsoft.DequantizeLinear"}


def test_deviations_are_explained():
    """A deviation names its arithmetic reason and an exact LSB bound; no blanket ones."""
    for case in CASES:
        if case.deviation:
            assert len(case.deviation["reason"]) > 80, case.case_id
            assert case.deviation["max_lsb"] == 1, case.case_id


@pytest.mark.parametrize("case", CASES, ids=[c.case_id for c in CASES])
def test_case(case):
    extra = (2,) if case.op in THREADED_OPS else ()
    status, detail = oracle.check_case(case, threads=1, extra_threads=extra)
    if status == "skipped":
        pytest.skip(detail)
    assert status == "passed", detail


def test_comparison_is_bitwise_and_deviation_is_exact():
    """The checks above can fail: one step off fails unless a deviation allows exactly that
    step at that level; NaN bits and signed zeros count."""
    import numpy as np

    case = oracle.Case("x/y", "x", {})
    ort = [np.array([10, 20, 30], np.uint8)]
    one_off = [np.array([10, 21, 30], np.uint8)]
    two_off = [np.array([10, 22, 30], np.uint8)]
    assert oracle.compare_outputs(case, "ORT ENABLE_ALL", ort, ort, ["y"]) == []
    assert oracle.compare_outputs(case, "ORT ENABLE_ALL", one_off, ort, ["y"])
    case.deviation = {"reason": "test", "max_lsb": 1, "levels": ["DISABLE_ALL"]}
    assert oracle.compare_outputs(case, "ORT ENABLE_ALL", one_off, ort, ["y"])
    assert oracle.compare_outputs(case, "ORT DISABLE_ALL", one_off, ort, ["y"]) == []
    assert oracle.compare_outputs(case, "ORT DISABLE_ALL", two_off, ort, ["y"])
    zeros = [np.array([0.0, np.nan], np.float32)]
    flipped = [np.array([-0.0, -np.nan], np.float32)]
    assert oracle.compare_outputs(case, "ORT DISABLE_ALL", flipped, zeros, ["y"])
