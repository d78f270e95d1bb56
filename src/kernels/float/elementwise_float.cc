#include "kernels/float/elementwise_float.h"

#include <algorithm>

#include "kernels/float/broadcast.h"

namespace octet {

void BinaryFloat32(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out, ThreadPool* pool) {
  const int64_t total = out.numel();
  if (total == 0) return;
  const Shape& shape = out.shape();
  const std::vector<int64_t> sa = BroadcastStrides(a.shape(), shape);
  const std::vector<int64_t> sb = BroadcastStrides(b.shape(), shape);
  // The output is rows of `inner` elements (its trailing dims from `split`
  // on), along which each operand is contiguous (step 1) or one repeated
  // value (step 0): [128,384] + [384] is 128 rows with b repeated per row.
  int a_step = -1, b_step = -1;
  int64_t inner = 1;
  size_t split = shape.size();
  for (; split > 0; --split) {
    const size_t d = split - 1;
    if (shape[d] == 1) continue;
    const int a_kind = sa[d] == 0 ? 0 : sa[d] == inner ? 1 : -1;
    const int b_kind = sb[d] == 0 ? 0 : sb[d] == inner ? 1 : -1;
    if (a_kind < 0 || b_kind < 0 || (a_step >= 0 && (a_kind != a_step || b_kind != b_step))) break;
    a_step = a_kind;
    b_step = b_kind;
    inner *= shape[d];
  }
  a_step = std::max(a_step, 0);
  b_step = std::max(b_step, 0);

  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* po = out.data<float>();
  // Each element is independent of the others, so any split of the flat
  // output gives the same bits.
  vmath::ParallelForWork(pool, total, total, [&](int64_t begin, int64_t end) {
    // Offsets of row begin / inner, then an odometer over the outer dims.
    std::vector<int64_t> index(split, 0);
    int64_t off_a = 0, off_b = 0;
    for (int64_t rest = begin / inner, d = static_cast<int64_t>(split) - 1; d >= 0; --d) {
      index[d] = rest % shape[d];
      rest /= shape[d];
      off_a += index[d] * sa[d];
      off_b += index[d] * sb[d];
    }
    int64_t column = begin % inner;
    for (int64_t pos = begin; pos < end;) {
      const int64_t length = std::min(inner - column, end - pos);
      vmath::Binary(op, pa + off_a + column * a_step, a_step, pb + off_b + column * b_step, b_step,
                    po + pos, length);
      pos += length;
      column = 0;
      for (size_t d = split; d-- > 0;) {
        off_a += sa[d];
        off_b += sb[d];
        if (++index[d] < shape[d]) break;
        off_a -= sa[d] * shape[d];
        off_b -= sb[d] * shape[d];
        index[d] = 0;
      }
    }
  });
}

void ReluFloat32(const Tensor& x, Tensor& out, ThreadPool* pool) {
  const float* px = x.data<float>();
  float* po = out.data<float>();
  vmath::ParallelForWork(pool, x.numel(), x.numel(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) po[i] = px[i] < 0.f ? 0.f : px[i];
  });
}

}  // namespace octet
