"""Slice -> Slice chains merged into one Slice (rewrite/slice_merge.h).

Slicing moves bytes, so the merged node must give exactly ONNX Runtime's bytes. Merged:
disjoint axes with constant parameters (YOLO's Focus crop, negative axes and steps,
out-of-range starts and ends, int32 parameters, the default axes of a Slice without the
axes input, a chain of three). Kept as written: a repeated axis, an intermediate read by
another node or a graph output, parameters that are graph inputs.
"""

import re

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import octet
from octet_cli import inspect_model

SHAPE = [2, 3, 10, 13]


def ints(name, values, dtype=np.int64):
    return numpy_helper.from_array(np.array(values, dtype), name)


def slice_node(prefix, data, out, starts, ends, axes=None, steps=None, dtype=np.int64):
    """A Slice node and its constant parameters (axes/steps omitted when None)."""
    inits = [ints(prefix + "_s", starts, dtype), ints(prefix + "_e", ends, dtype)]
    inputs = [data, prefix + "_s", prefix + "_e"]
    if axes is not None or steps is not None:
        inputs.append(prefix + "_a" if axes is not None else "")
        if axes is not None:
            inits.append(ints(prefix + "_a", axes, dtype))
    if steps is not None:
        inputs.append(prefix + "_t")
        inits.append(ints(prefix + "_t", steps, dtype))
    return helper.make_node("Slice", inputs, [out]), inits


CASES = {
    # name: (list of (starts, ends, axes, steps[, dtype]) applied in a chain, merged count)
    "focus_even": ([([0], [2**62], [2], [2]), ([0], [2**62], [3], [2])], 1),
    "focus_odd": ([([1], [2**62], [2], [2]), ([1], [2**62], [3], [2])], 1),
    "negative_axes_steps": ([([-1], [-11], [-1], [-2]), ([8, 2], [-20, 0], [-2, 1], [-3, -1])], 1),
    "out_of_range": ([([-100], [100], [0], [1]), ([5], [1000], [2], [1])], 1),
    "int32_params": ([([1], [9], [2], [3], np.int32), ([2], [-1], [3], [2], np.int32)], 1),
    "default_axes": ([([1, 0], [2, 3], None, None), ([2], [7], [3], None)], 1),
    "three_in_a_row": ([([0], [1], [0], None), ([1], [3], [1], None),
                        ([0], [2**62], [2], [2])], 2),
    "repeated_axis": ([([0], [9], [2], [1]), ([1], [8], [2], [2])], 0),
}


def chain_model(steps, extra_output=False):
    nodes, inits, data = [], [], "x"
    for i, step in enumerate(steps):
        starts, ends, axes, stepv = step[:4]
        dtype = step[4] if len(step) > 4 else np.int64
        out = f"y{i}"
        node, node_inits = slice_node(f"p{i}", data, out, starts, ends, axes, stepv, dtype)
        nodes.append(node)
        inits += node_inits
        data = out
    outputs = [data] + (["y0"] if extra_output else [])
    graph = helper.make_graph(
        nodes, "slices", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             ir_version=8).SerializeToString()


def merged_count(model_bytes, tmp_path):
    return len(re.findall(r"merged with Slice", inspect_model(model_bytes, tmp_path)))


def check_against_ort(model_bytes):
    x = np.arange(np.prod(SHAPE), dtype=np.float32).reshape(SHAPE)
    ours = octet.InferenceSession(model_bytes).run(None, {"x": x})
    theirs = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"]).run(
        None, {"x": x})
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", sorted(CASES))
def test_chain_equals_ort(name, tmp_path, monkeypatch):
    monkeypatch.delenv("OCTET_QDQ", raising=False)
    steps, merges = CASES[name]
    m = chain_model(steps)
    assert merged_count(m, tmp_path) == merges
    check_against_ort(m)


def test_intermediate_read_elsewhere_is_kept(tmp_path, monkeypatch):
    monkeypatch.delenv("OCTET_QDQ", raising=False)
    m = chain_model(CASES["focus_even"][0], extra_output=True)
    assert merged_count(m, tmp_path) == 0
    check_against_ort(m)


def test_runtime_parameters_are_kept(tmp_path, monkeypatch):
    monkeypatch.delenv("OCTET_QDQ", raising=False)
    first, _ = slice_node("p0", "x", "y0", [0], [2**62], [2], [2])
    second = helper.make_node("Slice", ["y0", "starts", "p0_e", "p0_a"], ["y1"])
    _, inits = slice_node("p0", "x", "y0", [0], [2**62], [2], [2])
    graph = helper.make_graph(
        [first, second], "slices",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE),
         helper.make_tensor_value_info("starts", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y1", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                          ir_version=8).SerializeToString()
    assert merged_count(m, tmp_path) == 0
    x = np.arange(np.prod(SHAPE), dtype=np.float32).reshape(SHAPE)
    feeds = {"x": x, "starts": np.array([1], np.int64)}
    ours = octet.InferenceSession(m).run(None, feeds)[0]
    theirs = ort.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_array_equal(ours, theirs)
