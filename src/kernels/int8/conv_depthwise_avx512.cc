// The depthwise plane (conv_depthwise.h) built with AVX-512: 16 input bytes
// widened to x - x_zero per step.

#include <immintrin.h>

#include <algorithm>

#include "kernels/int8/conv_depthwise.h"

namespace octet::conv {

namespace {

inline __mmask16 TailMask(int64_t remaining) {
  return remaining >= 16 ? static_cast<__mmask16>(0xFFFF)
                         : static_cast<__mmask16>((1u << remaining) - 1);
}

// dst[0, n) = 0 with masked stores: the padding runs are a few values, for
// which a memset call costs more than the stores.
void ZeroRun(int32_t* dst, int64_t n) {
  for (int64_t t = 0; t < n; t += 16)
    _mm512_mask_storeu_epi32(dst + t, TailMask(n - t), _mm512_setzero_si512());
}

// dst[t] = src[t * stride] - x_zero for t in [0, n), stride 1 or 2, 16 values per
// step; masked loads read only the bytes used (src may start inside the padding's
// reach, but never outside the row's bytes that are read).
template <bool kSigned, int kStride>
void WidenRun(const uint8_t* src, int64_t n, __m512i zero, int32_t* dst) {
  for (int64_t t = 0; t < n; t += 16) {
    const __mmask16 m = TailMask(n - t);
    __m512i v;
    if constexpr (kStride == 1) {
      const __m128i bytes = _mm_maskz_loadu_epi8(m, src + t);
      v = kSigned ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes);
    } else {
      // The even bytes of the 2 x min(16, n - t) bytes spanned.
      const int64_t spanned = 2 * std::min<int64_t>(16, n - t);
      const __mmask32 even = (spanned >= 32 ? ~0u : (1u << spanned) - 1) & 0x55555555u;
      const __m512i words = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi8(even, src + 2 * t));
      v = kSigned ? _mm512_srai_epi32(_mm512_slli_epi32(words, 24), 24)
                  : _mm512_and_si512(words, _mm512_set1_epi32(0xFF));
    }
    _mm512_mask_storeu_epi32(dst + t, m, _mm512_sub_epi32(v, zero));
  }
}

template <bool kSigned>
void BuildPlane(const ConvGeometry& g, const uint8_t* channel, int32_t x_zero, int32_t* plane) {
  const int64_t phase_len = DepthwisePhaseLength(g), s = g.stride_w;
  const __m512i zero = _mm512_set1_epi32(x_zero);
  for (int64_t ph = 0; ph < s; ++ph) {
    // Phase values t with ix = t * s + ph - pad_left inside the row: [lo, hi).
    const int64_t start = ph - g.pad_left;
    const int64_t lo = std::min(phase_len, start >= 0 ? 0 : (-start + s - 1) / s);
    const int64_t hi = std::clamp<int64_t>((g.in_w - start + s - 1) / s, lo, phase_len);
    for (int64_t iy = 0; iy < g.in_h; ++iy) {
      const uint8_t* src = channel + iy * g.in_w + start + lo * s;
      int32_t* dst = plane + (iy * s + ph) * phase_len;
      ZeroRun(dst, lo);
      if (s == 1) {
        WidenRun<kSigned, 1>(src, hi - lo, zero, dst + lo);
      } else {
        WidenRun<kSigned, 2>(src, hi - lo, zero, dst + lo);
      }
      ZeroRun(dst + hi, phase_len - hi);
    }
  }
}

}  // namespace

void BuildDepthwisePlaneAvx512(const ConvGeometry& g, const uint8_t* channel, bool is_signed,
                               int32_t x_zero, int32_t* plane) {
  if (g.stride_w > 2) return BuildDepthwisePlane(g, channel, is_signed, x_zero, plane);
  if (is_signed) {
    BuildPlane<true>(g, channel, x_zero, plane);
  } else {
    BuildPlane<false>(g, channel, x_zero, plane);
  }
}

}  // namespace octet::conv
