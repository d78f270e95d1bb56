// requantize.h's steps on zmm registers, shared by every AVX-512 tile that
// finishes its sums in registers (gemm_avx512vnni.cc, conv_*_avx512vnni.cc) and
// by requantize_avx512.cc, so the formula is written once. Same bits as the
// scalar code: cvtdq2ps / cvtps2dq round half to even (default MXCSR), maxps /
// minps return the bound for NaN as the scalar comparisons do, and no
// multiply-add is fused. Include only from files compiled with AVX-512 flags;
// internal linkage, so no copy can be mixed up with another file's.
#pragma once

#include <immintrin.h>

namespace octet::requant {
namespace {

struct RequantVectors {
  __m512 lo, hi;  // float(qmin - zero_point), float(qmax - zero_point)
  __m512i zero_point;
};

// float(sum) * multiplier, clamped to [lo, hi] (NaN -> lo), rounded half to
// even, + zero point: an int32 within the output type's range.
[[gnu::always_inline]] inline __m512i RequantizeVector(__m512i sum, __m512 multiplier,
                                                       const RequantVectors& r) {
  __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(sum), multiplier);
  f = _mm512_min_ps(_mm512_max_ps(f, r.lo), r.hi);
  return _mm512_add_epi32(_mm512_cvtps_epi32(f), r.zero_point);
}

// float(sum) * scale (+ bias): the product rounded before the add.
[[gnu::always_inline]] inline __m512 ScaleVector(__m512i sum, __m512 scale, const __m512* bias) {
  __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(sum), scale);
  asm("" : "+v"(f));  // keeps the product rounded: no fused multiply-add with the bias
  return bias ? _mm512_add_ps(f, *bias) : f;
}

// 4 zmm of 16 int32 values, each within the output type's range, narrowed
// with the saturating packs (exact in range) and left in their per-lane
// interleave: 128-bit lane l holds dwords 4l..4l+3 of a, then of b, c and d,
// as 4 bytes each. For callers that shuffle the bytes further anyway.
[[gnu::always_inline]] inline __m512i NarrowToLaneBytes(__m512i a, __m512i b, __m512i c, __m512i d,
                                                        bool is_signed) {
  const __m512i ab = _mm512_packs_epi32(a, b), cd = _mm512_packs_epi32(c, d);
  return is_signed ? _mm512_packs_epi16(ab, cd) : _mm512_packus_epi16(ab, cd);
}

// The same as 64 bytes in order a, b, c, d: one dword permute undoes the
// packs' per-lane interleave. The masked narrowing store (vpmovdb to memory)
// is several times slower on AMD Zen 4 and was a quarter of a 1x1
// convolution's time (docs/conv.md).
[[gnu::always_inline]] inline __m512i NarrowToBytes(__m512i a, __m512i b, __m512i c, __m512i d,
                                                    bool is_signed) {
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_epi32(order, NarrowToLaneBytes(a, b, c, d, is_signed));
}

}  // namespace
}  // namespace octet::requant
