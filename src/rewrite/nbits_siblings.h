// 4-bit products that read the same input (a decoder layer's q, k and v projections;
// its gate and up projections) become one octet.NBitsSiblings node (graph/octet_ops.h):
// one pass over their packed weights instead of one per product, so a decoding step
// makes fewer and longer weight streams and gives the thread pool fewer and larger
// pieces of work. Every output keeps its bits (each column of a 4-bit product is
// computed on its own).
#pragma once

#include "graph/graph.h"
#include "rewrite/qdq_report.h"

namespace octet {

// Merges com.microsoft MatMulNBits nodes (no g_idx, no bias) with the same input, K, bits,
// block_size, accuracy_level and kind of zero point, and octet.BlockedDqMatMul nodes with
// the same input, K, block_size and accuracy_level; weights, scales and zero points must
// be initializers. The merged node takes the first product's place.
void MergeNBitsSiblings(Graph& g, QdqReport& report);

}  // namespace octet
