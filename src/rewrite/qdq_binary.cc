#include "rewrite/qdq_binary.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "graph/octet_ops.h"
#include "rewrite/qdq_util.h"

namespace octet {

namespace {

bool IsBinary(const Node& n) {
  return n.domain == kOnnxDomain && (n.op_type == "Add" || n.op_type == "Mul");
}

bool IsGraphOutput(const Graph& g, int value) {
  return std::find(g.outputs.begin(), g.outputs.end(), value) != g.outputs.end();
}

// The zero point of a Q/DQ as ORT's S8-to-U8 rewrite wants it: explicit, constant,
// one int8 value.
std::optional<int32_t> ConstantInt8Zero(const Graph& g, const Node& n) {
  const Tensor* zero = ConstantValue(g, InputAt(n, 2));
  if (zero == nullptr || zero->dtype() != DType::kInt8 || zero->numel() != 1) return std::nullopt;
  return int32_t{zero->data<int8_t>()[0]};
}

// Output edges `value` has once EnsureUniqueDQForNodeUnit gave every consumer of a
// DequantizeLinear its own copy (the original stays for a graph output).
size_t EdgesAfterUniqueDq(const Graph& g, const std::vector<std::vector<int>>& consumers,
                          int value) {
  size_t edges = 0;
  for (const int c : consumers[value]) {
    const Node& n = g.nodes[c];
    if (!IsDequantizeNode(n) || InputAt(n, 0) != value) {
      ++edges;
      continue;
    }
    const int out = n.outputs[0];
    const size_t uses = consumers[out].size();
    edges += uses == 0 ? 1 : uses + (IsGraphOutput(g, out) ? 1 : 0);
  }
  return edges;
}

std::string ReadParams(const Graph& g, const Node& n, const char* side, ScalarQParams& p) {
  if (std::string why = ReadScalarQdq(g, n, p); !why.empty())
    return std::string("binary_") + side + "_" + why;
  return "";
}

}  // namespace

std::vector<bool> FindOrtUint8Values(const Graph& g) {
  std::vector<bool> moved(g.values.size(), false);
  const std::vector<std::vector<int>> consumers = ConsumersOf(g);
  for (const Node& q : g.nodes) {
    if (!IsQuantizeNode(q) || q.outputs.empty() || q.outputs[0] < 0) continue;
    const int out = q.outputs[0];
    if (IsGraphOutput(g, out) || EdgesAfterUniqueDq(g, consumers, out) != 1 ||
        consumers[out].size() != 1)
      continue;
    const Node& dq = g.nodes[consumers[out][0]];
    if (!IsDequantizeNode(dq) || InputAt(dq, 0) != out) continue;
    const std::optional<int32_t> q_zero = ConstantInt8Zero(g, q);
    const std::optional<int32_t> dq_zero = ConstantInt8Zero(g, dq);
    if (q_zero && dq_zero && *q_zero == *dq_zero) moved[out] = true;
  }
  return moved;
}

void FuseQdqBinary(Graph& g, QdqReport& report, const std::vector<bool>& ort_uint8_values) {
  const std::vector<std::vector<int>> consumers = ConsumersOf(g);
  auto dq_of = [&](const Node& n, size_t i) {
    const int v = InputAt(n, i);
    const int p = v >= 0 ? g.values[v].producer : -1;
    return p >= 0 && IsDequantizeNode(g.nodes[p]) ? p : -1;
  };
  auto moved_to_uint8 = [&](int value) {
    return value >= 0 && static_cast<size_t>(value) < ort_uint8_values.size() &&
           ort_uint8_values[value];
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
    std::string why = ReadParams(g, g.nodes[dq_a], "dq", a);
    if (why.empty()) why = ReadParams(g, g.nodes[dq_b], "dq", b);
    const int q = SoleConsumer(g, consumers, op.outputs[0]);
    if (why.empty() &&
        (q < 0 || !IsQuantizeNode(g.nodes[q]) || InputAt(g.nodes[q], 0) != op.outputs[0]))
      why = "binary_not_requantized";
    if (why.empty()) why = ReadParams(g, g.nodes[q], "q", c);
    if (!why.empty()) {
      report.Refuse(why, op);
      continue;
    }
    ++report.claimed;
    const Node& dqa = g.nodes[dq_a];
    const Node& dqb = g.nodes[dq_b];
    const Node& qn = g.nodes[q];
    // The types ORT's binary selector compares (all three must be equal for it to fuse)
    // are those after its S8-to-U8 rewrite.
    const int shift_a = moved_to_uint8(InputAt(dqa, 0)) ? 128 : 0;
    const int shift_b = moved_to_uint8(InputAt(dqb, 0)) ? 128 : 0;
    const int shift_c = moved_to_uint8(qn.outputs[0]) ? 128 : 0;
    auto ort_type = [](DType t, int shift) { return shift != 0 ? DType::kUInt8 : t; };
    const DType ta = ort_type(a.type, shift_a);
    const bool ort_fuses = ta == ort_type(b.type, shift_b) && ta == ort_type(c.type, shift_c);
    const bool as_stored = ort_fuses && shift_a == 0 && shift_b == 0 && shift_c == 0;
    Node fused;
    fused.name = (op.name.empty() ? "node" + std::to_string(n) : op.name) + "/qdq";
    fused.inputs = {InputAt(dqa, 0), InputAt(dqa, 1), InputAt(dqa, 2), InputAt(dqb, 0),
                    InputAt(dqb, 1), InputAt(dqb, 2), InputAt(qn, 1),  InputAt(qn, 2)};
    fused.outputs = {qn.outputs[0]};
    std::string became;
    if (as_stored) {
      fused.op_type = "QLinear" + op.op_type;
      fused.domain = kMsDomain;
      became = "com.microsoft." + fused.op_type + " (int8 output)";
    } else {
      fused.op_type = op.op_type == "Add" ? kQdqAddOp : kQdqMulOp;
      fused.domain = kOctetDomain;
      fused.attributes["arithmetic"] = Attribute::String(ort_fuses ? "qlinear" : "float");
      if (ort_fuses) fused.attributes["shift"] = Attribute::Ints({shift_a, shift_b, shift_c});
      fused.attributes["y_type"] = Attribute::Int(static_cast<int64_t>(c.type));
      became = std::string(kOctetDomain) + "." + fused.op_type +
               (ort_fuses ? " (int8 output; QLinear arithmetic on ORT's uint8 form)"
                          : " (int8 output; float steps: ORT keeps DQ -> " + op.op_type + " -> Q)");
    }
    fused.opset = 1;
    report.Fuse(op, became);
    removed[q] = true;
    for (const int dq : {dq_a, dq_b})
      if (--uses[g.nodes[dq].outputs[0]] == 0) removed[dq] = true;
    op = std::move(fused);
    changed = true;
  }
  if (changed) RemoveNodes(g, removed);
}

}  // namespace octet
