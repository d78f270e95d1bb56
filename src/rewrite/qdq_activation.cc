#include "rewrite/qdq_activation.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "graph/octet_ops.h"

namespace octet {

namespace {

// Clip's bounds (attributes before opset 11, constant inputs since); false when
// a bound is not a float32 constant scalar. An omitted bound is +-FLT_MAX, as in ORT.
bool ClipBounds(const Graph& g, const Node& clip, float& lo, float& hi) {
  lo = std::numeric_limits<float>::lowest();
  hi = std::numeric_limits<float>::max();
  if (clip.opset < 11) {
    lo = clip.GetFloat("min", lo);
    hi = clip.GetFloat("max", hi);
    return true;
  }
  for (size_t i = 1; i <= 2; ++i) {
    const int v = InputAt(clip, i);
    if (v < 0) continue;
    const Tensor* t = ConstantValue(g, v);
    if (!t || t->dtype() != DType::kFloat32 || t->numel() != 1) return false;
    (i == 1 ? lo : hi) = t->data<float>()[0];
  }
  return true;
}

// What the activation computes on one float (ORT's Relu: max(x, 0); Clip:
// min(max(x, lo), hi)).
float Activate(const Node& act, float x, float lo, float hi) {
  if (act.op_type == "Relu") return std::max(x, 0.f);
  return std::min(std::max(x, lo), hi);
}

// Whether ONNX Runtime's ReluQuantFusion / ClipQuantFusion delete the activation
// in front of a QuantizeLinear with parameters q.
bool OrtRemoves(const Node& act, float lo, float hi, const ScalarQParams& q) {
  if (act.op_type == "Relu") return q.zero == QMin(q.type);
  const float lower = q.scale * static_cast<float>(QMin(q.type) - q.zero);
  const float upper = q.scale * static_cast<float>(QMax(q.type) - q.zero);
  constexpr float kEpsilon = std::numeric_limits<float>::epsilon();
  return !(kEpsilon < lo - lower || kEpsilon < upper - hi);
}

// The 8-bit table of DQ(in) -> activation -> Q(out) over every input value.
std::vector<int32_t> ChainTable(const Node* act, float lo, float hi, const ScalarQParams& in,
                                const ScalarQParams& out) {
  std::vector<int32_t> table;
  for (int32_t q = QMin(in.type); q <= QMax(in.type); ++q) {
    float x = DequantizeValue(q, in);
    if (act) x = Activate(*act, x, lo, hi);
    table.push_back(QuantizeValue(x, out));
  }
  return table;
}

// Reads a fused node's quantized output parameters (the same inputs in both kinds).
bool FusedOutputParams(const Graph& g, const Node& f, ScalarQParams& p) {
  const Tensor* scale = ConstantValue(g, InputAt(f, kFusedYScale));
  if (!scale) return false;
  p.scale = scale->data<float>()[0];
  p.type = static_cast<DType>(f.GetInt("y_type", static_cast<int64_t>(DType::kUInt8)));
  p.zero = 0;
  if (const Tensor* zero = ConstantValue(g, InputAt(f, kFusedYZero))) {
    p.type = zero->dtype();
    p.zero = p.type == DType::kInt8 ? zero->data<int8_t>()[0] : zero->data<uint8_t>()[0];
  }
  return true;
}

}  // namespace

bool IsFusedQdqNode(const Node& n) {
  return n.domain == kOctetDomain && (n.op_type == kFusedMatMulOp || n.op_type == kFusedConvOp);
}

bool IsActivation(const Node& n) {
  return n.domain == kOnnxDomain && (n.op_type == "Relu" || n.op_type == "Clip");
}

std::string OrtKeepsActivation(const Graph& g, const Node& act, const ScalarQParams& q) {
  float lo = 0.f, hi = 0.f;
  if (act.op_type == "Clip" && !ClipBounds(g, act, lo, hi)) return "clip_bounds_not_constant";
  if (!OrtRemoves(act, lo, hi, q))
    return act.op_type == "Relu" ? "relu_zero_point_not_qmin" : "clip_inside_q_range";
  // ORT removes it. Relu with zero point = qmin changes nothing (negative
  // values saturate to qmin = Q(0)); Clip changes nothing when its bounds
  // quantize to qmin and qmax (Q is monotone), which its epsilon slack can miss.
  if (act.op_type == "Clip" &&
      (QuantizeValue(lo, q) != QMin(q.type) || QuantizeValue(hi, q) != QMax(q.type)))
    return "activation_removal_inexact";
  return "";
}

void AbsorbQdqActivations(Graph& g, QdqReport& report) {
  const std::vector<std::vector<int>> consumers = ConsumersOf(g);
  std::vector<bool> removed(g.nodes.size(), false);
  bool changed = false;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    Node& f = g.nodes[n];
    if (!IsFusedQdqNode(f)) continue;
    const int dq = SoleConsumer(g, consumers, f.outputs[0]);
    if (dq < 0 || !IsDequantizeNode(g.nodes[dq]) || removed[dq]) continue;
    const int act = SoleConsumer(g, consumers, g.nodes[dq].outputs[0]);
    if (act < 0 || !IsActivation(g.nodes[act])) continue;
    const Node& act_node = g.nodes[act];
    const int q = SoleConsumer(g, consumers, act_node.outputs[0]);
    if (q < 0 || !IsQuantizeNode(g.nodes[q])) {
      report.Refuse("activation_not_quantized", act_node);
      continue;
    }
    ScalarQParams y, in, out;
    if (!FusedOutputParams(g, f, y)) continue;
    if (std::string why = ReadScalarQdq(g, g.nodes[dq], in); !why.empty()) {
      report.Refuse("activation_dq_" + why, act_node);
      continue;
    }
    if (std::string why = ReadScalarQdq(g, g.nodes[q], out); !why.empty()) {
      report.Refuse("activation_q_" + why, act_node);
      continue;
    }
    if (in.type != y.type) {
      report.Refuse("activation_dq_type", act_node);
      continue;
    }
    float lo = 0.f, hi = 0.f;
    if (act_node.op_type == "Clip" && !ClipBounds(g, act_node, lo, hi)) {
      report.Refuse("clip_bounds_not_constant", act_node);
      continue;
    }
    const std::vector<int32_t> table = ChainTable(&act_node, lo, hi, in, out);
    // ORT_ENABLE_ALL deletes the activation when its rule says so; both readings
    // must agree for the clamp to equal ORT at every optimization level.
    if (OrtRemoves(act_node, lo, hi, out) && ChainTable(nullptr, lo, hi, in, out) != table) {
      report.Refuse("activation_removal_inexact", act_node);
      continue;
    }
    // The chain must be a clamp of the fused node's own output values.
    const int32_t y_min = table.front(), y_max = table.back();
    bool is_clamp = out.type == y.type;
    for (int32_t v = QMin(y.type); is_clamp && v <= QMax(y.type); ++v)
      is_clamp = table[v - QMin(y.type)] == std::clamp(v, y_min, y_max);
    if (!is_clamp) {
      report.Refuse("activation_requantizes", act_node);
      continue;
    }
    f.attributes["y_min"] =
        Attribute::Int(std::max<int64_t>(f.GetInt("y_min", QMin(y.type)), y_min));
    f.attributes["y_max"] =
        Attribute::Int(std::min<int64_t>(f.GetInt("y_max", QMax(y.type)), y_max));
    f.outputs[0] = g.nodes[q].outputs[0];
    removed[dq] = removed[act] = removed[q] = true;
    report.Fuse(act_node, std::string("clamp [") + std::to_string(y_min) + ", " +
                              std::to_string(y_max) + "] of " + f.name);
    changed = true;
  }
  if (changed) RemoveNodes(g, removed);
}

}  // namespace octet
