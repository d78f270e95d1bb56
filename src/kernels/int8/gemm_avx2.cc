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

#include <cstring>

#include "kernels/int8/gemm_finish_impl.h"
#include "kernels/simd_avx2.h"

namespace octet::gemm {

namespace {

constexpr int kCols = 16;
constexpr int kGroupBytes = 2;  // of B per column; A holds 2 int16 = 4 bytes per row

inline __m256i BroadcastPair(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_set1_epi32(v);
}

inline __m256i WidenB(const int8_t* p) {
  return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

template <int R>
void Tile(const TileArgs& t) {
  // Every loop over accumulators is fully unrolled: GCC 12 otherwise keeps the
  // array in memory and copies it between registers on every group.
  __m256i acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  const uint8_t* a = t.a;
  const int8_t* b = t.b;
  for (int64_t g = 0; g < t.k_groups; ++g) {
    const __m256i b_lo = WidenB(b), b_hi = WidenB(b + 16);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256i av = BroadcastPair(a + r * 4);
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(av, b_lo));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(av, b_hi));
    }
    a += R * 4;
    b += kCols * kGroupBytes;
  }
  FinishTile<simd::Avx2, R, 2>(t, acc);
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
    case 4:
      return Tile<4>(t);
    case 5:
      return Tile<5>(t);
    default:
      return Tile<6>(t);
  }
}

}  // namespace octet::gemm
