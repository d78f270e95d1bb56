// The body of PackIm2col (conv_pack.h), included once per instruction set by
// conv_pack.cc, conv_pack_avx2.cc and conv_pack_avx512vnni.cc: plain loops the compiler
// vectorizes, an SSE2 byte interleave; with AVX-512 one masked pass per row
// segment, and with VNNI the column sums taken from the packed panels.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#if defined(__AVX2__) || defined(__AVX512BW__) || defined(__AVX512VNNI__)
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

// Calls run(a, b) for each range [a, b) of the block's pixels [0, count) whose
// input column for tap column tc is inside the row: one range per output row
// the block touches, the block starting at output column ox0 of a row of w.
template <typename Run>
inline void ForEachColumnRun(const TapColumn& tc, int64_t w, int64_t ox0, int64_t count, Run run) {
  for (int64_t j = 0, ox = ox0; j < count; j += w - ox, ox = 0) {
    const int64_t n = std::min(w - ox, count - j);
    const int64_t lo = std::clamp(tc.lo - ox, int64_t{0}, n), hi = std::clamp(tc.hi - ox, lo, n);
    if (lo < hi) run(j + lo, j + hi);
  }
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
        // The stride in a register: the byte stores could alias g, so the
        // compiler would reload it for every byte.
        const int64_t stride = g.stride_w;
        for (int64_t i = first; i < last; ++i) dst[i] = static_cast<int8_t>(src[i * stride] ^ flip);
        std::fill_n(out + (last - ox), ox + n - last, pad);
      }
    }
    out += n;
    left -= n;
  }
}

#if defined(__AVX512BW__)
// The 4 x 64 byte interleave: rows r0..r3 (64 columns each) become out[q] =
// columns 16q..16q+15, 4 bytes (one per row) each. Byte and word unpacks work
// within 128-bit lanes, then a 4 x 4 transpose of the lanes restores column order.
inline void Interleave4x64(__m512i r0, __m512i r1, __m512i r2, __m512i r3, __m512i out[4]) {
  const __m512i lo01 = _mm512_unpacklo_epi8(r0, r1), hi01 = _mm512_unpackhi_epi8(r0, r1);
  const __m512i lo23 = _mm512_unpacklo_epi8(r2, r3), hi23 = _mm512_unpackhi_epi8(r2, r3);
  // Lane L of a, b, c, d: columns 16L + 0..3, 4..7, 8..11, 12..15.
  const __m512i a = _mm512_unpacklo_epi16(lo01, lo23), b = _mm512_unpackhi_epi16(lo01, lo23);
  const __m512i c = _mm512_unpacklo_epi16(hi01, hi23), d = _mm512_unpackhi_epi16(hi01, hi23);
  const __m512i ab_lo = _mm512_shuffle_i64x2(a, b, 0x44), ab_hi = _mm512_shuffle_i64x2(a, b, 0xEE);
  const __m512i cd_lo = _mm512_shuffle_i64x2(c, d, 0x44), cd_hi = _mm512_shuffle_i64x2(c, d, 0xEE);
  out[0] = _mm512_shuffle_i64x2(ab_lo, cd_lo, 0x88);
  out[1] = _mm512_shuffle_i64x2(ab_lo, cd_lo, 0xDD);
  out[2] = _mm512_shuffle_i64x2(ab_hi, cd_hi, 0x88);
  out[3] = _mm512_shuffle_i64x2(ab_hi, cd_hi, 0xDD);
}

// Stores the interleaved 64 columns from c0 (c0 a multiple of 64, nr 32): columns
// c0..c0+31 are the panel at dst, c0+32..c0+63 the next one (only when cols has them).
inline void StoreInterleaved(const __m512i v[4], int64_t c0, int64_t cols, int64_t panel_stride,
                             int8_t* dst) {
  _mm512_storeu_si512(dst, v[0]);
  _mm512_storeu_si512(dst + 64, v[1]);
  if (c0 + 64 <= cols) {
    _mm512_storeu_si512(dst + panel_stride, v[2]);
    _mm512_storeu_si512(dst + panel_stride + 64, v[3]);
  }
}
#endif

