// The forward route (issue 17, seed 000): float MatMuls with a constant 2-D weight
// run on the int8 GEMM. Opt-in (SessionOptions::float_matmul, the ORT plugin's
// `float_matmul=int8`): the result approximates the float product (per-row and
// per-column symmetric int8, amax / 127), it is not equal to it. A folded 4-bit
// DequantizeLinear -> MatMul (octet.BlockedDqMatMul) takes MatMulNBits'
// accuracy_level 4 arithmetic instead of the float one: what ONNX Runtime makes
// of that pair by default.
#pragma once

#include "graph/graph.h"
#include "rewrite/qdq_report.h"

namespace octet {

// Replaces every ai.onnx MatMul(x float32, W) whose W is a constant float32
// [K, N] initializer with octet.Int8DynamicMatMul(x, w_q, w_scale)
// (graph/octet_ops.h): W is quantized here, once, and dropped from the graph
// when nothing else reads it. Refusals go to the report (op=MatMul):
// weight_not_constant, weight_rank, weight_not_finite, activation_dtype,
// k_too_large. Every octet.BlockedDqMatMul gets accuracy_level=4.
void QuantizeFloatMatMuls(Graph& graph, QdqReport& report);

}  // namespace octet
