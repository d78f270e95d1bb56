// The C++ API: load a model, prepare it once, run it many times.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "graph/graph.h"

namespace octet {

// How float MatMuls with a constant weight run: as written (float32), or on the
// int8 GEMM (the forward route, an approximation: docs/ort-ep.md).
enum class FloatMatMul { kFloat, kInt8 };

struct SessionOptions {
  int threads = 1;
  // The largest tensor the session may allocate, in bytes (core/memory_limit.h): a larger
  // initializer, external-data tensor or run-time shape fails with an octet::Error before
  // anything is allocated. 0: OCTET_MAX_TENSOR_BYTES, else a quarter of physical memory.
  uint64_t max_tensor_bytes = 0;
  // false: octet's graph rewrites do not run and the graph runs node by node, as
  // written (what OCTET_QDQ=0 does for every session).
  bool rewrites = true;
  FloatMatMul float_matmul = FloatMatMul::kFloat;
  // When set, receives the rewrites' report once, at session creation: one
  // `qdq_refused why=<reason> op=<op> count=<n>` line per reason, then
  // `qdq_groups=<n> claimed=<n>` (what OCTET_QDQ_DEBUG=1 prints to stderr).
  std::function<void(const std::string&)> rewrite_report = nullptr;
  // FromGraph only: the graph's initializers are views of memory that stays valid only
  // while FromGraph runs (ORT's, in the plugin's Compile). octet reads them in place for
  // its rewrites and copies only those its nodes still read afterwards (a float weight
  // the forward route quantizes is never copied).
  bool borrowed_initializers = false;
  // Keep every value the graph computes (after the rewrites) until the run
  // ends, so that Run can return any of them by name (intermediates()). Costs
  // the memory of all of them; for `octet compare`. Results are unchanged.
  bool keep_intermediates = false;
  // Graph outputs wanted for their last row only (the last index of axis -2, e.g. a
  // decoder's logits when generating): each made by a product of independent rows is
  // computed for that row alone and returned as [..., 1, N], with the bits it has in
  // the whole output (rewrite/last_row.h); others stay whole, and the rewrite report
  // says why. A name that is not a graph output is an error.
  std::vector<std::string> last_row_outputs = {};
};

struct TensorInfo {
  std::string name;
  DType dtype = DType::kUndefined;
  std::vector<Dim> shape;  // empty with has_shape=false when the model gives none
  bool has_shape = false;
  // Inputs only: every kernel reading this input reads only its bytes, so a
  // Tensor::View of caller memory may be fed as it is. Otherwise a feed must be
  // readable, and zero, to the end of the 64-byte line after its last byte
  // (counted from its start), as octet's own tensors are.
  bool reads_only_own_bytes = false;
};

// Kernel time by op type ("QuantizeLinear", "octet.QdqMatMul"), summed over
// the profiled runs.
struct OpTime {
  std::string op;
  double seconds = 0;
  int64_t calls = 0;
};
struct SessionProfile {
  int64_t runs = 0;
  std::vector<OpTime> ops;  // most time first
};

struct KvCacheState;

// A decoder's keys and values held across runs (InferenceSession::NewKvCache). A run
// given the cache takes the model's past key and value inputs from it and appends the
// step's new rows to it in place, where the graph run as written copies the whole cache
// into its present outputs at every step (docs/design.md, "What a decoding step pays for
// its context"); the bits of every output are the same. One cache holds one sequence
// of one batch size and serves the session that made it; runs given it are serialized
// like the session's others, and Truncate must not overlap one.
class KvCache {
 public:
  ~KvCache();
  // Rows held per head: the positions run through the cache so far.
  int64_t length() const;
  // Keeps the first `length` positions (at most length()) and drops the rest: the next
  // run continues from there (rewinding a sequence, or reusing a prompt's prefix).
  void Truncate(int64_t length);
  // The graph inputs it stands for (the past keys and values), and the outputs that
  // hand them back with the step's rows (the presents), in the model's order.
  const std::vector<std::string>& inputs() const { return inputs_; }
  const std::vector<std::string>& outputs() const { return outputs_; }

 private:
  friend class InferenceSession;
  KvCache();
  uint64_t session_id_ = 0;  // the session's, unique in the process (not its address)
  std::unique_ptr<KvCacheState> state_;
  std::vector<std::string> inputs_, outputs_;
};

// Every failure of these calls is an octet::Error: bad model bytes, unsupported
// operators, bad feeds, tensors beyond max_tensor_bytes, running out of memory. A message
// that starts with "internal" is a bug in octet. Run may be called from any number of
// threads at once; the calls are serialized (the kernels share one thread pool).
class InferenceSession {
 public:
  static std::unique_ptr<InferenceSession> FromFile(const std::string& path,
                                                    const SessionOptions& options = {});
  // Serialized model bytes; external data is refused (no folder to resolve it in).
  static std::unique_ptr<InferenceSession> FromBytes(const void* data, size_t size,
                                                     const SessionOptions& options = {});
  // A graph made in memory (the ORT plugin's claimed subgraph). It must be
  // topologically sorted, with every value's dtype set where the graph knows it.
  static std::unique_ptr<InferenceSession> FromGraph(Graph graph,
                                                     const SessionOptions& options = {});
  ~InferenceSession();

  const std::vector<TensorInfo>& inputs() const;
  const std::vector<TensorInfo>& outputs() const;
  // The values the nodes compute besides the graph outputs, in the order the
  // nodes run, after the rewrites: a value inside a fused group is not among
  // them. Run returns them only with SessionOptions::keep_intermediates.
  const std::vector<TensorInfo>& intermediates() const;

  // Runs the model. feeds name the graph inputs; every graph input must be
  // fed, with its declared dtype, rank and static dims (symbolic dims must be
  // used consistently). output_names empty means all outputs, in model order;
  // with keep_intermediates they may also name intermediates().
  std::vector<Tensor> Run(const std::vector<std::pair<std::string, Tensor>>& feeds,
                          const std::vector<std::string>& output_names = {});
  // The same with a KV cache from NewKvCache: the cache's inputs are not fed (they are
  // its rows), and its outputs come back only when output_names name them (a copy of
  // its rows). A run that fails leaves the cache as it was.
  std::vector<Tensor> Run(const std::vector<std::pair<std::string, Tensor>>& feeds,
                          const std::vector<std::string>& output_names, KvCache& cache);
  // A KV cache for Run, with room for reserve_rows rows per head before it grows. Throws
  // when the model has none octet can hold: after the rewrites, each present key and
  // value must be Concat(past, new, axis=2) of a past graph input that the Concat alone
  // reads, taken into octet's decoder attention (rewrite/float_attention.h).
  std::unique_ptr<KvCache> NewKvCache(int64_t reserve_rows = 0);

  // Times every kernel call by op type from now on (on) or stops (off); the
  // counters add up until the session ends. OCTET_PROFILE=1 in the environment
  // turns it on at creation and prints the totals to stderr when the session
  // ends.
  void SetProfiling(bool on);
  SessionProfile Profile() const;

 private:
  struct Impl;
  explicit InferenceSession(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace octet
