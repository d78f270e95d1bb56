// Numpy-style (ONNX multidirectional) broadcasting of shapes and the strides
// that walk an input along a broadcast output.
#pragma once

#include <optional>
#include <vector>

#include "core/tensor.h"

namespace octet {

// The broadcast of a and b, or nullopt when a dim pair is neither equal nor 1.
std::optional<Shape> BroadcastShapes(const Shape& a, const Shape& b);

// Element strides of `in` (row-major) aligned to the trailing dims of `out`;
// 0 where `in` is broadcast (missing or size-1 dim). Size equals out.size().
std::vector<int64_t> BroadcastStrides(const Shape& in, const Shape& out);

}  // namespace octet
