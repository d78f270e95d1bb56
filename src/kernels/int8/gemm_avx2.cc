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
//
// gemm_i16s8_6x16c2_pairb_avx2, the matmuls' and convolutions' kernel: the
// same tile on paired B (gemm_kernels.h). A group's 32 bytes are 16 words
// (column q + 128 low, column q + 8 high, at k0 and k1), so one load and one
// vpsraw give both vpmaddwd operands: lane q of the raw words' sums is S(q) +
// 128 sum(a) + 256 S(q + 8), of the shifted words' S(q + 8). One step on B per
// group instead of two vpmovsxbw, which share the shuffle ports.
#include <immintrin.h>

#include "kernels/int8/gemm_finish_impl.h"
#include "kernels/simd_avx2.h"

namespace octet::gemm {

namespace {

// The accumulation loop, in assembly: written with intrinsics, GCC 12 hoists
// the six A broadcasts ahead of the multiplies and then keeps most of the 12
// accumulators on the stack. Here they stay in ymm registers (the compiler
// allocates them), B in ymm12-13, A's broadcast in ymm14 and each product in
// ymm15: all 16. One k group per iteration. The loop starts 32 bytes into a
// 64-byte line, a fixed place: its speed then does not depend on where the
// linker puts it (at the start of a line the two- and three-row loops run
// slower on Zen 5).
template <int R>
void Accumulate(__m256i (&acc)[R][2], const uint8_t* a, const int8_t* b, int64_t groups);
template <int R>
void AccumulatePaired(__m256i (&acc)[R][2], const uint8_t* a, const int8_t* b, int64_t groups);

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
// B of one group into ymm12-13: widened (plain), or raw and shifted (paired).
#define OCTET_AVX2_LOAD_PLAIN "vpmovsxbw (%[b]), %%ymm12\n\tvpmovsxbw 16(%[b]), %%ymm13\n\t"
#define OCTET_AVX2_LOAD_PAIRED "vmovdqu (%[b]), %%ymm12\n\tvpsraw $8, %%ymm12, %%ymm13\n\t"
#define OCTET_AVX2_ACCUMULATE_AS(NAME, LOAD, R, ROWS, ...)                          \
  template <>                                                                       \
  [[gnu::always_inline]] inline void NAME<R>(__m256i(&acc)[R][2], const uint8_t* a, \
                                             const int8_t* b, int64_t groups) {     \
    asm volatile(                                                                   \
        ".p2align 6\n.nops 32\n"                                                    \
        "1:\n\t" LOAD ROWS                                                          \
        "add $32, %[b]\n\t"                                                         \
        "add $" #R                                                                  \
        "*4, %[a]\n\t"                                                              \
        "dec %[n]\n\t"                                                              \
        "jnz 1b\n\t"                                                                \
        : __VA_ARGS__, [a] "+r"(a), [b] "+r"(b), [n] "+r"(groups)                   \
        :                                                                           \
        : "xmm12", "xmm13", "xmm14", "xmm15", "cc", "memory");                      \
  }
#define OCTET_AVX2_ACCUMULATE(R, ROWS, ...)                                         \
  OCTET_AVX2_ACCUMULATE_AS(Accumulate, OCTET_AVX2_LOAD_PLAIN, R, ROWS, __VA_ARGS__) \
  OCTET_AVX2_ACCUMULATE_AS(AccumulatePaired, OCTET_AVX2_LOAD_PAIRED, R, ROWS, __VA_ARGS__)
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
OCTET_AVX2_ACCUMULATE_AS(AccumulatePaired, OCTET_AVX2_LOAD_PAIRED, 1, OCTET_AVX2_ROW(0),
                         OCTET_AVX2_ACC(0))
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

// A GEMV on paired B: four groups (128 bytes) per iteration into two pairs of
// accumulators (one group per iteration is bound by the loop's own
// instructions), each group's B loaded an iteration ahead so that the
// multiplies do not wait in the scheduler for it; the last groups % 4 one at a
// time. No software prefetch: it slows B streamed from memory.
#define OCTET_AVX2_GEMV_GROUP(a_offset, w, x, p, c0, c1, NEXT) \
  "vpbroadcastd " #a_offset "(%[a]), %%ymm" #x                 \
  "\n\t"                                                       \
  "vpmaddwd %%ymm" #w ", %%ymm" #x ", %%ymm" #p                \
  "\n\t"                                                       \
  "vpsraw $8, %%ymm" #w ", %%ymm" #w                           \
  "\n\t"                                                       \
  "vpaddd %%ymm" #p ", %[" #c0 "], %[" #c0                     \
  "]\n\t"                                                      \
  "vpmaddwd %%ymm" #w ", %%ymm" #x ", %%ymm" #x                \
  "\n\t"                                                       \
  "vpaddd %%ymm" #x ", %[" #c1 "], %[" #c1 "]\n\t" NEXT
#define OCTET_AVX2_GEMV_LOAD(b_offset, w) "vmovdqu " #b_offset "(%[b]), %%ymm" #w "\n\t"
// Four groups, B in ymm4-7; N0-N3 load the next four (or nothing).
#define OCTET_AVX2_GEMV_QUAD(N0, N1, N2, N3)        \
  OCTET_AVX2_GEMV_GROUP(0, 4, 8, 9, c00, c01, N0)   \
  OCTET_AVX2_GEMV_GROUP(4, 5, 10, 11, d0, d1, N1)   \
  OCTET_AVX2_GEMV_GROUP(8, 6, 12, 13, c00, c01, N2) \
  OCTET_AVX2_GEMV_GROUP(12, 7, 14, 15, d0, d1, N3)  \
  "add $128, %[b]\n\tadd $16, %[a]\n\t"
void GemvPaired(__m256i (&acc)[1][2], const uint8_t* a, const int8_t* b, int64_t groups) {
  if (int64_t ahead = groups / 4 - 1; ahead >= 0) {  // quads with a next one to load
    __m256i d0 = _mm256_setzero_si256(), d1 = d0;
    asm volatile(
        // clang-format off
        OCTET_AVX2_GEMV_LOAD(0, 4) OCTET_AVX2_GEMV_LOAD(32, 5)
        OCTET_AVX2_GEMV_LOAD(64, 6) OCTET_AVX2_GEMV_LOAD(96, 7)
        "test %[n], %[n]\n\t"
        "jz 2f\n\t"
        ".p2align 4\n"
        "1:\n\t"
        OCTET_AVX2_GEMV_QUAD(OCTET_AVX2_GEMV_LOAD(128, 4), OCTET_AVX2_GEMV_LOAD(160, 5),
                             OCTET_AVX2_GEMV_LOAD(192, 6), OCTET_AVX2_GEMV_LOAD(224, 7))
        "dec %[n]\n\t"
        "jnz 1b\n"
        "2:\n\t"
        OCTET_AVX2_GEMV_QUAD("", "", "", "")
        // clang-format on
        : OCTET_AVX2_ACC(0), [d0] "+x"(d0), [d1] "+x"(d1), [a] "+r"(a), [b] "+r"(b),
          [n] "+r"(ahead)
        :
        : "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13",
          "xmm14", "xmm15", "cc", "memory");
    acc[0][0] = _mm256_add_epi32(acc[0][0], d0);
    acc[0][1] = _mm256_add_epi32(acc[0][1], d1);
  }
  if (groups % 4 != 0) AccumulatePaired<1>(acc, a, b, groups % 4);
}
#undef OCTET_AVX2_GEMV_QUAD
#undef OCTET_AVX2_GEMV_LOAD
#undef OCTET_AVX2_GEMV_GROUP
#undef OCTET_AVX2_ACCUMULATE
#undef OCTET_AVX2_ACCUMULATE_AS
#undef OCTET_AVX2_LOAD_PAIRED
#undef OCTET_AVX2_LOAD_PLAIN
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

// Paired B: the raw sums split into the two columns of each word, and on the
// last block the low columns' 128 per k removed (128 x the row sum of A).
template <int R>
void TilePaired(const TileArgs& t) {
  __m256i acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  if (t.k_groups > 0) {
    if constexpr (R == 1) {
      GemvPaired(acc, t.a, t.b, t.k_groups);
    } else {
      AccumulatePaired<R>(acc, t.a, t.b, t.k_groups);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    acc[r][0] = _mm256_sub_epi32(acc[r][0], _mm256_slli_epi32(acc[r][1], 8));
    if (t.last) {
      const auto neg_sum = static_cast<uint32_t>(t.row_neg_sum[r]);
      acc[r][0] =
          _mm256_add_epi32(acc[r][0], _mm256_set1_epi32(static_cast<int32_t>(neg_sum << 7)));
    }
  }
  FinishTile<simd::Avx2, R, 2>(t, acc);
}

}  // namespace

void TileAvx2(int rows, const TileArgs& t) {
  ForCount<6>(rows, [&]<int R>() { Tile<R>(t); });
}

void TileAvx2PairedB(int rows, const TileArgs& t) {
  ForCount<6>(rows, [&]<int R>() { TilePaired<R>(t); });
}

}  // namespace octet::gemm
