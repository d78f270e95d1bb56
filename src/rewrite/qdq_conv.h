// The QDQ Conv fold (docs/qdq.md, "Conv groups"):
//
//   DequantizeLinear(x) ---------------+
//   DequantizeLinear(W, constant) -----+--> Conv --> [Relu | Clip] --> QuantizeLinear --> y
//   [DequantizeLinear(int32 bias)] ----+
//
// becomes one octet.QLinearConvFused (graph/octet_ops.h): Int8Conv on the 8-bit
// integers, requantized once with the QLinearConv epilogue (ONNX Runtime's float
// order), so it equals ORT_ENABLE_ALL's QLinearConv bit for bit. Groups whose
// parameters cannot fold are left alone and counted by reason in the QdqReport.
#pragma once

#include "graph/graph.h"
#include "rewrite/qdq_report.h"

namespace octet {

// Rewrites g in place, adding to report. The graph's inputs and outputs, and
// every value some remaining node consumes, stay produced; nodes stay
// topologically ordered.
void FuseQdqConv(Graph& g, QdqReport& report);

}  // namespace octet
