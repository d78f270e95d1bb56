// The QDQ Conv fold (issue 6; docs/qdq.md, "Conv groups"):
//
//   DequantizeLinear(x) ---------------+
//   DequantizeLinear(W, constant) -----+--> Conv --> [Relu | Clip] --> QuantizeLinear --> y
//   [DequantizeLinear(int32 bias)] ----+
//
// becomes one node octet.QLinearConvFused that runs Int8Conv on the 8-bit
// integers and requantizes the int32 result once with the QLinearConv epilogue
// (ONNX Runtime's float order), so it equals ORT_ENABLE_ALL's QLinearConv bit
// for bit. Groups whose parameters cannot fold are left alone and counted by
// reason in the shared QdqReport.
#pragma once

#include "graph/graph.h"
#include "rewrite/qdq_matmul.h"

namespace octet {

inline constexpr const char* kFusedConvOp = "QLinearConvFused";

// Fused node interface: QLinearConv's inputs, with the zero points optional
// (-1 = omitted, meaning 0 of the operand's type).
enum FusedConvInput {
  kFusedConvX = 0,   // int8/uint8 activations [N, C, (H,) W]
  kFusedConvXScale,  // float32 scalar
  kFusedConvXZero,   // optional, x's dtype, scalar
  kFusedConvW,       // int8/uint8 constant weight [M, C/group, (kH,) kW]
  kFusedConvWScale,  // float32 constant, one value or M (per output channel)
  kFusedConvWZero,   // optional, W's dtype, same layout as the scale
  kFusedConvYScale,  // float32 scalar
  kFusedConvYZero,   // optional 8-bit scalar
  kFusedConvBias,    // optional int32 constant [M]; its scale is x_scale * w_scale[o]
  kFusedConvInputCount
};
// The output parameters sit where the fused MatMul node has them, so the Relu /
// Clip absorption (rewrite/qdq_activation.h) reads both node kinds alike.
static_assert(int{kFusedConvYScale} == int{kFusedYScale} &&
              int{kFusedConvYZero} == int{kFusedYZero});
// Attributes: the Conv's own (auto_pad, group, kernel_shape, strides, dilations,
// pads), y_type (DType of the output when y_zero_point is omitted), y_min / y_max
// (optional integer clamp of the output, from an absorbed Relu / Clip).

// Rewrites g in place, adding to report. The graph's inputs and outputs, and
// every value some remaining node consumes, stay produced; nodes stay
// topologically ordered.
void FuseQdqConv(Graph& g, QdqReport& report);

}  // namespace octet
