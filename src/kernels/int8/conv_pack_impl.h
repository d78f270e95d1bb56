// The body of PackIm2col (conv_pack.h), included once per instruction set by
// conv_pack.cc and conv_pack_avx512vnni.cc: plain loops the compiler
// vectorizes, an SSE2 byte interleave; with AVX-512 one masked pass per row
// segment, and with VNNI the column sums taken from the packed panels.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#if defined(__AVX512BW__) || defined(__AVX512VNNI__)
#include <immintrin.h>
#elif defined(__SSE2__)
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

#if defined(__AVX512BW__)
// out[t] = src[t] ^ flip for t in [first, last), pad elsewhere in [0, n). Masked
// lanes are neither read nor written, so src may point outside the row there.
inline void SegmentAvx512(const uint8_t* src, int64_t first, int64_t last, int64_t n, uint8_t flip,
                          int8_t pad, int8_t* out) {
  const __m512i pads = _mm512_set1_epi8(pad), flips = _mm512_set1_epi8(static_cast<char>(flip));
  auto bits = [](int64_t count) {  // the low `count` bits, count in [0, 64]
    return count >= 64 ? ~__mmask64{0} : (__mmask64{1} << count) - 1;
  };
  for (int64_t i = 0; i < n; i += 64) {
    const int64_t len = std::min<int64_t>(64, n - i);
    const int64_t a = std::clamp<int64_t>(first - i, 0, len),
                  b = std::clamp<int64_t>(last - i, a, len);
    const __mmask64 valid = bits(b) & ~bits(a);
    const __m512i x = _mm512_maskz_loadu_epi8(valid, src + i);
    const __m512i v = _mm512_mask_blend_epi8(valid, pads, _mm512_xor_si512(x, flips));
    _mm512_mask_storeu_epi8(out + i, bits(len), v);
  }
}

// The same with out[t] = src[2 t] (stride 2): 64 bytes loaded per 32 outputs,
// the even bytes kept by vpmovwb. Only bytes [2 first, 2 last - 1) are read.
inline void SegmentStride2Avx512(const uint8_t* src, int64_t first, int64_t last, int64_t n,
                                 uint8_t flip, int8_t pad, int8_t* out) {
  const __m256i pads = _mm256_set1_epi8(pad), flips = _mm256_set1_epi8(static_cast<char>(flip));
  auto bits = [](int64_t count) {  // the low `count` bits, count in [0, 64]
    return count >= 64 ? ~__mmask64{0} : (__mmask64{1} << count) - 1;
  };
  for (int64_t i = 0; i < n; i += 32) {
    const int64_t len = std::min<int64_t>(32, n - i);
    const int64_t a = std::clamp<int64_t>(first - i, 0, len);
    const int64_t b = std::clamp<int64_t>(last - i, a, len);
    const __mmask32 valid = static_cast<__mmask32>(bits(b) & ~bits(a));
    const __mmask64 bytes = b > a ? bits(2 * b - 1) & ~bits(2 * a) : 0;
    const __m256i x = _mm512_maskz_cvtepi16_epi8(static_cast<__mmask32>(~0u),
                                                 _mm512_maskz_loadu_epi8(bytes, src + 2 * i));
    const __m256i v = _mm256_mask_blend_epi8(valid, pads, _mm256_xor_si256(x, flips));
    _mm256_mask_storeu_epi8(out + i, static_cast<__mmask32>(bits(len)), v);
  }
}
#endif

// out[t] = src[t] ^ flip for t in [first, last), pad elsewhere in [0, n).
inline void Segment(const uint8_t* src, int64_t first, int64_t last, int64_t n, uint8_t flip,
                    int8_t pad, int8_t* out) {
#if defined(__AVX512BW__)
  SegmentAvx512(src, first, last, n, flip, pad, out);
#else
  std::fill_n(out, first, pad);
  CopyFlipped(src + first, last - first, flip, out + first);
  std::fill(out + last, out + n, pad);
#endif
}

// Where tap column kx reads: ix = ox * stride_w + offset, inside the row for
// output columns [lo, hi). Computed once per block, per kx.
struct TapColumn {
  int64_t offset, lo, hi;
};

