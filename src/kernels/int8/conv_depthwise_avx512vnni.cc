// AVX-512 VNNI depthwise kernel: one vpdpwssd per tap and 16 output pixels,
// with w' in the low half of each lane and 0 in the high half, is acc + x' * w'
// exactly (|x'|, |w'| <= 255 fit int16; the plane's int32 x' has x' in its low
// half), with the int32 wrap-around of the scalar kernel.

#include <immintrin.h>

#include <algorithm>

#include "kernels/int8/conv_depthwise.h"

namespace octet::conv {

namespace {

inline __mmask16 TailMask(int64_t remaining) {
  return remaining >= 16 ? static_cast<__mmask16>(0xFFFF)
                         : static_cast<__mmask16>((1u << remaining) - 1);
}

// kRows output rows x kVecs vectors of 16 pixels in registers: vpdpwssd's
// latency is several cycles, so independent accumulators keep it busy. The
// plane has zero rows for the vertical padding, so every tap row is read; the
// last group of rows repeats the band's last row (same values written twice).
template <int kVecs, int kRows>
void Channel(const ConvGeometry& g, const DepthwisePlane& p, const int32_t* taps, int64_t oy_begin,
             int64_t oy_end, int32_t* out) {
  for (int64_t oy0 = oy_begin; oy0 < oy_end; oy0 += kRows) {
    const int32_t* rows[kRows];
    int64_t out_rows[kRows];
#pragma GCC unroll 8
    for (int i = 0; i < kRows; ++i) {
      out_rows[i] = std::min<int64_t>(oy0 + i, oy_end - 1);
      rows[i] = p.data + (out_rows[i] * g.stride_h - g.pad_top) * p.row_len;
    }
    for (int64_t ox0 = 0; ox0 < g.out_w; ox0 += kVecs * 16) {
      const int64_t vecs = (g.out_w - ox0 + 15) / 16;
      __mmask16 mask[kVecs];
      __m512i acc[kRows][kVecs];
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) {
        const int64_t remaining = g.out_w - ox0 - v * 16;
        mask[v] = remaining > 0 ? TailMask(remaining) : 0;
#pragma GCC unroll 8
        for (int i = 0; i < kRows; ++i) acc[i][v] = _mm512_setzero_si512();
      }
      for (int64_t ky = 0; ky < g.kernel_h; ++ky) {
        const int64_t row_offset = ky * g.dilation_h * p.row_len + ox0;
        for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
          const int64_t offset = row_offset + p.tap_offsets[kx];
          const __m512i w = _mm512_set1_epi32(taps[ky * g.kernel_w + kx] & 0xFFFF);
#pragma GCC unroll 8
          for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 4
            for (int v = 0; v < kVecs; ++v) {
              if (v >= vecs) break;  // the row's last chunk can be narrower
              const __m512i x = _mm512_maskz_loadu_epi32(mask[v], rows[i] + offset + v * 16);
              acc[i][v] = _mm512_dpwssd_epi32(acc[i][v], x, w);
            }
          }
        }
      }
#pragma GCC unroll 8
      for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 4
        for (int v = 0; v < kVecs; ++v)
          _mm512_mask_storeu_epi32(out + (out_rows[i] - oy_begin) * g.out_w + ox0 + v * 16, mask[v],
                                   acc[i][v]);
      }
    }
  }
}

}  // namespace

void DepthwiseChannelAvx512Vnni(const ConvGeometry& g, const DepthwisePlane& p, const int32_t* taps,
                                int64_t oy_begin, int64_t oy_end, int32_t* out) {
  // As many vectors as a row needs, up to 4 (narrow rows would otherwise multiply zeros).
  switch ((g.out_w + 15) / 16) {
    case 1:
      return Channel<1, 8>(g, p, taps, oy_begin, oy_end, out);
    case 2:
      return Channel<2, 4>(g, p, taps, oy_begin, oy_end, out);
    case 3:
      return Channel<3, 2>(g, p, taps, oy_begin, oy_end, out);
    default:
      return Channel<4, 2>(g, p, taps, oy_begin, oy_end, out);
  }
}

}  // namespace octet::conv
