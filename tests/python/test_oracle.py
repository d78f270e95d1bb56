"""octet against ONNX Runtime 1.31.1 on the generated operator cases, bit for bit.

One test per case of tools/ops_quant_oracle.py (ids are the case ids, e.g.
"QuantizeLinear/q21_float32_int8_axis-1_ties"). Models, inputs and ORT outputs come from
build/oracle_cache/ (generated on the first run). Integer matmul and convolution cases
also run octet with 2 threads: results must not depend on the thread count.
"""

import dataclasses
import pickle

import numpy as np
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


def test_designed_refusals_and_spec_deviations_are_explained():
    """A designed refusal names its message; a spec deviation its reason and a bounded range
    of x / scale (never the whole line)."""
    refusals = [c for c in CASES if c.octet_refuses]
    assert {c.case_id.split("/")[0] for c in refusals} == {"ConvInteger", "QLinearConv"}
    assert all(c.octet_refuses == oracle.CONV3D_REFUSAL and len(c.spec["spatial"]) == 3
               for c in refusals)
    for case in CASES:
        if case.spec_deviation:
            assert len(case.spec_deviation["reason"]) > 80, case.case_id
            low, high = case.spec_deviation["quotient_range"]
            assert 0 < low < high < 2 * low, case.case_id


@pytest.mark.parametrize("case", CASES, ids=[c.case_id for c in CASES])
def test_case(case, record_property):
    extra = (2,) if case.op in THREADED_OPS else ()
    status, detail = oracle.check_case(case, threads=1, extra_threads=extra)
    if status == "skipped":
        pytest.skip(detail)
    # a designed refusal passes a different assertion (the error and its message); the
    # summary in conftest.py tallies it as "refused (by design)"
    record_property("oracle_status", status)
    assert status in ("passed", "refused"), detail


def test_comparison_is_bitwise_and_deviation_is_exact():
    """The checks above can fail: one step off fails unless a deviation allows exactly that
    step at that level; NaN bits and signed zeros count."""
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


def _case(case_id):
    return next(c for c in CASES if c.case_id == case_id)


def test_spec_deviation_covers_only_its_elements():
    """ORT's own output fails where ORT departs from the spec, and any change outside the
    declared elements fails too: the spec deviation is no tolerance."""
    case = _case("QuantizeLinear/q21_float32_float8e4m3fn_sat0_overflow_sweep")
    prepared = oracle.prepare(case)
    mask = oracle.spec_deviation_mask(case, prepared)
    assert 0 < mask.sum() < mask.size
    expected = oracle.spec_expected(case, prepared)["DISABLE_ALL"]
    label = "ORT DISABLE_ALL"
    ort = prepared.ort["DISABLE_ALL"]
    assert oracle.compare_outputs(case, label, ort, expected, ["y"])
    assert oracle.compare_outputs(case, label, expected, expected, ["y"]) == []
    changed = expected[0].copy()
    outside = int(np.flatnonzero(~mask.reshape(-1))[0])
    changed.reshape(-1)[outside] = -changed.reshape(-1)[outside] if \
        changed.reshape(-1)[outside] != 0 else 1.0
    assert oracle.compare_outputs(case, label, [changed], expected, ["y"])


def test_designed_refusal_can_fail():
    """A case declared refused fails when octet runs it or refuses with another message."""
    runs = dataclasses.replace(_case("ConvInteger/u8u8_1x1_full"), octet_refuses="anything")
    status, detail = oracle.check_case(runs)
    assert status == "failed" and "octet ran the case" in detail
    other = dataclasses.replace(_case("ConvInteger/u8u8_conv3d_limits"),
                                octet_refuses="some other message")
    status, detail = oracle.check_case(other)
    assert status == "failed" and "without the designed message" in detail


def test_u8s8_cases_are_judged_by_exact_ort_outputs(tmp_path, monkeypatch):
    """No u8 x s8 case is skipped: ORT's outputs for one come from its u8 x u8 form, or from
    its own form on a machine whose u8 x s8 kernel is exact (VNNI). A cached s8-form entry
    from a machine without VNNI is not used: prepare() recomputes it in this host's form."""
    cases = [c for c in CASES if c.vnni_exact_only]
    assert len(cases) >= 100
    for case in cases:
        prepared = oracle.prepare(case)
        assert oracle.usable(case, prepared.machine, prepared.form), case.case_id
    case = _case("MatMulInteger/u8i8_4x8_by_8x5_full_zarandom_zbrandom")
    monkeypatch.setattr(oracle, "CACHE_DIR", tmp_path)
    fresh = oracle.prepare(case)
    assert fresh.form == oracle.ort_form(case)
    entry = pickle.loads((tmp_path / f"{case.key()}.pkl").read_bytes())
    assert entry["form"] == fresh.form and entry["machine"] == oracle.machine_info()
    entry.update(form="s8", machine={"machine": "x86_64", "cpu": "saturating", "isa": ["avx2"]})
    (tmp_path / f"{case.key()}.pkl").write_bytes(pickle.dumps(entry))
    again = oracle.prepare(case)
    assert again.machine == oracle.machine_info() and again.form == fresh.form
