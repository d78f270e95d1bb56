#include "rewrite/constant_fold.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "core/error.h"
#include "core/memory_limit.h"
#include "rewrite/qdq_util.h"

namespace octet {

namespace {

bool HoldsSubgraph(const Node& node) {
  for (const auto& [name, attribute] : node.attributes)
    if (attribute.kind == Attribute::Kind::kGraph) return true;
  return false;
}

}  // namespace

void FoldConstantNodes(Graph& g, const NodeEvaluator& evaluate) {
  const std::set<int> graph_outputs(g.outputs.begin(), g.outputs.end());
  std::vector<bool> removed(g.nodes.size(), false);
  bool changed = false;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    std::vector<const Tensor*> inputs;
    size_t input_bytes = 0;
    bool constant = !HoldsSubgraph(node), any_input = false;
    for (int in : node.inputs) {
      const Tensor* t = in >= 0 ? g.values[in].initializer : nullptr;
      constant = constant && (in < 0 || t != nullptr);
      any_input = any_input || t != nullptr;
      if (t != nullptr) input_bytes += t->nbytes();
      inputs.push_back(t);
    }
    for (int out : node.outputs) constant = constant && !graph_outputs.count(out);
    if (!constant || !any_input || input_bytes > kFoldedBytes) continue;
    std::vector<Tensor> results;
    try {
      // A node that would make a larger tensor (ConstantOfShape of a constant shape)
      // stops at its first allocation instead of computing what would be dropped.
      const TensorByteLimit limit(std::min<uint64_t>(MaxTensorBytes(), kFoldedBytes));
      results = evaluate(node, inputs);
    } catch (const Error&) {
      continue;
    }
    size_t output_bytes = 0;
    for (size_t i = 0; i < node.outputs.size() && i < results.size(); ++i)
      if (node.outputs[i] >= 0) output_bytes += results[i].nbytes();
    if (results.size() < node.outputs.size() || output_bytes > kFoldedBytes) continue;
    for (size_t i = 0; i < node.outputs.size(); ++i)
      if (node.outputs[i] >= 0) g.SetInitializer(node.outputs[i], std::move(results[i]));
    removed[n] = changed = true;
  }
  if (changed) RemoveNodes(g, removed);
}

}  // namespace octet
