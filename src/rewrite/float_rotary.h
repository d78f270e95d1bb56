// Rotary position embedding's rotate-half form written out in float (how decoder
// exporters and tools/models/decoder.py spell it):
//
//   rot = Concat(Neg(Slice(x, [half], [end], [-1])), Slice(x, [0], [half], [-1]), axis=-1)
//   y   = Add(Mul(x, cos), Mul(rot, sin))
//
// becomes one octet.Rotary(x, cos, sin) (graph/octet_ops.h), one pass over x instead of
// seven nodes and their intermediate tensors. Each element takes the same two multiplies
// and the add, so the bits are the graph's. The Slices must have constant non-negative
// bounds on the last axis with step 1; nodes whose intermediate values something else
// reads stay as written.
#pragma once

#include "graph/graph.h"
#include "rewrite/qdq_report.h"

namespace octet {

void FuseFloatRotary(Graph& g, QdqReport& report);

}  // namespace octet