#if defined(__SSE2__)
// The paired words (gemm_kernels.h) of 16 columns of two k rows, one nr-16
// panel: an unpack of the rows gives the plain pairs; a low column's pair
// (+ 128) and its high column's then alternate byte by byte.
inline void StorePairedWords16(__m128i r0, __m128i r1, int8_t* panel) {
  const __m128i low =
      _mm_xor_si128(_mm_unpacklo_epi8(r0, r1), _mm_set1_epi8(static_cast<char>(0x80)));
  const __m128i high = _mm_unpackhi_epi8(r0, r1);
  auto* d = reinterpret_cast<__m128i*>(panel);
  _mm_storeu_si128(d, _mm_unpacklo_epi8(low, high));
  _mm_storeu_si128(d + 1, _mm_unpackhi_epi8(low, high));
}
#endif

#if defined(__AVX2__)
// The same for 32 columns: lane 0's words go to panel, lane 1's to panel +
// lane1 (nr 16: each lane is a panel's 16 columns, lane1 the panel stride;
// nr 32: the lanes are permuted between the unpacks so that lane 0 holds the
// low columns' pairs and lane 1 the high ones', lane1 32).
inline void StorePairedWords32(__m256i r0, __m256i r1, int nr, int64_t lane1, int8_t* panel) {
  __m256i low = _mm256_unpacklo_epi8(r0, r1), high = _mm256_unpackhi_epi8(r0, r1);
  if (nr == 32) {
    const __m256i first = low;
    low = _mm256_permute2x128_si256(first, high, 0x20);
    high = _mm256_permute2x128_si256(first, high, 0x31);
  }
  low = _mm256_xor_si256(low, _mm256_set1_epi8(static_cast<char>(0x80)));
  const __m256i w0 = _mm256_unpacklo_epi8(low, high), w1 = _mm256_unpackhi_epi8(low, high);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(panel), _mm256_castsi256_si128(w0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(panel + 16), _mm256_castsi256_si128(w1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(panel + lane1), _mm256_extracti128_si256(w0, 1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(panel + lane1 + 16), _mm256_extracti128_si256(w1, 1));
}
#endif

// Writes 2 rows of `cols` bytes (a multiple of nr, itself a multiple of 16) as
// group `group_dst` of the panels: in panel q, column j's 2 bytes at
// q * panel_stride + j * 2; paired (gemm_kernels.h), the words of column
// j < nr / 2 (+ 128) and column j + nr / 2 at q * panel_stride + j * 4.
inline void InterleavePairs(const int8_t* rows, int64_t cols, int nr, bool paired,
                            int64_t panel_stride, int8_t* group_dst) {
  const int half = nr / 2;
  int8_t* panel = group_dst;  // stepped, not c0 / nr: a division per panel is its copy's cost
  int64_t c0 = 0;
#if defined(__AVX2__)
  if (paired) {
    const int64_t lane1 = nr == 16 ? panel_stride : 32;  // where lane 1's words go
    for (; c0 + 32 <= cols; c0 += 32, panel += 32 / nr * panel_stride) {
      StorePairedWords32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows + c0)),
                         _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows + cols + c0)), nr,
                         lane1, panel);
    }
  }
#endif
  for (; c0 < cols; c0 += nr, panel += panel_stride) {
    const int8_t* r0 = rows + c0;
    const int8_t* r1 = rows + cols + c0;
    int j = 0;
#if defined(__SSE2__)
    auto* d = reinterpret_cast<__m128i*>(panel);
    if (paired && nr == 16) {  // a last odd panel: the step above in one lane
      StorePairedWords16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r0)),
                         _mm_loadu_si128(reinterpret_cast<const __m128i*>(r1)), panel);
      j = half;
    } else if (!paired) {
      for (; j + 16 <= nr; j += 16, d += 2) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r0 + j));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r1 + j));
        _mm_storeu_si128(d, _mm_unpacklo_epi8(a, b));
        _mm_storeu_si128(d + 1, _mm_unpackhi_epi8(a, b));
      }
    }
