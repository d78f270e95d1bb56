// The exact int8 convolution (ConvInteger, QLinearConv, fused DQ -> Conv -> Q):
// NCHW activations, OIHW weights, 1-D and 2-D, groups, strides, dilations and
// pads, computed on the raw 8-bit integers and identical to ConvReferenceS32
// on every instruction-set path and thread count. docs/conv.md describes it.
//
// An Int8Conv is made once per constant weight (session creation): it packs
// each group's weights for the GEMM micro-kernel (gemm_pack.h) with their row
// sums and zero-point terms. Each run packs the im2col view of x straight into
// the micro-kernel's B layout, one block of output pixels at a time (no column
// buffer), and applies the requantization epilogue (requantize.h) to each
// block while it is in cache (on AVX-512 VNNI with symmetric int8 weights, in
// the micro-tile's registers: conv_pack.h RequantTile). Depthwise
// convolutions (one input channel per group) take a direct kernel instead,
// and dense kernels larger than 1x1 with symmetric int8 weights on AVX-512
// VNNI the NHWC indirect one (conv_indirect.h).
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "kernels/int8/conv_depthwise.h"
#include "kernels/int8/conv_indirect.h"
#include "kernels/int8/conv_reference.h"  // ConvGeometry, Int8ConvOperand
#include "kernels/isa.h"

namespace octet {

class ThreadPool;

// The QLinearConv epilogue, per output channel o:
//   y = clamp(requantize(acc + bias[o], multipliers[per_channel ? o : 0], zero_point),
//             y_min, y_max)
// with requantize.h's formula (multiplier = x_scale * w_scale[o] / y_scale).
struct ConvRequantize {
  const float* multipliers = nullptr;  // out_channels entries when per_channel, else one
  bool per_channel = false;
  const int32_t* bias = nullptr;  // out_channels entries, or null
  int32_t zero_point = 0;         // within output_type's range
  DType output_type = DType::kUInt8;
  // Integer clamp of the requantized values (an absorbed Relu / Clip); the
  // defaults leave the type's full range.
  int32_t y_min = INT32_MIN;
  int32_t y_max = INT32_MAX;
};

class Int8Conv {
 public:
  // Packs w [out_channels, in_channels / group, kernel_h, kernel_w] (its bytes
  // are copied; w need not outlive the object). Only the weight fields of
  // `shape` are used (out_channels, in_channels, group, kernel_h, kernel_w);
  // w.zero holds one value or out_channels values (w.zero_per_channel).
  // Throws octet::Error when K = in_channels / group * kernel_h * kernel_w
  // exceeds kGemmMaxK or `isa` cannot run here.
  Int8Conv(const ConvGeometry& shape, const Int8ConvOperand& w, Isa isa = ActiveIsa());

  // y: int32 [batch, out_channels, out_h, out_w] = ConvReferenceS32(g, x, w).
  // g must match the weight fields given at creation; x.zero is one value.
  void RunS32(const ConvGeometry& g, const Int8ConvOperand& x, int32_t* y, ThreadPool* pool) const;

  // y: uint8/int8 [batch, out_channels, out_h, out_w], the convolution
  // requantized by `rq`.
  void RunRequantized(const ConvGeometry& g, const Int8ConvOperand& x, const ConvRequantize& rq,
                      void* y, ThreadPool* pool) const;

  bool depthwise() const { return depthwise_; }
  Isa isa() const { return isa_; }

 private:
  struct Output;  // RunS32's or RunRequantized's destination
  void Run(const ConvGeometry& g, const Int8ConvOperand& x, const Output& out,
           ThreadPool* pool) const;
  void RunGemm(const ConvGeometry& g, const Int8ConvOperand& x, const Output& out,
               ThreadPool* pool) const;
  void RunDepthwise(const ConvGeometry& g, const Int8ConvOperand& x, const Output& out,
                    ThreadPool* pool) const;
  void RunIndirect(const ConvGeometry& g, const Int8ConvOperand& x, const Output& out,
                   ThreadPool* pool) const;
  void RunDepthwiseVector(const ConvGeometry& g, const Int8ConvOperand& x, const Output& out,
                          ThreadPool* pool) const;

  ConvGeometry shape_;
  Isa isa_;
  bool depthwise_ = false;
  // GEMM path with int8 weights whose zero points are all 0 (AVX-512 VNNI):
  // the weights are packed as they are (signed A), x as uint8 (unsigned B,
  // TileAvx512VnniUnsignedB), and sum (w)(x - zx) = sum w x - zx * rowsum(w)
  // needs no column sums: the second term is a per-channel constant, added
  // with the bias.
  bool unsigned_b_ = false;
  // The NHWC indirect path (AVX-512 VNNI, group 1, kernel larger than 1x1,
  // int8 weights with zero points 0): its weights instead of packed_w_.
  bool indirect_ = false;
  conv::IndirectWeights indirect_w_;
  int64_t k_ = 0;         // in_channels / group * kernel_h * kernel_w
  int64_t k_groups_ = 0;  // k_ rounded up to groups of 4
  // GEMM path: per group, the packed weight panels (gemm_pack.h's A layout)
  // and per output channel -(w_zero in the A domain) and -(row sum of the packed A).
  std::vector<uint8_t> packed_w_;
  std::vector<int32_t> row_neg_za_, row_neg_sum_;
  // Depthwise path: w - w_zero per output channel and tap.
  std::vector<int32_t> taps_;
  // The channel-vector depthwise path (AVX-512 VNNI, one output channel per
  // group, int8 weights with zero points 0, requantized output): its weights.
  bool depthwise_vector_ = false;
  conv::DepthwiseVectorWeights depthwise_vector_w_;
};

}  // namespace octet
