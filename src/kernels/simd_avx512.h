// The AVX-512 vector type of the kernels written once over a vector type V
// (kernels/float/vmath_impl.h, kernels/int8/quantize_impl.h,
// kernels/int8/qlinear_binary_impl.h): 16 float or int32 lanes, partial
// vectors through masked loads and stores (nothing outside the span is read
// or written). kernels/simd_avx2.h is the same interface on AVX2.
// Include only from files compiled for AVX-512 (*_avx512*.cc); the struct has
// internal linkage, so no other file's copy can replace it at link time.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <type_traits>

namespace octet::simd {
namespace {

struct Avx512 {
  static constexpr int kWidth = 16;
  using F = __m512;
  using I = __m512i;
  using M = __mmask16;
  static M FirstLanes(int count) {
    return count >= 16 ? static_cast<M>(0xFFFF) : static_cast<M>((1u << count) - 1);
  }

  // Floats.
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
  // x86 semantics: a < b ? a : b (the second operand when either is NaN).
  static F Min(F a, F b) { return _mm512_min_ps(a, b); }
  static F Max(F a, F b) { return _mm512_max_ps(a, b); }
  static F Abs(F a) { return _mm512_andnot_ps(_mm512_set1_ps(-0.f), a); }
  static F SignBit(F a) { return _mm512_and_ps(_mm512_set1_ps(-0.f), a); }
  static F Or(F a, F b) { return _mm512_or_ps(a, b); }
  static M Less(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static M Unordered(F a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q); }
  static M OrMask(M a, M b) { return a | b; }
  static bool AnyLane(M m) { return m != 0; }
  static F Select(M m, F a, F b) { return _mm512_mask_blend_ps(m, b, a); }
  static I Bits(F a) { return _mm512_castps_si512(a); }
  static F FromBits(I a) { return _mm512_castsi512_ps(a); }
  // cvtdq2ps, and cvtps2dq: round half to even under the default MXCSR, INT32_MIN
  // for NaN and values outside int32.
  static F ToFloat(I a) { return _mm512_cvtepi32_ps(a); }
  static I RoundToInt(F a) { return _mm512_cvtps_epi32(a); }

  // int32 lanes (wrap-around arithmetic).
  static I LoadI(const int32_t* p) { return _mm512_loadu_si512(p); }
  static I LoadIPartial(const int32_t* p, int count) {
    return _mm512_maskz_loadu_epi32(FirstLanes(count), p);
  }
  static void StoreI(int32_t* p, I v) { _mm512_storeu_si512(p, v); }
  static void StoreIPartial(int32_t* p, I v, int count) {
    _mm512_mask_storeu_epi32(p, FirstLanes(count), v);
  }
  static I AddI(I a, I b) { return _mm512_add_epi32(a, b); }
  static I SubI(I a, I b) { return _mm512_sub_epi32(a, b); }
  static I MulI(I a, I b) { return _mm512_mullo_epi32(a, b); }
  static I MinI(I a, I b) { return _mm512_min_epi32(a, b); }
  static I MaxI(I a, I b) { return _mm512_max_epi32(a, b); }
  static I XorI(I a, I b) { return _mm512_xor_si512(a, b); }
  static I SetI(int32_t v) { return _mm512_set1_epi32(v); }
  static I ShiftRight1(I a) { return _mm512_srai_epi32(a, 1); }
  static I ShiftLeft23(I a) { return _mm512_slli_epi32(a, 23); }

  // 8- and 16-bit storage T widened to int32 lanes (sign- or zero-extended),
  // and int32 lanes stored as their low sizeof(T) bytes.
  template <typename T>
  static I LoadWiden(const T* p) {
    return Widen<T>(sizeof(T) == 1 ? _mm512_castsi128_si512(_mm_loadu_si128(Ptr128(p)))
                                   : _mm512_castsi256_si512(_mm256_loadu_si256(Ptr256(p))));
  }
  template <typename T>
  static I LoadWidenPartial(const T* p, int count) {
    return Widen<T>(sizeof(T) == 1
                        ? _mm512_castsi128_si512(_mm_maskz_loadu_epi8(FirstLanes(count), p))
                        : _mm512_castsi256_si512(_mm256_maskz_loadu_epi16(FirstLanes(count), p)));
  }
  template <typename T>
  static void StoreLow(T* p, I v) {
    if constexpr (sizeof(T) == 1)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(v));
    else
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(v));
  }
  // Two vectors of int32 lanes within 8-bit T's range, stored as 32 T: a's
  // lanes, then b's (vpmovdb each: fewer operations than packing the pair).
  template <typename T>
  static void StoreNarrowPair(T* p, I a, I b) {
    static_assert(sizeof(T) == 1);
    StoreLow(p, a);
    StoreLow(p + kWidth, b);
  }
  template <typename T>
  static void StoreLowPartial(T* p, I v, int count) {
    if constexpr (sizeof(T) == 1)
      _mm512_mask_cvtepi32_storeu_epi8(p, FirstLanes(count), v);
    else
      _mm512_mask_cvtepi32_storeu_epi16(p, FirstLanes(count), v);
  }

 private:
  template <typename T>
  static const __m128i* Ptr128(const T* p) {
    return reinterpret_cast<const __m128i*>(p);
  }
  template <typename T>
  static const __m256i* Ptr256(const T* p) {
    return reinterpret_cast<const __m256i*>(p);
  }
  // The low 16 bytes (8-bit T) or 32 bytes (16-bit T) of `raw`, widened.
  template <typename T>
  static I Widen(__m512i raw) {
    if constexpr (std::is_same_v<T, uint8_t>)
      return _mm512_cvtepu8_epi32(_mm512_castsi512_si128(raw));
    else if constexpr (std::is_same_v<T, int8_t>)
      return _mm512_cvtepi8_epi32(_mm512_castsi512_si128(raw));
    else if constexpr (std::is_same_v<T, uint16_t>)
      return _mm512_cvtepu16_epi32(_mm512_castsi512_si256(raw));
    else
      return _mm512_cvtepi16_epi32(_mm512_castsi512_si256(raw));
  }
};

}  // namespace
}  // namespace octet::simd
