// The register epilogue of the AVX-512 convolution tiles (conv_pack.h
// RequantTile, conv_indirect.h IndirectTile, conv_depthwise.h
// DepthwiseVectorTile): epilogue.h's 8-bit output with every operand per
// output channel, in the form those tiles load it. conv.cc derives it from the
// convolution's one Epilogue (ChannelRequantFor); the tiles apply
// epilogue_impl.h's Requantize to it.
#pragma once

#include <cstdint>

namespace octet::conv {

struct ChannelRequant {
  // From the tile's first output channel: the sums' starting values (the
  // epilogue's bias plus the zero-point term the path folds in, int32,
  // wrapping) and the multipliers (null: int32 output, indirect path only).
  const int32_t* bias = nullptr;
  const float* multipliers = nullptr;
  float lo = 0, hi = 0;  // the float clamp, relative to the zero point
  int32_t zero_point = 0;
  bool signed_output = false;  // int8 (else uint8) output
};

}  // namespace octet::conv
