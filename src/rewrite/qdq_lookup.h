// Pointwise chains on 8-bit data become one table lookup (docs/qdq.md, "Lookup tables").
//
//   x (int8/uint8) -> DequantizeLinear -> Sigmoid -> QuantizeLinear -> octet.QdqMul(x, .) -> y
//
// Every value of y depends on one value of x only, and x has 256 possible values, so
// the chain is y = table[x]. The table is made by running the chain's own kernels
// (`evaluate`, the session's kernels) on the 256 values, so the lookup gives the bits
// the unfused nodes give, by construction.
// A chain qualifies when every node is pointwise (ops listed in qdq_lookup.cc), every
// input not computed from x is a one-element constant, and no value inside it is read
// outside it; the largest such chain from each x is taken.
#pragma once

#include "graph/graph.h"
#include "rewrite/qdq_report.h"
#include "rewrite/rewrite.h"

namespace octet {

void FoldPointwiseChainsToTables(Graph& g, QdqReport& report, const NodeEvaluator& evaluate);

}  // namespace octet
