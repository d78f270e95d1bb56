// Nodes whose every input is a constant run once, at session creation: their
// outputs become initializers and the nodes leave the graph. What a QDQ model
// leaves of these after the fusions is small (the DequantizeLinear of a
// LayerNormalization's scale and bias, of a quantized scalar) but runs on every
// call otherwise. Only small results are kept, so a large float tensor is never
// held in place of the quantized one it came from (a refused group's weight is
// still dequantized per run).
#pragma once

#include "graph/graph.h"
#include "rewrite/rewrite.h"

namespace octet {

// Folds the nodes (in graph order, so chains of them fold too) that read at least one
// input, only initializers (or omitted inputs), hold no subgraph, write no graph
// output, and whose inputs and outputs each total at most kFoldedBytes. The evaluator
// runs under a tensor size limit of kFoldedBytes, so a node that would make a larger
// tensor stops early; it stays, as does one the evaluator refuses (octet::Error), to
// run, or fail, where it always did.
inline constexpr size_t kFoldedBytes = size_t{64} << 10;
void FoldConstantNodes(Graph& g, const NodeEvaluator& evaluate);

}  // namespace octet
