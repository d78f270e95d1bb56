#include "rewrite/slice_merge.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "rewrite/qdq_util.h"

namespace octet {

namespace {

// A Slice's constant parameters with axes normalized and steps filled in.
struct SliceParams {
  std::vector<int64_t> starts, ends, axes, steps;
};

std::optional<std::vector<int64_t>> ConstantInts(const Graph& g, int value) {
  const Tensor* t = value >= 0 ? ConstantValue(g, value) : nullptr;
  if (t == nullptr || t->rank() > 1) return std::nullopt;
  std::vector<int64_t> v(static_cast<size_t>(t->numel()));
  for (int64_t i = 0; i < t->numel(); ++i) {
    if (t->dtype() == DType::kInt64)
      v[i] = t->data<int64_t>()[i];
    else if (t->dtype() == DType::kInt32)
      v[i] = t->data<int32_t>()[i];
    else
      return std::nullopt;
  }
  return v;
}

// The parameters of an ai.onnx Slice (opset >= 10: inputs) whose starts, ends,
// axes and steps are constants, its axes normalized against `rank` (unknown:
// -1, then only non-negative axes are accepted); nullopt otherwise.
std::optional<SliceParams> ReadSlice(const Graph& g, const Node& n, int64_t rank) {
  if (n.domain != kOnnxDomain || n.op_type != "Slice" || n.opset < 10 || n.inputs.size() < 3 ||
      n.inputs.size() > 5)
    return std::nullopt;
  const auto starts = ConstantInts(g, n.inputs[1]);
  const auto ends = ConstantInts(g, n.inputs[2]);
  if (!starts || !ends || ends->size() != starts->size()) return std::nullopt;
  SliceParams p{*starts, *ends, {}, {}};
  const int axes_input = InputAt(n, 3), steps_input = InputAt(n, 4);
  if (axes_input >= 0) {
    const auto axes = ConstantInts(g, axes_input);
    if (!axes) return std::nullopt;
    p.axes = *axes;
  } else {
    for (size_t i = 0; i < p.starts.size(); ++i) p.axes.push_back(static_cast<int64_t>(i));
  }
  if (steps_input >= 0) {
    const auto steps = ConstantInts(g, steps_input);
    if (!steps) return std::nullopt;
    p.steps = *steps;
  } else {
    p.steps.assign(p.starts.size(), 1);
  }
  if (p.axes.size() != p.starts.size() || p.steps.size() != p.starts.size()) return std::nullopt;
  for (int64_t& a : p.axes) {
    if (a < 0 && rank < 0) return std::nullopt;
    const std::optional<int64_t> axis =
        rank < 0 ? std::optional<int64_t>(a) : NormalizeAxis(a, rank);
    if (!axis) return std::nullopt;
    a = *axis;
  }
  // The kernel reports a step of 0 and repeated axes; leave those nodes to it.
  if (std::count(p.steps.begin(), p.steps.end(), 0) > 0) return std::nullopt;
  std::vector<int64_t> sorted = p.axes;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return std::nullopt;
  return p;
}

int64_t KnownRank(const Graph& g, int value) {
  const auto& shape = g.values[value].shape;
  return shape ? static_cast<int64_t>(shape->size()) : -1;
}

Tensor Int64Tensor(const std::vector<int64_t>& v) {
  Tensor t(DType::kInt64, Shape{static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

}  // namespace

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
