#include "ops/kv_cache.h"

#include <cstring>

#include "core/thread_pool.h"

namespace octet {

namespace {
// Below this many bytes a copy runs on the calling thread: waking the pool costs more.
constexpr int64_t kParallelCopyBytes = int64_t{1} << 17;
}  // namespace

Tensor KvCacheState::NewRows(const Shape& shape) {
  if (!rows_arena_ || rows_arena_length_ != length) {
    rows_arena_ = std::make_shared<WeightArena>();
    rows_arena_length_ = length;
  }
  return ArenaTensor(*rows_arena_, DType::kFloat32, shape, rows_arena_);
}

void CopyHeadRows(const float* src, int64_t src_head_stride, float* dst, int64_t dst_head_stride,
                  int64_t heads, int64_t count, ThreadPool* pool) {
  if (heads <= 0 || count <= 0) return;
  const bool parallel = heads > 1 && heads * count * int64_t{sizeof(float)} >= kParallelCopyBytes;
  ParallelFor(parallel ? pool : nullptr, heads, [&](int64_t begin, int64_t end) {
    for (int64_t h = begin; h < end; ++h)
      std::memcpy(dst + h * dst_head_stride, src + h * src_head_stride, count * sizeof(float));
  });
}

}  // namespace octet
