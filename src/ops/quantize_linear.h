// DynamicQuantizeLinear's arithmetic (src/ops/quantize_linear.cc), shared by
// ai.onnx DynamicQuantizeLinear and com.microsoft DynamicQuantizeMatMul so the
// two cannot drift apart.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"

namespace octet {

struct DynamicQuantization {
  float scale = 1.f;
  int32_t zero_point = 0;  // within [0, 255]
};

// Quantizes x[0, n) to uint8 y exactly as DynamicQuantizeLinear does in ONNX
// Runtime 1.31.1 (docs/int8.md, "Quantize and dequantize"):
//   min = min(0, min(x)), max = max(0, max(x))
//   scale = max == min ? 1 : (max - min) / 255
//   zero_point = round_half_even(clamp(0 - min / scale, 0, 255)), NaN -> 255
//   y = QuantizeLinear(x, scale, zero_point) on the saturating float path.
// A NaN anywhere in x makes min and max NaN (scale NaN, zero point 255, y 0).
// `pool` may be null; the result never depends on its thread count.
DynamicQuantization DynamicQuantizeToUint8(const float* x, int64_t n, uint8_t* y, ThreadPool* pool);

}  // namespace octet
