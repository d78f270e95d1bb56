// The body of PackIm2col (conv_pack.h), included once per instruction set by
// conv_pack.cc and conv_pack_avx512.cc (plain loops the compiler vectorizes
// for each, plus an SSE2 byte interleave).
#pragma once

#include <algorithm>
#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "kernels/int8/conv_pack.h"

// Internal linkage: each including file gets its own copy, compiled with its flags
// (one shared inline definition could hand the AVX-512 code to the baseline path).
namespace octet::conv {
namespace {

constexpr int kGroup = 4;

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// dst[i] = src[i] ^ flip for i < n. Short runs (an output row is often < 64
// pixels) defeat the compiler's wide vector loop, so 16 bytes at a time, the
// last chunk overlapping the previous one instead of a scalar tail.
inline void CopyFlipped(const uint8_t* src, int64_t n, uint8_t flip, int8_t* dst) {
  int64_t i = 0;
#if defined(__SSE2__)
  if (n >= 16) {
    const __m128i f = _mm_set1_epi8(static_cast<char>(flip));
    for (;; i += 16) {
      if (i + 16 > n) i = n - 16;
      _mm_storeu_si128(
          reinterpret_cast<__m128i*>(dst + i),
          _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)), f));
      if (i + 16 == n) return;
    }
  }
#endif
  for (; i < n; ++i) dst[i] = static_cast<int8_t>(src[i] ^ flip);
}

// im2col row (c, ky, kx) for the block's pixels into out[0, count).
inline void BuildRow(const Im2colBlock& b, const uint8_t* channel, int64_t ky, int64_t kx,
                     int8_t* __restrict out) {
  const ConvGeometry& g = *b.g;
  const int64_t offset_x = kx * g.dilation_w - g.pad_left;  // ix = ox * stride_w + offset_x
  // Output columns [lo, hi) read inside the row.
  const int64_t lo = std::min(g.out_w, offset_x >= 0 ? 0 : CeilDiv(-offset_x, g.stride_w));
  const int64_t hi =
      std::max(lo, std::min(g.out_w, std::max<int64_t>(0, CeilDiv(g.in_w - offset_x, g.stride_w))));
  const uint8_t flip = b.flip;
  const int8_t pad = b.pad;
  int64_t oy = b.p0 / g.out_w, ox = b.p0 % g.out_w;
  for (int64_t left = b.count; left > 0; ++oy, ox = 0) {
    const int64_t n = std::min(g.out_w - ox, left);
    const int64_t iy = oy * g.stride_h - g.pad_top + ky * g.dilation_h;
    if (iy < 0 || iy >= g.in_h) {
      std::fill_n(out, n, pad);
    } else {
      const int64_t first = std::clamp(lo, ox, ox + n), last = std::clamp(hi, first, ox + n);
      std::fill_n(out, first - ox, pad);
      const uint8_t* __restrict src = channel + iy * g.in_w + offset_x;
      int8_t* __restrict dst = out - ox;
      if (g.stride_w == 1) {
        CopyFlipped(src + first, last - first, flip, dst + first);
      } else {
        for (int64_t i = first; i < last; ++i)
          dst[i] = static_cast<int8_t>(src[i * g.stride_w] ^ flip);
      }
      std::fill_n(out + (last - ox), ox + n - last, pad);
    }
    out += n;
    left -= n;
  }
}

// Writes 4 rows of `cols` bytes as group `group_dst` of the panels.
inline void Interleave(const int8_t* rows, int64_t cols, int nr, int64_t panel_stride,
                       int8_t* group_dst) {
  auto dst_of = [&](int64_t c) { return group_dst + (c / nr) * panel_stride + (c % nr) * kGroup; };
  int64_t c = 0;
#if defined(__SSE2__)
  for (; c + 16 <= cols; c += 16) {
    __m128i r[4];
    for (int i = 0; i < 4; ++i)
      r[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows + i * cols + c));
    const __m128i lo01 = _mm_unpacklo_epi8(r[0], r[1]), hi01 = _mm_unpackhi_epi8(r[0], r[1]);
    const __m128i lo23 = _mm_unpacklo_epi8(r[2], r[3]), hi23 = _mm_unpackhi_epi8(r[2], r[3]);
    // Each quarter: 4 columns x 4 bytes; 4 columns never straddle a panel (nr % 4 == 0).
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst_of(c)), _mm_unpacklo_epi16(lo01, lo23));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst_of(c + 4)), _mm_unpackhi_epi16(lo01, lo23));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst_of(c + 8)), _mm_unpacklo_epi16(hi01, hi23));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst_of(c + 12)), _mm_unpackhi_epi16(hi01, hi23));
  }
#endif
  for (; c < cols; ++c) {
    int8_t* d = dst_of(c);
    for (int i = 0; i < 4; ++i) d[i] = rows[i * cols + c];
  }
}

inline void Pack(const Im2colBlock& b, int8_t* rows, int8_t* packed_b,
                 int32_t* __restrict col_sum) {
  const ConvGeometry& g = *b.g;
  const int64_t taps = g.kernel_h * g.kernel_w, in_plane = g.in_h * g.in_w;
  const int64_t k_groups = CeilDiv(b.k, kGroup), cols = b.cols, count = b.count;
  std::fill_n(col_sum, count, 0);
  for (int64_t group = 0; group < k_groups; ++group) {
    for (int i = 0; i < kGroup; ++i) {
      const int64_t k = group * kGroup + i;
      int8_t* __restrict row = rows + i * cols;
      if (k >= b.k) {  // padding k: the packed weights are 0 there
        std::fill_n(row, cols, 0);
        continue;
      }
      const int64_t c = k / taps, tap = k % taps;
      BuildRow(b, b.x_group + c * in_plane, tap / g.kernel_w, tap % g.kernel_w, row);
      std::fill(row + count, row + cols, 0);
      for (int64_t j = 0; j < count; ++j) col_sum[j] += row[j];
    }
    Interleave(rows, cols, b.nr, k_groups * b.nr * kGroup, packed_b + group * b.nr * kGroup);
  }
}

}  // namespace
}  // namespace octet::conv
