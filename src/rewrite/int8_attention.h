// Attention's int8 head Transposes folded into the run-time-B QLinearMatMuls
// around them. A Transpose with perm [0, 2, 1, 3] (heads split off
// [B, S, H, D] -> [B, H, S, D]) or, on B only, [0, 2, 3, 1] (K^T) that is read
// only by a QLinearMatMul's A or B input, and a QLinearMatMul read only by a
// Transpose [0, 2, 1, 3] (heads merged back), are removed; the QLinearMatMul
// gets the perm as an attribute (graph/octet_ops.h: octet_a_perm / _b_perm / _y_perm)
// and reads or writes the untransposed tensor through strides
// (MatMulHeadLayout in ops/int_matmul_shape.h). A Transpose is pure data
// movement, so the bytes are the same.
#pragma once

#include "graph/graph.h"
#include "rewrite/qdq_report.h"

namespace octet {

void FoldInt8HeadTransposes(Graph& g, QdqReport& report);

}  // namespace octet
