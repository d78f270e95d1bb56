// libFuzzer target: octet::fuzz::FuzzSession (tests/fuzz/targets.h). Run it with tools/fuzz.sh
// session.
#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return octet::fuzz::FuzzSession(data, size);
}
