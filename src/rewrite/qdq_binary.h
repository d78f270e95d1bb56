// DequantizeLinear(a), DequantizeLinear(b) -> Add | Mul -> QuantizeLinear with
// per-tensor constant 8-bit parameters becomes one node that computes what ONNX
// Runtime 1.31.1 at ORT_ENABLE_ALL (x86, default session options) computes for the
// group, bit for bit, on the 8-bit tensors (issue 4; docs/qdq.md, "Binary ops"):
// - com.microsoft QLinearAdd | QLinearMul where ORT fuses the group as stored;
// - octet.QdqAdd | QdqMul (graph/octet_ops.h), arithmetic="qlinear", shift=[a, b, c] where ORT
// fuses it
//   after moving some of its tensors from int8 to uint8 (shift 128 each);
// - octet.QdqAdd | QdqMul, arithmetic="float" where ORT keeps the three nodes and
//   runs them in float32 (the float steps, without the float tensors).
#pragma once

#include <vector>

#include "graph/graph.h"
#include "rewrite/qdq_report.h"

namespace octet {

// ORT's QDQS8ToU8Transformer (level 2; runs unless session.qdqisint8allowed=1, which
// x86 does not set by default): a QuantizeLinear whose output has exactly one consumer
// edge after EnsureUniqueDQForNodeUnit, that consumer a DequantizeLinear, both with
// explicit, constant, one-value int8 zero points that are equal, is moved to uint8
// (zero point + 128). Returns, per value id, whether it is such a Q's output. Must see
// the graph as the model wrote it (before any octet pass).
std::vector<bool> FindOrtUint8Values(const Graph& g);

// ort_uint8_values: FindOrtUint8Values of the graph before the other passes ran
// (empty: none).
void FuseQdqBinary(Graph& g, QdqReport& report, const std::vector<bool>& ort_uint8_values = {});

}  // namespace octet