#endif
    if (paired) {
      for (; j < half; ++j) {
        panel[j * 4] = static_cast<int8_t>(r0[j] ^ 0x80);
        panel[j * 4 + 1] = r0[half + j];
        panel[j * 4 + 2] = static_cast<int8_t>(r1[j] ^ 0x80);
        panel[j * 4 + 3] = r1[half + j];
      }
      continue;
    }
    for (; j < nr; ++j) {
      panel[j * 2] = r0[j];
      panel[j * 2 + 1] = r1[j];
    }
  }
}

// Writes 4 rows of `cols` bytes (a multiple of nr) as group `group_dst` of the
// panels: in panel q, column j's 4 bytes at q * panel_stride + j * 4.
inline void Interleave(const int8_t* rows, int64_t cols, int nr, int64_t panel_stride,
                       int8_t* group_dst) {
#if defined(__AVX512BW__)
  if (nr == 32) {
    for (int64_t c0 = 0; c0 < cols; c0 += 64) {
      const __mmask64 m = cols - c0 >= 64 ? ~__mmask64{0} : (__mmask64{1} << (cols - c0)) - 1;
      __m512i v[4];
      Interleave4x64(_mm512_maskz_loadu_epi8(m, rows + c0),
                     _mm512_maskz_loadu_epi8(m, rows + cols + c0),
                     _mm512_maskz_loadu_epi8(m, rows + 2 * cols + c0),
                     _mm512_maskz_loadu_epi8(m, rows + 3 * cols + c0), v);
      StoreInterleaved(v, c0, cols, panel_stride, group_dst + (c0 / 32) * panel_stride);
    }
    return;
  }
#endif
  int8_t* panel = group_dst;  // stepped, not c0 / nr: a division per panel is its copy's cost
  for (int64_t c0 = 0; c0 < cols; c0 += nr, panel += panel_stride) {
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

inline bool ShiftedRuns(const ConvGeometry& g) {
  return g.stride_h == 1 && g.stride_w == 1 && g.in_w == g.out_w;
}

inline int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

#if defined(__AVX512VNNI__)
// Shifted runs. With stride 1 and in_w == out_w (1x1 convolutions, "same"-padded
// k x k), output pixel p of tap (c, ky, kx) reads x[c][p + shift_y * in_w +
// offset_x]: each im2col row of the block is one shifted run of the input
// channel, minus the pixels whose input row or column is padding. Those are
// per-block bit masks (rows: a range per ky; columns: a periodic pattern per
// kx), so 4 k rows x 64 pixels are loaded straight from x, blended with the
// padding and interleaved in registers: no row scratch, no per-row segments.
// Other strides (and valid padding) reach the same form through the phase
// planes (conv_pack.h): plane (c, ry, rx) row i, column j holds x[c][i * stride_h
// + ry][j * stride_w + rx] with row pitch out_w, so tap (ky, kx) reads plane
// (c, ry, rx) at p + sy * out_w + sx, (sy, ry) = divmod(ky * dilation_h -
// pad_top, stride_h) and (sx, rx) likewise.
inline void PackShiftedRuns(const Im2colBlock& b, int8_t* packed_b) {
  const ConvGeometry& g = *b.g;
  const int64_t w = g.out_w;  // row pitch of the source
  const int64_t k_groups = CeilDiv(b.k, kGroup), cols = b.cols, count = b.count, p0 = b.p0;
  const int64_t chunks = CeilDiv(cols, 64), panel_stride = k_groups * 32 * kGroup;
  auto bits = [](int64_t n) {  // the low n bits, n clamped to [0, 64]
    return n <= 0 ? __mmask64{0} : n >= 64 ? ~__mmask64{0} : (__mmask64{1} << n) - 1;
  };
  // The source of tap (c, ky, kx): channel c's plane for (ry, rx), at shift_y * w + shift_x.
  const bool phases = b.phases != nullptr;
  const int64_t plane_size = phases ? PhasePlaneSize(g) : g.in_h * g.in_w;
  const int64_t planes_per_channel = phases ? g.stride_h * g.stride_w : 1;
  const uint8_t* const source = phases ? b.phases : b.x_group;
  // Per kx: the plane column offset, and per chunk the pixels whose input column
  // is inside the row.
  std::vector<__mmask64> column_masks(g.kernel_w * chunks, 0);
  std::vector<int64_t> offsets_x(g.kernel_w);
  for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
    const TapColumn tc = MakeTapColumn(g, kx);
    const int64_t sx = FloorDiv(tc.offset, g.stride_w), rx = tc.offset - sx * g.stride_w;
    offsets_x[kx] = phases ? rx * plane_size + sx : tc.offset;
    __mmask64* mask = column_masks.data() + kx * chunks;
    ForEachColumnRun(tc, w, p0 % w, count, [&](int64_t first, int64_t last) {
      for (int64_t j = first; j < last;) {  // bits [first, last), a word at a time
        const int64_t n = std::min(last - j, 64 - j % 64);
        mask[j / 64] |= bits(n) << (j % 64);
        j += n;
      }
    });
  }
  // Per ky: the plane row offset and the block pixels [first, last) whose input
  // row is inside the image.
  std::vector<int64_t> offsets_y(g.kernel_h), firsts(g.kernel_h), lasts(g.kernel_h);
  for (int64_t ky = 0; ky < g.kernel_h; ++ky) {
    const int64_t offset = ky * g.dilation_h - g.pad_top;
    const int64_t sy = FloorDiv(offset, g.stride_h), ry = offset - sy * g.stride_h;
    offsets_y[ky] = phases ? ry * g.stride_w * plane_size + sy * w : offset * w;
    const int64_t oy_lo = std::min(g.out_h, offset >= 0 ? 0 : CeilDiv(-offset, g.stride_h));
    const int64_t oy_hi = std::clamp<int64_t>(CeilDiv(g.in_h - offset, g.stride_h), oy_lo, g.out_h);
    firsts[ky] = std::clamp(oy_lo * w - p0, int64_t{0}, count);
    lasts[ky] = std::clamp(oy_hi * w - p0, firsts[ky], count);
  }
  const __m512i pads = _mm512_set1_epi8(b.pad), flips = _mm512_set1_epi8(static_cast<char>(b.flip));
  int64_t c = 0, ky = 0, kx = 0;  // k = (c * kernel_h + ky) * kernel_w + kx
  for (int64_t group = 0; group < k_groups; ++group) {
    const uint8_t* src[kGroup];
    const __mmask64* col_mask[kGroup];
    int64_t first[kGroup], last[kGroup];
    for (int i = 0; i < kGroup; ++i) {
      if (group * kGroup + i >= b.k) {  // padding k: the packed weights are 0 there
        src[i] = nullptr;
        continue;
      }
      src[i] = source + c * planes_per_channel * plane_size + offsets_y[ky] + offsets_x[kx] + p0;
      col_mask[i] = column_masks.data() + kx * chunks;
      first[i] = firsts[ky];
      last[i] = lasts[ky];
      if (++kx == g.kernel_w) {
        kx = 0;
        if (++ky == g.kernel_h) {
          ky = 0;
          ++c;
        }
      }
    }
    int8_t* dst = packed_b + group * 32 * kGroup;
    for (int64_t q = 0; q < chunks; ++q) {
      const int64_t j = q * 64;
      // Padding inside the block, 0 in the columns past count.
      const __m512i fill = _mm512_maskz_mov_epi8(bits(count - j), pads);
      __m512i r[kGroup];
      for (int i = 0; i < kGroup; ++i) {
        if (src[i] == nullptr) {
          r[i] = _mm512_setzero_si512();
          continue;
        }
        const __mmask64 valid = col_mask[i][q] & bits(last[i] - j) & ~bits(first[i] - j);
        const __m512i x = _mm512_maskz_loadu_epi8(valid, src[i] + j);
        r[i] = _mm512_mask_blend_epi8(valid, fill, _mm512_xor_si512(x, flips));
      }
      __m512i v[4];
      Interleave4x64(r[0], r[1], r[2], r[3], v);
      StoreInterleaved(v, j, cols, panel_stride, dst + (j / 32) * panel_stride);
    }
  }
}
#endif

#if defined(__AVX2__) && !defined(__AVX512VNNI__)
// The 4-byte groups of 4 k rows x 32 columns, two nr-16 panels: lane 0 of the
// byte and word unpacks holds columns 0-15's groups, lane 1 columns 16-31's.
inline void StoreGroups32(const __m256i (&r)[4], int64_t panel_stride, int8_t* panel) {
  const __m256i lo01 = _mm256_unpacklo_epi8(r[0], r[1]), hi01 = _mm256_unpackhi_epi8(r[0], r[1]);
  const __m256i lo23 = _mm256_unpacklo_epi8(r[2], r[3]), hi23 = _mm256_unpackhi_epi8(r[2], r[3]);
  const __m256i a = _mm256_unpacklo_epi16(lo01, lo23), b = _mm256_unpackhi_epi16(lo01, lo23);
  const __m256i c = _mm256_unpacklo_epi16(hi01, hi23), d = _mm256_unpackhi_epi16(hi01, hi23);
  auto store = [](int8_t* dst, __m256i v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), v);
  };
  store(panel, _mm256_permute2x128_si256(a, b, 0x20));
  store(panel + 32, _mm256_permute2x128_si256(c, d, 0x20));
  store(panel + panel_stride, _mm256_permute2x128_si256(a, b, 0x31));
  store(panel + panel_stride + 32, _mm256_permute2x128_si256(c, d, 0x31));
}

