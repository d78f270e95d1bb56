// RMS normalization written out in float (how decoder exporters and
// tools/models/decoder.py spell it, and ai.onnx RMSNormalization's function body):
//
//   r = Reciprocal(Sqrt(Add(ReduceMean(Pow(x, 2), axes=[-1]), epsilon)));  y = Mul(Mul(x, r), w)
//
// becomes one ai.onnx RMSNormalization(x, w, axis=-1, epsilon), one pass per row
// instead of seven over the tensor. Pow(x, 2) may be Mul(x, x) and Reciprocal a Div(1, s);
// epsilon, 1 and w are constants of rank <= 1 (so no node's output grows past x's shape).
// The kernel evaluates the same operations as octet's separate kernels (x^2 as one
// multiply, the mean accumulated in double in increasing index), so the bits are the
// graph's. Other spellings (a Div by the root, a scale before the normalization) stay as
// written, as do nodes whose intermediate values something else reads.
#pragma once

#include "graph/graph.h"
#include "rewrite/qdq_report.h"

namespace octet {

void FuseFloatRmsNorm(Graph& g, QdqReport& report);

}  // namespace octet
