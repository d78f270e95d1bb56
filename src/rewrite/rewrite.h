// Graph passes that run once at session creation, before kernels are chosen.
#pragma once

#include <string>

#include "graph/graph.h"

namespace octet {

// Runs every enabled pass over the graph (in place). Passes keep the graph's
// inputs, outputs and results unchanged; they only change how it is computed.
void ApplyRewrites(Graph& graph);

// For `octet inspect MODEL`: what the QDQ passes would do to this graph (run on
// a copy), one line per fused or refused group in graph order:
//   fused   <op> '<node>' -> <what it became>
//   refused <op> '<node>' why=<reason>
// then `qdq_groups=<n> claimed=<n>`; says so when OCTET_QDQ=0 turns the passes off.
std::string DescribeRewrites(const Graph& graph);

}  // namespace octet
