#include "core/quant.h"

#include <cmath>

namespace octet {

bool Is8Bit(DType t) { return t == DType::kInt8 || t == DType::kUInt8; }
int32_t QMin(DType t) { return t == DType::kInt8 ? -128 : 0; }
int32_t QMax(DType t) { return t == DType::kInt8 ? 127 : 255; }

float DequantizeValue(int32_t q, const ScalarQParams& p) {
  return static_cast<float>(q - p.zero) * p.scale;
}

int32_t QuantizeValue(float x, const ScalarQParams& p) {
  float v = x / p.scale;
  const float lo = static_cast<float>(QMin(p.type) - p.zero);
  const float hi = static_cast<float>(QMax(p.type) - p.zero);
  if (!(v >= lo)) v = lo;  // NaN goes to the low end, as maxps does
  if (v > hi) v = hi;
  return static_cast<int32_t>(std::nearbyint(v)) + p.zero;
}

}  // namespace octet
