// The end of every GEMM micro-tile (gemm_kernels.h's contract), written once
// over a vector type V (kernels/simd_scalar.h, simd_avx2.h, simd_avx512.h): the
// sums of earlier k blocks added, the sums kept for the next block, or the
// zero-point correction and the epilogue (epilogue_impl.h) into the output.
// A tile hands over its sums as R rows of kVecs vectors of V::kWidth columns,
// in column order. Include from a tile's ISA file after V's header.
#pragma once

#include <cstdint>

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

  // The zero-point correction: column vectors once, row values per row.
  if (t.col_offset != nullptr) {
    I col[kVecs];
#pragma GCC unroll 8
    for (int v = 0; v < kVecs; ++v) col[v] = V::LoadI(t.col_offset + v * W);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const I row = V::SetI(t.row_offset[r]);
#pragma GCC unroll 8
      for (int v = 0; v < kVecs; ++v) sum[r][v] = V::AddI(sum[r][v], V::AddI(col[v], row));
    }
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

  // The epilogue. Operands that are the same for every row are loaded once.
  const Epilogue& e = *t.epilogue;
  int count[kVecs];
#pragma GCC unroll 8
  for (int v = 0; v < kVecs; ++v) {
    const int left = t.cols - v * W;
    count[v] = left <= 0 ? 0 : (left < W ? left : W);
  }
  const bool has_bias = e.bias.present(), has_float_bias = e.float_bias.present();
  const bool per_row = e.bias.per_row || e.multiplier.per_row || e.float_bias.per_row;
  const int64_t ld_out = t.ld_out;
  auto* const out = static_cast<uint8_t*>(t.out);
  // One body per output type: no vector tests the type at run time.
  auto finish = [&]<EpilogueOutput kOut>() __attribute__((always_inline)) {
    constexpr bool kEightBit = kOut == EpilogueOutput::kUInt8 || kOut == EpilogueOutput::kInt8;
    constexpr bool kNeedsMultiplier = kOut != EpilogueOutput::kInt32;
    constexpr int64_t kSize = kEightBit ? 1 : 4;
    I bias[kVecs] = {};
    F multiplier[kVecs] = {}, float_bias[kVecs] = {};
    auto load_row = [&](int64_t row) {
#pragma GCC unroll 8
      for (int v = 0; v < kVecs; ++v) {
        if (count[v] == 0) continue;
        const int64_t col = t.col0 + v * W;
        if (has_bias)
          bias[v] = epilogue::LoadOperand<V>(e.bias.Row(row), e.bias.per_column, col, count[v]);
        if (kNeedsMultiplier)
          multiplier[v] = epilogue::LoadOperand<V>(e.multiplier.Row(row), e.multiplier.per_column,
                                                   col, count[v]);
        if (kOut == EpilogueOutput::kFloat && has_float_bias)
          float_bias[v] = epilogue::LoadOperand<V>(e.float_bias.Row(row), e.float_bias.per_column,
                                                   col, count[v]);
      }
    };
    if (!per_row) load_row(t.row0);
    const epilogue::Requant<V> rq(e);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      if (per_row) load_row(t.row0 + r);
      uint8_t* const out_row = out + r * ld_out * kSize;
#pragma GCC unroll 8
      for (int v = 0; v < kVecs; ++v) {
        if (count[v] == 0) continue;
        I s = sum[r][v];
        if (has_bias) s = V::AddI(s, bias[v]);
        uint8_t* const dst = out_row + v * W * kSize;
        if constexpr (kOut == EpilogueOutput::kFloat) {
          epilogue::StoreFloat<V>(
              reinterpret_cast<float*>(dst),
              epilogue::Scale<V>(s, multiplier[v], has_float_bias ? &float_bias[v] : nullptr),
              count[v]);
        } else {
          if constexpr (kEightBit) s = epilogue::Requantize<V>(s, multiplier[v], rq);
          epilogue::StoreInt<V>(kOut, dst, s, count[v]);
        }
      }
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
