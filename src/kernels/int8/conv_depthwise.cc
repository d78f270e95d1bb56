#include "kernels/int8/conv_depthwise.h"

#include <algorithm>

namespace octet::conv {

int64_t DepthwisePhaseLength(const ConvGeometry& g) {
  const int64_t padded_w = (g.out_w - 1) * g.stride_w + (g.kernel_w - 1) * g.dilation_w + 1;
  return (padded_w + g.stride_w - 1) / g.stride_w;
}

void DepthwiseTapOffsets(const ConvGeometry& g, int64_t phase_len, int64_t* offsets) {
  for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
    const int64_t offset = kx * g.dilation_w;
    offsets[kx] = (offset % g.stride_w) * phase_len + offset / g.stride_w;
  }
}

DepthwisePaddingRows DepthwisePadding(const ConvGeometry& g) {
  const int64_t last_row = (g.out_h - 1) * g.stride_h - g.pad_top + (g.kernel_h - 1) * g.dilation_h;
  return {std::max<int64_t>(0, g.pad_top), std::max<int64_t>(0, last_row - (g.in_h - 1))};
}

namespace {
template <typename T>
void BuildPlane(const ConvGeometry& g, const T* channel, int32_t x_zero, int32_t* plane) {
  const int64_t phase_len = DepthwisePhaseLength(g), s = g.stride_w;
  for (int64_t ph = 0; ph < s; ++ph) {
    // Phase values t with ix = t * s + ph - pad_left inside the row: [lo, hi).
    const int64_t start = ph - g.pad_left;
    const int64_t lo = std::min(phase_len, start >= 0 ? 0 : (-start + s - 1) / s);
    const int64_t hi = std::clamp<int64_t>((g.in_w - start + s - 1) / s, lo, phase_len);
    for (int64_t iy = 0; iy < g.in_h; ++iy) {
      const T* src = channel + iy * g.in_w + start;
      int32_t* dst = plane + (iy * s + ph) * phase_len;
      std::fill_n(dst, lo, 0);
      if (s == 1) {
        for (int64_t t = lo; t < hi; ++t) dst[t] = static_cast<int32_t>(src[t]) - x_zero;
      } else {
        for (int64_t t = lo; t < hi; ++t) dst[t] = static_cast<int32_t>(src[t * s]) - x_zero;
      }
      std::fill(dst + hi, dst + phase_len, 0);
    }
  }
}
}  // namespace

void BuildDepthwisePlane(const ConvGeometry& g, const uint8_t* channel, bool is_signed,
                         int32_t x_zero, int32_t* plane) {
  if (is_signed) {
    BuildPlane(g, reinterpret_cast<const int8_t*>(channel), x_zero, plane);
  } else {
    BuildPlane(g, channel, x_zero, plane);
  }
}

void DepthwiseChannelScalar(const ConvGeometry& g, const DepthwisePlane& p, const int32_t* taps,
                            int64_t oy_begin, int64_t oy_end, int32_t* out) {
  for (int64_t oy = oy_begin; oy < oy_end; ++oy) {
    uint32_t* acc = reinterpret_cast<uint32_t*>(out + (oy - oy_begin) * g.out_w);
    std::fill_n(acc, g.out_w, 0u);
    for (int64_t ky = 0; ky < g.kernel_h; ++ky) {
      const int64_t iy = oy * g.stride_h - g.pad_top + ky * g.dilation_h;
      if (iy < 0 || iy >= g.in_h) continue;  // padding rows contribute 0
      const int32_t* row = p.data + iy * p.row_len;
      for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
        const int32_t* src = row + p.tap_offsets[kx];
        const uint32_t w = static_cast<uint32_t>(taps[ky * g.kernel_w + kx]);
        for (int64_t ox = 0; ox < g.out_w; ++ox) acc[ox] += static_cast<uint32_t>(src[ox]) * w;
      }
    }
  }
}

DepthwiseVectorWeights PackDepthwiseVectorWeights(const int8_t* w, int64_t channels, int64_t taps) {
  DepthwiseVectorWeights p;
  p.cp = (channels + 15) / 16 * 16;
  p.packed.assign(p.cp / 16 * taps * 4 * 64, 0);
  p.col_sum.assign(channels, 0);
  for (int64_t c = 0; c < channels; ++c) {
    const int64_t block = c / 16, j = c % 16 / 4, k = c % 4;
    for (int64_t t = 0; t < taps; ++t) {
      const int8_t v = w[c * taps + t];
      p.col_sum[c] += v;
      uint8_t* vector = p.packed.data() + ((block * taps + t) * 4 + k) * 64;
      for (int64_t lane = 0; lane < 4; ++lane)
        vector[16 * lane + 4 * j + k] = static_cast<uint8_t>(v);
    }
  }
  return p;
}

}  // namespace octet::conv
