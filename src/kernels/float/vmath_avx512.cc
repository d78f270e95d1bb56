// The AVX-512 path of kernels/float/vmath.h: 16 floats per vector, tails
// through masked loads and stores.
// Rounding after every Add and Mul (see vmath_impl.h); must precede the
// includes so that inlined intrinsics agree.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
// GCC 12 reports the _mm512_undefined_ps() pass-through of unmasked
// intrinsics (min, max, shifts) as uninitialized (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include "kernels/float/vmath_impl.h"

namespace octet::vmath {

namespace {

struct Avx512 {
  static constexpr int kWidth = 16;
  using F = __m512;
  using I = __m512i;
  using M = __mmask16;
  static M FirstLanes(int count) { return static_cast<M>((1u << count) - 1); }
  static F Load(const float* p) { return _mm512_loadu_ps(p); }
  static F LoadPartial(const float* p, int count, float fill) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), FirstLanes(count), p);
  }
  static void Store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static void StorePartial(float* p, F v, int count) {
    _mm512_mask_storeu_ps(p, FirstLanes(count), v);
  }
  static F Set(float v) { return _mm512_set1_ps(v); }
  static F Add(F a, F b) { return _mm512_add_ps(a, b); }
  static F Sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F Mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F Div(F a, F b) { return _mm512_div_ps(a, b); }
  static F Fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F Min(F a, F b) { return _mm512_min_ps(a, b); }
  static F Max(F a, F b) { return _mm512_max_ps(a, b); }
  static F Abs(F a) { return _mm512_andnot_ps(_mm512_set1_ps(-0.f), a); }
  static F SignBit(F a) { return _mm512_and_ps(_mm512_set1_ps(-0.f), a); }
  static F Or(F a, F b) { return _mm512_or_ps(a, b); }
  static M Less(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static F Select(M m, F a, F b) { return _mm512_mask_blend_ps(m, b, a); }
  static I Bits(F a) { return _mm512_castps_si512(a); }
  static F FromBits(I a) { return _mm512_castsi512_ps(a); }
  static I AddI(I a, I b) { return _mm512_add_epi32(a, b); }
  static I SubI(I a, I b) { return _mm512_sub_epi32(a, b); }
  static I SetI(int32_t v) { return _mm512_set1_epi32(v); }
  static I ShiftRight1(I a) { return _mm512_srai_epi32(a, 1); }
  static I ShiftLeft23(I a) { return _mm512_slli_epi32(a, 23); }
};

}  // namespace

constinit const Kernels kAvx512Kernels = MakeKernels<Avx512>();

}  // namespace octet::vmath
