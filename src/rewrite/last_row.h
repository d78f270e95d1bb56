// The graph outputs a caller wants for their last row only (the last index of
// axis -2: a decoder's last position, all that greedy generation reads of its
// logits). Such an output is made by a product of independent rows: MatMul or
// com.microsoft MatMulNBits with weights computed from constants alone,
// optionally followed by Add of a constant vector (a bias). The pass inserts
// Slice(starts=[-1], ends=[max], axes=[-2]) on the product's input, before any
// QuantizeLinear / DequantizeLinear of one scale and zero point that leads to
// it (each quantizes every row alone, and the int8 folds still see their
// groups), so the product runs on one row and the output is [..., 1, N].
//
// Every product kernel computes a row to the same bits at any row count, so
// the row is the one the whole output would have held. Outputs of any other
// form stay whole; the pass says why in its report.
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"

namespace octet {

// Applies the pass to each named output; throws octet::Error when a name is
// not an output of the graph. Returns one line per name:
//   last_row output=<name>
//   last_row_refused output=<name> why=<reason>
std::vector<std::string> KeepLastRows(Graph& g, const std::vector<std::string>& outputs);

}  // namespace octet
