#include "rewrite/qdq_matmul.h"

#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "graph/octet_ops.h"
#include "rewrite/qdq_activation.h"
#include "rewrite/qdq_util.h"

namespace octet {

namespace {

struct Claim {
  std::string why;     // non-empty: refused for this reason
  std::string why_op;  // the operator the refusal is reported under
  Node fused;
  int removed_q = -1;    // the QuantizeLinear node folded in, if any
  int removed_act = -1;  // a Relu / Clip before it that ONNX Runtime removes too
  std::string q_note;    // a QuantizeLinear left unfused (reason), group still claimed
  std::string act_note;  // a Relu / Clip kept in float (reason), group still claimed
};

Claim Refuse(const std::string& why, const Node& at) {
  Claim c;
  c.why = why;
  c.why_op = at.op_type;
  return c;
}

// B computed at run time (attention's K^T and V): with per-tensor parameters, explicit
// zero points and a QuantizeLinear after the product, the group is ai.onnx QLinearMatMul,
// the integer product ONNX Runtime makes of it when it fuses the group (B is packed per
// run). Otherwise the group stays as written.
Claim ClaimRuntimeWeight(const Graph& g, int mm_index, const DqParams& x, const DqParams& w,
                         const std::vector<std::vector<int>>& consumers,
                         const std::set<int>& graph_outputs) {
  const Node& mm = g.nodes[mm_index];
  if (mm.op_type != "MatMul") return Refuse("weight_not_constant", mm);
  if (x.per_axis || w.per_axis) return Refuse("runtime_weight_per_axis", mm);
  if (!Is8Bit(w.data_type)) return Refuse("weight_dtype", mm);
  if (x.zero < 0 || w.zero < 0) return Refuse("runtime_weight_zero_point_omitted", mm);
  Claim claim;
  DType out_type = DType::kUndefined;
  claim.removed_q =
      FoldableQuantize(g, mm.outputs[0], consumers, graph_outputs, claim.q_note, out_type);
  if (claim.removed_q < 0)
    return Refuse(claim.q_note.empty() ? "runtime_weight_float_output" : claim.q_note, mm);
  const Node& q = g.nodes[claim.removed_q];
  ScalarQParams qp;
  if (InputAt(q, 2) < 0 || !ReadScalarQdq(g, q, qp).empty())
    return Refuse("runtime_weight_output_params", mm);
  Node& f = claim.fused;
  f.name = (mm.name.empty() ? std::string("node") + std::to_string(mm_index) : mm.name) + "/qdq";
  f.op_type = "QLinearMatMul";
  f.domain = kOnnxDomain;
  f.opset = 10;
  f.inputs = {x.data, x.scale, x.zero, w.data, w.scale, w.zero, q.inputs[1], q.inputs[2]};
  f.outputs = {q.outputs[0]};
  return claim;
}

Claim TryClaim(const Graph& g, int mm_index, const std::vector<std::vector<int>>& consumers,
               const std::set<int>& graph_outputs) {
  const Node& mm = g.nodes[mm_index];
  const bool is_gemm = mm.op_type == "Gemm";
  const Node& x_dq = g.nodes[g.values[mm.inputs[0]].producer];
  const Node& w_dq = g.nodes[g.values[mm.inputs[1]].producer];

  int64_t trans_b = 0;
  if (is_gemm) {
    if (mm.GetInt("transA", 0) != 0) return Refuse("gemm_trans_a", mm);
    if (mm.GetFloat("alpha", 1.f) != 1.f) return Refuse("gemm_alpha", mm);
    if (InputAt(mm, 2) >= 0 && mm.GetFloat("beta", 1.f) != 1.f) return Refuse("gemm_beta", mm);
    trans_b = mm.GetInt("transB", 0);
  }

  DqParams x, w;
  if (std::string why = ReadDq(g, x_dq, x); !why.empty()) return Refuse(why, mm);
  if (std::string why = ReadDq(g, w_dq, w); !why.empty()) return Refuse(why, mm);
  if (x.data_type == DType::kUndefined) return Refuse("activation_dtype_unknown", mm);
  if (!Is8Bit(x.data_type)) return Refuse("activation_dtype", mm);

  const Tensor* weight = ConstantValue(g, w.data);
  if (!weight) return ClaimRuntimeWeight(g, mm_index, x, w, consumers, graph_outputs);
  if (!Is8Bit(weight->dtype())) return Refuse("weight_dtype", mm);
  if (weight->rank() != 2) return Refuse("weight_rank", mm);
  const int64_t k_axis = trans_b ? 1 : 0, n_axis = 1 - k_axis;
  const int64_t K = weight->dim(k_axis), N = weight->dim(n_axis);
  if (K > kGemmMaxK) return Refuse("k_too_large", mm);
  if (w.per_axis) {
    const auto axis = NormalizeAxis(w.axis, 2);
    if (!axis) return Refuse("scale_axis", mm);
    if (*axis == k_axis) return Refuse("scale_along_k", mm);
    if (w.count != N) return Refuse("scale_shape", mm);
  }

  // The activation's scale may run along any axis but the last (K): rows of
  // the flattened [M, K] product.
  int64_t x_axis = -1, x_rank = 0;
  const Value& x_value = g.values[x.data];
  if (x_value.shape) {
    x_rank = static_cast<int64_t>(x_value.shape->size());
    if (is_gemm && x_rank != 2) return Refuse("activation_rank", mm);
    const Dim& k_dim = x_value.shape->back();
    if (x_rank == 0 || (k_dim.is_static() && *k_dim.value != K))
      return Refuse("shape_mismatch", mm);
  }
  if (x.per_axis) {
    if (!x_value.shape) return Refuse("activation_rank_unknown", mm);
    const auto axis = NormalizeAxis(x.axis, x_rank);
    if (!axis) return Refuse("scale_axis", mm);
    if (*axis == x_rank - 1) return Refuse("scale_along_k", mm);
    const Dim& d = (*x_value.shape)[*axis];
    if (d.is_static() && *d.value != x.count) return Refuse("scale_shape", mm);
    x_axis = *axis;
  }

  // Gemm bias: int32 DequantizeLinear whose scale is exactly x_scale * w_scale
  // (what quantizers write), so the int32 bias adds to the accumulator.
  int bias = -1;
  if (is_gemm && InputAt(mm, 2) >= 0) {
    const Value& c = g.values[mm.inputs[2]];
    if (c.producer < 0 || !IsDequantizeNode(g.nodes[c.producer]))
      return Refuse("bias_not_quantized", mm);
    DqParams b;
    if (std::string why = ReadDq(g, g.nodes[c.producer], b); !why.empty())
      return Refuse("bias_" + why, mm);
    const Tensor* bias_data = ConstantValue(g, b.data);
    if (!bias_data || bias_data->dtype() != DType::kInt32) return Refuse("bias_not_int32", mm);
    const bool bias_vector =
        bias_data->numel() == N &&
        (bias_data->rank() == 1 || (bias_data->rank() == 2 && bias_data->dim(0) == 1));
    if (bias_data->numel() != 1 && !bias_vector) return Refuse("bias_shape", mm);
    if (b.per_axis && (b.count != N || !bias_vector)) return Refuse("bias_shape", mm);
    if (const Tensor* bz = ConstantValue(g, b.zero)) {
      for (int64_t i = 0; i < bz->numel(); ++i)
        if (bz->data<int32_t>()[i] != 0) return Refuse("bias_zero_point", mm);
    }
    if (x.per_axis) return Refuse("bias_with_row_scale", mm);
    const float sx = ConstantValue(g, x.scale)->data<float>()[0];
    const float* sw = ConstantValue(g, w.scale)->data<float>();
    const float* sb = ConstantValue(g, b.scale)->data<float>();
    for (int64_t n = 0; n < N; ++n)
      if (sb[b.per_axis ? n : 0] != sx * sw[w.per_axis ? n : 0]) return Refuse("bias_scale", mm);
    bias = b.data;
  }

  Claim claim;
  DType out_type = DType::kUndefined;
  const int product = mm.outputs[0];
  claim.removed_q = FoldableQuantize(g, product, consumers, graph_outputs, claim.q_note, out_type);
  // product -> Relu | Clip -> QuantizeLinear: ONNX Runtime drops the activation
  // when it changes no quantized value (then fuses the group); otherwise it keeps
  // the float product, and so do we (the group stays claimed in float form).
  const int act = SoleConsumer(g, consumers, product);
  if (claim.removed_q < 0 && claim.q_note.empty() && act >= 0 && IsActivation(g.nodes[act])) {
    const Node& act_node = g.nodes[act];
    std::string q_note;
    DType act_out_type = DType::kUndefined;
    const int q =
        FoldableQuantize(g, act_node.outputs[0], consumers, graph_outputs, q_note, act_out_type);
    ScalarQParams qp;
    if (q >= 0 && ReadScalarQdq(g, g.nodes[q], qp).empty()) {
      claim.act_note = OrtKeepsActivation(g, act_node, qp);
      if (claim.act_note.empty()) {
        claim.removed_q = q;
        claim.removed_act = act;
        out_type = act_out_type;
      }
    }
  }

  Node& f = claim.fused;
  f.name = (mm.name.empty() ? std::string("node") + std::to_string(mm_index) : mm.name) + "/qdq";
  f.op_type = kFusedMatMulOp;
  f.domain = kOctetDomain;
  f.opset = 1;
  f.inputs.assign(kFusedInputCount, -1);
  f.inputs[kFusedX] = x.data;
  f.inputs[kFusedXScale] = x.scale;
  f.inputs[kFusedXZero] = x.zero;
  f.inputs[kFusedW] = w.data;
  f.inputs[kFusedWScale] = w.scale;
  f.inputs[kFusedWZero] = w.zero;
  f.inputs[kFusedBias] = bias;
  f.attributes["x_axis"] = Attribute::Int(x_axis);
  f.attributes["x_rank"] = Attribute::Int(x_rank);
  f.attributes["trans_b"] = Attribute::Int(trans_b);
  if (claim.removed_q >= 0) {
    const Node& q = g.nodes[claim.removed_q];
    f.inputs[kFusedYScale] = q.inputs[1];
    f.inputs[kFusedYZero] = InputAt(q, 2);
    f.attributes["y_type"] = Attribute::Int(static_cast<int64_t>(out_type));
    f.outputs = {q.outputs[0]};
  } else {
    f.outputs = {product};
  }
  return claim;
}

}  // namespace

QdqReport FuseQdqMatMul(Graph& g) {
  QdqReport report;
  const std::vector<std::vector<int>> consumers = ConsumersOf(g);
  const std::set<int> graph_outputs(g.outputs.begin(), g.outputs.end());

  auto fed_by_dq = [&](const Node& n, size_t i) {
    const int v = InputAt(n, i);
    return v >= 0 && g.values[v].producer >= 0 && IsDequantizeNode(g.nodes[g.values[v].producer]);
  };
  std::vector<bool> removed(g.nodes.size(), false);
  std::vector<std::optional<Node>> replacement(g.nodes.size());
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    if (node.domain != kOnnxDomain || (node.op_type != "MatMul" && node.op_type != "Gemm"))
      continue;
    if (!fed_by_dq(node, 0) || !fed_by_dq(node, 1)) continue;
    ++report.groups;
    Claim claim = TryClaim(g, static_cast<int>(n), consumers, graph_outputs);
    if (!claim.why.empty()) {
      report.Refuse(claim.why, node);
      continue;
    }
    ++report.claimed;
    if (!claim.q_note.empty()) report.Refuse(claim.q_note, g.nodes[consumers[node.outputs[0]][0]]);
    if (!claim.act_note.empty())
      report.Refuse(claim.act_note, g.nodes[consumers[node.outputs[0]][0]]);
    report.Fuse(node, claim.fused.domain + "." + claim.fused.op_type +
                          (claim.removed_q >= 0 ? " (int8 output" : " (float output") +
                          (claim.removed_act >= 0 ? ", " + g.nodes[claim.removed_act].op_type +
                                                        " dropped as ONNX Runtime does)"
                                                  : ")"));
    if (claim.removed_q >= 0) removed[claim.removed_q] = true;
    if (claim.removed_act >= 0) removed[claim.removed_act] = true;
    replacement[n] = std::move(claim.fused);
  }
  if (report.claimed == 0) return report;

  std::vector<Node> nodes;
  nodes.reserve(g.nodes.size());
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (removed[n]) continue;
    nodes.push_back(replacement[n] ? std::move(*replacement[n]) : std::move(g.nodes[n]));
  }
  g.nodes = std::move(nodes);
  DropUnreadDequantize(g);
  return report;
}

}  // namespace octet
