// Byte interleaves shared by the AVX-512 convolution kernels that rearrange
// NCHW channel rows into per-pixel channel groups (conv_indirect_avx512vnni.cc,
// conv_depthwise_vector_avx512vnni.cc), written once for zmm and xmm through a
// table of the unpack instructions, and the narrowing of requantized lanes to
// bytes. Include only from files compiled with AVX-512 flags; internal linkage.
#pragma once

#include <immintrin.h>

namespace octet::conv {
namespace {

struct Zmm {
  using V = __m512i;
  static V Lo8(V a, V b) { return _mm512_unpacklo_epi8(a, b); }
  static V Hi8(V a, V b) { return _mm512_unpackhi_epi8(a, b); }
  static V Lo16(V a, V b) { return _mm512_unpacklo_epi16(a, b); }
  static V Hi16(V a, V b) { return _mm512_unpackhi_epi16(a, b); }
  static V Lo32(V a, V b) { return _mm512_unpacklo_epi32(a, b); }
  static V Hi32(V a, V b) { return _mm512_unpackhi_epi32(a, b); }
  static V Lo64(V a, V b) { return _mm512_unpacklo_epi64(a, b); }
  static V Hi64(V a, V b) { return _mm512_unpackhi_epi64(a, b); }
};

struct Xmm {
  using V = __m128i;
  static V Lo8(V a, V b) { return _mm_unpacklo_epi8(a, b); }
  static V Hi8(V a, V b) { return _mm_unpackhi_epi8(a, b); }
  static V Lo16(V a, V b) { return _mm_unpacklo_epi16(a, b); }
  static V Hi16(V a, V b) { return _mm_unpackhi_epi16(a, b); }
  static V Lo32(V a, V b) { return _mm_unpacklo_epi32(a, b); }
  static V Hi32(V a, V b) { return _mm_unpackhi_epi32(a, b); }
  static V Lo64(V a, V b) { return _mm_unpacklo_epi64(a, b); }
  static V Hi64(V a, V b) { return _mm_unpackhi_epi64(a, b); }
};

// Rows a, b, c, d (one channel each) as 4-byte columns [a b c d]: in each
// 128-bit lane l (16 columns), q[j] holds columns 16 l + 4 j .. + 3.
template <typename T>
[[gnu::always_inline]] inline void InterleaveRows4(typename T::V a, typename T::V b,
                                                   typename T::V c, typename T::V d,
                                                   typename T::V q[4]) {
  const typename T::V lo01 = T::Lo8(a, b), hi01 = T::Hi8(a, b);
  const typename T::V lo23 = T::Lo8(c, d), hi23 = T::Hi8(c, d);
  q[0] = T::Lo16(lo01, lo23);
  q[1] = T::Hi16(lo01, lo23);
  q[2] = T::Lo16(hi01, hi23);
  q[3] = T::Hi16(hi01, hi23);
}

// A 4 x 4 dword transpose in each 128-bit lane: dword m of u[k] is dword k of v[m].
template <typename T>
[[gnu::always_inline]] inline void TransposeDwords4(typename T::V v0, typename T::V v1,
                                                    typename T::V v2, typename T::V v3,
                                                    typename T::V u[4]) {
  const typename T::V t0 = T::Lo32(v0, v1), t1 = T::Hi32(v0, v1);
  const typename T::V t2 = T::Lo32(v2, v3), t3 = T::Hi32(v2, v3);
  u[0] = T::Lo64(t0, t2);
  u[1] = T::Hi64(t0, t2);
  u[2] = T::Lo64(t1, t3);
  u[3] = T::Hi64(t1, t3);
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

}  // namespace
}  // namespace octet::conv
