#!/usr/bin/env bash
# Sets up, builds the bundled default model, and runs it through octet (Python
# API and CLI) and ONNX Runtime, reporting whether they agree.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
.venv/bin/python tools/models/make_default_model.py

echo
echo "== octet CLI =="
.venv/bin/octet run build/models/default_mlp.int8.onnx \
  --input input=build/models/default_mlp.input.npy --output build/models/default_mlp.octet.npz
echo
echo "== octet vs ONNX Runtime =="
.venv/bin/python tools/demo.py