// The same for 16 columns (a last odd panel), from the rows' low lanes.
inline void StoreGroups16(const __m256i (&r)[4], int8_t* panel) {
  const __m128i r0 = _mm256_castsi256_si128(r[0]), r1 = _mm256_castsi256_si128(r[1]);
  const __m128i r2 = _mm256_castsi256_si128(r[2]), r3 = _mm256_castsi256_si128(r[3]);
  const __m128i lo01 = _mm_unpacklo_epi8(r0, r1), hi01 = _mm_unpackhi_epi8(r0, r1);
  const __m128i lo23 = _mm_unpacklo_epi8(r2, r3), hi23 = _mm_unpackhi_epi8(r2, r3);
  auto* d = reinterpret_cast<__m128i*>(panel);
  _mm_storeu_si128(d, _mm_unpacklo_epi16(lo01, lo23));
  _mm_storeu_si128(d + 1, _mm_unpackhi_epi16(lo01, lo23));
  _mm_storeu_si128(d + 2, _mm_unpacklo_epi16(hi01, hi23));
  _mm_storeu_si128(d + 3, _mm_unpackhi_epi16(hi01, hi23));
}

// Shifted runs (above) for the AVX2-class kernels: kRows = 2 into the paired
// words of the vpmaddwd kernels (nr 16 or 32), kRows = 4 into AVX-VNNI's 4-byte
// groups (nr 16), kRows k rows x 32 pixels per step. AVX2 has no byte-masked
// load, so each row's 32 bytes are loaded whole and blended with the padding by
// a byte mask per tap and chunk (the tap column's periodic pattern and the tap
// row's range, built once per block); a load that would reach outside the
// group's input channels copies the valid bytes instead. No column sums: taken
// only when the kernel's correction needs none.
template <int kRows>
inline void PackShiftedRunsAvx2(const Im2colBlock& b, int8_t* packed_b) {
  const ConvGeometry& g = *b.g;
  const int64_t w = g.out_w, taps = g.kernel_h * g.kernel_w, channels = b.k / taps;
  const int64_t k_groups = CeilDiv(b.k, kRows), cols = b.cols, count = b.count, p0 = b.p0;
  const int64_t chunks = CeilDiv(cols, 32), panel_stride = k_groups * b.nr * kRows;
  // The source of tap (c, ky, kx): channel c's plane for (ry, rx), at sy * w + sx.
  const bool phases = b.phases != nullptr;
  const int64_t plane_size = phases ? PhasePlaneSize(g) : g.in_h * g.in_w;
  const int64_t channel_size = (phases ? g.stride_h * g.stride_w : 1) * plane_size;
  const uint8_t* const source = phases ? b.phases : b.x_group;
  const int64_t extent = channels * channel_size;  // bytes from source on that the taps read
  // Per tap (ky, kx): its offset from the output pixel, and per chunk the
  // pixels whose input is inside the image; per chunk the fill, the padding
  // inside the block and 0 in the columns past count.
  auto vector_at = [](const uint8_t* bytes) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes));
  };
  std::vector<int64_t> offsets(taps);
  std::vector<uint8_t> columns(g.kernel_w * chunks * 32), fills(chunks * 32);
  std::vector<uint8_t> masks(taps * chunks * 32);
  std::fill_n(fills.begin(), count, static_cast<uint8_t>(b.pad));
  for (int64_t kx = 0; kx < g.kernel_w; ++kx) {  // the column pattern, a run per output row
    const TapColumn tc = MakeTapColumn(g, kx);
    uint8_t* column = columns.data() + kx * chunks * 32;
    for (int64_t j = 0, ox = p0 % w; j < count; j += w - ox, ox = 0) {
      const int64_t n = std::min(w - ox, count - j);
      const int64_t lo = std::clamp(tc.lo - ox, int64_t{0}, n), hi = std::clamp(tc.hi - ox, lo, n);
      std::fill(column + j + lo, column + j + hi, 0xFF);
    }
  }
  const __m256i lane_index =
      _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
                       22, 23, 24, 25, 26, 27, 28, 29, 30, 31);
  for (int64_t ky = 0; ky < g.kernel_h; ++ky) {  // and the row range
    const int64_t offset = ky * g.dilation_h - g.pad_top;
    const int64_t sy = FloorDiv(offset, g.stride_h), ry = offset - sy * g.stride_h;
    const int64_t oy_lo = std::min(g.out_h, offset >= 0 ? 0 : CeilDiv(-offset, g.stride_h));
    const int64_t oy_hi = std::clamp<int64_t>(CeilDiv(g.in_h - offset, g.stride_h), oy_lo, g.out_h);
    const int64_t first = std::clamp(oy_lo * w - p0, int64_t{0}, count);
    const int64_t last = std::clamp(oy_hi * w - p0, first, count);
    for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
      const int64_t tap = ky * g.kernel_w + kx;
      const int64_t offset_x = MakeTapColumn(g, kx).offset;
      const int64_t sx = FloorDiv(offset_x, g.stride_w), rx = offset_x - sx * g.stride_w;
      offsets[tap] =
          phases ? (ry * g.stride_w + rx) * plane_size + sy * w + sx : offset * w + offset_x;
      for (int64_t q = 0; q < chunks; ++q) {  // bytes [first, last) of chunk q
        const __m256i lo =
            _mm256_set1_epi8(static_cast<char>(std::clamp<int64_t>(first - q * 32, 0, 32)));
        const __m256i hi =
            _mm256_set1_epi8(static_cast<char>(std::clamp<int64_t>(last - q * 32, 0, 32)));
        const __m256i rows = _mm256_andnot_si256(_mm256_cmpgt_epi8(lo, lane_index),
                                                 _mm256_cmpgt_epi8(hi, lane_index));
        _mm256_storeu_si256(
            reinterpret_cast<__m256i*>(masks.data() + (tap * chunks + q) * 32),
            _mm256_and_si256(rows, vector_at(columns.data() + (kx * chunks + q) * 32)));
      }
    }
  }
  const __m256i flips = _mm256_set1_epi8(static_cast<char>(b.flip));
  const int64_t lane1 = b.nr == 16 ? panel_stride : 32;
  const int64_t chunk_stride = b.nr == 16 ? 2 * panel_stride : panel_stride;
  int64_t c = 0, tap = 0;  // k = c * taps + tap
  for (int64_t group = 0; group < k_groups; ++group) {
    int64_t start[kRows];  // the row's byte offset from source at the block's first pixel
    const uint8_t* mask[kRows];
    bool present[kRows];
    for (int i = 0; i < kRows; ++i) {
      present[i] = group * kRows + i < b.k;  // padding k: the packed weights are 0 there
      if (!present[i]) continue;
      start[i] = c * channel_size + offsets[tap] + p0;
      mask[i] = masks.data() + tap * chunks * 32;
      if (++tap == taps) tap = 0, ++c;
    }
    int8_t* panel = packed_b + group * b.nr * kRows;
    for (int64_t q = 0; q < chunks; ++q, panel += chunk_stride) {
      const int64_t j = q * 32;
      const __m256i fill = vector_at(fills.data() + j);
      auto row = [&](int i) __attribute__((always_inline)) {
        if (!present[i]) return _mm256_setzero_si256();
        const __m256i valid = vector_at(mask[i] + j);
        const int64_t at = start[i] + j;
        __m256i x;
        if (at >= 0 && at + 32 <= extent) [[likely]] {
          x = vector_at(source + at);
        } else {
          alignas(32) uint8_t bytes[32] = {};
          for (int64_t t = 0; t < 32; ++t) {
            if (at + t >= 0 && at + t < extent) bytes[t] = source[at + t];
          }
          x = vector_at(bytes);
        }
        return _mm256_blendv_epi8(fill, _mm256_xor_si256(x, flips), valid);
      };
      const bool whole = j + 32 <= cols;  // else nr 16, a last odd panel
      if constexpr (kRows == 2) {
        const __m256i r0 = row(0), r1 = row(1);
        if (whole) {
          StorePairedWords32(r0, r1, b.nr, lane1, panel);
        } else {
          StorePairedWords16(_mm256_castsi256_si128(r0), _mm256_castsi256_si128(r1), panel);
        }
      } else {
        const __m256i r[4] = {row(0), row(1), row(2), row(3)};
        if (whole) {
          StoreGroups32(r, panel_stride, panel);
        } else {
          StoreGroups16(r, panel);
        }
      }
    }
  }
}
#endif

