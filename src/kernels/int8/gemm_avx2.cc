// AVX2 micro-kernel without VNNI: operands widened to int16 and multiplied in
// pairs with vpmaddwd, which cannot saturate for 8-bit inputs (unlike
// vpmaddubsw, never used here). Up to 4 rows x 8 columns.
//
// A group of packed B (8 columns x 4 k) widens to two ymm of int16,
// [c0k0..c0k3 c1k0..c1k3 c2.. c3..] and [c4.. c7..]; the row's 4 A bytes are
// widened and repeated to [a0 a1 a2 a3] x 4. vpmaddwd then leaves, per
// column, two int32 partials (k0+k1, k2+k3) in adjacent lanes, summed once
// at the end.
#include <immintrin.h>

#include <cstring>

#include "kernels/int8/gemm_pack.h"

namespace octet::gemm {

namespace {

constexpr int kCols = 8;  // TileShapeFor(Isa::kAvx2).nr

inline __m256i WidenA(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_cvtepu8_epi16(_mm_set1_epi32(v));
}

inline __m256i WidenB(const int8_t* p) {
  return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

inline __m256i Load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

template <int R>
void Tile(const TileArgs& t) {
  constexpr int U = R == 1 ? 4 : (R == 2 ? 2 : 1);  // accumulator sets for latency
  // Every loop over accumulators is fully unrolled: GCC 12 otherwise keeps the
  // array in memory and copies it between registers on every group.
  __m256i lo[U][R], hi[U][R];
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) lo[u][r] = hi[u][r] = _mm256_setzero_si256();

  const uint8_t* a = t.a;
  const int8_t* b = t.b;
  int64_t g = 0;
  for (; g + U <= t.k_groups; g += U) {
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u) {
      const __m256i b_lo = WidenB(b + u * kCols * kGroup);
      const __m256i b_hi = WidenB(b + u * kCols * kGroup + 16);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256i av = WidenA(a + (u * R + r) * kGroup);
        lo[u][r] = _mm256_add_epi32(lo[u][r], _mm256_madd_epi16(av, b_lo));
        hi[u][r] = _mm256_add_epi32(hi[u][r], _mm256_madd_epi16(av, b_hi));
      }
    }
    a += U * R * kGroup;
    b += U * kCols * kGroup;
  }
  // Leftover groups. With U == 1 the loop above took them all, and compiling this
  // loop anyway makes GCC shuffle the accumulators between registers.
  for (; U > 1 && g < t.k_groups; ++g) {
    const __m256i b_lo = WidenB(b), b_hi = WidenB(b + 16);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256i av = WidenA(a + r * kGroup);
      lo[0][r] = _mm256_add_epi32(lo[0][r], _mm256_madd_epi16(av, b_lo));
      hi[0][r] = _mm256_add_epi32(hi[0][r], _mm256_madd_epi16(av, b_hi));
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
    __m256i l = lo[0][r], h = hi[0][r];
#pragma GCC unroll 8
    for (int u = 1; u < U; ++u) {
      l = _mm256_add_epi32(l, lo[u][r]);
      h = _mm256_add_epi32(h, hi[u][r]);
    }
    // hadd -> [c0 c1 c4 c5 | c2 c3 c6 c7]; reorder the 64-bit pairs to c0..c7.
    __m256i sum = _mm256_permute4x64_epi64(_mm256_hadd_epi32(l, h), _MM_SHUFFLE(3, 1, 2, 0));
    int32_t* c = c0 + r * ldc;
    if (accumulate) sum = _mm256_add_epi32(sum, Load(c));
    if (row_neg_za) {
      sum = _mm256_add_epi32(sum,
                             _mm256_mullo_epi32(_mm256_set1_epi32(row_neg_za[r]), Load(col_term)));
      sum = _mm256_add_epi32(sum,
                             _mm256_mullo_epi32(_mm256_set1_epi32(row_neg_sum[r]), Load(col_zb)));
    }
    if (col_offset) {
      sum = _mm256_add_epi32(sum,
                             _mm256_add_epi32(Load(col_offset), _mm256_set1_epi32(row_offset[r])));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c), sum);
  }
}

}  // namespace

void TileAvx2(int rows, const TileArgs& t) {
  switch (rows) {
    case 1:
      return Tile<1>(t);
    case 2:
      return Tile<2>(t);
    case 3:
      return Tile<3>(t);
    default:
      return Tile<4>(t);
  }
}

}  // namespace octet::gemm
