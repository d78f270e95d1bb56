// gemm_i16s8_6x16c2_avx2: the exact AVX2 micro-kernel without VNNI. A is packed
// as int16 (its own values), B as int8 pairs of k, widened to int16 in
// registers; vpmaddwd multiplies 16 int16 pairs and adds each pair into an
// int32 lane, which cannot saturate for 8-bit inputs (unlike vpmaddubsw, never
// used here). Up to 6 rows x 16 columns: 12 accumulators, 2 B and 1 A of the
// 16 ymm registers.
//
// Per group (2 k): B's 32 bytes are columns 0-15 x k0, k1; each 16-byte half
// widens to [c0k0 c0k1 .. c7k0 c7k1] and the row's int16 pair is broadcast
// to [a0 a1] x 8, so lane j of vpmaddwd is a0 b(j, k0) + a1 b(j, k1): the
// accumulators hold columns in order.
#include <immintrin.h>

#include "kernels/int8/gemm_finish_impl.h"
#include "kernels/simd_avx2.h"

namespace octet::gemm {

namespace {

// The accumulation loop, in assembly: written with intrinsics, GCC 12 hoists
// the six A broadcasts ahead of the multiplies and then keeps most of the 12
// accumulators on the stack. Here they stay in ymm registers (the compiler
// allocates them), B in ymm12-13, A's broadcast in ymm14 and each product in
// ymm15: all 16. One k group per iteration.
template <int R>
void Accumulate(__m256i (&acc)[R][2], const uint8_t* a, const int8_t* b, int64_t groups);

// Row r of a group: its int16 pair of A broadcast, times both halves of B.
#define OCTET_AVX2_ROW(r)                  \
  "vpbroadcastd " #r                       \
  "*4(%[a]), %%ymm14\n\t"                  \
  "vpmaddwd %%ymm12, %%ymm14, %%ymm15\n\t" \
  "vpaddd %%ymm15, %[c" #r "0], %[c" #r    \
  "0]\n\t"                                 \
  "vpmaddwd %%ymm13, %%ymm14, %%ymm15\n\t" \
  "vpaddd %%ymm15, %[c" #r "1], %[c" #r "1]\n\t"
#define OCTET_AVX2_ACC(r) [c##r##0] "+x"(acc[r][0]), [c##r##1] "+x"(acc[r][1])
#define OCTET_AVX2_ACCUMULATE(R, ROWS, ...)                                               \
  template <>                                                                             \
  [[gnu::always_inline]] inline void Accumulate<R>(__m256i(&acc)[R][2], const uint8_t* a, \
                                                   const int8_t* b, int64_t groups) {     \
    asm volatile(                                                                         \
        ".p2align 4\n"                                                                    \
        "1:\n\t"                                                                          \
        "vpmovsxbw (%[b]), %%ymm12\n\t"                                                   \
        "vpmovsxbw 16(%[b]), %%ymm13\n\t" ROWS                                            \
        "add $32, %[b]\n\t"                                                               \
        "add $" #R                                                                        \
        "*4, %[a]\n\t"                                                                    \
        "dec %[n]\n\t"                                                                    \
        "jnz 1b\n\t"                                                                      \
        : __VA_ARGS__, [a] "+r"(a), [b] "+r"(b), [n] "+r"(groups)                         \
        :                                                                                 \
        : "xmm12", "xmm13", "xmm14", "xmm15", "cc", "memory");                            \
  }
// One row (a GEMV): two groups, one 64-byte line of B, per iteration, products
// written over the B registers; an odd last group takes one more step.
template <>
[[gnu::always_inline]] inline void Accumulate<1>(__m256i (&acc)[1][2], const uint8_t* a,
                                                 const int8_t* b, int64_t groups) {
  int64_t pairs = groups / 2;
  if (pairs > 0) {
    asm volatile(
        ".p2align 4\n"
        "1:\n\t"
        "vpmovsxbw (%[b]), %%ymm12\n\t"
        "vpmovsxbw 16(%[b]), %%ymm13\n\t"
        "vpbroadcastd (%[a]), %%ymm14\n\t"
        "vpmovsxbw 32(%[b]), %%ymm15\n\t"
        "vpmaddwd %%ymm12, %%ymm14, %%ymm12\n\t"
        "vpaddd %%ymm12, %[c00], %[c00]\n\t"
        "vpmovsxbw 48(%[b]), %%ymm12\n\t"
        "vpmaddwd %%ymm13, %%ymm14, %%ymm13\n\t"
        "vpaddd %%ymm13, %[c01], %[c01]\n\t"
        "vpbroadcastd 4(%[a]), %%ymm14\n\t"
        "vpmaddwd %%ymm15, %%ymm14, %%ymm15\n\t"
        "vpaddd %%ymm15, %[c00], %[c00]\n\t"
        "vpmaddwd %%ymm12, %%ymm14, %%ymm12\n\t"
        "vpaddd %%ymm12, %[c01], %[c01]\n\t"
        "add $64, %[b]\n\t"
        "add $8, %[a]\n\t"
        "dec %[n]\n\t"
        "jnz 1b\n\t"
        : OCTET_AVX2_ACC(0), [a] "+r"(a), [b] "+r"(b), [n] "+r"(pairs)
        :
        : "xmm12", "xmm13", "xmm14", "xmm15", "cc", "memory");
  }
  if (groups % 2 == 0) return;
  const __m256i av = _mm256_set1_epi32(*reinterpret_cast<const int32_t*>(a));
  const __m256i lo = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
  const __m256i hi =
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16)));
  acc[0][0] = _mm256_add_epi32(acc[0][0], _mm256_madd_epi16(av, lo));
  acc[0][1] = _mm256_add_epi32(acc[0][1], _mm256_madd_epi16(av, hi));
}
OCTET_AVX2_ACCUMULATE(2, OCTET_AVX2_ROW(0) OCTET_AVX2_ROW(1), OCTET_AVX2_ACC(0), OCTET_AVX2_ACC(1))
OCTET_AVX2_ACCUMULATE(3, OCTET_AVX2_ROW(0) OCTET_AVX2_ROW(1) OCTET_AVX2_ROW(2), OCTET_AVX2_ACC(0),
                      OCTET_AVX2_ACC(1), OCTET_AVX2_ACC(2))
