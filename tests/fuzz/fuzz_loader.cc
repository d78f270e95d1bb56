// libFuzzer target: octet::fuzz::FuzzLoader (tests/fuzz/targets.h). Run it with tools/fuzz.sh
// loader.
#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return octet::fuzz::FuzzLoader(data, size);
}
