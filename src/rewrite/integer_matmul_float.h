// The float tail of ONNX Runtime's dynamic quantization (quantize_dynamic, QOperator):
//
//   MatMulInteger(A, B, a_zero, b_zero) -> Cast(to float) -> Mul(., S) [-> Add(., bias)]
//
// becomes com.microsoft MatMulIntegerToFloat(A, B, 1.0, S, a_zero, b_zero [, bias]), as
// ONNX Runtime's MatMulIntegerToFloatFusion does: the product's float epilogue then does
// the cast, the scale and the bias in one pass, with the same float operations
// (float(acc) * (1.0 * S[n]) = float(acc) * S[n], then + bias[n]; docs/qdq.md).
// S must be one value or one per column of a constant B, known from the graph: a constant,
// or a Mul of constants and DynamicQuantizeLinear scales (the quantizer's scale product).
#pragma once

#include "graph/graph.h"
#include "rewrite/qdq_matmul.h"

namespace octet {

void FoldMatMulIntegerToFloat(Graph& g, QdqReport& report);

}  // namespace octet