inline TapColumn MakeTapColumn(const ConvGeometry& g, int64_t kx) {
  const int64_t offset = kx * g.dilation_w - g.pad_left;
  const int64_t lo = std::min(g.out_w, offset >= 0 ? 0 : CeilDiv(-offset, g.stride_w));
  const int64_t hi =
      std::max(lo, std::min(g.out_w, std::max<int64_t>(0, CeilDiv(g.in_w - offset, g.stride_w))));
  return {offset, lo, hi};
}

// im2col row (c, ky, kx) for the block's pixels into out[0, count); the block
// starts at output position (oy0, ox0).
inline void BuildRow(const Im2colBlock& b, const uint8_t* channel, int64_t ky, const TapColumn& tc,
                     int64_t oy0, int64_t ox0, int8_t* __restrict out) {
  const ConvGeometry& g = *b.g;
  const int64_t offset_x = tc.offset, lo = tc.lo, hi = tc.hi;
  const uint8_t flip = b.flip;
  const int8_t pad = b.pad;
  if (g.stride_w == 1 && g.stride_h == 1 && offset_x == 0 && g.in_w == g.out_w) {
    // Consecutive output rows read consecutive whole input rows (1x1 convolutions,
    // the centre column of a padded 3x3): one contiguous run, iy = oy + shift.
    const int64_t shift = ky * g.dilation_h - g.pad_top;
    const int64_t oy_lo = std::max<int64_t>(0, -shift), oy_hi = std::min(g.out_h, g.in_h - shift);
    const int64_t first = std::clamp(oy_lo * g.out_w - b.p0, int64_t{0}, b.count);
    const int64_t last = std::clamp(oy_hi * g.out_w - b.p0, first, b.count);
    Segment(channel + shift * g.in_w + b.p0, first, last, b.count, flip, pad, out);
    return;
  }
  int64_t oy = oy0, ox = ox0;
  for (int64_t left = b.count; left > 0; ++oy, ox = 0) {
    const int64_t n = std::min(g.out_w - ox, left);
    const int64_t iy = oy * g.stride_h - g.pad_top + ky * g.dilation_h;
    if (iy < 0 || iy >= g.in_h) {
      std::fill_n(out, n, pad);
    } else {
      const int64_t first = std::clamp(lo, ox, ox + n), last = std::clamp(hi, first, ox + n);
      const uint8_t* __restrict src = channel + iy * g.in_w + offset_x;
      if (g.stride_w == 1) {
        Segment(src + ox, first - ox, last - ox, n, flip, pad, out);
#if defined(__AVX512BW__)
      } else if (g.stride_w == 2) {
        SegmentStride2Avx512(src + 2 * ox, first - ox, last - ox, n, flip, pad, out);
#endif
      } else {
        std::fill_n(out, first - ox, pad);
        int8_t* __restrict dst = out - ox;
        for (int64_t i = first; i < last; ++i)
          dst[i] = static_cast<int8_t>(src[i * g.stride_w] ^ flip);
        std::fill_n(out + (last - ox), ox + n - last, pad);
      }
    }
    out += n;
    left -= n;
  }
}

