// One node run with octet's kernels, outside a session: what the lookup-table
// rewrite evaluates (rewrite/rewrite.h NodeEvaluator), so a table equals the
// nodes it replaces by construction.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "graph/graph.h"

namespace octet {

// The node's outputs for these inputs (null: omitted), from the kernel the
// registry picks for their dtypes, run on the calling thread.
std::vector<Tensor> EvaluateNode(const Node& node, const std::vector<const Tensor*>& inputs);

}  // namespace octet
