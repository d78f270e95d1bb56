// Numpy-style (ONNX multidirectional) broadcasting of shapes and the strides
// that walk an input along a broadcast output.
#pragma once

#include <array>
#include <optional>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace octet {

// The broadcast of a and b, or nullopt when a dim pair is neither equal nor 1.
std::optional<Shape> BroadcastShapes(const Shape& a, const Shape& b);
// The broadcast of a and b; throws "<who()>: shapes A and B do not broadcast". `who` is
// called only then: a node's description costs more to build than the broadcast.
template <typename Who>
Shape BroadcastOrFail(const Shape& a, const Shape& b, Who&& who) {
  std::optional<Shape> shape = BroadcastShapes(a, b);
  OCTET_CHECK(shape.has_value(), who(), ": shapes ", ShapeToString(a), " and ", ShapeToString(b),
              " do not broadcast");
  return *std::move(shape);
}

// Element strides of `in` (row-major) aligned to the trailing dims of `out`;
// 0 where `in` is broadcast (missing or size-1 dim). Size equals out.size().
std::vector<int64_t> BroadcastStrides(const Shape& in, const Shape& out);

// Walks `out` in row-major order and calls fn(out_offset, input_offsets) for
// every element, where input_offsets[k] is the element offset in input k
// (each input shape must broadcast to `out`).
template <size_t N, typename Fn>
void ForEachBroadcast(const Shape& out, const std::array<const Shape*, N>& inputs, Fn&& fn) {
  const int64_t total = NumElements(out);
  if (total == 0) return;
  std::array<int64_t, N> offsets{};
  if (out.empty()) {
    fn(int64_t{0}, offsets);
    return;
  }
  std::array<std::vector<int64_t>, N> strides;
  for (size_t k = 0; k < N; ++k) strides[k] = BroadcastStrides(*inputs[k], out);
  const size_t last = out.size() - 1;
  const int64_t inner = out[last];
  std::vector<int64_t> index(out.size(), 0);
  for (int64_t done = 0; done < total; done += inner) {
    std::array<int64_t, N> row = offsets;
    for (int64_t j = 0; j < inner; ++j) {
      fn(done + j, row);
      for (size_t k = 0; k < N; ++k) row[k] += strides[k][last];
    }
    // Odometer over all dims but the last.
    for (size_t d = last; d-- > 0;) {
      for (size_t k = 0; k < N; ++k) offsets[k] += strides[k][d];
      if (++index[d] < out[d]) break;
      for (size_t k = 0; k < N; ++k) offsets[k] -= strides[k][d] * out[d];
      index[d] = 0;
    }
  }
}

}  // namespace octet
