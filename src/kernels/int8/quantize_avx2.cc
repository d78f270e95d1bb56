// The quantize kernels (quantize.h) with AVX2, 8 elements per step; the
// remaining elements go through the scalar code. Same bits as the scalar
// code: divps is the scalar division, maxps/minps return the bound for NaN
// (and the scalar code keeps the value only when it compares >= the bound),
// cvtps2dq rounds half to even (default MXCSR), and a product is never fused
// with anything.
#include <immintrin.h>

#include <limits>
#include <type_traits>

#include "kernels/int8/quantize.h"

namespace octet::quant {

namespace {

// v is in T's range, so the saturating packs are exact.
template <typename T>
void StoreInts(T* out, __m256i v) {
  const __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
  auto* dst = reinterpret_cast<__m128i*>(out);
  if constexpr (std::is_same_v<T, uint16_t>) {
    _mm_storeu_si128(dst, _mm_packus_epi32(lo, hi));
  } else {
    const __m128i words = _mm_packs_epi32(lo, hi);
    if constexpr (std::is_same_v<T, int16_t>)
      _mm_storeu_si128(dst, words);
    else if constexpr (std::is_same_v<T, int8_t>)
      _mm_storel_epi64(dst, _mm_packs_epi16(words, words));
    else
      _mm_storel_epi64(dst, _mm_packus_epi16(words, words));
  }
}

template <typename T>
__m256i LoadInts(const T* in) {
  if constexpr (sizeof(T) == 1) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(in));
    return std::is_signed_v<T> ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes);
  } else {
    const __m128i words = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in));
    return std::is_signed_v<T> ? _mm256_cvtepi16_epi32(words) : _mm256_cvtepu16_epi32(words);
  }
}

template <typename T, bool kPerElement>
void QuantizeTyped(const float* x, int64_t n, const QuantizeSpanParams& p, T* y) {
  const __m256i qmin = _mm256_set1_epi32(std::numeric_limits<T>::min());
  const __m256i qmax = _mm256_set1_epi32(std::numeric_limits<T>::max());
  const __m256 tensor_scale = _mm256_set1_ps(p.scale[0]);
  const __m256i tensor_zero = _mm256_set1_epi32(p.zero_point[0]);
  const __m256 tensor_lo = _mm256_cvtepi32_ps(_mm256_sub_epi32(qmin, tensor_zero));
  const __m256 tensor_hi = _mm256_cvtepi32_ps(_mm256_sub_epi32(qmax, tensor_zero));
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 scale = tensor_scale, lo = tensor_lo, hi = tensor_hi;
    __m256i zero = tensor_zero;
    if constexpr (kPerElement) {
      scale = _mm256_loadu_ps(p.scale + i);
      zero = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.zero_point + i));
      lo = _mm256_cvtepi32_ps(_mm256_sub_epi32(qmin, zero));
      hi = _mm256_cvtepi32_ps(_mm256_sub_epi32(qmax, zero));
    }
    __m256 v = _mm256_div_ps(_mm256_loadu_ps(x + i), scale);
    v = _mm256_max_ps(v, lo);  // NaN -> lo
    v = _mm256_min_ps(v, hi);
    StoreInts(y + i, _mm256_add_epi32(_mm256_cvtps_epi32(v), zero));
  }
  QuantizeSpanParams rest = p;
  if (kPerElement) {
    rest.scale += i;
    rest.zero_point += i;
  }
  QuantizeScalar(x + i, n - i, rest, y + i);
}

template <typename T, bool kPerElement>
void DequantizeTyped(const T* x, int64_t n, const QuantizeSpanParams& p, float* y) {
  const __m256 tensor_scale = _mm256_set1_ps(p.scale[0]);
  const __m256i tensor_zero = _mm256_set1_epi32(p.zero_point[0]);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 scale = tensor_scale;
    __m256i zero = tensor_zero;
    if constexpr (kPerElement) {
      scale = _mm256_loadu_ps(p.scale + i);
      zero = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.zero_point + i));
    }
    const __m256 v = _mm256_cvtepi32_ps(_mm256_sub_epi32(LoadInts(x + i), zero));
    _mm256_storeu_ps(y + i, _mm256_mul_ps(v, scale));
  }
  QuantizeSpanParams rest = p;
  if (kPerElement) {
    rest.scale += i;
    rest.zero_point += i;
  }
  DequantizeScalar(x + i, n - i, rest, y + i);
}

template <typename T>
void Quantize(const float* x, int64_t n, const QuantizeSpanParams& p, void* y) {
  if (p.per_element)
    QuantizeTyped<T, true>(x, n, p, static_cast<T*>(y));
  else
    QuantizeTyped<T, false>(x, n, p, static_cast<T*>(y));
}

template <typename T>
void Dequantize(const void* x, int64_t n, const QuantizeSpanParams& p, float* y) {
  if (p.per_element)
    DequantizeTyped<T, true>(static_cast<const T*>(x), n, p, y);
  else
    DequantizeTyped<T, false>(static_cast<const T*>(x), n, p, y);
}

}  // namespace

void QuantizeAvx2(const float* x, int64_t n, const QuantizeSpanParams& p, void* y) {
  switch (p.type) {
    case DType::kUInt8:
      return Quantize<uint8_t>(x, n, p, y);
    case DType::kInt8:
      return Quantize<int8_t>(x, n, p, y);
    case DType::kUInt16:
      return Quantize<uint16_t>(x, n, p, y);
    default:
      return Quantize<int16_t>(x, n, p, y);
  }
}

void DequantizeAvx2(const void* x, int64_t n, const QuantizeSpanParams& p, float* y) {
  switch (p.type) {
    case DType::kUInt8:
      return Dequantize<uint8_t>(x, n, p, y);
    case DType::kInt8:
      return Dequantize<int8_t>(x, n, p, y);
    case DType::kUInt16:
      return Dequantize<uint16_t>(x, n, p, y);
    default:
      return Dequantize<int16_t>(x, n, p, y);
  }
}

FloatRange RangeAvx2(const float* x, int64_t n) {
  // minps(x, low) is `x < low ? x : low`, std::min(low, x) exactly: a NaN x
  // keeps low, and -0 never replaces +0.
  __m256 low = _mm256_setzero_ps(), high = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    low = _mm256_min_ps(v, low);
    high = _mm256_max_ps(v, high);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  // The rest, then the lanes: no NaN and no -0 among them, so the order of
  // the folds cannot matter.
  const FloatRange rest = RangeScalar(x + i, n - i);
  alignas(32) float lows[8], highs[8];
  _mm256_store_ps(lows, low);
  _mm256_store_ps(highs, high);
  FloatRange r = rest;
  for (int lane = 0; lane < 8; ++lane) {
    r.low = lows[lane] < r.low ? lows[lane] : r.low;
    r.high = highs[lane] > r.high ? highs[lane] : r.high;
  }
  r.has_nan = rest.has_nan || _mm256_movemask_ps(nan) != 0;
  return r;
}

}  // namespace octet::quant
