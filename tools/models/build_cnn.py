#!/usr/bin/env python3
"""Builds the convolutional model: ddddocr's character detector (`common_det.onnx`, a
YOLOX-style network, 20.1 MB of trained float weights shipped in the PyPI package ddddocr
1.6.1), quantized with onnxruntime.quantization. Deterministic; no download beyond
`pip install --no-deps ddddocr==1.6.1`.

The packaged model is opset 11 with a fixed 1x3x416x416 input (BGR, 0..255, CHW). Its
head reshapes with -1, so it runs at any size that is a multiple of 32; the builder sets
the input size (--size, 416 by default; CI uses 128), converts to opset 13 (per-axis
DequantizeLinear needs it) and quantizes it. Output `output` [1, anchors, 6]: box
(x, y, log w, log h) relative to the anchor grid, objectness and class score (sigmoids).

Writes into build/models/ (kept unless --force):
    det-{size}.fp32.onnx     the float model at that size, opset 13
    det-{size}.qdq_pc.onnx   quantize_static QDQ, S8S8, per-channel weights
    det-{size}.qop.onnx      quantize_static QOperator, U8S8
  what a careful user makes (24 calibration images, ORT's better calibration):
    det-{size}.qdq_pc_pct.onnx  QDQ, uint8 activations, per-channel, Percentile 99.999
    det-{size}.qdq_pc_ent.onnx  QDQ, S8S8, per-channel, Entropy
Calibration: 8 synthetic captcha-like images (seeded numpy drawing, see synth_image), 24 for
the careful recipes (common.STATIC_RECIPES).
"""

import argparse
import os
import sys

import numpy as np
import onnx
from onnx import version_converter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

PACKAGE = "ddddocr"
OPSET = 13
VARIANTS = ("fp32", "qdq_pc", "qop", "qdq_pc_pct", "qdq_pc_ent")
QUANTIZED = VARIANTS[1:]
CALIBRATION_SEEDS = range(100, 108)
MORE_CALIBRATION_SEEDS = range(100, 124)
EVAL_SEEDS = range(200, 204)
PAD_VALUE = 114  # ddddocr's letterbox fill
SCORE_THRESHOLD = 0.1  # ddddocr's get_bbox: a box is kept when objectness * class > 0.1


def synth_image(seed, size):
    """A deterministic captcha-like BGR image, float32 [1, 3, size, size] in 0..255: a
    textured light background holding a letterboxed strip of 4-6 dark glyphs made of thick
    strokes and rings, plus thin noise lines, as ddddocr's preprocessing would feed it."""
    rng = np.random.default_rng(seed)
    height = int(size * rng.uniform(0.3, 0.6))
    yy, xx = np.mgrid[0:height, 0:size].astype(np.float32)
    base = rng.uniform(170, 240, 3).astype(np.float32)
    strip = base[None, None, :] + (xx / size * rng.uniform(-30, 30))[..., None]
    strip = strip + rng.normal(0, 8, (height, size, 3)).astype(np.float32)
    glyphs = rng.integers(4, 7)
    cell = size / glyphs
    for g in range(glyphs):
        colour = rng.uniform(0, 110, 3).astype(np.float32)
        cx, cy = (g + 0.5) * cell + rng.uniform(-0.15, 0.15) * cell, height * rng.uniform(0.35, 0.65)
        radius = min(cell, height) * rng.uniform(0.25, 0.4)
        ink = np.zeros((height, size), bool)
        for _ in range(rng.integers(2, 4)):  # strokes: thick segments through the glyph
            angle = rng.uniform(0, np.pi)
            dx, dy = np.cos(angle), np.sin(angle)
            along = (xx - cx) * dx + (yy - cy) * dy
            across = -(xx - cx) * dy + (yy - cy) * dx
            ink |= (np.abs(along) < radius) & (np.abs(across) < radius * 0.18)
        if rng.random() < 0.5:  # a ring, like o, c, e
            dist = np.hypot(xx - cx, yy - cy)
            ink |= np.abs(dist - radius * 0.7) < radius * 0.15
        strip[ink] = colour
    for _ in range(3):  # thin interference lines across the strip
        x0, x1 = rng.uniform(0, size, 2)
        y0, y1 = rng.uniform(0, height, 2)
        t = np.linspace(0, 1, size * 2)
        px = np.clip((x0 + (x1 - x0) * t).astype(int), 0, size - 1)
        py = np.clip((y0 + (y1 - y0) * t).astype(int), 0, height - 1)
        strip[py, px] = rng.uniform(0, 255, 3).astype(np.float32)
    image = np.full((size, size, 3), PAD_VALUE, np.float32)
    image[:height] = np.clip(np.round(strip), 0, 255)  # uint8 pixel values, as decoded
    return np.ascontiguousarray(image.transpose(2, 0, 1)[None])


def calibration_feeds(size, more_data=False):
    seeds = MORE_CALIBRATION_SEEDS if more_data else CALIBRATION_SEEDS
    return [{"images": synth_image(seed, size)} for seed in seeds]


def eval_feeds(size):
    """The check's inputs: one feed per image (the model's batch is fixed at 1)."""
    return [{"images": synth_image(seed, size)} for seed in EVAL_SEEDS]


def build_float_model(size):
    model = onnx.load(common.package_file(PACKAGE, "common_det.onnx"))
    dims = model.graph.input[0].type.tensor_type.shape.dim
    dims[2].dim_value = dims[3].dim_value = size
    # One anchor per cell of the stride 8, 16 and 32 grids.
    model.graph.output[0].type.tensor_type.shape.dim[1].dim_value = sum(
        (size // stride) ** 2 for stride in (8, 16, 32))
    del model.graph.value_info[:]  # shapes recorded for 416 no longer hold
    model = version_converter.convert_version(model, OPSET)
    model.ir_version = common.IR_VERSION
    model.producer_name = "octet build_cnn (ddddocr common_det.onnx)"
    return model


def model_path(variant, size):
    return os.path.join(common.MODELS_DIR, "det-%d.%s.onnx" % (size, variant))


def build(size=416, variants=VARIANTS, force=False, log=lambda *a: None):
    if size % 32:
        raise ValueError("detector input size must be a multiple of 32, got %d" % size)
    float_path = model_path("fp32", size)
    if force or not os.path.exists(float_path):
        common.save(build_float_model(size), float_path)
        log("wrote", float_path)
    paths = {}
    for variant in variants:
        path = model_path(variant, size)
        if variant != "fp32" and (force or not os.path.exists(path)):
            common.quantize(float_path, path, variant, calibration_feeds(
                size, common.STATIC_RECIPES[variant].get("more_data", False)))
            log("wrote", path)
        paths[variant] = path
    return paths


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=416, help="input height = width (x32)")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--force", action="store_true", help="rebuild models already cached")
    args = parser.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        parser.error("unknown variants %s (known: %s)" % (sorted(unknown), ", ".join(VARIANTS)))
    if args.size % 32 or args.size < 32:
        parser.error("--size must be a positive multiple of 32")
    paths = build(args.size, variants, args.force, log=print)
    for variant in variants:
        print("%-8s %s  sha256 %s" % (variant, paths[variant], common.sha256(paths[variant])[:16]))


if __name__ == "__main__":
    main()
