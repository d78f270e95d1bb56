// The NHWC indirect convolution (AVX-512 VNNI): Int8Conv's path for dense
// convolutions (group 1) with int8 weights whose zero points are all 0.
//
// x is transposed to a padded NHWC uint8 image, a band of rows at a time (the
// rows one band of output pixels reads, right before its micro-tiles): rows of
// `cp` bytes per pixel (channels padded to a multiple of 4; int8 x stored as
// x + 128, its zero point zb likewise), surrounded by the convolution's
// padding filled with zb, so every tap of every output pixel is a fixed offset
// from the pixel's base position and padding needs no test. The weights are packed once as the
// vpdpbusd vector operand: panels of 8-48 output channels (16 per zmm, a last
// 8 in a ymm), k
// ordered (ky, kx, channel group of 4). A micro-tile is kIndirectPixels output
// pixels x one panel: for each contiguous run of input bytes (a kernel row's
// kernel_w x cp bytes when dilation_w is 1, else one tap's cp bytes), 4 bytes
// per pixel are broadcast per channel group. The sums are sum w * x' over all
// taps, so the result is sum w (x' - zb) = sum - zb * colsum(w), the second
// term a per-channel constant added with the bias; padding reads zb and
// contributes exactly 0. docs/conv.md, "The NHWC indirect path".
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/int8/conv_requant.h"

namespace octet::conv {

// Output pixels per micro-tile (the broadcast operand's rows).
constexpr int64_t kIndirectPixels = 8;

struct IndirectWeights {
  int64_t cp = 0;           // input channels rounded up to a multiple of 4
  int64_t panel_width = 0;  // output channels per panel: 8, 16, 24, 32, 40 or 48
  int64_t panels = 0;
  // [panel][tap][channel group][panel_width channels][4 bytes]; channels
  // past out_channels and input channels past in_channels are 0.
  std::vector<uint8_t> packed;
  // Per output channel (panels * panel_width entries, 0 past
  // out_channels): the sum of its int8 weights.
  std::vector<int32_t> col_sum;
};

// Packs int8 w [out_channels, in_channels, taps] (OIHW, group 1).
IndirectWeights PackIndirectWeights(const int8_t* w, int64_t out_channels, int64_t in_channels,
                                    int64_t taps);

// One micro-tile: output pixels [p, p + count) x channels [o, o + channels)
// of one panel, count <= kIndirectPixels, channels <= panel_width.
struct IndirectTile {
  // The kIndirectPixels pixels' base positions in the padded NHWC image and
  // the byte offsets of the runs from them; each run is run_groups x 4 bytes.
  const uint8_t* const* pixels = nullptr;
  const int64_t* run_offsets = nullptr;
  int64_t runs = 0;
  int64_t run_groups = 0;
  const uint8_t* w = nullptr;  // the panel's packed weights
  // From channel o, panel_width rounded up to 16 entries (multipliers null:
  // int32 output).
  ChannelRequant requant;
  void* y = nullptr;  // output (uint8/int8, or int32 without multipliers) of channel o, pixel p
  int64_t ld = 0;     // elements from one output channel to the next
  int64_t channels = 0;
  int64_t count = 0;
};

void IndirectTileAvx512Vnni(int64_t panel_width, const IndirectTile& t);

// `count` consecutive pixels of NCHW x (channel c's first at x + c *
// channel_stride) as NHWC rows of cp bytes from nhwc, each byte XOR flip; the
// pad channels are 0.
void ToNhwcAvx512Vnni(const uint8_t* x, int64_t channels, int64_t channel_stride, int64_t count,
                      uint8_t flip, int64_t cp, uint8_t* nhwc);

}  // namespace octet::conv
