#include "rewrite/float_matmul_int8.h"

#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "core/quant.h"
#include "graph/octet_ops.h"
#include "rewrite/qdq_util.h"

namespace octet {

namespace {

// Why W cannot be quantized for the route; empty when it can.
std::string CheckWeight(const Graph& g, int w) {
  const Tensor* t = ConstantValue(g, w);
  if (t == nullptr) return "weight_not_constant";
  if (t->dtype() != DType::kFloat32) return "weight_dtype";
  if (t->rank() != 2) return "weight_rank";
  if (t->dim(0) > kGemmMaxK) return "k_too_large";
  const float* p = t->data<float>();
  for (int64_t i = 0; i < t->numel(); ++i)
    if (!std::isfinite(p[i])) return "weight_not_finite";
  return "";
}

}  // namespace

void QuantizeFloatMatMuls(Graph& g, QdqReport& report) {
  const std::set<int> graph_outputs(g.outputs.begin(), g.outputs.end());
  std::vector<int> quantized_weights;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    Node& node = g.nodes[n];
    if (node.domain == kOctetDomain && node.op_type == kBlockedDqMatMulOp) {
      node.attributes["accuracy_level"] = Attribute::Int(4);
      report.Fuse(node, std::string(kOctetDomain) + "." + kBlockedDqMatMulOp +
                            " (forward route: accuracy_level 4, x int8 per block)");
      continue;
    }
    if (node.domain != kOnnxDomain || node.op_type != "MatMul" || node.inputs.size() != 2 ||
        node.outputs.size() != 1)
      continue;
    DType x_type = KnownDType(g, node.inputs[0]);
    // MatMul's inputs share one type, so a float32 weight makes an activation whose type
    // the model does not record (an intermediate without value_info) float32 too.
    if (x_type == DType::kUndefined && KnownDType(g, node.inputs[1]) == DType::kFloat32)
      x_type = DType::kFloat32;
    if (x_type != DType::kFloat32) {
      // Only a float32 product is an approximation octet offers; double stays double.
      if (x_type != DType::kUndefined) report.Refuse("activation_dtype", node);
      continue;
    }
    const std::string why = CheckWeight(g, node.inputs[1]);
    if (!why.empty()) {
      report.Refuse(why, node);
      continue;
    }
    const Tensor& w = *ConstantValue(g, node.inputs[1]);
    const int64_t K = w.dim(0), N = w.dim(1);
    Tensor w_q(DType::kInt8, {K, N});
    Tensor w_scale(DType::kFloat32, {N});
    const float* src = w.data<float>();
    int8_t* q = w_q.data<int8_t>();
    float* s = w_scale.data<float>();
    for (int64_t c = 0; c < N; ++c) {
      float amax = 0.f;
      for (int64_t k = 0; k < K; ++k) amax = std::fmax(amax, std::fabs(src[k * N + c]));
      s[c] = amax / 127.f;
    }
    for (int64_t k = 0; k < K; ++k)
      for (int64_t c = 0; c < N; ++c) {
        // Round half to even (the default rounding mode), then clamp: x / (amax / 127)
        // can round to 128 by one ulp.
        const float v = s[c] == 0.f ? 0.f : std::nearbyint(src[k * N + c] / s[c]);
        q[k * N + c] = static_cast<int8_t>(std::fmin(127.f, std::fmax(-127.f, v)));
      }
    const std::string base = g.values[node.inputs[1]].name;
    const int q_value = AddConstant(g, base + "/int8", std::move(w_q));
    const int s_value = AddConstant(g, base + "/int8_scale", std::move(w_scale));
    quantized_weights.push_back(node.inputs[1]);
    Node& m = g.nodes[n];  // AddConstant may not touch nodes, but keep the reference fresh
    m.op_type = kInt8DynamicMatMulOp;
    m.domain = kOctetDomain;
    m.opset = 1;
    m.inputs = {m.inputs[0], q_value, s_value};
    m.attributes.clear();
    report.Fuse(m,
                "octet.Int8DynamicMatMul (forward route: W int8 per column, x per row, "
                "amax/127)");
  }
  // A float weight nothing reads any more is dropped: only its int8 copy stays.
  if (quantized_weights.empty()) return;
  const std::vector<std::vector<int>> consumers = ConsumersOf(g);
  for (int w : quantized_weights)
    if (consumers[w].empty() && !graph_outputs.count(w) && g.values[w].initializer) {
      g.values[w].initializer = nullptr;
      g.initializers.erase(w);
    }
}

}  // namespace octet
