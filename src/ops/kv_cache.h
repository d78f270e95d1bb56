// The keys and values a decoder's attention keeps across runs when the caller holds a
// KV cache (runtime/session.h, KvCache): the graph's present = Concat(past, new) then
// appends the new rows in place instead of copying the whole cache every step.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "core/weight_arena.h"
#include "kernels/float/sgemm.h"

namespace octet {

class ThreadPool;

// One attention node's rows, [batch, kv heads, capacity, head size], each head with room
// for `capacity` rows so that a step appends to every head in place. Both are kept as the
// float GEMM's packed B on `path` (kernels/float/sgemm.h), which the attention's products
// read as they lie instead of packing or striding through them every step: each head of
// the keys holds K^T in panels of SgemmPackedBPanel keys (capacity a whole number of
// them), each head of the values holds V in panels of that many of its columns, each
// panel `capacity` rows long (keys tensor [batch, kv heads, capacity, head size], values
// [batch, kv heads, capacity, head size rounded up to whole panels]).
struct KvCacheRows {
  Tensor keys, values;  // undefined until the node's first run
  SgemmPath path = SgemmPath::kScalar;
};

struct KvCacheState {
  int64_t length = 0;   // rows held per head, the same in every node's; set by the runtime
  int64_t reserve = 0;  // the capacity a node's rows start with (grown when a run needs more)
  // The rows this run appends: set by the first node that appends, checked by the others.
  int64_t appended = -1;
  bool presents_wanted = false;    // the caller asked for the present outputs
  std::vector<KvCacheRows> nodes;  // by the attention node's cache_slot attribute

  // A zero-filled float tensor for a node's grown rows. Every step reads the whole cache,
  // so its rows go on huge pages as the weights do (core/weight_arena.h): the nodes that
  // grow in one run share an arena, which lives while any tensor of it does.
  Tensor NewRows(const Shape& shape);

 private:
  std::shared_ptr<WeightArena> rows_arena_;
  int64_t rows_arena_length_ = -1;  // the length at the growth rows_arena_ serves
};

// count elements from each of `heads` runs of src (head_stride apart) to dst's (its
// head_stride apart): the copy of a cache's rows when it grows.
void CopyHeadRows(const float* src, int64_t src_head_stride, float* dst, int64_t dst_head_stride,
                  int64_t heads, int64_t count, ThreadPool* pool);

}  // namespace octet
