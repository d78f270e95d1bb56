// The QDQ MatMul/Gemm fold (docs/qdq.md):
//
//   DequantizeLinear(x) ---------------+
//                                       +--> MatMul | Gemm --> [QuantizeLinear] --> y
//   DequantizeLinear(W, constant) -----+     (Gemm: optional int32 DequantizeLinear bias)
//
// becomes one octet.QLinearMatMulFused (graph/octet_ops.h) that multiplies the
// 8-bit integers and requantizes the int32 result once, in ONNX Runtime's float
// order. Groups whose parameters cannot fold are left alone and counted by reason.
#pragma once

#include "graph/graph.h"
#include "rewrite/qdq_report.h"

namespace octet {

// Rewrites g in place. The graph's inputs and outputs, and every value that
// some remaining node consumes, stay produced; nodes stay topologically ordered.
QdqReport FuseQdqMatMul(Graph& g);

}  // namespace octet
