// The SiLU-gated product of decoder MLPs written out in float (how decoder exporters and
// tools/models/decoder.py spell it):
//
//   y = Mul(Mul(g, Sigmoid(g)), up)      (each Mul's operands in either order)
//
// becomes one octet.GatedSilu(g, up) (graph/octet_ops.h), one pass instead of three nodes
// and their two intermediate tensors. The kernel applies the same Sigmoid and the two
// multiplies to each element, so the bits are the graph's. Nodes whose intermediate values
// something else reads stay as written.
#pragma once

#include "graph/graph.h"
#include "rewrite/qdq_report.h"

namespace octet {

void FuseFloatGatedSilu(Graph& g, QdqReport& report);

}  // namespace octet
