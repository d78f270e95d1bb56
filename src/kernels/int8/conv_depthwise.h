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

#include "kernels/int8/conv_reference.h"

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
// BuildDepthwisePlane with AVX-512 (stride_w 1 and 2 vectorized; same values).
void BuildDepthwisePlaneAvx512(const ConvGeometry& g, const uint8_t* channel, bool is_signed,
                               int32_t x_zero, int32_t* plane);
// DepthwiseChannelScalar with AVX-512 VNNI. Reads every tap row: p.data must
// have DepthwisePadding(g) zero rows above and below.
void DepthwiseChannelAvx512Vnni(const ConvGeometry& g, const DepthwisePlane& p, const int32_t* taps,
                                int64_t oy_begin, int64_t oy_end, int32_t* out);
#endif

}  // namespace octet::conv
