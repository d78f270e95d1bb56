// GELU written out in float (how exporters and tools/models/build_minilm.py spell it):
//
//   e = Erf(Mul(x, 1/sqrt(2)));  y = Mul(Mul(x, Add(e, 1)), 0.5)   (or 0.5 applied to x first)
//
// becomes one ai.onnx Gelu (approximate="none"), one pass over x instead of five. The
// fused kernel computes 0.5 * x * (1 + erf(x * float(1/sqrt(2)))) with the same Erf, and
// scaling by 0.5 is exact, so the result has the same bits as the five nodes when the
// constants are exactly float(1/sqrt(2)), 1 and 0.5 (other spellings, such as a Div by
// sqrt(2), stay as written). ONNX Runtime makes the same fusion (GeluFusion).
#pragma once

#include "graph/graph.h"
#include "rewrite/qdq_matmul.h"

namespace octet {

void FuseFloatGelu(Graph& g, QdqReport& report);

}  // namespace octet
