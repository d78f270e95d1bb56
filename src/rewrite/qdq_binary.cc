#include "rewrite/qdq_binary.h"

#include <string>
#include <vector>

#include "rewrite/qdq_util.h"

namespace octet {

namespace {

bool IsBinary(const Node& n) {
  return n.domain == kOnnxDomain && (n.op_type == "Add" || n.op_type == "Mul");
}

std::string ReadInput(const Graph& g, const Node& dq, ScalarQParams& p) {
  if (std::string why = ReadScalarQdq(g, dq, p); !why.empty()) return "binary_dq_" + why;
  return "";
}

}  // namespace

void FuseQdqBinary(Graph& g, QdqReport& report) {
  const std::vector<std::vector<int>> consumers = ConsumersOf(g);
  auto dq_of = [&](const Node& n, size_t i) {
    const int v = InputAt(n, i);
    const int p = v >= 0 ? g.values[v].producer : -1;
    return p >= 0 && IsDequantizeNode(g.nodes[p]) ? p : -1;
  };
  std::vector<bool> removed(g.nodes.size(), false);
  std::vector<int> uses(g.values.size(), 0);
  for (size_t v = 0; v < consumers.size(); ++v) uses[v] = static_cast<int>(consumers[v].size());
  for (int v : g.outputs) ++uses[v];
  bool changed = false;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    Node& op = g.nodes[n];
    if (!IsBinary(op) || op.inputs.size() != 2) continue;
    const int dq_a = dq_of(op, 0), dq_b = dq_of(op, 1);
    if (dq_a < 0 || dq_b < 0) continue;
    ++report.groups;
    ScalarQParams a, b, c;
    std::string why = ReadInput(g, g.nodes[dq_a], a);
    if (why.empty()) why = ReadInput(g, g.nodes[dq_b], b);
    const int q = SoleConsumer(g, consumers, op.outputs[0]);
    if (why.empty() &&
        (q < 0 || !IsQuantizeNode(g.nodes[q]) || InputAt(g.nodes[q], 0) != op.outputs[0]))
      why = "binary_not_requantized";
    if (why.empty()) {
      if (std::string q_why = ReadScalarQdq(g, g.nodes[q], c); !q_why.empty())
        why = "binary_q_" + q_why;
    }
    // QLinearAdd / QLinearMul take one type T for A, B and C.
    if (why.empty() && (a.type != b.type || a.type != c.type)) why = "binary_types_differ";
    if (!why.empty()) {
      report.Refuse(why, op);
      continue;
    }
    ++report.claimed;
    const Node& dqa = g.nodes[dq_a];
    const Node& dqb = g.nodes[dq_b];
    const Node& qn = g.nodes[q];
    Node fused;
    fused.name = (op.name.empty() ? "node" + std::to_string(n) : op.name) + "/qdq";
    fused.op_type = "QLinear" + op.op_type;
    fused.domain = kMsDomain;
    fused.opset = 1;
    fused.inputs = {InputAt(dqa, 0), InputAt(dqa, 1), InputAt(dqa, 2), InputAt(dqb, 0),
                    InputAt(dqb, 1), InputAt(dqb, 2), InputAt(qn, 1),  InputAt(qn, 2)};
    fused.outputs = {qn.outputs[0]};
    report.Fuse(op, "com.microsoft." + fused.op_type + " (int8 output)");
    removed[q] = true;
    for (const int dq : {dq_a, dq_b})
      if (--uses[g.nodes[dq].outputs[0]] == 0) removed[dq] = true;
    op = std::move(fused);
    changed = true;
  }
  if (changed) RemoveNodes(g, removed);
}

}  // namespace octet
