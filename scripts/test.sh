#!/usr/bin/env bash
# The whole test suite: set-up, release build + all C++ tests, the unit tests
# again under AddressSanitizer + UndefinedBehaviorSanitizer, and the Python
# tests (API, CLI, ONNX backend tests, ONNX Runtime oracle). Prints a summary
# and exits non-zero if anything failed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
JOBS="${OCTET_JOBS:-2}"

declare -a NAMES=() RESULTS=()
step() {  # step NAME COMMAND...: runs and records one step
  local name=$1
  shift
  echo
  echo "==== $name ===="
  if "$@"; then RESULTS+=(PASS); else RESULTS+=(FAIL); fi
  NAMES+=("$name")
}
last_passed() { [ "${RESULTS[${#RESULTS[@]}-1]}" = PASS ]; }

step "setup" bash scripts/setup.sh
if last_passed; then
  step "release build (build/release)" bash -c "
    cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null &&
    cmake --build build/release -j$JOBS"
  if last_passed; then
    step "ctest (build/release)" ctest --test-dir build/release --output-on-failure -j"$JOBS"
  fi
  step "ASan+UBSan build (build/asan, -O1)" bash -c "
    cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DOCTET_SANITIZE=ON \
      -DCMAKE_CXX_FLAGS_DEBUG='-O1 -g' >/dev/null &&
    cmake --build build/asan -j$JOBS --target octet_unit_tests"
  if last_passed; then
    step "unit tests under ASan+UBSan" env ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
      UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 build/asan/octet_unit_tests
  fi
  step "pytest tests/python" .venv/bin/python -m pytest tests/python -q -rs
fi

echo
echo "==== summary ===="
status=0
for i in "${!NAMES[@]}"; do
  printf '  %-4s %s\n' "${RESULTS[$i]}" "${NAMES[$i]}"
  [ "${RESULTS[$i]}" = PASS ] || status=1
done
if [ $status -eq 0 ]; then echo "ALL PASSED"; else echo "FAILED"; fi
exit $status
