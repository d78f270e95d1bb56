// Products that read the same input (a decoder layer's q, k and v projections; its
// gate and up projections) become one node: octet.NBitsSiblings for 4-bit weights,
// octet.QLinearMatMulSiblings for int8 ones (graph/octet_ops.h). One pass over their
// weights packed side by side instead of one per product, so a decoding step makes
// fewer and longer weight streams and gives the thread pool fewer and larger pieces of
// work. Every output keeps its bits (each column of these products is computed on its
// own).
#pragma once

#include "graph/graph.h"
#include "rewrite/qdq_report.h"

namespace octet {

// Merges, each family with its own:
// - com.microsoft MatMulNBits nodes (no g_idx, no bias) with the same input, K, bits,
//   block_size, accuracy_level and kind of zero point, and octet.BlockedDqMatMul nodes
//   with the same input, K, block_size and accuracy_level;
// - octet.QLinearMatMulFused nodes with float output, the same x and the same x scale
//   and zero point values (per tensor; an absent zero point is 0), and weights of one
//   type and K;
// when weights and their parameters are initializers. The merged node takes the first
// product's place.
void MergeSiblingProducts(Graph& g, QdqReport& report);

}  // namespace octet
