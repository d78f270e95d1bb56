// The AVX2 path of kernels/float/vmath.h: 8 floats per vector, tails
// through maskload/maskstore.
// Rounding after every Add and Mul (see vmath_impl.h); must precede the
// includes so that inlined intrinsics agree.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif
#include <immintrin.h>

#include "kernels/float/vmath_impl.h"

namespace octet::vmath {

namespace {

struct Avx2 {
  static constexpr int kWidth = 8;
  using F = __m256;
  using I = __m256i;
  using M = __m256;
  static __m256i FirstLanes(int count) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static F Load(const float* p) { return _mm256_loadu_ps(p); }
  static F LoadPartial(const float* p, int count, float fill) {
    const __m256i mask = FirstLanes(count);
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, mask),
                            _mm256_castsi256_ps(mask));
  }
  static void Store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static void StorePartial(float* p, F v, int count) {
    _mm256_maskstore_ps(p, FirstLanes(count), v);
  }
  static F Set(float v) { return _mm256_set1_ps(v); }
  static F Add(F a, F b) { return _mm256_add_ps(a, b); }
  static F Sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F Mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F Div(F a, F b) { return _mm256_div_ps(a, b); }
  static F Fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F Min(F a, F b) { return _mm256_min_ps(a, b); }
  static F Max(F a, F b) { return _mm256_max_ps(a, b); }
  static F Abs(F a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.f), a); }
  static F SignBit(F a) { return _mm256_and_ps(_mm256_set1_ps(-0.f), a); }
  static F Or(F a, F b) { return _mm256_or_ps(a, b); }
  static M Less(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static F Select(M m, F a, F b) { return _mm256_blendv_ps(b, a, m); }
  static I Bits(F a) { return _mm256_castps_si256(a); }
  static F FromBits(I a) { return _mm256_castsi256_ps(a); }
  static I AddI(I a, I b) { return _mm256_add_epi32(a, b); }
  static I SubI(I a, I b) { return _mm256_sub_epi32(a, b); }
  static I SetI(int32_t v) { return _mm256_set1_epi32(v); }
  static I ShiftRight1(I a) { return _mm256_srai_epi32(a, 1); }
  static I ShiftLeft23(I a) { return _mm256_slli_epi32(a, 23); }
};

}  // namespace

constinit const Kernels kAvx2Kernels = MakeKernels<Avx2>();

}  // namespace octet::vmath
