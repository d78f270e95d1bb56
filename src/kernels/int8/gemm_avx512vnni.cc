// AVX-512 VNNI micro-kernel: up to 8 rows x 32 columns of int32 accumulators
// in zmm registers. Per group of 4 k: two 64-byte loads of packed B (32
// columns x 4 k) and one 4-byte broadcast of A per row, then vpdpbusd
// (u8 x s8, four products summed into int32 without saturation: exact).
// TileAvx512Vnni takes A as the unsigned operand (gemm_pack.h's layout);
// TileAvx512VnniUnsignedB the same panels with the roles swapped (B unsigned,
// A signed), for the convolution's zero-point-free path (conv.cc).
#include <immintrin.h>

#include <cstring>

#include "kernels/int8/gemm_pack.h"

namespace octet::gemm {

namespace {

constexpr int kCols = 32;  // TileShapeFor(Isa::kAvx512Vnni).nr
constexpr int kVecs = kCols / 16;

inline __m512i BroadcastA(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm512_set1_epi32(v);
}

// a x b summed by groups of 4 into acc, the unsigned operand first.
template <bool kUnsignedB>
inline __m512i Dot(__m512i acc, __m512i a, __m512i b) {
  return kUnsignedB ? _mm512_dpbusd_epi32(acc, b, a) : _mm512_dpbusd_epi32(acc, a, b);
}

template <int R, bool kUnsignedB>
void Tile(const TileArgs& t) {
  // Few rows leave too few independent vpdpbusd chains to cover its latency,
  // so consecutive groups go to separate accumulator sets, summed at the end.
  constexpr int U = R == 1 ? 4 : (R == 2 ? 2 : 1);
  // Every loop over accumulators is fully unrolled: GCC 12 otherwise keeps the
  // array in memory and copies it between registers on every group.
  __m512i acc[U][R][kVecs];
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int v = 0; v < kVecs; ++v) acc[u][r][v] = _mm512_setzero_si512();

  const uint8_t* a = t.a;
  const int8_t* b = t.b;
  int64_t g = 0;
  for (; g + U <= t.k_groups; g += U) {
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u) {
      __m512i bv[kVecs];
#pragma GCC unroll 8
      for (int v = 0; v < kVecs; ++v) bv[v] = _mm512_loadu_si512(b + (u * kCols + v * 16) * kGroup);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512i av = BroadcastA(a + (u * R + r) * kGroup);
#pragma GCC unroll 8
        for (int v = 0; v < kVecs; ++v) acc[u][r][v] = Dot<kUnsignedB>(acc[u][r][v], av, bv[v]);
      }
    }
    a += U * R * kGroup;
    b += U * kCols * kGroup;
  }
  // Leftover groups. With U == 1 the loop above took them all, and compiling this
  // loop anyway makes GCC shuffle the accumulators between registers.
  for (; U > 1 && g < t.k_groups; ++g) {
    __m512i bv[kVecs];
#pragma GCC unroll 8
    for (int v = 0; v < kVecs; ++v) bv[v] = _mm512_loadu_si512(b + v * 16 * kGroup);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512i av = BroadcastA(a + r * kGroup);
#pragma GCC unroll 8
      for (int v = 0; v < kVecs; ++v) acc[0][r][v] = Dot<kUnsignedB>(acc[0][r][v], av, bv[v]);
    }
    a += R * kGroup;
    b += kCols * kGroup;
  }

  // Locals: stores to C could otherwise alias the arguments and force reloads.
  const bool accumulate = t.accumulate;
  const int32_t *row_neg_za = t.row_neg_za, *row_neg_sum = t.row_neg_sum;
  const int32_t *col_term = t.col_term, *col_zb = t.col_zb;
  const int32_t *col_offset = t.col_offset, *row_offset = t.row_offset;
  int32_t* const c0 = t.c;
  const int64_t ldc = t.ldc;
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    int32_t* c = c0 + r * ldc;
#pragma GCC unroll 8
    for (int v = 0; v < kVecs; ++v) {
      __m512i sum = acc[0][r][v];
#pragma GCC unroll 8
      for (int u = 1; u < U; ++u) sum = _mm512_add_epi32(sum, acc[u][r][v]);
      if (accumulate) sum = _mm512_add_epi32(sum, _mm512_loadu_si512(c + v * 16));
      if (row_neg_za) {
        const __m512i term = _mm512_loadu_si512(col_term + v * 16);
        const __m512i zb = _mm512_loadu_si512(col_zb + v * 16);
        sum = _mm512_add_epi32(sum, _mm512_mullo_epi32(_mm512_set1_epi32(row_neg_za[r]), term));
        sum = _mm512_add_epi32(sum, _mm512_mullo_epi32(_mm512_set1_epi32(row_neg_sum[r]), zb));
      }
      if (col_offset) {
        sum = _mm512_add_epi32(sum, _mm512_add_epi32(_mm512_loadu_si512(col_offset + v * 16),
                                                     _mm512_set1_epi32(row_offset[r])));
      }
      _mm512_storeu_si512(c + v * 16, sum);
    }
  }
}

template <bool kUnsignedB>
void TileRows(int rows, const TileArgs& t) {
  switch (rows) {
    case 1:
      return Tile<1, kUnsignedB>(t);
    case 2:
      return Tile<2, kUnsignedB>(t);
    case 3:
      return Tile<3, kUnsignedB>(t);
    case 4:
      return Tile<4, kUnsignedB>(t);
    case 5:
      return Tile<5, kUnsignedB>(t);
    case 6:
      return Tile<6, kUnsignedB>(t);
    case 7:
      return Tile<7, kUnsignedB>(t);
    default:
      return Tile<8, kUnsignedB>(t);
  }
}

}  // namespace

void TileAvx512Vnni(int rows, const TileArgs& t) { TileRows<false>(rows, t); }

void TileAvx512VnniUnsignedB(int rows, const TileArgs& t) { TileRows<true>(rows, t); }

}  // namespace octet::gemm
