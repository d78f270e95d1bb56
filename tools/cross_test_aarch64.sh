#!/usr/bin/env bash
# Builds the kernel unit tests (GEMM, micro-kernel table, epilogue, convolution) for
# aarch64 with Debian's cross compiler and runs them under qemu-aarch64 -cpu max, so
# the Arm dot-product path (gemm_s8s8_4x16c4_neondot) and the scalar path run on an
# x86 machine. Not part of CI (a few minutes of compiling and emulation).
#   bash tools/cross_test_aarch64.sh [BUILD_DIR]      (default build/aarch64)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
OUT=${1:-build/aarch64}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

need=()
command -v aarch64-linux-gnu-g++ >/dev/null || need+=(g++-aarch64-linux-gnu)
command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
if ((${#need[@]})); then
  echo "cross_test_aarch64: installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >/dev/null
fi

# GoogleTest for aarch64 from Debian's sources (libgtest-dev ships them).
if [ ! -f "$OUT/gtest/lib/libgtest.a" ]; then
  cat >"$OUT/toolchain.cmake" <<'EOF'
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
EOF
  cmake -S /usr/src/googletest -B "$OUT/gtest-build" -G Ninja -DBUILD_GMOCK=OFF \
    -DCMAKE_TOOLCHAIN_FILE="$OUT/toolchain.cmake" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$OUT/gtest" >/dev/null
  cmake --build "$OUT/gtest-build" -j2 >/dev/null
  cmake --install "$OUT/gtest-build" >/dev/null
fi

# The layers' include roots, as CMakeLists.txt makes them.
for layer in core graph kernels ops; do
  mkdir -p "$OUT/layers/$layer"
  ln -sfn "$ROOT/src/$layer" "$OUT/layers/$layer/$layer"
done
sources=(src/core/*.cc src/kernels/*.cc)
for f in src/kernels/int8/*.cc; do
  case $f in *_avx*) ;; *) sources+=("$f") ;; esac
done
sources+=(tests/unit/gemm_test.cc tests/unit/gemm_kernels_test.cc tests/unit/epilogue_test.cc
          tests/unit/conv_fast_test.cc)
flags=(-std=c++20 -O2 -Wall -Wextra -ffp-contract=off -march=armv8.2-a+dotprod
       -I"$OUT/layers/core" -I"$OUT/layers/graph" -I"$OUT/layers/kernels" -I"$OUT/layers/ops"
       -I"$OUT/gtest/include")
mkdir -p "$OUT/obj"
objects=()
for f in "${sources[@]}"; do
  o="$OUT/obj/$(echo "$f" | tr / _).o"
  objects+=("$o")
  aarch64-linux-gnu-g++ "${flags[@]}" -c "$f" -o "$o" &
  while [ "$(jobs -r | wc -l)" -ge 2 ]; do sleep 0.2; done
done
wait
# Static linking warns about gtest's getaddrinfo; every other message shows.
aarch64-linux-gnu-g++ -static -o "$OUT/kernel_tests" "${objects[@]}" "$OUT/gtest/lib/libgtest.a" \
  "$OUT/gtest/lib/libgtest_main.a" -lpthread 2> >(grep -v -e getaddrinfo -e MakeConnection >&2)
# The OCTET_ISA death test re-executes the binary, which qemu-user cannot do.
qemu-aarch64 -cpu max "$OUT/kernel_tests" --gtest_filter='-*DeathTest*'
