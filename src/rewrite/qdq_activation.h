// Relu / Clip next to fused QDQ groups (issue 4; docs/qdq.md, "Relu and Clip").
//
//   fused (int8 out) -> DequantizeLinear -> Relu | Clip -> QuantizeLinear
//
// becomes the fused node's integer output clamp (attributes y_min / y_max) when
// that is exactly what the three nodes compute: the table of all 256 inputs,
// built with ONNX Runtime's float steps, must equal a clamp. A float-output
// group followed by Relu | Clip -> QuantizeLinear is handled in qdq_matmul.cc
// with OrtKeepsActivation below.
#pragma once

#include <string>

#include "graph/graph.h"
#include "rewrite/qdq_conv.h"
#include "rewrite/qdq_matmul.h"
#include "rewrite/qdq_util.h"

namespace octet {

bool IsActivation(const Node& n);  // ai.onnx Relu or Clip

// octet.QLinearMatMulFused or octet.QLinearConvFused: fused nodes whose int8
// output can take an absorbed clamp (attributes y_min / y_max).
bool IsFusedQdqNode(const Node& n);

// Empty when ONNX Runtime removes this Relu / Clip in front of a QuantizeLinear
// with parameters q (its ReluQuantFusion / ClipQuantFusion rules) and the
// removal changes no quantized value; otherwise why the activation must stay.
std::string OrtKeepsActivation(const Graph& g, const Node& act, const ScalarQParams& q);

// Absorbs fused (MatMul or Conv) -> DQ -> Relu | Clip -> Q chains into the
// fused node's clamp.
void AbsorbQdqActivations(Graph& g, QdqReport& report);

}  // namespace octet
