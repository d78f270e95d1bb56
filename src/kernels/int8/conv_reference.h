// The naive integer convolution every fast convolution kernel is tested
// against: NCHW input, OIHW weights (I = in_channels / group), exact int64
// sums returned as int32 (wrapping, as int32 hardware accumulation would).
// A 1-D convolution is the 2-D one with in_h = out_h = kernel_h = 1.
#pragma once

#include <cstdint>

namespace octet {

struct ConvGeometry {
  int64_t batch = 0;
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  int64_t group = 1;
  int64_t in_h = 1, in_w = 0;
  int64_t out_h = 1, out_w = 0;
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0;  // the bottom/right pads only shape out_h / out_w
};

// One 8-bit tensor with its zero points: zero has out_channels entries when
// zero_per_channel (weights only), else one.
struct Int8ConvOperand {
  const void* data = nullptr;
  bool is_signed = false;
  const int32_t* zero = nullptr;  // nullptr means zero point 0
  bool zero_per_channel = false;
};

// y[n, o, oy, ox] = sum over the input channels c of o's group, ky, kx of
//   (x[n, c, iy, ix] - x_zero) * (w[o, c - group_start, ky, kx] - w_zero[o]),
// iy = oy * stride_h - pad_top + ky * dilation_h (ix likewise). Positions in the
// padding contribute 0: padding holds the input's zero point.
void ConvReferenceS32(const ConvGeometry& g, const Int8ConvOperand& x, const Int8ConvOperand& w,
                      int32_t* y);

}  // namespace octet
