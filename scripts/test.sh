#!/usr/bin/env bash
# The whole test suite: set-up, release build + all C++ tests, the unit tests
# again under AddressSanitizer + UndefinedBehaviorSanitizer, the threaded ones under
# ThreadSanitizer, each libFuzzer target briefly, and the Python
# tests (API, CLI, ONNX backend tests, ONNX Runtime oracle, reduced model rows), then the
# Python tests again with cpuid masked to AVX2 (tools/avx2_host.sh, where CPUID faulting
# exists) and the ORT-oracle tests and some reduced model rows under qemu-x86_64 -cpu
# Haswell, so that a machine with AVX-512 VNNI also proves the suite on an AVX2 CPU (ONNX
# Runtime then takes its AVX2 kernels, whose u8 x s8 products saturate). Prints a summary
# and exits non-zero if anything failed (a step this machine cannot run is listed as SKIP
# with the reason).
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
skip() {  # skip NAME REASON: records a step that cannot run on this machine
  echo
  echo "==== $1 ===="
  echo "skipped: $2"
  NAMES+=("$1 (skipped: $2)")
  RESULTS+=(SKIP)
}
last_passed() { [ "${RESULTS[${#RESULTS[@]}-1]}" = PASS ]; }

step "setup" bash scripts/setup.sh
if last_passed; then
  # The fuzz targets' models (build/fuzz/models): the unit tests replay the kept fuzz
  # findings against them (tests/unit/fuzz_regression_test.cc).
  step "fuzz models and seeds (tools/fuzz_seeds.py)" .venv/bin/python tools/fuzz_seeds.py
  step "release build (build/release)" bash -c "
    cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null &&
    cmake --build build/release -j$JOBS"
  if last_passed; then
    step "ctest (build/release)" ctest --test-dir build/release --output-on-failure -j"$JOBS"
  fi
  # One sanitizer build for two tiers: clang-14 with ASan + UBSan (LeakSanitizer on, no
  # suppressions) at -O1 and libFuzzer's coverage, from which come the unit tests and the
  # fuzz targets (tools/fuzz.sh; the kernels at -O2 for fuzzing speed).
  step "ASan+UBSan build (build/fuzz: clang-14, unit tests and fuzz targets)" tools/fuzz.sh build
  if last_passed; then
    step "unit tests under ASan+UBSan" env ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
      UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 build/fuzz/octet_unit_tests
    # Each libFuzzer target briefly from its seeds (docs/reliability.md has the long runs).
    step "fuzz targets, ${OCTET_FUZZ_SECONDS:-25} s each (tools/fuzz.sh all)" \
      tools/fuzz.sh all --time "${OCTET_FUZZ_SECONDS:-25}"
  fi
  # The threaded unit tests (CMakeLists.txt: octet_tsan_tests) under ThreadSanitizer, the
  # C++ multi-threaded run test among them (8 threads on one session, sessions made and
  # destroyed meanwhile).
  step "ThreadSanitizer build (build/tsan, -O1)" bash -c "
    cmake -S . -B build/tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DOCTET_TSAN=ON \
      -DCMAKE_CXX_FLAGS_DEBUG='-O1 -g' >/dev/null &&
    cmake --build build/tsan -j$JOBS --target octet_tsan_tests"
  if last_passed; then
    step "threaded unit tests under TSan" env TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
      build/tsan/octet_tsan_tests
  fi
  step "soak: 10^4 sessions created, run and destroyed, RSS flat (tools/soak.py)" \
    .venv/bin/python tools/soak.py --iterations 10000
  step "pytest tests/python" .venv/bin/python -m pytest tests/python -q -rs
  if [ "$(uname -m)" = x86_64 ]; then
    # The whole Python suite again with cpuid answered as an AVX2-only CPU's
    # (tools/avx2_host.sh): ONNX Runtime on its saturating AVX2 kernels, octet on its
    # avx2 path, at native speed. About 2 minutes on 2 cores.
    name="pytest under tools/avx2_host.sh (tests/python as on an AVX2-only CPU)"
    if ! grep -qw cpuid_fault /proc/cpuinfo; then
      skip "$name" "this kernel or CPU has no CPUID faulting; the qemu tier below covers AVX2"
    elif ! grep -qwE 'avx512f|avx_vnni' /proc/cpuinfo; then
      skip "$name" "this CPU is AVX2-only already: the tier above ran on it"
    else
      step "$name" tools/avx2_host.sh .venv/bin/python -m pytest tests/python -q -rs \
        -p no:cacheprovider
    fi
    # TCG runs this 10-50x slower than the CPU: the fact test, the operator oracle (its own
    # cache, so that ONNX Runtime runs emulated) and three reduced rows whose agreement gate
    # depends on ONNX Runtime's u8 x s8 kernels (MiniLM dynamic and QOperator, the QOperator
    # detector), with 4 noise draws per set (a floor over fewer runs is a stricter gate).
    # About 6 minutes on 2 cores; the timeout is its budget.
    step "pytest under qemu-x86_64 -cpu Haswell (tests/python: ORT oracle, 3 model rows)" \
      env OCTET_TEST_TRIALS=4 OCTET_ORACLE_CACHE=build/oracle_cache_haswell \
      timeout "${OCTET_QEMU_TIMEOUT:-900}" qemu-x86_64 -cpu Haswell .venv/bin/python -m pytest \
      tests/python/test_ort_exact.py tests/python/test_oracle.py tests/python/test_models.py \
      -k "not test_models or (passes_its_gates and (qop or (minilm and dynamic)))" -q -rs \
      -p no:cacheprovider
  fi
fi

echo
echo "==== summary ===="
status=0
for i in "${!NAMES[@]}"; do
  printf '  %-4s %s\n' "${RESULTS[$i]}" "${NAMES[$i]}"
  [ "${RESULTS[$i]}" = FAIL ] && status=1
done
if [ $status -eq 0 ]; then echo "ALL PASSED"; else echo "FAILED"; fi
exit $status
