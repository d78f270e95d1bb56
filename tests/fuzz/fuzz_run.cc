// libFuzzer target: octet::fuzz::FuzzRun (tests/fuzz/targets.h). Run it with tools/fuzz.sh run.
#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return octet::fuzz::FuzzRun(data, size);
}
