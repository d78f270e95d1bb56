#include "rewrite/float_rotary.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "graph/octet_ops.h"
#include "rewrite/qdq_util.h"

namespace octet {

namespace {

// [begin, end) of a Slice of x over its last axis alone, with step 1 and
// non-negative bounds; nullopt otherwise.
std::optional<std::pair<int64_t, int64_t>> LastAxisRange(const Graph& g, const Node& slice, int x) {
  const int64_t rank = KnownRank(g, x);
  std::optional<SliceParams> p = ReadSlice(g, slice, rank);
  if (!p || p->axes.size() != 1 || p->steps[0] != 1 || p->starts[0] < 0 || p->ends[0] < 0)
    return std::nullopt;
  const int64_t axis = p->axes[0];
  // ReadSlice keeps a negative axis only when the rank is unknown.
  if (axis != -1 && !(rank > 0 && axis == rank - 1)) return std::nullopt;
  return std::make_pair(p->starts[0], p->ends[0]);
}

// Whether Concat node n joins its two inputs over the last axis of x.
bool ConcatsLastAxis(const Graph& g, const Node& n, int x) {
  if (n.domain != kOnnxDomain || n.op_type != "Concat" || n.inputs.size() != 2) return false;
  const int64_t axis = n.GetInt("axis", 0), rank = KnownRank(g, x);
  return axis == -1 || (rank > 0 && axis == rank - 1);
}

}  // namespace

void FuseFloatRotary(Graph& g, QdqReport& report) {
  const std::vector<std::vector<int>> consumers = ConsumersOf(g);
  std::vector<bool> removed(g.nodes.size(), false);
  bool changed = false;
  auto producer = [&](int value) {
    const int p = value >= 0 ? g.values[value].producer : -1;
    return p >= 0 && !removed[p] ? p : -1;
  };
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    // From the Concat: rot = Concat(Neg(Slice(x, half, end)), Slice(x, 0, half)).
    const Node& concat = g.nodes[n];
    if (removed[n] || concat.inputs.size() != 2) continue;
    const int neg = producer(concat.inputs[0]), low = producer(concat.inputs[1]);
    if (neg < 0 || low < 0 || g.nodes[neg].op_type != "Neg" || g.nodes[neg].domain != kOnnxDomain ||
        g.nodes[neg].inputs.size() != 1)
      continue;
    const int high = producer(g.nodes[neg].inputs[0]);
    if (high < 0 || g.nodes[high].inputs.empty()) continue;
    const int x = g.nodes[high].inputs[0];
    if (x < 0 || g.nodes[low].inputs.empty() || g.nodes[low].inputs[0] != x ||
        !ConcatsLastAxis(g, concat, x))
      continue;
    const auto low_range = LastAxisRange(g, g.nodes[low], x);
    const auto high_range = LastAxisRange(g, g.nodes[high], x);
    if (!low_range || !high_range || low_range->first != 0 ||
        high_range->first != low_range->second || low_range->second == 0 ||
        high_range->second < high_range->first)
      continue;
    if (SoleConsumer(g, consumers, concat.inputs[0]) != static_cast<int>(n) ||
        SoleConsumer(g, consumers, concat.inputs[1]) != static_cast<int>(n) ||
        SoleConsumer(g, consumers, g.nodes[neg].inputs[0]) != neg)
      continue;
    // y = Add(Mul(x, cos), Mul(rot, sin)), either operand order.
    const int rot = concat.outputs[0];
    const int rot_mul = SoleConsumer(g, consumers, rot);
    if (rot_mul < 0 || removed[rot_mul] || !IsOnnxBinary(g.nodes[rot_mul], "Mul")) continue;
    const int sin = OtherInput(g.nodes[rot_mul], rot);
    const int add = SoleConsumer(g, consumers, g.nodes[rot_mul].outputs[0]);
    if (sin < 0 || add < 0 || removed[add] || !IsOnnxBinary(g.nodes[add], "Add")) continue;
    const int x_mul = producer(OtherInput(g.nodes[add], g.nodes[rot_mul].outputs[0]));
    if (x_mul < 0 || !IsOnnxBinary(g.nodes[x_mul], "Mul") ||
        SoleConsumer(g, consumers, g.nodes[x_mul].outputs[0]) != add)
      continue;
    const int cos = OtherInput(g.nodes[x_mul], x);
    if (cos < 0) continue;
    if (!MayBeFloat32(g, x) || !MayBeFloat32(g, cos) || !MayBeFloat32(g, sin)) continue;

    Node rotary;
    rotary.name = (concat.name.empty() ? "node" + std::to_string(n) : concat.name) + "/rotary";
    rotary.op_type = kRotaryOp;
    rotary.domain = kOctetDomain;
    rotary.opset = 1;
    rotary.inputs = {x, cos, sin};
    rotary.outputs = {g.nodes[add].outputs[0]};
    rotary.attributes["half"] = Attribute::Int(low_range->second);
    rotary.attributes["end"] = Attribute::Int(high_range->second);
    report.Fuse(concat, std::string("octet.") + kRotaryOp +
                            " (float; Slice, Slice, Neg, Concat, Mul, Mul, Add folded)");
    for (int node : {low, high, neg, static_cast<int>(n), rot_mul, x_mul}) removed[node] = true;
    g.nodes[add] = std::move(rotary);
    changed = true;
  }
  if (changed) RemoveNodes(g, removed);
}

}  // namespace octet
