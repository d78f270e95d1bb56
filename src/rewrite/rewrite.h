// Graph passes that run once at session creation, before kernels are chosen.
#pragma once

#include "graph/graph.h"

namespace octet {

// Runs every enabled pass over the graph (in place). Passes keep the graph's
// inputs, outputs and results unchanged; they only change how it is computed.
void ApplyRewrites(Graph& graph);

}  // namespace octet
