// Internal to the convolution's AVX-512 VNNI tiles (conv_indirect_avx512vnni.cc,
// conv_gemm_avx512vnni.cc): requantize.h's formula on 16 int32 sums in a
// register, op for op: float(sum + bias) * multiplier, max lo (NaN -> lo),
// min hi, cvtps2dq (round half to even under the default MXCSR), + zero point;
// no fused multiply-add. Include only from files compiled with AVX-512 flags;
// internal linkage, so no copy can be mixed up with another file's.
#pragma once

#include <immintrin.h>

namespace octet::conv {
namespace {

struct RequantVectors {
  __m512 lo, hi;
  __m512i zero_point;
};

[[gnu::always_inline]] inline __m512i RequantizeVector(__m512i sum, __m512i bias, __m512 multiplier,
                                                       const RequantVectors& r) {
  __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(sum, bias)), multiplier);
  f = _mm512_min_ps(_mm512_max_ps(f, r.lo), r.hi);  // NaN -> lo, as requantize.h
  return _mm512_add_epi32(_mm512_cvtps_epi32(f), r.zero_point);
}

}  // namespace
}  // namespace octet::conv
