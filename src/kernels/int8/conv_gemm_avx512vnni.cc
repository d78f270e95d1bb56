// The GEMM path's requantizing micro-tile (conv_pack.h, RequantTile): the
// unsigned-B product of gemm::TileAvx512VnniUnsignedB's panels (signed weight
// rows broadcast, 32 uint8 x columns as two zmm per group of 4 k) with the
// requantization done in registers and each output channel's 32 pixels
// narrowed and stored straight into its NCHW row: no int32 block in memory.

#include <immintrin.h>

#include <algorithm>

#include "kernels/int8/conv_pack.h"
#include "kernels/int8/epilogue_impl.h"
#include "kernels/int8/gemm_kernels.h"
#include "kernels/int8/interleave_avx512_inline.h"
#include "kernels/int8/tile_avx512vnni.h"
#include "kernels/simd_avx512.h"

namespace octet::conv {

namespace {

using Requant = epilogue::Requant<simd::Avx512>;

// R rows x kVecs vectors of 16 columns: kVecs = 1 for a panel's last 16 or
// fewer columns (a 13x13 image's 169 pixels: 176 columns computed, not 192).
template <int R, int kVecs>
void Tile(const RequantTile& t) {
  // Signed weight rows (A) against unsigned x columns (B).
  constexpr int U = gemm::AccumulatorSets(R);
  __m512i acc[U][R][kVecs];
  gemm::AccumulateTile<R, kVecs, U, true, false, false>(acc, t.a, 0, t.b, t.k_groups);

  const Requant requant(t.requant.lo, t.requant.hi, t.requant.zero_point);
  const bool is_signed = t.requant.signed_output;
  const int64_t count = t.count;
  __mmask16 masks[kVecs];
#pragma GCC unroll 8
  for (int v = 0; v < kVecs; ++v) {
    const int64_t valid = std::clamp<int64_t>(count - 16 * v, 0, 16);
    masks[v] = static_cast<__mmask16>((1u << valid) - 1);
  }
  uint8_t* const y0 = t.y;
  const int64_t ld = t.ld;
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m512i bias = _mm512_set1_epi32(t.requant.bias[r]);
    const __m512 multiplier = _mm512_set1_ps(t.requant.multipliers[r]);
#pragma GCC unroll 8
    for (int v = 0; v < kVecs; ++v) {
      // Each accumulator passes through an empty asm: without it GCC 12's
      // tree PRE ties the epilogue's uses to the accumulation loop, and the
      // loop then copies every accumulator between registers (and two to the
      // stack) on each group of k.
      __m512i sum = acc[0][r][v];
      asm("" : "+v"(sum));
#pragma GCC unroll 8
      for (int u = 1; u < U; ++u) {
        __m512i part = acc[u][r][v];
        asm("" : "+v"(part));
        sum = _mm512_add_epi32(sum, part);
      }
      const __m512i q =
          epilogue::Requantize<simd::Avx512>(_mm512_add_epi32(sum, bias), multiplier, requant);
      // q is in the output type's range: the saturating narrowing is exact.
      const __m128i bytes = is_signed ? _mm512_cvtsepi32_epi8(q) : _mm512_cvtusepi32_epi8(q);
      _mm_mask_storeu_epi8(y0 + r * ld + v * 16, masks[v], bytes);
    }
  }
}

template <int kVecs>
void TileRows(int rows, const RequantTile& t) {
  ForCount<8>(rows, [&]<int R>() { Tile<R, kVecs>(t); });
}

}  // namespace

void RequantTileAvx512Vnni(int rows, const RequantTile& t) {
  return t.count <= 16 ? TileRows<1>(rows, t) : TileRows<2>(rows, t);
}

}  // namespace octet::conv