#if defined(__AVX2__)
// dst[t] = src[2 t] for t < n; reads src[0, 2 n - 1) only.
inline void CopyStride2(const uint8_t* src, int64_t n, uint8_t* dst) {
#if defined(__AVX512BW__)
  SegmentStride2Avx512(src, 0, n, n, 0, 0, reinterpret_cast<int8_t*>(dst));
#else
  int64_t t = 0;
  const __m256i low_bytes = _mm256_set1_epi16(0x00FF);
  for (; t + 33 <= n; t += 32) {  // 64 bytes read: 2 t + 64 <= 2 n - 1
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * t));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * t + 32));
    // The packs work per 128-bit lane: lanes a0 b0 a1 b1, put back in order.
    const __m256i even =
        _mm256_packus_epi16(_mm256_and_si256(a, low_bytes), _mm256_and_si256(b, low_bytes));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + t), _mm256_permute4x64_epi64(even, 0xD8));
  }
  for (; t < n; ++t) dst[t] = src[2 * t];
#endif
}

inline void BuildPhasePlanes(const ConvGeometry& g, const uint8_t* x_group, int64_t channels,
                             int64_t p0, int64_t count, uint8_t* planes) {
  const int64_t plane_size = PhasePlaneSize(g), in_plane = g.in_h * g.in_w;
  const int64_t sh = g.stride_h, sw = g.stride_w;
  // The plane rows the block's output rows [oy0, oy1) read: i = oy + sy for the
  // row shifts sy of ky = 0 and ky = kernel_h - 1.
  const int64_t oy0 = p0 / g.out_w, oy1 = (p0 + count - 1) / g.out_w + 1;
  const int64_t i0 = oy0 + FloorDiv(-g.pad_top, sh);
  const int64_t i1 = oy1 + FloorDiv((g.kernel_h - 1) * g.dilation_h - g.pad_top, sh);
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t ry = 0; ry < sh; ++ry) {
      const int64_t rows = std::max<int64_t>(0, CeilDiv(g.in_h - ry, sh));
      for (int64_t rx = 0; rx < sw; ++rx) {
        const int64_t n = std::clamp<int64_t>(CeilDiv(g.in_w - rx, sw), 0, g.out_w);
        uint8_t* plane = planes + ((c * sh + ry) * sw + rx) * plane_size;
        for (int64_t i = std::max<int64_t>(i0, 0); i < std::min(i1, rows); ++i) {
          const uint8_t* src = x_group + c * in_plane + (i * sh + ry) * g.in_w + rx;
          uint8_t* dst = plane + i * g.out_w;
          if (sw == 1) {
            std::copy_n(src, n, dst);
          } else if (sw == 2) {
            CopyStride2(src, n, dst);
          } else {
            for (int64_t j = 0; j < n; ++j) dst[j] = src[j * sw];
          }
        }
      }
    }
  }
}
#endif

