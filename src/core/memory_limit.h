// The largest tensor octet allocates. Every Tensor octet allocates (initializers at load,
// kernels' outputs and scratch tensors at run) is checked against the limit in force
// before any memory is taken: a model or a feed that asks for absurd memory (an Expand to
// [2^31, 2^31]) fails its load or its run with an octet::Error instead of taking the
// process down.
#pragma once

#include <cstdint>
#include <string>

namespace octet {

// The process default: OCTET_MAX_TENSOR_BYTES when set (a byte count, optionally with a
// K, M, G or T suffix, powers of 1024), else a quarter of the memory this process may use
// (physical memory, or the cgroup memory limit when that is lower). Reads the environment
// on every call; throws octet::Error when OCTET_MAX_TENSOR_BYTES is not a byte count.
uint64_t DefaultMaxTensorBytes();

// The limit in force on this thread: the innermost TensorByteLimit, else the process
// default (read once). ThreadPool workers take the limit of the thread that started the job.
uint64_t MaxTensorBytes();

// Sets this thread's limit until destroyed (scopes nest). InferenceSession holds one
// while it loads, prepares and runs (SessionOptions::max_tensor_bytes).
class TensorByteLimit {
 public:
  explicit TensorByteLimit(uint64_t max_bytes);
  ~TensorByteLimit();
  TensorByteLimit(const TensorByteLimit&) = delete;
  TensorByteLimit& operator=(const TensorByteLimit&) = delete;

 private:
  uint64_t previous_;
};

// "6 GiB", "512 MiB", "1000 bytes": a byte count for messages.
std::string ByteCountToString(uint64_t bytes);

// Parses a byte count as OCTET_MAX_TENSOR_BYTES takes it ("1073741824", "512M", "4G");
// throws octet::Error naming `what` otherwise. 0 is refused.
uint64_t ParseByteSize(const std::string& text, const std::string& what);

}  // namespace octet
