// The epilogues (requantize.h) with AVX2, 8 columns per step; the remaining
// columns go through the scalar row code. Same bits as the scalar code:
// cvtdq2ps/cvtps2dq round half to even (default MXCSR), maxps/minps return
// the bound for NaN as the scalar comparisons do, and no multiply-add is fused.
#include <immintrin.h>

#include <limits>

#include "kernels/int8/requantize.h"

namespace octet::requant {

namespace {

template <typename T>
void RequantizeRow(const int32_t* acc, int64_t c0, int64_t c1, const RequantizeParams& p, T* out) {
  const auto [clamp_lo, clamp_hi] = RequantizeFloatClamp(p);
  const __m256 lo = _mm256_set1_ps(clamp_lo);
  const __m256 hi = _mm256_set1_ps(clamp_hi);
  const __m256i zero_point = _mm256_set1_epi32(p.zero_point);
  const __m256 tensor_multiplier = _mm256_set1_ps(p.multiplier[0]);
  const __m256i tensor_bias = _mm256_set1_epi32(p.bias ? p.bias[0] : 0);
  int64_t c = c0;
  for (; c + 8 <= c1; c += 8) {
    __m256i sum = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + c));
    if (p.bias) {
      sum = _mm256_add_epi32(
          sum, p.bias_per_column ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.bias + c))
                                 : tensor_bias);
    }
    const __m256 multiplier =
        p.multiplier_per_column ? _mm256_loadu_ps(p.multiplier + c) : tensor_multiplier;
    __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(sum), multiplier);
    v = _mm256_max_ps(v, lo);  // NaN -> lo
    v = _mm256_min_ps(v, hi);
    const __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(v), zero_point);
    // In range, so the saturating packs are exact.
    const __m128i words =
        _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    const __m128i bytes = std::numeric_limits<T>::is_signed ? _mm_packs_epi16(words, words)
                                                            : _mm_packus_epi16(words, words);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + c), bytes);
  }
  RequantizeRowScalar(acc, c, c1, p, out);
}

}  // namespace

void RequantizeRowAvx2(const int32_t* acc, int64_t c0, int64_t c1, const RequantizeParams& p,
                       void* out) {
  if (p.output_type == DType::kInt8) {
    RequantizeRow(acc, c0, c1, p, static_cast<int8_t*>(out));
  } else {
    RequantizeRow(acc, c0, c1, p, static_cast<uint8_t*>(out));
  }
}

void FloatRowAvx2(const int32_t* acc, int64_t c0, int64_t c1, const FloatOutputParams& p,
                  float* out) {
  const __m256 tensor_scale = _mm256_set1_ps(p.scale[0]);
  const __m256i tensor_acc_bias = _mm256_set1_epi32(p.acc_bias ? p.acc_bias[0] : 0);
  const __m256 tensor_bias = _mm256_set1_ps(p.bias ? p.bias[0] : 0.f);
  int64_t c = c0;
  for (; c + 8 <= c1; c += 8) {
    __m256i sum = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + c));
    if (p.acc_bias) {
      sum = _mm256_add_epi32(
          sum, p.acc_bias_per_column
                   ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.acc_bias + c))
                   : tensor_acc_bias);
    }
    const __m256 scale = p.scale_per_column ? _mm256_loadu_ps(p.scale + c) : tensor_scale;
    __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(sum), scale);
    asm("" : "+x"(v));  // keeps the product rounded: no fused multiply-add with the bias
    if (p.bias) v = _mm256_add_ps(v, p.bias_per_column ? _mm256_loadu_ps(p.bias + c) : tensor_bias);
    _mm256_storeu_ps(out + c, v);
  }
  FloatRowScalar(acc, c, c1, p, out);
}

}  // namespace octet::requant
