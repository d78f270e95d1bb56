// The epilogues (requantize.h) with AVX-512, 64 (requantize) or 16 (float)
// columns per step; the last partial step uses masked loads and stores, so
// nothing past the row is read or written. Same bits as the scalar code
// (requantize_avx512_inline.h has the steps).

#include <immintrin.h>

#include <limits>

#include "kernels/int8/requantize.h"
#include "kernels/int8/requantize_avx512_inline.h"

namespace octet::requant {

namespace {

// The first `count` of 16 columns (none when count <= 0).
__mmask16 ColumnMask(int64_t count) {
  if (count <= 0) return 0;
  return count >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << count) - 1);
}

template <typename T>
void RequantizeRow(const int32_t* acc, int64_t c0, int64_t c1, const RequantizeParams& p, T* out) {
  const auto [lo, hi] = RequantizeFloatClamp(p);
  const RequantVectors rq{_mm512_set1_ps(lo), _mm512_set1_ps(hi), _mm512_set1_epi32(p.zero_point)};
  constexpr bool kSigned = std::numeric_limits<T>::is_signed;
  const __m512 tensor_multiplier = _mm512_set1_ps(p.multiplier[0]);
  const __m512i tensor_bias = _mm512_set1_epi32(p.bias ? p.bias[0] : 0);
  // 16 columns from c (mask: those before c1), requantized to int32.
  auto quantize = [&](int64_t c, __mmask16 mask) {
    __m512i sum = _mm512_maskz_loadu_epi32(mask, acc + c);
    if (p.bias) {
      sum = _mm512_add_epi32(
          sum, p.bias_per_column ? _mm512_maskz_loadu_epi32(mask, p.bias + c) : tensor_bias);
    }
    const __m512 multiplier =
        p.multiplier_per_column ? _mm512_maskz_loadu_ps(mask, p.multiplier + c) : tensor_multiplier;
    return RequantizeVector(sum, multiplier, rq);
  };
  int64_t c = c0;
  for (; c + 64 <= c1; c += 64) {
    const __m512i bytes =
        NarrowToBytes(quantize(c, 0xFFFF), quantize(c + 16, 0xFFFF), quantize(c + 32, 0xFFFF),
                      quantize(c + 48, 0xFFFF), kSigned);
    _mm512_storeu_si512(out + c, bytes);
  }
  if (c < c1) {  // the last 1..63 columns: masked loads, one masked byte store
    const int64_t n = c1 - c;
    const __m512i bytes = NarrowToBytes(
        quantize(c, ColumnMask(n)), quantize(c + 16, ColumnMask(n - 16)),
        quantize(c + 32, ColumnMask(n - 32)), quantize(c + 48, ColumnMask(n - 48)), kSigned);
    _mm512_mask_storeu_epi8(out + c, (1ull << n) - 1, bytes);
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
    const __m512 bias = p.bias_per_column ? _mm512_maskz_loadu_ps(mask, p.bias + c) : tensor_bias;
    _mm512_mask_storeu_ps(out + c, mask, ScaleVector(sum, scale, p.bias ? &bias : nullptr));
  }
}

}  // namespace octet::requant
