// The epilogues (requantize.h) with AVX-512, 16 columns per step; the last
// partial step uses masked loads and stores, so nothing past the row is read
// or written. Same bits as the scalar code: cvtdq2ps/cvtps2dq round half to
// even (default MXCSR), maxps/minps return the bound for NaN as the scalar
// comparisons do, and no multiply-add is fused.
// GCC 12.2 warns falsely about the _mm512_undefined_* pass-through operand of
// max/min/cvt intrinsics (GCC bug 105593, fixed in 12.3).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <limits>

#include "kernels/int8/requantize.h"

namespace octet::requant {

namespace {

__mmask16 ColumnMask(int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << count) - 1);
}

template <typename T>
void RequantizeRow(const int32_t* acc, int64_t c0, int64_t c1, const RequantizeParams& p, T* out) {
  const __m512 lo =
      _mm512_set1_ps(static_cast<float>(std::numeric_limits<T>::min() - p.zero_point));
  const __m512 hi =
      _mm512_set1_ps(static_cast<float>(std::numeric_limits<T>::max() - p.zero_point));
  const __m512i zero_point = _mm512_set1_epi32(p.zero_point);
  const __m512 tensor_multiplier = _mm512_set1_ps(p.multiplier[0]);
  const __m512i tensor_bias = _mm512_set1_epi32(p.bias ? p.bias[0] : 0);
  for (int64_t c = c0; c < c1; c += 16) {
    const __mmask16 mask = ColumnMask(c1 - c);
    __m512i sum = _mm512_maskz_loadu_epi32(mask, acc + c);
    if (p.bias) {
      sum = _mm512_add_epi32(
          sum, p.bias_per_column ? _mm512_maskz_loadu_epi32(mask, p.bias + c) : tensor_bias);
    }
    const __m512 multiplier =
        p.multiplier_per_column ? _mm512_maskz_loadu_ps(mask, p.multiplier + c) : tensor_multiplier;
    __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(sum), multiplier);
    v = _mm512_max_ps(v, lo);  // NaN -> lo
    v = _mm512_min_ps(v, hi);
    const __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(v), zero_point);
    _mm512_mask_cvtepi32_storeu_epi8(out + c, mask, q);  // in range: truncation is exact
  }
}

}  // namespace

void RequantizeRowAvx512(const int32_t* acc, int64_t c0, int64_t c1, const RequantizeParams& p,
                         void* out) {
  if (p.output_type == DType::kInt8) {
    RequantizeRow(acc, c0, c1, p, static_cast<int8_t*>(out));
  } else {
    RequantizeRow(acc, c0, c1, p, static_cast<uint8_t*>(out));
  }
}

void FloatRowAvx512(const int32_t* acc, int64_t c0, int64_t c1, const FloatOutputParams& p,
                    float* out) {
  const __m512 tensor_scale = _mm512_set1_ps(p.scale[0]);
  const __m512i tensor_acc_bias = _mm512_set1_epi32(p.acc_bias ? p.acc_bias[0] : 0);
  const __m512 tensor_bias = _mm512_set1_ps(p.bias ? p.bias[0] : 0.f);
  for (int64_t c = c0; c < c1; c += 16) {
    const __mmask16 mask = ColumnMask(c1 - c);
    __m512i sum = _mm512_maskz_loadu_epi32(mask, acc + c);
    if (p.acc_bias) {
      sum = _mm512_add_epi32(sum, p.acc_bias_per_column
                                      ? _mm512_maskz_loadu_epi32(mask, p.acc_bias + c)
                                      : tensor_acc_bias);
    }
    const __m512 scale =
        p.scale_per_column ? _mm512_maskz_loadu_ps(mask, p.scale + c) : tensor_scale;
    __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(sum), scale);
    asm("" : "+v"(v));  // keeps the product rounded: no fused multiply-add with the bias
    if (p.bias) {
      v = _mm512_add_ps(v,
                        p.bias_per_column ? _mm512_maskz_loadu_ps(mask, p.bias + c) : tensor_bias);
    }
    _mm512_mask_storeu_ps(out + c, mask, v);
  }
}

}  // namespace octet::requant
