// DequantizeLinear(a), DequantizeLinear(b) -> Add | Mul -> QuantizeLinear with
// per-tensor constant parameters and one 8-bit type throughout becomes one
// com.microsoft QLinearAdd | QLinearMul node (ops/qlinear_binary.cc): the node
// ONNX Runtime's QDQ fusion makes, so the result equals ORT_ENABLE_ALL bit for
// bit (issue 4; docs/qdq.md, "Binary ops").
#pragma once

#include "graph/graph.h"
#include "rewrite/qdq_matmul.h"

namespace octet {

void FuseQdqBinary(Graph& g, QdqReport& report);

}  // namespace octet
