// The AVX2 vector type of the kernels written once over a vector type V: the
// interface of kernels/simd_avx512.h with 8 lanes. Partial float vectors use
// maskload / maskstore; partial 8- and 16-bit vectors go through a small
// buffer, so nothing outside the span is read or written.
// Include only from files compiled for AVX2 (*_avx2.cc); internal linkage.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace octet::simd {
namespace {

struct Avx2 {
  static constexpr int kWidth = 8;
  using F = __m256;
  using I = __m256i;
  using M = __m256;  // all-ones / all-zeros lanes
  static __m256i FirstLanes(int count) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }

  // Floats.
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
  // x86 semantics: a < b ? a : b (the second operand when either is NaN).
  static F Min(F a, F b) { return _mm256_min_ps(a, b); }
  static F Max(F a, F b) { return _mm256_max_ps(a, b); }
  static F Abs(F a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.f), a); }
  static F SignBit(F a) { return _mm256_and_ps(_mm256_set1_ps(-0.f), a); }
  static F Or(F a, F b) { return _mm256_or_ps(a, b); }
  static M Less(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static M Unordered(F a) { return _mm256_cmp_ps(a, a, _CMP_UNORD_Q); }
  static M OrMask(M a, M b) { return _mm256_or_ps(a, b); }
  static bool AnyLane(M m) { return _mm256_movemask_ps(m) != 0; }
  static F Select(M m, F a, F b) { return _mm256_blendv_ps(b, a, m); }
  static I Bits(F a) { return _mm256_castps_si256(a); }
  static F FromBits(I a) { return _mm256_castsi256_ps(a); }
  // cvtdq2ps, and cvtps2dq: round half to even under the default MXCSR, INT32_MIN
  // for NaN and values outside int32.
  static F ToFloat(I a) { return _mm256_cvtepi32_ps(a); }
  static I RoundToInt(F a) { return _mm256_cvtps_epi32(a); }

  // int32 lanes (wrap-around arithmetic).
  static I LoadI(const int32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const I*>(p)); }
  static I LoadIPartial(const int32_t* p, int count) {
    return _mm256_maskload_epi32(p, FirstLanes(count));
  }
  static void StoreI(int32_t* p, I v) { _mm256_storeu_si256(reinterpret_cast<I*>(p), v); }
  static void StoreIPartial(int32_t* p, I v, int count) {
    _mm256_maskstore_epi32(p, FirstLanes(count), v);
  }
  static I AddI(I a, I b) { return _mm256_add_epi32(a, b); }
  static I SubI(I a, I b) { return _mm256_sub_epi32(a, b); }
  static I MulI(I a, I b) { return _mm256_mullo_epi32(a, b); }
  static I MinI(I a, I b) { return _mm256_min_epi32(a, b); }
  static I MaxI(I a, I b) { return _mm256_max_epi32(a, b); }
  static I XorI(I a, I b) { return _mm256_xor_si256(a, b); }
  static I SetI(int32_t v) { return _mm256_set1_epi32(v); }
  static I ShiftRight1(I a) { return _mm256_srai_epi32(a, 1); }
  static I ShiftLeft23(I a) { return _mm256_slli_epi32(a, 23); }

  // 8- and 16-bit storage T widened to int32 lanes (sign- or zero-extended),
  // and int32 lanes stored as their low sizeof(T) bytes.
  template <typename T>
  static I LoadWiden(const T* p) {
    return Widen<T>(sizeof(T) == 1 ? _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))
                                   : _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  template <typename T>
  static I LoadWidenPartial(const T* p, int count) {
    alignas(16) T buffer[16 / sizeof(T)] = {};
    std::memcpy(buffer, p, static_cast<size_t>(count) * sizeof(T));
    return LoadWiden(buffer);
  }
  template <typename T>
  static void StoreLow(T* p, I v) {
    const __m128i low = LowParts<T>(v);
    if constexpr (sizeof(T) == 1)
      _mm_storel_epi64(reinterpret_cast<__m128i*>(p), low);
    else
      _mm_storeu_si128(reinterpret_cast<__m128i*>(p), low);
  }
  // Two vectors of int32 lanes within 8-bit T's range, stored as 16 T: a's
  // lanes, then b's.
  template <typename T>
  static void StoreNarrowPair(T* p, I a, I b) {
    static_assert(sizeof(T) == 1);
    const __m256i words = _mm256_packs_epi32(a, b);  // a0-3 b0-3 | a4-7 b4-7
    const __m256i bytes =
        std::is_signed_v<T> ? _mm256_packs_epi16(words, words) : _mm256_packus_epi16(words, words);
    const __m256i ordered =
        _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 0, 4, 1, 5));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(ordered));
  }
  template <typename T>
  static void StoreLowPartial(T* p, I v, int count) {
    alignas(16) T buffer[16 / sizeof(T)];
    _mm_store_si128(reinterpret_cast<__m128i*>(buffer), LowParts<T>(v));
    std::memcpy(p, buffer, static_cast<size_t>(count) * sizeof(T));
  }

 private:
  template <typename T>
  static I Widen(__m128i raw) {
    if constexpr (std::is_same_v<T, uint8_t>)
      return _mm256_cvtepu8_epi32(raw);
    else if constexpr (std::is_same_v<T, int8_t>)
      return _mm256_cvtepi8_epi32(raw);
    else if constexpr (std::is_same_v<T, uint16_t>)
      return _mm256_cvtepu16_epi32(raw);
    else
      return _mm256_cvtepi16_epi32(raw);
  }
  // The low sizeof(T) bytes of each lane, in lane order, at the start of 16 bytes.
  template <typename T>
  static __m128i LowParts(I v) {
    const __m256i pick =
        sizeof(T) == 1
            ? _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8,
                               12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1)
            : _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 4, 5,
                               8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m256i picked = _mm256_shuffle_epi8(v, pick);
    const __m128i lo = _mm256_castsi256_si128(picked), hi = _mm256_extracti128_si256(picked, 1);
    return sizeof(T) == 1 ? _mm_unpacklo_epi32(lo, hi) : _mm_unpacklo_epi64(lo, hi);
  }
};

}  // namespace
}  // namespace octet::simd
