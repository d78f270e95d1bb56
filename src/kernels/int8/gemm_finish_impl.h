// The end of every GEMM micro-tile (gemm_kernels.h's contract), written once
// over a vector type V (kernels/simd_scalar.h, simd_avx2.h, simd_avx512.h): the
// sums of earlier k blocks added, the sums kept for the next block, or the
// zero-point correction and the epilogue (epilogue_impl.h) into the output.
// A tile hands over its sums as R rows of kVecs vectors of V::kWidth columns,
// in column order. Include from a tile's ISA file after V's header.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/int8/epilogue_impl.h"
#include "kernels/int8/gemm_kernels.h"

namespace octet::gemm {
namespace {

template <typename V, int R, int kVecs>
[[gnu::always_inline]] inline void FinishTile(const TileArgs& t, typename V::I (&sum)[R][kVecs]) {
  using I = typename V::I;
  using F = typename V::F;
  constexpr int W = V::kWidth;
  // Locals: stores through out may alias the arguments and would force reloads.
  int32_t* const partial = t.partial;
  const int64_t partial_ld = t.partial_ld;
  if (t.accumulate) {
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int v = 0; v < kVecs; ++v)
        sum[r][v] = V::AddI(sum[r][v], V::LoadI(partial + r * partial_ld + v * W));
  }
  if (!t.last) {
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int v = 0; v < kVecs; ++v) V::StoreI(partial + r * partial_ld + v * W, sum[r][v]);
    return;
  }

