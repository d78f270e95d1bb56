// The requantization epilogue of every int8 product (QLinearMatMul,
// QLinearConv, fused QDQ groups): int32 accumulators -> uint8/int8 in ONNX
// Runtime 1.31.1's exact float order (docs/int8.md, "Integer matmul and
// convolution"; tools/probe_ort_requant.py shows each step):
//
//   multiplier = (a_scale * b_scale) / y_scale           float32, in this order
//   v = float(acc + bias) * multiplier                   bias added in int32 first
//   v = clamp(v, qmin - y_zero, qmax - y_zero)           in float; NaN -> qmin - y_zero
//   y = round_half_even(v) + y_zero
#pragma once

#include <cmath>
#include <cstdint>

#include "core/dtype.h"

namespace octet {

// The one float32 multiplier, formed in ONNX Runtime's order.
inline float RequantizeMultiplier(float a_scale, float b_scale, float y_scale) {
  return (a_scale * b_scale) / y_scale;
}

// One output value; lo/hi are float(qmin - zero_point) and float(qmax - zero_point).
inline int32_t RequantizeValue(int32_t acc, float multiplier, float lo, float hi,
                               int32_t zero_point) {
  float v = static_cast<float>(acc) * multiplier;
  v = v > lo ? v : lo;  // written so that NaN becomes lo, as maxps does
  v = v < hi ? v : hi;
  return static_cast<int32_t>(std::nearbyint(v)) + zero_point;
}

struct RequantizeParams {
  const float* multiplier = nullptr;  // cols entries when multiplier_per_column, else one
  bool multiplier_per_column = false;
  const int32_t* bias = nullptr;  // optional; cols entries when bias_per_column, else one
  bool bias_per_column = false;
  int32_t zero_point = 0;             // within the output type's range
  DType output_type = DType::kUInt8;  // kUInt8 or kInt8
};

// out[r * ld_out + c] = requantized acc[r * ld_acc + c] (+ bias) for a rows x cols block.
// The bias is added with int32 wrap-around, as ONNX Runtime's int32 addition does.
void RequantizeS32(const int32_t* acc, int64_t ld_acc, int64_t rows, int64_t cols,
                   const RequantizeParams& params, void* out, int64_t ld_out);

}  // namespace octet
