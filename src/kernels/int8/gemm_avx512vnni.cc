// The AVX-512 VNNI micro-kernels: up to 8 rows x 32 columns of int32
// accumulators in zmm registers. Per group of 4 k: two 64-byte loads of packed
// B (32 columns x 4 k) and one 4-byte broadcast of A per row, then vpdpbusd
// (u8 x s8, four products summed into int32 without saturation: exact).
//   gemm_u8s8_8x32c4_avx512vnni       packed A unsigned, B signed
//   gemm_s8u8_8x32c4_avx512vnni       packed A signed, B unsigned (the
//                                     convolution's zero-point-free path)
//   gemm_u8s8_8x32c4_rowa_avx512vnni  uint8 A read in place
//   gemm_s8u8_8x32c4_rowa_avx512vnni  int8 A read in place, B flipped to
//                                     unsigned as it is loaded

#include <immintrin.h>

#include "kernels/int8/gemm_finish_impl.h"
#include "kernels/int8/tile_avx512vnni.h"
#include "kernels/simd_avx512.h"

namespace octet::gemm {

namespace {

constexpr int kVecs = kTileCols / 16;
constexpr int kGroup = 4;

// kRowMajorA: A is read in place (row r at t.a + r * t.a_ld, 4 bytes per group)
// instead of from a packed panel. With kUnsignedB as well, the packed (signed
// domain) B is flipped to the unsigned domain as it is loaded (B + 128).
template <int R, bool kUnsignedB, bool kRowMajorA = false>
void Tile(const TileArgs& t) {
  constexpr int U = AccumulatorSets(R);
  __m512i acc[U][R][kVecs];
  AccumulateTile<R, kVecs, U, kUnsignedB, kRowMajorA, kRowMajorA && kUnsignedB>(
      acc, t.a, kRowMajorA ? t.a_ld : 0, t.b, t.k_groups);
  __m512i sum[R][kVecs];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < kVecs; ++v) {
      sum[r][v] = acc[0][r][v];
#pragma GCC unroll 8
      for (int u = 1; u < U; ++u) sum[r][v] = _mm512_add_epi32(sum[r][v], acc[u][r][v]);
    }
  FinishTile<simd::Avx512, R, kVecs>(t, sum);
}

template <bool kUnsignedB, bool kRowMajorA = false>
void TileRows(int rows, const TileArgs& t) {
  ForCount<8>(rows, [&]<int R>() { Tile<R, kUnsignedB, kRowMajorA>(t); });
}

}  // namespace

void TileAvx512Vnni(int rows, const TileArgs& t) { TileRows<false>(rows, t); }

void TileAvx512VnniUnsignedB(int rows, const TileArgs& t) { TileRows<true>(rows, t); }

void RowSumsAvx512Vnni(const void* a, bool a_signed, int64_t ld, int64_t row_begin, int64_t row_end,
                       int64_t K, int32_t* row_sums) {
  // vpdpbusd against ones sums 4 bytes per lane exactly; masked loads never
  // touch bytes past K.
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t m = row_begin; m < row_end; ++m) {
    const auto* row = static_cast<const uint8_t*>(a) + m * ld;
    __m512i acc = _mm512_setzero_si512();
    for (int64_t k = 0; k < K; k += 64) {
      const __mmask64 mask = K - k >= 64 ? ~__mmask64{0} : (__mmask64{1} << (K - k)) - 1;
      const __m512i x = _mm512_maskz_loadu_epi8(mask, row + k);
      acc = a_signed ? _mm512_dpbusd_epi32(acc, ones, x) : _mm512_dpbusd_epi32(acc, x, ones);
    }
    row_sums[m] = _mm512_reduce_add_epi32(acc);
  }
}

void ColumnSumsAvx512Vnni(const int8_t* packed, int64_t panels, int64_t k_groups,
                          int32_t* col_sums) {
  // vpdpbusd of ones against each group of the panel sums its 4 bytes per column.
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t p = 0; p < panels; ++p) {
    const int8_t* panel = packed + p * k_groups * kTileCols * kGroup;
    __m512i acc[kVecs];
#pragma GCC unroll 8
    for (int v = 0; v < kVecs; ++v) acc[v] = _mm512_setzero_si512();
    for (int64_t g = 0; g < k_groups; ++g) {
#pragma GCC unroll 8
      for (int v = 0; v < kVecs; ++v) {
        acc[v] = _mm512_dpbusd_epi32(acc[v], ones,
                                     _mm512_loadu_si512(panel + (g * kTileCols + v * 16) * kGroup));
      }
    }
#pragma GCC unroll 8
    for (int v = 0; v < kVecs; ++v) _mm512_storeu_si512(col_sums + p * kTileCols + v * 16, acc[v]);
  }
}

void TileAvx512VnniRowMajorA(int rows, const TileArgs& t) { TileRows<false, true>(rows, t); }

void TileAvx512VnniRowMajorSignedA(int rows, const TileArgs& t) { TileRows<true, true>(rows, t); }

}  // namespace octet::gemm
