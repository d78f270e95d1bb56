#include "rewrite/slice_merge.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "rewrite/qdq_util.h"

namespace octet {

void MergeSliceChains(Graph& g, QdqReport& report) {
  const std::vector<std::vector<int>> consumers = ConsumersOf(g);
  std::vector<bool> removed(g.nodes.size(), false);
  bool changed = false;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    Node& second = g.nodes[n];
    if (second.op_type != "Slice" || second.inputs.empty() || second.inputs[0] < 0) continue;
    const int between = second.inputs[0];
    const int first_index = g.values[between].producer;
    if (first_index < 0 || removed[first_index] ||
        SoleConsumer(g, consumers, between) != static_cast<int>(n))
      continue;
    const Node& first = g.nodes[first_index];
    if (first.inputs.empty() || first.inputs[0] < 0) continue;
    // A Slice keeps the rank, so both normalize their axes against the source's.
    int64_t rank = KnownRank(g, first.inputs[0]);
    if (rank < 0) rank = KnownRank(g, between);
    const std::optional<SliceParams> a = ReadSlice(g, first, rank);
    const std::optional<SliceParams> b = ReadSlice(g, second, rank);
    if (!a || !b) continue;
    // Axes of an unknown rank stay as written: -1 and 3 may be one axis.
    const auto negative = [](const SliceParams& p) {
      return std::any_of(p.axes.begin(), p.axes.end(), [](int64_t axis) { return axis < 0; });
    };
    if (negative(*a) || negative(*b)) continue;
    const bool disjoint = std::none_of(b->axes.begin(), b->axes.end(), [&](int64_t axis) {
      return std::find(a->axes.begin(), a->axes.end(), axis) != a->axes.end();
    });
    if (!disjoint) continue;

    SliceParams merged = *a;
    for (size_t i = 0; i < b->axes.size(); ++i) {
      merged.starts.push_back(b->starts[i]);
      merged.ends.push_back(b->ends[i]);
      merged.axes.push_back(b->axes[i]);
      merged.steps.push_back(b->steps[i]);
    }
    const std::string base = (second.name.empty() ? "slice" + std::to_string(n) : second.name);
    second.inputs = {first.inputs[0], AddConstant(g, base + "/starts", Int64Tensor(merged.starts)),
                     AddConstant(g, base + "/ends", Int64Tensor(merged.ends)),
                     AddConstant(g, base + "/axes", Int64Tensor(merged.axes)),
                     AddConstant(g, base + "/steps", Int64Tensor(merged.steps))};
    second.opset = std::max(second.opset, 10);
    report.Fuse(second, "ai.onnx.Slice (merged with Slice '" + first.name + "')");
    removed[first_index] = true;
    changed = true;
  }
  if (changed) RemoveNodes(g, removed);
}

}  // namespace octet
