// The bodies of the libFuzzer targets (tests/fuzz/fuzz_*.cc), shared with the unit tests,
// which run every kept input of tests/fuzz/regressions/<target>/ through them
// (tests/unit/fuzz_regression_test.cc), so a fixed finding stays fixed in every build.
//
// An octet::Error is the expected answer to bad bytes. Anything else is a finding: another
// exception, a crash or sanitizer report, an octet::InternalError (a bug octet itself
// detected), or, for fuzz_run, outputs or errors that differ between one and two threads. A finding
// calls the finding handler: the fuzz targets abort (libFuzzer then keeps the input), the unit
// tests throw FuzzFinding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace octet::fuzz {

// Every session the targets make may allocate tensors of at most this many bytes, so
// that no input can ask libFuzzer's malloc limit (2 GiB by default) for more.
inline constexpr uint64_t kMaxTensorBytes = uint64_t{64} << 20;
// fuzz_run skips feeds of more elements than this (each input), to keep runs short.
inline constexpr int64_t kMaxFeedElements = int64_t{1} << 16;
// fuzz_run's models of more than 1 MiB (the reduced MiniLM, the detector) take feeds of at
// most this many elements each (MiniLM: batch x seq <= 8 tokens); the small ones' sessions
// allocate tensors of at most kSmallModelMaxTensorBytes, so that a fuzzed shape input
// (Resize sizes, Pad pads) asks for little work.
inline constexpr int64_t kLargeModelMaxFeedElements = 8;
inline constexpr uint64_t kSmallModelMaxTensorBytes = uint64_t{4} << 20;

struct FuzzFinding : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Called with a description of the finding. The default prints it and aborts.
using FindingHandler = void (*)(const std::string& what);
void SetFindingHandler(FindingHandler handler);

// fuzz_loader: LoadModelFromBytes.
int FuzzLoader(const uint8_t* data, size_t size);
// fuzz_session: InferenceSession::FromBytes (load, rewrites, kernel creation, weight
// packing); a session that builds is run once on small zero-filled feeds.
int FuzzSession(const uint8_t* data, size_t size);
// fuzz_run: feeds decoded from the bytes (format: tools/fuzz_seeds.py) to one of the
// models of tests/fuzz/run_models.txt, found in models_dir (SetRunModelsDir, else the
// OCTET_FUZZ_MODELS environment variable, else build/fuzz/models of the source tree).
int FuzzRun(const uint8_t* data, size_t size);
void SetRunModelsDir(const std::string& dir);
// How many of run_models.txt's models were found (loads them on first use).
size_t RunModelsFound();

}  // namespace octet::fuzz
