// Internal to Int8Conv (conv.cc): the direct kernel for depthwise
// convolutions, where each output channel reads one input channel.
//
// The input channel is first widened to int32 as x - x_zero (so padding is 0)
// and each row is split into stride_w phases: phase ph holds padded columns
// ph, ph + stride_w, ph + 2 stride_w, ... Then every tap (ky, kx) reads a
// contiguous run of out_w values, at phase (kx * dilation_w) % stride_w and
// offset (kx * dilation_w) / stride_w, and the kernel is a sum of scaled rows.
// Integer sums wrap modulo 2^32, so every path gives the same bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/int8/conv_reference.h"
#include "kernels/int8/conv_requant.h"

namespace octet::conv {

struct DepthwisePlane {
  const int32_t* data;  // in_h rows of row_len values
  int64_t row_len;      // stride_w * phase_len
  int64_t phase_len;    // values per phase: ceil(padded width / stride_w)
  // Per kx: where its run starts in a row, (kx * dilation_w) % stride_w * phase_len +
  // (kx * dilation_w) / stride_w (DepthwiseTapOffsets).
  const int64_t* tap_offsets;
};

// The kernel_w entries of DepthwisePlane::tap_offsets.
void DepthwiseTapOffsets(const ConvGeometry& g, int64_t phase_len, int64_t* offsets);

// Values per phase for geometry g.
int64_t DepthwisePhaseLength(const ConvGeometry& g);

// Zero rows above (pad_top) and below the in_h rows that a kernel reading
// every tap row needs.
struct DepthwisePaddingRows {
  int64_t top, bottom;
};
DepthwisePaddingRows DepthwisePadding(const ConvGeometry& g);

// Fills plane (in_h * stride_w * phase_len values) from one input channel.
void BuildDepthwisePlane(const ConvGeometry& g, const uint8_t* channel, bool is_signed,
                         int32_t x_zero, int32_t* plane);

// For output rows oy in [oy_begin, oy_end):
// out[(oy - oy_begin) * out_w + ox] = sum over taps of plane values * taps[ky * kernel_w + kx].
void DepthwiseChannelScalar(const ConvGeometry& g, const DepthwisePlane& p, const int32_t* taps,
                            int64_t oy_begin, int64_t oy_end, int32_t* out);

#if defined(__x86_64__) || defined(_M_X64)
// BuildDepthwisePlane with AVX-512, and with AVX2 (stride_w 1 and 2 vectorized;
// same values).
void BuildDepthwisePlaneAvx512(const ConvGeometry& g, const uint8_t* channel, bool is_signed,
                               int32_t x_zero, int32_t* plane);
void BuildDepthwisePlaneAvx2(const ConvGeometry& g, const uint8_t* channel, bool is_signed,
                             int32_t x_zero, int32_t* plane);
// DepthwiseChannelScalar with AVX-512 VNNI, and with AVX2. Both read every tap
// row: p.data must have DepthwisePadding(g) zero rows above and below.
void DepthwiseChannelAvx512Vnni(const ConvGeometry& g, const DepthwisePlane& p, const int32_t* taps,
                                int64_t oy_begin, int64_t oy_end, int32_t* out);
void DepthwiseChannelAvx2(const ConvGeometry& g, const DepthwisePlane& p, const int32_t* taps,
                          int64_t oy_begin, int64_t oy_end, int32_t* out);
#endif

// The channel-vector depthwise path (AVX-512 VNNI; one output channel per
// input channel, int8 weights whose zero points are all 0, requantized
// output): x in a padded image of 16-channel blocks, a band of rows at a time
// (as on the indirect path, conv_indirect.h, but block b a plane of its own
// with 16 bytes per pixel: channels 16 b .. 16 b + 15, 0 past the channels),
// and a micro-tile of kDepthwiseVectorPixels consecutive output pixels x one
// block. Per tap, the block's 16 bytes of 4 pixels fill a zmm (one pixel per
// 128-bit lane) and vpdpbusd multiplies it by 4 weight vectors, vector k
// holding channel 4j + k's weight in byte k of dword j and 0 in the other
// three: accumulator k's dword j sums channel 4j + k alone. The sums are
// sum w * x' as on the indirect path (padding reads zb; the bias absorbs zb *
// colsum(w)). docs/conv.md, "Channel-vector depthwise path".
constexpr int64_t kDepthwiseVectorPixels = 16;

struct DepthwiseVectorWeights {
  int64_t cp = 0;  // channels rounded up to 16 (the image's blocks x 16)
  // [block of 16 channels][tap][k = 0..3][64 bytes]: byte 16 l + 4 j + i of
  // vector k is channel 4 j + k's weight when i == k, else 0 (the same in each
  // 128-bit lane l); 0 past the channels.
  std::vector<uint8_t> packed;
  // Per channel (channels entries): the sum of its int8 weights.
  std::vector<int32_t> col_sum;
};

// Packs int8 w [channels, 1, taps] (OIHW, one output channel per group).
DepthwiseVectorWeights PackDepthwiseVectorWeights(const int8_t* w, int64_t channels, int64_t taps);

// One micro-tile: output pixels [p, p + count) x channels [c, c + channels) of
// one block of 16, count <= kDepthwiseVectorPixels, channels <= 16.
struct DepthwiseVectorTile {
  // The kDepthwiseVectorPixels pixels' base positions in the first block's
  // plane (pixels past count repeat the last one: read, not stored), the
  // offset of this block's plane from it, and the taps' byte offsets.
  const uint8_t* const* pixels = nullptr;
  int64_t pixel_offset = 0;
  const int64_t* tap_offsets = nullptr;
  int64_t taps = 0;
  const uint8_t* w = nullptr;  // the block's packed weights
  ChannelRequant requant;      // 16 entries from channel c
  uint8_t* y = nullptr;        // output of channel c, pixel p
  int64_t ld = 0;              // bytes from one output channel to the next
  int64_t channels = 0;
  int64_t count = 0;
};

#if defined(__x86_64__) || defined(_M_X64)
void DepthwiseVectorTileAvx512Vnni(const DepthwiseVectorTile& t);

// `count` consecutive pixels of up to 16 NCHW channels of x (channel c's first
// at x + c * channel_stride) as 16 bytes per pixel from out (channel c at byte
// c, 0 past channels), each byte XOR flip: one block of 16 channels of the
// channel-vector path's image.
void ToBlocked16Avx512Vnni(const uint8_t* x, int64_t channels, int64_t channel_stride,
                           int64_t count, uint8_t flip, uint8_t* out);
#endif

}  // namespace octet::conv
