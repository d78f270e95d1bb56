#include "kernels/int8/quantize.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace octet {

int32_t QuantizeScaledValue(float scaled, int32_t zero_point, int32_t qmin, int32_t qmax) {
  const float low = static_cast<float>(qmin - zero_point);
  const float high = static_cast<float>(qmax - zero_point);
  if (!(scaled >= low)) scaled = low;  // NaN goes to the low end, as maxps does
  if (scaled > high) scaled = high;
  return static_cast<int32_t>(std::nearbyint(scaled)) + zero_point;
}

bool IsSpanQuantizedType(DType t) {
  return t == DType::kUInt8 || t == DType::kInt8 || t == DType::kUInt16 || t == DType::kInt16;
}

namespace quant {

namespace {

template <typename T>
void QuantizeTyped(const float* x, int64_t n, const QuantizeSpanParams& p, T* y) {
  constexpr int32_t qmin = std::numeric_limits<T>::min(), qmax = std::numeric_limits<T>::max();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t s = p.per_element ? i : 0;
    y[i] = static_cast<T>(QuantizeScaledValue(x[i] / p.scale[s], p.zero_point[s], qmin, qmax));
  }
}

template <typename T>
void DequantizeTyped(const T* x, int64_t n, const QuantizeSpanParams& p, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t s = p.per_element ? i : 0;
    y[i] = static_cast<float>(int32_t{x[i]} - p.zero_point[s]) * p.scale[s];
  }
}

}  // namespace

void QuantizeScalar(const float* x, int64_t n, const QuantizeSpanParams& p, void* y) {
  switch (p.type) {
    case DType::kUInt8:
      return QuantizeTyped(x, n, p, static_cast<uint8_t*>(y));
    case DType::kInt8:
      return QuantizeTyped(x, n, p, static_cast<int8_t*>(y));
    case DType::kUInt16:
      return QuantizeTyped(x, n, p, static_cast<uint16_t*>(y));
    default:
      return QuantizeTyped(x, n, p, static_cast<int16_t*>(y));
  }
}

void DequantizeScalar(const void* x, int64_t n, const QuantizeSpanParams& p, float* y) {
  switch (p.type) {
    case DType::kUInt8:
      return DequantizeTyped(static_cast<const uint8_t*>(x), n, p, y);
    case DType::kInt8:
      return DequantizeTyped(static_cast<const int8_t*>(x), n, p, y);
    case DType::kUInt16:
      return DequantizeTyped(static_cast<const uint16_t*>(x), n, p, y);
    default:
      return DequantizeTyped(static_cast<const int16_t*>(x), n, p, y);
  }
}

FloatRange RangeScalar(const float* x, int64_t n) {
  FloatRange r;
  for (int64_t i = 0; i < n; ++i) {
    r.has_nan |= std::isnan(x[i]);
    r.low = std::min(r.low, x[i]);
    r.high = std::max(r.high, x[i]);
  }
  return r;
}

}  // namespace quant

namespace {

#if defined(__x86_64__) || defined(_M_X64)
#define OCTET_QUANT_VECTOR_FNS(name) quant::name##Avx2, quant::name##Avx512
#else
#define OCTET_QUANT_VECTOR_FNS(name) nullptr, nullptr
#endif

void CheckSpanType(DType t) {
  OCTET_CHECK(IsSpanQuantizedType(t), "quantize kernels: type ", DTypeName(t),
              " is not uint8, int8, uint16 or int16");
}

}  // namespace

void QuantizeSpan(const float* x, int64_t n, const QuantizeSpanParams& p, void* y, Isa isa) {
  CheckSpanType(p.type);
  if (n <= 0) return;
  PickKernel<quant::QuantizeFn>(isa, "quantize kernels", quant::QuantizeScalar,
                                OCTET_QUANT_VECTOR_FNS(Quantize))(x, n, p, y);
}

void DequantizeSpan(const void* x, int64_t n, const QuantizeSpanParams& p, float* y, Isa isa) {
  CheckSpanType(p.type);
  if (n <= 0) return;
  PickKernel<quant::DequantizeFn>(isa, "quantize kernels", quant::DequantizeScalar,
                                  OCTET_QUANT_VECTOR_FNS(Dequantize))(x, n, p, y);
}

FloatRange RangeWithZero(const float* x, int64_t n, Isa isa) {
  if (n <= 0) return {};
  return PickKernel<quant::RangeFn>(isa, "quantize kernels", quant::RangeScalar,
                                    OCTET_QUANT_VECTOR_FNS(Range))(x, n);
}

}  // namespace octet
