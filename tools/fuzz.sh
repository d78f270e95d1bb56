#!/usr/bin/env bash
# Runs one of octet's libFuzzer targets (tests/fuzz; docs/reliability.md).
#
#   tools/fuzz.sh TARGET [--runs N | --time SECONDS] [--replay] [-- LIBFUZZER_FLAGS...]
#
# TARGET is loader (LoadModelFromBytes), session (InferenceSession::FromBytes, then one run
# on zero feeds) or run (fuzzed feeds to the models of tests/fuzz/run_models.txt), or all
# (each in turn, with the same limit); build only builds the three and, from the same
# objects, the unit tests (build/fuzz/octet_unit_tests, scripts/test.sh's ASan+UBSan tier).
# --runs N stops after N executions, --time SECONDS after that long (default: --time 60).
# --replay only runs the kept findings of tests/fuzz/regressions/TARGET once each.
#
# Builds build/fuzz with clang++-14 (-fsanitize=fuzzer,address,undefined; LeakSanitizer
# on) when needed, writes the models and seeds (tools/fuzz_seeds.py, needs .venv from
# scripts/setup.sh), then fuzzes: new inputs go to build/fuzz/corpus/TARGET (kept between
# runs), findings to build/fuzz/findings/TARGET/ (crash-*, leak-*, timeout-*, oom-*), the
# log to build/fuzz/logs/TARGET.log. Prints one summary line per target with the
# executions done; exits 1 when a target found something.
#
# Long runs share the machine: nice -n 19 tools/fuzz.sh run --runs 1000000
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
JOBS="${OCTET_JOBS:-2}"
CXX_FOR_FUZZ="${OCTET_FUZZ_CXX:-clang++-14}"

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 1 ] || usage
target=$1
shift
limit=(-max_total_time=60)
replay=0
extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --runs) [ $# -ge 2 ] || usage; limit=(-runs="$2"); shift 2 ;;
    --time) [ $# -ge 2 ] || usage; limit=(-max_total_time="$2"); shift 2 ;;
    --replay) replay=1; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) usage ;;
    *) echo "fuzz.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
build_only=0
case $target in
  loader|session|run) targets=("$target") ;;
  all) targets=(loader session run) ;;
  build) targets=(loader session run); build_only=1 ;;
  *) echo "fuzz.sh: unknown target '$target' (loader, session, run, all, build)" >&2; exit 2 ;;
esac

build=build/fuzz
if [ ! -f $build/build.ninja ]; then
  command -v "$CXX_FOR_FUZZ" >/dev/null ||
    { echo "fuzz.sh: error: $CXX_FOR_FUZZ not found (scripts/setup.sh installs clang-14)" >&2; exit 1; }
  cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER="$CXX_FOR_FUZZ" \
    -DOCTET_FUZZ=ON -DCMAKE_CXX_FLAGS_DEBUG='-O1 -g' >/dev/null || exit 1
fi
build_targets=("${targets[@]/#/fuzz_}")
[ $build_only -eq 1 ] && build_targets+=(octet_unit_tests)
cmake --build $build -j"$JOBS" --target "${build_targets[@]}" >/dev/null ||
  { echo "fuzz.sh: error: building the fuzz targets failed" >&2;
    cmake --build $build -j1 --target "${build_targets[@]}" 2>&1 | grep -m5 error; exit 1; }
[ $build_only -eq 1 ] && exit 0
if [ $replay -eq 0 ]; then
  .venv/bin/python tools/fuzz_seeds.py || exit 1
fi

# LeakSanitizer on (libFuzzer reports a leak as a finding), no suppressions.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:allocator_may_return_null=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export OCTET_FUZZ_MODELS="$PWD/$build/models"
status=0
for t in "${targets[@]}"; do
  bin=$build/fuzz_$t
  mkdir -p $build/corpus/$t $build/findings/$t $build/logs
  log=$build/logs/$t.log
  common=(-timeout=30 -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix=$build/findings/$t/)
  [ "$t" = run ] && common+=(-max_len=16384)
  kept=(tests/fuzz/regressions/$t/*)
  start=$(date +%s)
  if [ $replay -eq 1 ]; then
    if [ ! -e "${kept[0]}" ]; then echo "fuzz.sh: $t: no kept findings"; continue; fi
    "$bin" "${common[@]}" "${kept[@]}" >"$log" 2>&1
    rc=$?
    echo "fuzz.sh: $t: replayed ${#kept[@]} kept findings in $(( $(date +%s) - start )) s:" \
      "$([ $rc -eq 0 ] && echo ok || echo FAILED, see $log)"
  else
    "$bin" "${common[@]}" "${limit[@]}" "${extra[@]}" $build/corpus/$t $build/seeds/$t \
      >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    corpus=$(ls $build/corpus/$t | wc -l)
    echo "fuzz.sh: $t: ${execs:-?} executions in $(( $(date +%s) - start )) s, corpus" \
      "$corpus new inputs: $([ $rc -eq 0 ] && echo 'no findings' || echo "FINDING, see $log and $build/findings/$t/")"
  fi
  if [ $rc -ne 0 ]; then
    status=1
    grep -m3 -E "ERROR|SUMMARY|octet fuzz finding|runtime error" "$log" | sed 's/^/  /'
  fi
done
exit $status
