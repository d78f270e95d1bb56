// Quantization parameters (scales, zero points) of the integer operators
// (MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv), read and checked.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "core/quant.h"
#include "core/tensor.h"
#include "graph/graph.h"

namespace octet {

// The 8-bit value stored as byte b (int8 reads it as signed).
inline int32_t ByteValue(int b, DType type) {
  return type == DType::kInt8 ? static_cast<int32_t>(static_cast<int8_t>(b)) : b;
}

// What ORT's float -> int32 casts give on x86 (cvttss2si): truncation, and INT32_MIN for
// NaN and values outside int32.
inline int32_t TruncateToInt32LikeX86(float v) {
  return v >= -2147483648.0f && v < 2147483648.0f ? static_cast<int32_t>(v)
                                                  : std::numeric_limits<int32_t>::min();
}

// The scale values as float32; float16 and bfloat16 scales widen exactly.
std::vector<float> ReadScales(const Node& node, const Tensor& scale, const char* name);

// The zero point values as int32; the dtype must equal `expected` (the dtype
// of the tensor it belongs to).
std::vector<int32_t> ReadZeroPoints(const Node& node, const Tensor& zero_point, DType expected,
                                    const char* name);

// Fails unless the parameter holds one value (a per-tensor parameter).
void CheckPerTensor(const Node& node, const Tensor& param, const char* name);

}  // namespace octet
