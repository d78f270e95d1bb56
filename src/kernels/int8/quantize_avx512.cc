// The quantize kernels (quantize.h) with AVX-512, 16 elements per step; the
// last partial step uses masked loads and stores, so nothing past the span is
// read or written. Same bits as the scalar code: divps is the scalar
// division, maxps/minps return the bound for NaN (and the scalar code keeps
// the value only when it compares >= the bound), cvtps2dq rounds half to
// even (default MXCSR), and a product is never fused with anything.
// GCC 12.2 warns falsely about the _mm512_undefined_* pass-through operand of
// max/min/cvt intrinsics (GCC bug 105593, fixed in 12.3).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <limits>
#include <type_traits>

#include "kernels/int8/quantize.h"

namespace octet::quant {

namespace {

__mmask16 TailMask(int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << count) - 1);
}

// v is in T's range, so the truncating stores are exact.
template <typename T>
void StoreInts(T* out, __mmask16 mask, __m512i v) {
  if constexpr (sizeof(T) == 1)
    _mm512_mask_cvtepi32_storeu_epi8(out, mask, v);
  else
    _mm512_mask_cvtepi32_storeu_epi16(out, mask, v);
}

template <typename T>
__m512i LoadInts(const T* in, __mmask16 mask) {
  if constexpr (std::is_same_v<T, uint8_t>)
    return _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(mask, in));
  else if constexpr (std::is_same_v<T, int8_t>)
    return _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(mask, in));
  else if constexpr (std::is_same_v<T, uint16_t>)
    return _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, in));
  else
    return _mm512_cvtepi16_epi32(_mm256_maskz_loadu_epi16(mask, in));
}

template <typename T, bool kPerElement>
void QuantizeTyped(const float* x, int64_t n, const QuantizeSpanParams& p, T* y) {
  const __m512i qmin = _mm512_set1_epi32(std::numeric_limits<T>::min());
  const __m512i qmax = _mm512_set1_epi32(std::numeric_limits<T>::max());
  const __m512 tensor_scale = _mm512_set1_ps(p.scale[0]);
  const __m512i tensor_zero = _mm512_set1_epi32(p.zero_point[0]);
  const __m512 tensor_lo = _mm512_cvtepi32_ps(_mm512_sub_epi32(qmin, tensor_zero));
  const __m512 tensor_hi = _mm512_cvtepi32_ps(_mm512_sub_epi32(qmax, tensor_zero));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = TailMask(n - i);
    __m512 scale = tensor_scale, lo = tensor_lo, hi = tensor_hi;
    __m512i zero = tensor_zero;
    if constexpr (kPerElement) {
      scale = _mm512_mask_loadu_ps(tensor_scale, mask, p.scale + i);
      zero = _mm512_maskz_loadu_epi32(mask, p.zero_point + i);
      lo = _mm512_cvtepi32_ps(_mm512_sub_epi32(qmin, zero));
      hi = _mm512_cvtepi32_ps(_mm512_sub_epi32(qmax, zero));
    }
    __m512 v = _mm512_div_ps(_mm512_maskz_loadu_ps(mask, x + i), scale);
    v = _mm512_max_ps(v, lo);  // NaN -> lo
    v = _mm512_min_ps(v, hi);
    StoreInts(y + i, mask, _mm512_add_epi32(_mm512_cvtps_epi32(v), zero));
  }
}

template <typename T, bool kPerElement>
void DequantizeTyped(const T* x, int64_t n, const QuantizeSpanParams& p, float* y) {
  const __m512 tensor_scale = _mm512_set1_ps(p.scale[0]);
  const __m512i tensor_zero = _mm512_set1_epi32(p.zero_point[0]);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = TailMask(n - i);
    __m512 scale = tensor_scale;
    __m512i zero = tensor_zero;
    if constexpr (kPerElement) {
      scale = _mm512_maskz_loadu_ps(mask, p.scale + i);
      zero = _mm512_maskz_loadu_epi32(mask, p.zero_point + i);
    }
    const __m512 v = _mm512_cvtepi32_ps(_mm512_sub_epi32(LoadInts(x + i, mask), zero));
    _mm512_mask_storeu_ps(y + i, mask, _mm512_mul_ps(v, scale));
  }
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

void QuantizeAvx512(const float* x, int64_t n, const QuantizeSpanParams& p, void* y) {
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

void DequantizeAvx512(const void* x, int64_t n, const QuantizeSpanParams& p, float* y) {
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

FloatRange RangeAvx512(const float* x, int64_t n) {
  // minps(x, low) is `x < low ? x : low`, std::min(low, x) exactly: a NaN x
  // keeps low, and -0 never replaces +0. Lanes the mask leaves out keep theirs.
  __m512 low = _mm512_setzero_ps(), high = _mm512_setzero_ps();
  __mmask16 nan = 0;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = TailMask(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(mask, x + i);
    low = _mm512_mask_min_ps(low, mask, v, low);
    high = _mm512_mask_max_ps(high, mask, v, high);
    nan |= _mm512_mask_cmp_ps_mask(mask, v, v, _CMP_UNORD_Q);
  }
  // Lanes hold no NaN and no -0, so the order of the fold cannot matter.
  alignas(64) float lows[16], highs[16];
  _mm512_store_ps(lows, low);
  _mm512_store_ps(highs, high);
  FloatRange r;
  for (int lane = 0; lane < 16; ++lane) {
    r.low = lows[lane] < r.low ? lows[lane] : r.low;
    r.high = highs[lane] > r.high ? highs[lane] : r.high;
  }
  r.has_nan = nan != 0;
  return r;
}

}  // namespace octet::quant