  // The integer terms, added in place: the zero-point correction and the bias,
  // gathered into one value per row and one vector per column block where their
  // layout allows (the additions wrap, so their order does not change the bits).
  const Epilogue& e = *t.epilogue;
  int count[kVecs];
#pragma GCC unroll 8
  for (int v = 0; v < kVecs; ++v) {
    const int left = t.cols - v * W;
    count[v] = left <= 0 ? 0 : (left < W ? left : W);
  }
  int32_t row_term[R] = {};
  I col_term[kVecs] = {};
  bool has_row_term = false, has_col_term = false;
  if (t.col_offset != nullptr) {
#pragma GCC unroll 8
    for (int v = 0; v < kVecs; ++v) col_term[v] = V::LoadI(t.col_offset + v * W);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) row_term[r] = t.row_offset[r];
    has_row_term = has_col_term = true;
  } else if (t.row_neg_za != nullptr) {
    I term[kVecs], zb[kVecs];
#pragma GCC unroll 8
    for (int v = 0; v < kVecs; ++v) {
      term[v] = V::LoadI(t.col_term + v * W);
      zb[v] = V::LoadI(t.col_zb + v * W);
    }
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const I neg_za = V::SetI(t.row_neg_za[r]), neg_sum = V::SetI(t.row_neg_sum[r]);
#pragma GCC unroll 8
      for (int v = 0; v < kVecs; ++v) {
        sum[r][v] = V::AddI(sum[r][v], V::MulI(neg_za, term[v]));
        sum[r][v] = V::AddI(sum[r][v], V::MulI(neg_sum, zb[v]));
      }
    }
  }
  if (e.bias.present()) {
    if (e.bias.per_row && e.bias.per_column) {
#pragma GCC unroll 12
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int v = 0; v < kVecs; ++v)
          if (count[v] > 0)
            sum[r][v] = V::AddI(sum[r][v], epilogue::LoadOperand<V>(e.bias.Row(t.row0 + r), true,
                                                                    t.col0 + v * W, count[v]));
    } else if (e.bias.per_column) {
#pragma GCC unroll 8
      for (int v = 0; v < kVecs; ++v) {
        if (count[v] == 0) continue;
        const I bias = epilogue::LoadOperand<V>(e.bias.data, true, t.col0 + v * W, count[v]);
        col_term[v] = has_col_term ? V::AddI(col_term[v], bias) : bias;
      }
      has_col_term = true;
    } else {
#pragma GCC unroll 12
      for (int r = 0; r < R; ++r)
        row_term[r] = static_cast<int32_t>(static_cast<uint32_t>(row_term[r]) +
                                           static_cast<uint32_t>(*e.bias.Row(t.row0 + r)));
      has_row_term = true;
    }
  }
  if (has_row_term || has_col_term) {
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const I row = V::SetI(row_term[r]);
#pragma GCC unroll 8
      for (int v = 0; v < kVecs; ++v) {
        const I term = !has_col_term ? row : has_row_term ? V::AddI(col_term[v], row) : col_term[v];
        sum[r][v] = V::AddI(sum[r][v], term);
      }
    }
  }

  // The epilogue, whole vectors into out, or into a tile-sized buffer when the
  // tile has fewer columns (then copied). Operands that are the same for every
  // row are loaded once.
  constexpr int kCols = kVecs * W;
  static_assert(kVecs % 2 == 0, "8-bit outputs narrow pairs of vectors");
  const bool whole = t.cols == kCols;
  alignas(64) uint8_t buffer[R * kCols * 4];
  // The float operands' rows and layout, read before the first store: stores
  // through out may alias e, and each row would read its fields again.
  const bool has_float_bias = e.float_bias.present();
  const bool per_row = e.multiplier.per_row || e.float_bias.per_row;
  const bool multiplier_per_column = e.multiplier.per_column,
             float_bias_per_column = e.float_bias.per_column;
  const float *multiplier_row[R] = {}, *float_bias_row[R] = {};
  if (e.output != EpilogueOutput::kInt32) {
    for (int r = 0; r < (per_row ? R : 1); ++r) {
      multiplier_row[r] = e.multiplier.Row(t.row0 + r);
      if (has_float_bias) float_bias_row[r] = e.float_bias.Row(t.row0 + r);
    }
  }
  const int64_t ld_out = whole ? t.ld_out : kCols;
  auto* const out = whole ? static_cast<uint8_t*>(t.out) : buffer;
  // One body per output type: no vector tests the type at run time.
  auto finish = [&]<EpilogueOutput kOut>() __attribute__((always_inline)) {
    constexpr bool kEightBit = kOut == EpilogueOutput::kUInt8 || kOut == EpilogueOutput::kInt8;
    constexpr int64_t kSize = kEightBit ? 1 : 4;
    using Narrow = std::conditional_t<kOut == EpilogueOutput::kInt8, int8_t, uint8_t>;
    F multiplier[kVecs] = {}, float_bias[kVecs] = {};
    auto load_row = [&](int r) {
#pragma GCC unroll 8
      for (int v = 0; v < kVecs; ++v) {
        if (count[v] == 0) continue;
        const int64_t col = t.col0 + v * W;
        multiplier[v] =
            epilogue::LoadOperand<V>(multiplier_row[r], multiplier_per_column, col, count[v]);
        if (kOut == EpilogueOutput::kFloat && has_float_bias)
          float_bias[v] =
              epilogue::LoadOperand<V>(float_bias_row[r], float_bias_per_column, col, count[v]);
      }
    };
    if constexpr (kOut != EpilogueOutput::kInt32) {
      if (!per_row) load_row(0);
    }
    [[maybe_unused]] const epilogue::Requant<V> rq =
        kEightBit ? epilogue::Requant<V>(e) : epilogue::Requant<V>(0.f, 0.f, 0);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      if constexpr (kOut != EpilogueOutput::kInt32) {
        if (per_row) load_row(r);
      }
      uint8_t* const out_row = out + r * ld_out * kSize;
#pragma GCC unroll 8
      for (int v = 0; v < kVecs; ++v) {
        if constexpr (kOut == EpilogueOutput::kFloat) {
          V::Store(reinterpret_cast<float*>(out_row) + v * W,
                   epilogue::Scale<V>(sum[r][v], multiplier[v],
                                      has_float_bias ? &float_bias[v] : nullptr));
        } else if constexpr (kOut == EpilogueOutput::kInt32) {
          V::StoreI(reinterpret_cast<int32_t*>(out_row) + v * W, sum[r][v]);
        } else if (v % 2 == 0) {
          V::template StoreNarrowPair<Narrow>(
              reinterpret_cast<Narrow*>(out_row) + v * W,
              epilogue::Requantize<V>(sum[r][v], multiplier[v], rq),
              epilogue::Requantize<V>(sum[r][v + 1], multiplier[v + 1], rq));
        }
      }
    }
    if (!whole) {
      auto* const dst = static_cast<uint8_t*>(t.out);
      for (int r = 0; r < R; ++r)
        std::memcpy(dst + r * t.ld_out * kSize, buffer + r * kCols * kSize,
                    static_cast<size_t>(t.cols) * kSize);
    }
  };
  switch (e.output) {
    case EpilogueOutput::kUInt8:
      return finish.template operator()<EpilogueOutput::kUInt8>();
    case EpilogueOutput::kInt8:
      return finish.template operator()<EpilogueOutput::kInt8>();
    case EpilogueOutput::kFloat:
      return finish.template operator()<EpilogueOutput::kFloat>();
    case EpilogueOutput::kInt32:
      return finish.template operator()<EpilogueOutput::kInt32>();
  }
}

}  // namespace
}  // namespace octet::gemm
