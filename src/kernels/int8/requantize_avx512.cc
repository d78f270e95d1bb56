// The epilogues (requantize.h) with AVX-512, 64 (requantize) or 16 (float)
// columns per step; the last partial step uses masked loads and stores, so
// nothing past the row is read or written. Same bits as the scalar code:
// cvtdq2ps/cvtps2dq round half to even (default MXCSR), maxps/minps return the
// bound for NaN as the scalar comparisons do, and no multiply-add is fused.
// GCC 12.2 warns falsely about the _mm512_undefined_* pass-through operand of
// max/min/cvt intrinsics (GCC bug 105593, fixed in 12.3).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <limits>

#include "kernels/int8/requantize.h"

namespace octet::requant {

namespace {

// The first `count` of 16 columns (none when count <= 0).
__mmask16 ColumnMask(int64_t count) {
  if (count <= 0) return 0;
  return count >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << count) - 1);
}

// 64 int32 values, each within T's range, as 64 bytes in order. Narrowed in
// registers with the saturating packs (exact in range) and one dword permute:
// the masked narrowing store (vpmovdb to memory) is several times slower on
// AMD Zen 4 and was a quarter of a 1x1 convolution's time (docs/conv.md).
template <typename T>
__m512i NarrowToBytes(__m512i a, __m512i b, __m512i c, __m512i d) {
  // Per 128-bit lane i, the packs give [a_i b_i c_i d_i] (4 bytes each); the
  // permute puts dword 4i + j (group j of lane i) at 4j + i.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m512i ab = _mm512_packs_epi32(a, b), cd = _mm512_packs_epi32(c, d);
  const __m512i bytes =
      std::numeric_limits<T>::is_signed ? _mm512_packs_epi16(ab, cd) : _mm512_packus_epi16(ab, cd);
  return _mm512_permutexvar_epi32(order, bytes);
}

template <typename T>
void RequantizeRow(const int32_t* acc, int64_t c0, int64_t c1, const RequantizeParams& p, T* out) {
  const auto [y_lo, y_hi] = RequantizeOutputRange(p);
  const __m512 lo = _mm512_set1_ps(static_cast<float>(y_lo - p.zero_point));
  const __m512 hi = _mm512_set1_ps(static_cast<float>(y_hi - p.zero_point));
  const __m512i zero_point = _mm512_set1_epi32(p.zero_point);
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
    __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(sum), multiplier);
    v = _mm512_max_ps(v, lo);  // NaN -> lo
    v = _mm512_min_ps(v, hi);
    return _mm512_add_epi32(_mm512_cvtps_epi32(v), zero_point);
  };
  int64_t c = c0;
  for (; c + 64 <= c1; c += 64) {
    const __m512i bytes = NarrowToBytes<T>(quantize(c, 0xFFFF), quantize(c + 16, 0xFFFF),
                                           quantize(c + 32, 0xFFFF), quantize(c + 48, 0xFFFF));
    _mm512_storeu_si512(out + c, bytes);
  }
  if (c < c1) {  // the last 1..63 columns: masked loads, one masked byte store
    const int64_t n = c1 - c;
    const __m512i bytes = NarrowToBytes<T>(
        quantize(c, ColumnMask(n)), quantize(c + 16, ColumnMask(n - 16)),
        quantize(c + 32, ColumnMask(n - 32)), quantize(c + 48, ColumnMask(n - 48)));
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