// The general packing: each im2col row of the block is built in `rows`
// (per output row segments), a k group of rows at a time interleaved into the
// panels. Without VNNI the column sums are accumulated here (col_sum non-null).
inline void PackRows(const Im2colBlock& b, int8_t* rows, int8_t* packed_b,
                     int32_t* __restrict col_sum) {
  const ConvGeometry& g = *b.g;
  const int64_t in_plane = g.in_h * g.in_w;
  const int g_size = b.k_group;
  const int64_t k_groups = CeilDiv(b.k, g_size), cols = b.cols, count = b.count;
  const int64_t oy0 = b.p0 / g.out_w, ox0 = b.p0 % g.out_w;
  std::vector<TapColumn> tap_columns(g.kernel_w);
  for (int64_t kx = 0; kx < g.kernel_w; ++kx) tap_columns[kx] = MakeTapColumn(g, kx);
  if (col_sum != nullptr) std::fill_n(col_sum, count, 0);
  int64_t c = 0, ky = 0,
          kx = 0;  // k = (c * kernel_h + ky) * kernel_w + kx, stepped without divisions
  for (int64_t group = 0; group < k_groups; ++group) {
    for (int i = 0; i < g_size; ++i) {
      const int64_t k = group * g_size + i;
      int8_t* __restrict row = rows + i * cols;
      if (k >= b.k) {  // padding k: the packed weights are 0 there
        std::fill_n(row, cols, 0);
        continue;
      }
      BuildRow(b, b.x_group + c * in_plane, ky, tap_columns[kx], oy0, ox0, row);
      std::fill(row + count, row + cols, 0);
      if (col_sum != nullptr) {
        for (int64_t j = 0; j < count; ++j) col_sum[j] += row[j];
      }
      if (++kx == g.kernel_w) {
        kx = 0;
        if (++ky == g.kernel_h) {
          ky = 0;
          ++c;
        }
      }
    }
    const int64_t panel_stride = k_groups * b.nr * g_size;
    if (g_size == 2) {
      InterleavePairs(rows, cols, b.nr, b.paired, panel_stride, packed_b + group * b.nr * 2);
    } else {
      Interleave(rows, cols, b.nr, panel_stride, packed_b + group * b.nr * kGroup);
    }
  }
}