// Writes 4 rows of `cols` bytes (a multiple of nr) as group `group_dst` of the
// panels: in panel q, column j's 4 bytes at q * panel_stride + j * 4.
inline void Interleave(const int8_t* rows, int64_t cols, int nr, int64_t panel_stride,
                       int8_t* group_dst) {
  for (int64_t c0 = 0; c0 < cols; c0 += nr) {
    int8_t* panel = group_dst + (c0 / nr) * panel_stride;
    int j = 0;
#if defined(__SSE2__)
    for (; j + 16 <= nr; j += 16) {
      const int64_t c = c0 + j;
      __m128i r[4];
      for (int i = 0; i < 4; ++i)
        r[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows + i * cols + c));
      const __m128i lo01 = _mm_unpacklo_epi8(r[0], r[1]), hi01 = _mm_unpackhi_epi8(r[0], r[1]);
      const __m128i lo23 = _mm_unpacklo_epi8(r[2], r[3]), hi23 = _mm_unpackhi_epi8(r[2], r[3]);
      __m128i* d = reinterpret_cast<__m128i*>(panel + j * kGroup);
      _mm_storeu_si128(d, _mm_unpacklo_epi16(lo01, lo23));
      _mm_storeu_si128(d + 1, _mm_unpackhi_epi16(lo01, lo23));
      _mm_storeu_si128(d + 2, _mm_unpacklo_epi16(hi01, hi23));
      _mm_storeu_si128(d + 3, _mm_unpackhi_epi16(hi01, hi23));
    }
    for (; j + 8 <= nr; j += 8) {
      const int64_t c = c0 + j;
      __m128i r[4];
      for (int i = 0; i < 4; ++i)
        r[i] = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(rows + i * cols + c));
      const __m128i lo01 = _mm_unpacklo_epi8(r[0], r[1]), lo23 = _mm_unpacklo_epi8(r[2], r[3]);
      __m128i* d = reinterpret_cast<__m128i*>(panel + j * kGroup);
      _mm_storeu_si128(d, _mm_unpacklo_epi16(lo01, lo23));
      _mm_storeu_si128(d + 1, _mm_unpackhi_epi16(lo01, lo23));
    }
#endif
    for (; j < nr; ++j) {
      for (int i = 0; i < 4; ++i) panel[j * kGroup + i] = rows[i * cols + c0 + j];
    }
  }
}

inline void Pack(const Im2colBlock& b, int8_t* rows, int8_t* packed_b,
                 int32_t* __restrict col_sum) {
  const ConvGeometry& g = *b.g;
  const int64_t in_plane = g.in_h * g.in_w;
  const int64_t k_groups = CeilDiv(b.k, kGroup), cols = b.cols, count = b.count;
  const int64_t oy0 = b.p0 / g.out_w, ox0 = b.p0 % g.out_w;
  std::vector<TapColumn> tap_columns(g.kernel_w);
  for (int64_t kx = 0; kx < g.kernel_w; ++kx) tap_columns[kx] = MakeTapColumn(g, kx);
#if !defined(__AVX512VNNI__)
  std::fill_n(col_sum, count, 0);
#endif
  int64_t c = 0, ky = 0,
          kx = 0;  // k = (c * kernel_h + ky) * kernel_w + kx, stepped without divisions
  for (int64_t group = 0; group < k_groups; ++group) {
    for (int i = 0; i < kGroup; ++i) {
      const int64_t k = group * kGroup + i;
      int8_t* __restrict row = rows + i * cols;
      if (k >= b.k) {  // padding k: the packed weights are 0 there
        std::fill_n(row, cols, 0);
        continue;
      }
      BuildRow(b, b.x_group + c * in_plane, ky, tap_columns[kx], oy0, ox0, row);
      std::fill(row + count, row + cols, 0);
#if !defined(__AVX512VNNI__)
      for (int64_t j = 0; j < count; ++j) col_sum[j] += row[j];
#endif
      if (++kx == g.kernel_w) {
        kx = 0;
        if (++ky == g.kernel_h) {
          ky = 0;
          ++c;
        }
      }
    }
    Interleave(rows, cols, b.nr, k_groups * b.nr * kGroup, packed_b + group * b.nr * kGroup);
  }
#if defined(__AVX512VNNI__)
  // Column sums from the packed panels: vpdpbusd of ones with each group's 4
  // bytes per column (padding k and columns hold 0). nr is 32 on this path.
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t q = 0; q < cols / 32; ++q) {
    __m512i sum0 = _mm512_setzero_si512(), sum1 = _mm512_setzero_si512();
    const int8_t* panel = packed_b + q * k_groups * 32 * kGroup;
    for (int64_t group = 0; group < k_groups; ++group) {
      sum0 = _mm512_dpbusd_epi32(sum0, ones, _mm512_loadu_si512(panel + group * 128));
      sum1 = _mm512_dpbusd_epi32(sum1, ones, _mm512_loadu_si512(panel + group * 128 + 64));
    }
    _mm512_storeu_si512(col_sum + q * 32, sum0);
    _mm512_storeu_si512(col_sum + q * 32 + 16, sum1);
  }
#endif
}

}  // namespace
}  // namespace octet::conv
