// The blocked 4-bit weight fold (docs/qdq.md, "4-bit weights"):
//
//   x (float) -----------------------------------------------+
//                                                            +--> MatMul --> y
//   DequantizeLinear(W int4 | uint4 constant, axis 0, block) +
//
// becomes one octet.BlockedDqMatMul (graph/octet_ops.h), which packs W's 4-bit
// codes once and computes the pair's product in the 4-bit kernel's float order
// (kernels/nbits/nbits.h) without making the float weights. Groups that cannot
// fold stay as written, counted by reason.
#pragma once

#include "graph/graph.h"
#include "rewrite/qdq_report.h"

namespace octet {

// Rewrites g in place, adding to report; runs after FuseQdqMatMul.
void FuseBlockedDqMatMul(Graph& g, QdqReport& report);

}  // namespace octet