OCTET_AVX2_ACCUMULATE(4, OCTET_AVX2_ROW(0) OCTET_AVX2_ROW(1) OCTET_AVX2_ROW(2) OCTET_AVX2_ROW(3),
                      OCTET_AVX2_ACC(0), OCTET_AVX2_ACC(1), OCTET_AVX2_ACC(2), OCTET_AVX2_ACC(3))
OCTET_AVX2_ACCUMULATE(5,
                      OCTET_AVX2_ROW(0) OCTET_AVX2_ROW(1) OCTET_AVX2_ROW(2) OCTET_AVX2_ROW(3)
                          OCTET_AVX2_ROW(4),
                      OCTET_AVX2_ACC(0), OCTET_AVX2_ACC(1), OCTET_AVX2_ACC(2), OCTET_AVX2_ACC(3),
                      OCTET_AVX2_ACC(4))
OCTET_AVX2_ACCUMULATE(6,
                      OCTET_AVX2_ROW(0) OCTET_AVX2_ROW(1) OCTET_AVX2_ROW(2) OCTET_AVX2_ROW(3)
                          OCTET_AVX2_ROW(4) OCTET_AVX2_ROW(5),
                      OCTET_AVX2_ACC(0), OCTET_AVX2_ACC(1), OCTET_AVX2_ACC(2), OCTET_AVX2_ACC(3),
                      OCTET_AVX2_ACC(4), OCTET_AVX2_ACC(5))
#undef OCTET_AVX2_ACCUMULATE
#undef OCTET_AVX2_ACC
#undef OCTET_AVX2_ROW

template <int R>
void Tile(const TileArgs& t) {
  __m256i acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  if (t.k_groups > 0) Accumulate<R>(acc, t.a, t.b, t.k_groups);
  FinishTile<simd::Avx2, R, 2>(t, acc);
}

}  // namespace

void TileAvx2(int rows, const TileArgs& t) {
  ForCount<6>(rows, [&]<int R>() { Tile<R>(t); });
}

}  // namespace octet::gemm
