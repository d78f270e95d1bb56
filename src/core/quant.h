// 8-bit quantization values shared by every layer: one per-tensor parameter set,
// ONNX Runtime's float steps for one value (DequantizeLinear and QuantizeLinear),
// the 8-bit type limits, and the longest dot product whose int32 sum is exact.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace octet {

// The largest K whose int32 accumulation of 8-bit products is exact for every
// input, zero points included (K * 255 * 255 < 2^31); longer products are refused.
constexpr int64_t kGemmMaxK = (int64_t{1} << 31) / (255 * 255);  // 33025

// One per-tensor Q or DQ parameter set.
struct ScalarQParams {
  float scale = 1.f;
  int32_t zero = 0;
  DType type = DType::kUndefined;  // the 8-bit side's type
};

bool Is8Bit(DType t);   // int8 or uint8
int32_t QMin(DType t);  // 8-bit types only
int32_t QMax(DType t);

// ONNX Runtime's DequantizeLinear of one value: float(q - zero) * scale.
float DequantizeValue(int32_t q, const ScalarQParams& p);
// ONNX Runtime's QuantizeLinear of one value (MLAS): x / scale clamped in float
// to the range shifted by the zero point, rounded half to even, plus the zero point.
int32_t QuantizeValue(float x, const ScalarQParams& p);

}  // namespace octet
