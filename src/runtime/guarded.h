// The runtime's API boundary: what leaves InferenceSession and introspect.h is an
// octet::Error, whatever failed underneath.
#pragma once

#include <cstdint>
#include <exception>
#include <new>

#include "core/error.h"
#include "core/memory_limit.h"

namespace octet {

// Runs fn under a tensor size limit (core/memory_limit.h); every failure leaves as an
// octet::Error: std::bad_alloc as "out of memory", anything else as an InternalError
// (a bug in octet; the fuzz targets count it as a finding).
template <typename Fn>
auto Guarded(uint64_t max_tensor_bytes, Fn&& fn) -> decltype(fn()) {
  const TensorByteLimit limit(max_tensor_bytes);
  try {
    return fn();
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    Fail("out of memory (std::bad_alloc)");
  } catch (const std::exception& e) {
    FailInternal(e.what());
  }
}

}  // namespace octet
