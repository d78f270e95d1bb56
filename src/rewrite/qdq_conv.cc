#include "rewrite/qdq_conv.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "graph/conv_attributes.h"
#include "graph/octet_ops.h"
#include "rewrite/qdq_activation.h"
#include "rewrite/qdq_util.h"

namespace octet {

namespace {

struct ConvClaim {
  std::string why;  // non-empty: refused for this reason (reported under the Conv)
  Node fused;
  int removed_q = -1;    // the QuantizeLinear folded in
  int removed_act = -1;  // a Relu / Clip before it that ONNX Runtime removes too
};

ConvClaim Refuse(const std::string& why) {
  ConvClaim c;
  c.why = why;
  return c;
}

// Why the int32 bias DequantizeLinear cannot be added to the accumulators as
// it is (zero point 0, scale == x_scale * w_scale[o] in float32, [M] values).
std::string CheckBias(const Graph& g, const Node& conv, const DqParams& x, const DqParams& w,
                      int64_t out_channels, int& bias) {
  const Value& b_value = g.values[InputAt(conv, 2)];
  if (b_value.producer < 0 || !IsDequantizeNode(g.nodes[b_value.producer]))
    return "bias_not_quantized";
  DqParams b;
  if (std::string why = ReadDq(g, g.nodes[b_value.producer], b); !why.empty()) return "bias_" + why;
  const Tensor* data = ConstantValue(g, b.data);
  if (!data || data->dtype() != DType::kInt32) return "bias_not_int32";
  if (data->shape() != Shape{out_channels}) return "bias_shape";
  if (b.per_axis && b.count != out_channels) return "bias_shape";
  if (const Tensor* zero = ConstantValue(g, b.zero)) {
    for (int64_t i = 0; i < zero->numel(); ++i)
      if (zero->data<int32_t>()[i] != 0) return "bias_zero_point";
  }
  const float sx = ConstantValue(g, x.scale)->data<float>()[0];
  const float* sw = ConstantValue(g, w.scale)->data<float>();
  const float* sb = ConstantValue(g, b.scale)->data<float>();
  for (int64_t o = 0; o < out_channels; ++o)
    if (sb[b.per_axis ? o : 0] != sx * sw[w.per_axis ? o : 0]) return "bias_scale";
  bias = b.data;
  return "";
}

ConvClaim TryClaim(const Graph& g, int conv_index, const std::vector<std::vector<int>>& consumers,
                   const std::set<int>& graph_outputs) {
  const Node& conv = g.nodes[conv_index];
  try {
    ReadConvAttributes(conv);
  } catch (const Error&) {
    return Refuse("conv_attributes");  // the Conv kernel reports what is wrong
  }
  DqParams x, w;
  if (std::string why = ReadDq(g, g.nodes[g.values[conv.inputs[0]].producer], x); !why.empty())
    return Refuse(why);
  if (std::string why = ReadDq(g, g.nodes[g.values[conv.inputs[1]].producer], w); !why.empty())
    return Refuse(why);
  if (x.data_type == DType::kUndefined) return Refuse("activation_dtype_unknown");
  if (!Is8Bit(x.data_type)) return Refuse("activation_dtype");
  if (x.per_axis) return Refuse("activation_scale_per_axis");

  const Tensor* weight = ConstantValue(g, w.data);
  if (!weight) return Refuse("weight_not_constant");
  if (!Is8Bit(weight->dtype())) return Refuse("weight_dtype");
  if (weight->rank() == 5) return Refuse("conv_3d");
  if (weight->rank() != 3 && weight->rank() != 4) return Refuse("weight_rank");
  const int64_t out_channels = weight->dim(0);
  const int64_t group = conv.GetInt("group", 1);
  if (out_channels % group != 0) return Refuse("group_shape");
  if (weight->numel() / std::max<int64_t>(out_channels, 1) > kGemmMaxK)
    return Refuse("k_too_large");
  if (w.per_axis) {
    const auto axis = NormalizeAxis(w.axis, weight->rank());
    if (!axis) return Refuse("scale_axis");
    if (*axis != 0) return Refuse("scale_not_per_output_channel");
    if (w.count != out_channels) return Refuse("scale_shape");
  }
  if (const Value& xv = g.values[x.data]; xv.shape) {
    if (xv.shape->size() == 5) return Refuse("conv_3d");
    if (xv.shape->size() != static_cast<size_t>(weight->rank())) return Refuse("shape_mismatch");
  }

  int bias = -1;
  if (InputAt(conv, 2) >= 0) {
    if (std::string why = CheckBias(g, conv, x, w, out_channels, bias); !why.empty())
      return Refuse(why);
  }

  // The output must be quantized: Conv -> Q, or Conv -> Relu | Clip -> Q where
  // ONNX Runtime removes the activation (ReluQuantFusion / ClipQuantFusion).
  ConvClaim claim;
  std::string q_note;
  DType out_type = DType::kUndefined;
  const int product = conv.outputs[0];
  claim.removed_q = FoldableQuantize(g, product, consumers, graph_outputs, q_note, out_type);
  if (!q_note.empty()) return Refuse(q_note);
  const int act = SoleConsumer(g, consumers, product);
  if (claim.removed_q < 0 && act >= 0 && IsActivation(g.nodes[act])) {
    const Node& act_node = g.nodes[act];
    const int q =
        FoldableQuantize(g, act_node.outputs[0], consumers, graph_outputs, q_note, out_type);
    if (!q_note.empty()) return Refuse(q_note);
    ScalarQParams qp;
    if (q >= 0) {
      if (std::string why = ReadScalarQdq(g, g.nodes[q], qp); !why.empty())
        return Refuse("q_" + why);
      if (std::string why = OrtKeepsActivation(g, act_node, qp); !why.empty()) return Refuse(why);
      claim.removed_q = q;
      claim.removed_act = act;
    }
  }
  // Float output (ONNX Runtime keeps DQ -> Conv in float here too) is not fused yet.
  if (claim.removed_q < 0) return Refuse("float_output");

  const Node& q = g.nodes[claim.removed_q];
  Node& f = claim.fused;
  f.name =
      (conv.name.empty() ? std::string("node") + std::to_string(conv_index) : conv.name) + "/qdq";
  f.op_type = kFusedConvOp;
  f.domain = kOctetDomain;
  f.opset = 1;
  f.attributes = conv.attributes;  // auto_pad, group, kernel_shape, strides, dilations, pads
  f.inputs.assign(kFusedConvInputCount, -1);
  f.inputs[kFusedConvX] = x.data;
  f.inputs[kFusedConvXScale] = x.scale;
  f.inputs[kFusedConvXZero] = x.zero;
  f.inputs[kFusedConvW] = w.data;
  f.inputs[kFusedConvWScale] = w.scale;
  f.inputs[kFusedConvWZero] = w.zero;
  f.inputs[kFusedConvYScale] = q.inputs[1];
  f.inputs[kFusedConvYZero] = InputAt(q, 2);
  f.inputs[kFusedConvBias] = bias;
  f.attributes["y_type"] = Attribute::Int(static_cast<int64_t>(out_type));
  f.outputs = {q.outputs[0]};
  return claim;
}

}  // namespace

void FuseQdqConv(Graph& g, QdqReport& report) {
  const std::vector<std::vector<int>> consumers = ConsumersOf(g);
  const std::set<int> graph_outputs(g.outputs.begin(), g.outputs.end());
  auto fed_by_dq = [&](const Node& n, size_t i) {
    const int v = InputAt(n, i);
    return v >= 0 && g.values[v].producer >= 0 && IsDequantizeNode(g.nodes[g.values[v].producer]);
  };
  std::vector<bool> removed(g.nodes.size(), false);
  bool changed = false;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    if (node.domain != kOnnxDomain || node.op_type != "Conv") continue;
    if (!fed_by_dq(node, 0) || !fed_by_dq(node, 1)) continue;
    ++report.groups;
    ConvClaim claim = TryClaim(g, static_cast<int>(n), consumers, graph_outputs);
    if (!claim.why.empty()) {
      report.Refuse(claim.why, node);
      continue;
    }
    ++report.claimed;
    report.Fuse(node, std::string(kOctetDomain) + "." + kFusedConvOp + " (int8 output" +
                          (claim.removed_act >= 0 ? ", " + g.nodes[claim.removed_act].op_type +
                                                        " dropped as ONNX Runtime does)"
                                                  : ")"));
    removed[claim.removed_q] = true;
    if (claim.removed_act >= 0) removed[claim.removed_act] = true;
    // The fused node takes the Conv's place: its inputs are produced before the
    // Conv, and its output's consumers came after the QuantizeLinear.
    g.nodes[n] = std::move(claim.fused);
    changed = true;
  }
  if (!changed) return;
  RemoveNodes(g, removed);
  DropUnreadDequantize(g);
}

}  // namespace octet
