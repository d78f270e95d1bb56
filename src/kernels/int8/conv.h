// The exact int8 convolution (ConvInteger, QLinearConv, fused DQ -> Conv -> Q):
// NCHW activations, OIHW weights, 1-D and 2-D, groups, strides, dilations and
// pads, computed on the raw 8-bit integers and identical to ConvReferenceS32
// on every instruction-set path and thread count, then finished by one
// Epilogue (epilogue.h) whose rows are the output channels and whose columns
// are the output pixels. docs/conv.md describes it.
//
// An Int8Conv is made once per constant weight (session creation). It chooses
// its path once (ConvPathName), and the path owns its packed weights:
//   gemm              im2col fused into the packing of the GEMM's B operand, the
//                     weights as the packed A of a gemm_kernels.h micro-kernel
//                     that finishes in its registers (every ISA);
//   indirect          NHWC, an indirect micro-kernel (AVX-512 VNNI, group 1,
//                     kernels larger than 1x1, int8 weights with zero points 0);
//   depthwise         one input channel per group, a direct plane kernel;
//   depthwise_vector  16 channels per vector (AVX-512 VNNI, multiplier 1, int8
//                     weights with zero points 0; 8-bit outputs, int32 ones take
//                     the depthwise plane kernel).
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/int8/conv_reference.h"  // ConvGeometry, Int8ConvOperand
#include "kernels/int8/epilogue.h"
#include "kernels/isa.h"

namespace octet {

class ThreadPool;

namespace conv {
class Path;
}

class Int8Conv {
 public:
  // Packs w [out_channels, in_channels / group, kernel_h, kernel_w] (its bytes
  // are copied; w need not outlive the object) for `isa`, which must be
  // supported here. Only the weight fields of `shape` are used (out_channels,
  // in_channels, group, kernel_h, kernel_w); w.zero holds one value or
  // out_channels values (w.zero_per_channel). Throws octet::Error when K =
  // in_channels / group * kernel_h * kernel_w exceeds kGemmMaxK.
  Int8Conv(const ConvGeometry& shape, const Int8ConvOperand& w, Isa isa);
  ~Int8Conv();

  // y [batch, out_channels, out_h, out_w] of the epilogue's output type =
  // epilogue(ConvReferenceS32(g, x, w)) at (output channel, output pixel). g must
  // match the weight fields given at creation; x.zero is one value.
  void Run(const ConvGeometry& g, const Int8ConvOperand& x, const Epilogue& epilogue, void* y,
           ThreadPool* pool) const;

  // "gemm", "indirect", "depthwise" or "depthwise_vector".
  const char* path_name() const;

 private:
  ConvGeometry shape_;
  std::unique_ptr<const conv::Path> path_;
};

}  // namespace octet