inline void Pack(const Im2colBlock& b, int8_t* rows, int8_t* packed_b, int32_t* col_sum) {
#if defined(__AVX512VNNI__)
  // nr is 32 on this path.
  if (b.phases != nullptr || ShiftedRuns(*b.g)) {
    PackShiftedRuns(b, packed_b);
  } else {
    PackRows(b, rows, packed_b, nullptr);
  }
  if (col_sum == nullptr) return;
  // Column sums from the packed panels: vpdpbusd of ones with each group's 4
  // bytes per column (padding k and columns hold 0).
  const int64_t k_groups = CeilDiv(b.k, kGroup);
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t q = 0; q < b.cols / 32; ++q) {
    __m512i sum0 = _mm512_setzero_si512(), sum1 = _mm512_setzero_si512();
    const int8_t* panel = packed_b + q * k_groups * 32 * kGroup;
    for (int64_t group = 0; group < k_groups; ++group) {
      sum0 = _mm512_dpbusd_epi32(sum0, ones, _mm512_loadu_si512(panel + group * 128));
      sum1 = _mm512_dpbusd_epi32(sum1, ones, _mm512_loadu_si512(panel + group * 128 + 64));
    }
    _mm512_storeu_si512(col_sum + q * 32, sum0);
    _mm512_storeu_si512(col_sum + q * 32 + 16, sum1);
  }
#else
#if defined(__AVX2__)
  if (UsesAvx2ShiftedRuns(b.k_group, b.nr, b.paired, col_sum != nullptr) &&
      (b.phases != nullptr || ShiftedRuns(*b.g))) {
    return b.paired ? PackShiftedRunsAvx2<2>(b, packed_b) : PackShiftedRunsAvx2<4>(b, packed_b);
  }
#endif
  PackRows(b, rows, packed_b, col_sum);
#endif
}

}  // namespace
}  // namespace octet::conv
