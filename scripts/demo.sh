#!/usr/bin/env bash
# Sets up, then runs the main job: the quantized sentence encoder (all-MiniLM-L6-v2, int8)
# on the bundled sentences through octet, with its agreement with ONNX Runtime. Then the
# small bundled MLP through the CLI and bit for bit against ONNX Runtime.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh

echo
echo "== sentence encoder: octet vs ONNX Runtime =="
.venv/bin/python tools/demo.py

echo
echo "== small MLP: octet CLI, then bit-exact check against ONNX Runtime =="
.venv/bin/python tools/models/make_default_model.py
.venv/bin/octet run build/models/default_mlp.int8.onnx \
  --input input=build/models/default_mlp.input.npy --output build/models/default_mlp.octet.npz
.venv/bin/python tools/demo.py --mlp
