// AVX-512 VNNI micro-kernel: up to 8 rows x 32 columns of int32 accumulators
// in zmm registers. Per group of 4 k: two 64-byte loads of packed B (32
// columns x 4 k) and one 4-byte broadcast of A per row, then vpdpbusd
// (u8 x s8, four products summed into int32 without saturation: exact).
// TileAvx512Vnni takes A as the unsigned operand (gemm_pack.h's layout);
// TileAvx512VnniUnsignedB the same panels with the roles swapped (B unsigned,
// A signed), for the convolution's zero-point-free path (conv.cc).

#include <immintrin.h>

#include "kernels/int8/gemm_pack.h"
#include "kernels/int8/requantize_avx512_inline.h"
#include "kernels/int8/tile_avx512vnni.h"

namespace octet::gemm {

namespace {

constexpr int kVecs = kTileCols / 16;

// kRowMajorA: A is read in place (row r at t.a + r * t.a_ld, 4 bytes per group)
// instead of from a packed panel. With kUnsignedB as well, the packed (signed
// domain) B is flipped to the unsigned domain as it is loaded (B + 128).
template <int R, bool kUnsignedB, bool kRowMajorA = false>
void Tile(const TileArgs& t) {
  constexpr int U = AccumulatorSets(R);
  __m512i acc[U][R][kVecs];
  AccumulateTile<R, kVecs, U, kUnsignedB, kRowMajorA, kRowMajorA && kUnsignedB>(
      acc, t.a, kRowMajorA ? t.a_ld : 0, t.b, t.k_groups);

  // Locals: stores to C could otherwise alias the arguments and force reloads.
  const bool accumulate = t.accumulate;
  const int32_t *row_neg_za = t.row_neg_za, *row_neg_sum = t.row_neg_sum;
  const int32_t *col_term = t.col_term, *col_zb = t.col_zb;
  const int32_t *col_offset = t.col_offset, *row_offset = t.row_offset;
  int32_t* const c0 = t.c;
  const int64_t ldc = t.ldc;
  if (t.finish != nullptr) {
    const TileFinish& f = *t.finish;
    __mmask16 masks[kVecs];
    __m512 multipliers[kVecs], biases[kVecs];
    __m512i acc_biases[kVecs];
    // The column vectors, loaded once: the stores below may alias anything, so
    // the compiler would reload them for every row.
    __m512i col_a[kVecs], col_b[kVecs];
#pragma GCC unroll 8
    for (int v = 0; v < kVecs; ++v) {
      const int valid = f.cols - v * 16;
      masks[v] = valid >= 16 ? __mmask16{0xFFFF}
                             : static_cast<__mmask16>(valid <= 0 ? 0 : (1u << valid) - 1);
      multipliers[v] = f.multiplier_per_column
                           ? _mm512_maskz_loadu_ps(masks[v], f.multiplier + v * 16)
                           : _mm512_set1_ps(f.multiplier[0]);
      acc_biases[v] = f.acc_bias == nullptr ? _mm512_setzero_si512()
                      : f.acc_bias_per_column
                          ? _mm512_maskz_loadu_epi32(masks[v], f.acc_bias + v * 16)
                          : _mm512_set1_epi32(f.acc_bias[0]);
      biases[v] = f.bias == nullptr   ? _mm512_setzero_ps()
                  : f.bias_per_column ? _mm512_maskz_loadu_ps(masks[v], f.bias + v * 16)
                                      : _mm512_set1_ps(f.bias[0]);
      col_a[v] = _mm512_loadu_si512(col_offset ? col_offset + v * 16 : col_term + v * 16);
      col_b[v] = _mm512_loadu_si512(col_zb + v * 16);
    }
    // Row r's finished sums of vector v: the accumulators, the zero-point
    // correction and the int32 bias.
    auto finished = [&](int r, int v) {
      __m512i sum = acc[0][r][v];
#pragma GCC unroll 8
      for (int u = 1; u < U; ++u) sum = _mm512_add_epi32(sum, acc[u][r][v]);
      const __m512i row_a = _mm512_set1_epi32(col_offset ? row_offset[r] : row_neg_za[r]);
      if (col_offset) {
        sum = _mm512_add_epi32(sum, _mm512_add_epi32(col_a[v], row_a));
      } else {
        sum = _mm512_add_epi32(sum, _mm512_mullo_epi32(row_a, col_a[v]));
        sum =
            _mm512_add_epi32(sum, _mm512_mullo_epi32(_mm512_set1_epi32(row_neg_sum[r]), col_b[v]));
      }
      return f.acc_bias ? _mm512_add_epi32(sum, acc_biases[v]) : sum;
    };
    if (f.to_float) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
        for (int v = 0; v < kVecs; ++v) {
          const __m512 y =
              requant::ScaleVector(finished(r, v), multipliers[v], f.bias ? &biases[v] : nullptr);
          _mm512_mask_storeu_ps(static_cast<float*>(f.out) + r * f.ld_out + v * 16, masks[v], y);
        }
      }
      return;
    }
    const requant::RequantVectors rq{_mm512_set1_ps(f.lo), _mm512_set1_ps(f.hi),
                                     _mm512_set1_epi32(f.zero_point)};
    auto* out = static_cast<uint8_t*>(f.out);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
      for (int v = 0; v < kVecs; ++v) {
        const __m512i q = requant::RequantizeVector(finished(r, v), multipliers[v], rq);
        _mm512_mask_cvtepi32_storeu_epi8(out + r * f.ld_out + v * 16, masks[v], q);
      }
    }
    return;
  }
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

template <bool kUnsignedB, bool kRowMajorA = false>
void TileRows(int rows, const TileArgs& t) {
  switch (rows) {
    case 1:
      return Tile<1, kUnsignedB, kRowMajorA>(t);
    case 2:
      return Tile<2, kUnsignedB, kRowMajorA>(t);
    case 3:
      return Tile<3, kUnsignedB, kRowMajorA>(t);
    case 4:
      return Tile<4, kUnsignedB, kRowMajorA>(t);
    case 5:
      return Tile<5, kUnsignedB, kRowMajorA>(t);
    case 6:
      return Tile<6, kUnsignedB, kRowMajorA>(t);
    case 7:
      return Tile<7, kUnsignedB, kRowMajorA>(t);
    default:
      return Tile<8, kUnsignedB, kRowMajorA>(t);
  }
}

}  // namespace

void TileAvx512Vnni(int rows, const TileArgs& t) { TileRows<false>(rows, t); }

void TileAvx512VnniUnsignedB(int rows, const TileArgs& t) { TileRows<true>(rows, t); }

void RowSumsAvx512Vnni(const Int8Operand& A, int64_t row_begin, int64_t row_end, int64_t K,
                       int32_t* row_sums) {
  // vpdpbusd against ones sums 4 bytes per lane exactly; masked loads never
  // touch bytes past K.
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t m = row_begin; m < row_end; ++m) {
    const auto* row = static_cast<const uint8_t*>(A.data) + m * A.ld;
    __m512i acc = _mm512_setzero_si512();
    for (int64_t k = 0; k < K; k += 64) {
      const __mmask64 mask = K - k >= 64 ? ~__mmask64{0} : (__mmask64{1} << (K - k)) - 1;
      const __m512i x = _mm512_maskz_loadu_epi8(mask, row + k);
      acc = A.is_signed ? _mm512_dpbusd_epi32(acc, ones, x) : _mm512_dpbusd_epi32(acc, x, ones);
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
