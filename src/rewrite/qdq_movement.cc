#include "rewrite/qdq_movement.h"

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "rewrite/qdq_util.h"

namespace octet {

namespace {

bool IsMovement(const Node& n) {
  static const std::set<std::string> kOps = {"Reshape", "Transpose", "Squeeze", "Unsqueeze",
                                             "Flatten", "Gather",    "Slice"};
  return n.domain == kOnnxDomain && kOps.count(n.op_type) != 0;
}

bool SameParams(const ScalarQParams& a, const ScalarQParams& b) {
  return std::memcmp(&a.scale, &b.scale, sizeof(float)) == 0 && a.zero == b.zero &&
         a.type == b.type;
}

// Why the pair cannot be elided; empty when it can.
std::string CheckPair(const Graph& g, const Node& dq, const Node& q) {
  ScalarQParams in, out;
  if (std::string why = ReadScalarQdq(g, dq, in); !why.empty()) return "movement_dq_" + why;
  if (std::string why = ReadScalarQdq(g, q, out); !why.empty()) return "movement_q_" + why;
  if (!SameParams(in, out)) return "movement_params_differ";
  for (int32_t v = QMin(in.type); v <= QMax(in.type); ++v)
    if (QuantizeValue(DequantizeValue(v, in), out) != v) return "movement_roundtrip_inexact";
  return "";
}

}  // namespace

void ElideQdqAroundMovement(Graph& g, QdqReport& report) {
  const std::vector<std::vector<int>> consumers = ConsumersOf(g);
  std::vector<bool> removed(g.nodes.size(), false);
  std::vector<int> uses(g.values.size(), 0);
  for (size_t v = 0; v < consumers.size(); ++v) uses[v] = static_cast<int>(consumers[v].size());
  for (int v : g.outputs) ++uses[v];
  bool changed = false;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    Node& op = g.nodes[n];
    if (!IsMovement(op) || op.inputs.empty() || op.inputs[0] < 0) continue;
    const int dq = g.values[op.inputs[0]].producer;
    if (dq < 0 || !IsDequantizeNode(g.nodes[dq])) continue;
    const int q = SoleConsumer(g, consumers, op.outputs[0]);
    if (q < 0 || !IsQuantizeNode(g.nodes[q]) || InputAt(g.nodes[q], 0) != op.outputs[0]) {
      report.Refuse("movement_not_requantized", op);
      continue;
    }
    if (std::string why = CheckPair(g, g.nodes[dq], g.nodes[q]); !why.empty()) {
      report.Refuse(why, op);
      continue;
    }
    const int dq_out = op.inputs[0];
    op.inputs[0] = g.nodes[dq].inputs[0];
    op.outputs[0] = g.nodes[q].outputs[0];
    removed[q] = true;
    if (--uses[dq_out] == 0) removed[dq] = true;
    report.Fuse(op, op.op_type + " on the 8-bit data");
    changed = true;
  }
  if (changed) RemoveNodes(g, removed);
}

}  // namespace octet
