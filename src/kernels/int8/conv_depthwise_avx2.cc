// AVX2 depthwise kernel and plane. The kernel: one vpmaddwd per tap and 8 output pixels, with w' in
// the low half of each lane and 0 in the high half, is x' * w' exactly (|x'|,
// |w'| <= 255 fit int16; the plane's int32 x' has x' in its low half), added
// into int32 lanes with the int32 wrap-around of the scalar kernel. The
// arithmetic of DepthwiseChannelAvx512Vnni without VNNI's fused add.
#include <immintrin.h>

#include <algorithm>

#include "kernels/int8/conv_depthwise.h"

namespace octet::conv {

namespace {

// The first `remaining` lanes (all when remaining >= 8).
inline __m256i TailMask(int64_t remaining) {
  return _mm256_cmpgt_epi32(
      _mm256_set1_epi32(static_cast<int32_t>(std::min<int64_t>(remaining, 8))),
      _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// kRows output rows x kVecs vectors of 8 pixels in registers, independent
// accumulators for vpmaddwd's latency. The plane has zero rows for the
// vertical padding, so every tap row is read; the last group of rows repeats
// the band's last row (same values written twice).
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
    for (int64_t ox0 = 0; ox0 < g.out_w; ox0 += kVecs * 8) {
      const int64_t vecs = (g.out_w - ox0 + 7) / 8;
      __m256i mask[kVecs];
      bool full[kVecs];
      __m256i acc[kRows][kVecs];
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) {
        const int64_t remaining = g.out_w - ox0 - v * 8;
        mask[v] = TailMask(std::max<int64_t>(remaining, 0));
        full[v] = remaining >= 8;
#pragma GCC unroll 8
        for (int i = 0; i < kRows; ++i) acc[i][v] = _mm256_setzero_si256();
      }
      for (int64_t ky = 0; ky < g.kernel_h; ++ky) {
        const int64_t row_offset = ky * g.dilation_h * p.row_len + ox0;
        for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
          const int64_t offset = row_offset + p.tap_offsets[kx];
          const __m256i w = _mm256_set1_epi32(taps[ky * g.kernel_w + kx] & 0xFFFF);
#pragma GCC unroll 8
          for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 4
            for (int v = 0; v < kVecs; ++v) {
              if (v >= vecs) break;  // the row's last chunk can be narrower
              const int32_t* src = rows[i] + offset + v * 8;
              const __m256i x = full[v] ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src))
                                        : _mm256_maskload_epi32(src, mask[v]);
              acc[i][v] = _mm256_add_epi32(acc[i][v], _mm256_madd_epi16(x, w));
            }
          }
        }
      }
#pragma GCC unroll 8
      for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 4
        for (int v = 0; v < kVecs; ++v) {
          if (v >= vecs) break;
          int32_t* dst = out + (out_rows[i] - oy_begin) * g.out_w + ox0 + v * 8;
          if (full[v]) {
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), acc[i][v]);
          } else {
            _mm256_maskstore_epi32(dst, mask[v], acc[i][v]);
          }
        }
      }
    }
  }
}

// dst[t] = src[t * kStride] - x_zero for t in [0, n), kStride 1 or 2: 8 values
// per step from 8 (16) bytes, never reading a byte past the last one used (x may
// be the caller's memory with nothing after it); the tail one value at a time.
template <bool kSigned, int kStride>
void WidenRun(const uint8_t* src, int64_t n, int32_t x_zero, int32_t* dst) {
  const __m256i zero = _mm256_set1_epi32(x_zero);
  // Even bytes of 16 to the low 8 (stride 2).
  const __m128i even = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1);
  int64_t t = 0;
  for (; t + 8 + (kStride - 1) <= n; t += 8) {
    __m128i bytes;
    if constexpr (kStride == 1) {
      bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + t));
    } else {
      bytes =
          _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * t)), even);
    }
    const __m256i v = kSigned ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + t), _mm256_sub_epi32(v, zero));
  }
  for (; t < n; ++t) {
    const uint8_t b = src[t * kStride];
    dst[t] = (kSigned ? static_cast<int8_t>(b) : b) - x_zero;
  }
}

template <bool kSigned>
void BuildPlane(const ConvGeometry& g, const uint8_t* channel, int32_t x_zero, int32_t* plane) {
  const int64_t phase_len = DepthwisePhaseLength(g), s = g.stride_w;
  for (int64_t ph = 0; ph < s; ++ph) {
    // Phase values t with ix = t * s + ph - pad_left inside the row: [lo, hi).
    const int64_t start = ph - g.pad_left;
    const int64_t lo = std::min(phase_len, start >= 0 ? 0 : (-start + s - 1) / s);
    const int64_t hi = std::clamp<int64_t>((g.in_w - start + s - 1) / s, lo, phase_len);
    for (int64_t iy = 0; iy < g.in_h; ++iy) {
      const uint8_t* src = channel + iy * g.in_w + start + lo * s;
      int32_t* dst = plane + (iy * s + ph) * phase_len;
      std::fill_n(dst, lo, 0);
      if (s == 1) {
        WidenRun<kSigned, 1>(src, hi - lo, x_zero, dst + lo);
      } else {
        WidenRun<kSigned, 2>(src, hi - lo, x_zero, dst + lo);
      }
      std::fill(dst + hi, dst + phase_len, 0);
    }
  }
}

}  // namespace

void DepthwiseChannelAvx2(const ConvGeometry& g, const DepthwisePlane& p, const int32_t* taps,
                          int64_t oy_begin, int64_t oy_end, int32_t* out) {
  // As many vectors as a row needs, up to 4 (narrow rows would otherwise multiply zeros).
  switch ((g.out_w + 7) / 8) {
    case 1:
      return Channel<1, 8>(g, p, taps, oy_begin, oy_end, out);
    case 2:
      return Channel<2, 4>(g, p, taps, oy_begin, oy_end, out);
    case 3:
      return Channel<3, 3>(g, p, taps, oy_begin, oy_end, out);
    default:
      return Channel<4, 2>(g, p, taps, oy_begin, oy_end, out);
  }
}

void BuildDepthwisePlaneAvx2(const ConvGeometry& g, const uint8_t* channel, bool is_signed,
                             int32_t x_zero, int32_t* plane) {
  if (g.stride_w > 2) return BuildDepthwisePlane(g, channel, is_signed, x_zero, plane);
  if (is_signed) {
    BuildPlane<true>(g, channel, x_zero, plane);
  } else {
    BuildPlane<false>(g, channel, x_zero, plane);
  }
}

}  // namespace octet::conv
