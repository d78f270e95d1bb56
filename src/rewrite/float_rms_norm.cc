#include "rewrite/float_rms_norm.h"

#include <string>
#include <vector>

#include "rewrite/qdq_util.h"

namespace octet {

namespace {

// The constant of one float32 value and rank <= 1 that `value` is, else nullptr.
const Tensor* FloatScalar(const Graph& g, int value) {
  const Tensor* t = ConstantValue(g, value);
  return t && t->dtype() == DType::kFloat32 && t->numel() == 1 && t->rank() <= 1 ? t : nullptr;
}

// Whether node n squares x: Pow(x, 2) (float or integer exponent) or Mul(x, x).
bool Squares(const Graph& g, const Node& n, int x) {
  if (IsOnnxBinary(n, "Mul")) return n.inputs[0] == x && n.inputs[1] == x;
  if (!IsOnnxBinary(n, "Pow") || n.inputs[0] != x) return false;
  const Tensor* e = ConstantValue(g, n.inputs[1]);
  if (!e || e->numel() != 1 || e->rank() > 1) return false;
  switch (e->dtype()) {
    case DType::kFloat32:
      return e->data<float>()[0] == 2.f;
    case DType::kInt32:
      return e->data<int32_t>()[0] == 2;
    case DType::kInt64:
      return e->data<int64_t>()[0] == 2;
    default:
      return false;
  }
}

// Whether ReduceMean node n averages over the last axis of x alone, keeping it.
bool MeansLastAxis(const Graph& g, const Node& n, int x) {
  if (n.GetInt("keepdims", 1) != 1) return false;
  std::vector<int64_t> axes = n.GetInts("axes");
  if (n.opset >= 18) {
    if (n.inputs.size() != 2) return false;
    const auto input_axes = ConstantInts(g, n.inputs[1]);
    if (!input_axes) return false;
    axes = *input_axes;
  }
  if (axes.size() != 1) return false;
  const int64_t rank = KnownRank(g, x);
  return axes[0] == -1 || (rank > 0 && axes[0] == rank - 1);
}

}  // namespace

void FuseFloatRmsNorm(Graph& g, QdqReport& report) {
  const std::vector<std::vector<int>> consumers = ConsumersOf(g);
  std::vector<bool> removed(g.nodes.size(), false);
  bool changed = false;
  // The node that alone reads `value` and is the binary op `op`, else -1.
  auto next_binary = [&](int value, const char* op) {
    const int n = SoleConsumer(g, consumers, value);
    return n >= 0 && !removed[n] && IsOnnxBinary(g.nodes[n], op) ? n : -1;
  };
  auto next_unary = [&](int value, const char* op) {
    const int n = SoleConsumer(g, consumers, value);
    return n >= 0 && !removed[n] && g.nodes[n].domain == kOnnxDomain && g.nodes[n].op_type == op &&
                   g.nodes[n].inputs.size() == 1
               ? n
               : -1;
  };
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& mean = g.nodes[n];
    if (mean.domain != kOnnxDomain || mean.op_type != "ReduceMean" || mean.inputs.empty() ||
        mean.inputs[0] < 0 || removed[n])
      continue;
    const int squared = mean.inputs[0];
    const int square = g.values[squared].producer;
    if (square < 0 || removed[square] || SoleConsumer(g, consumers, squared) != static_cast<int>(n))
      continue;
    const int x = g.nodes[square].inputs.empty() ? -1 : g.nodes[square].inputs[0];
    if (x < 0 || !Squares(g, g.nodes[square], x) || !MeansLastAxis(g, mean, x)) continue;
    if (!MayBeFloat32(g, x)) continue;
    // Add(mean, epsilon) -> Sqrt -> Reciprocal | Div(1, root) -> Mul(x, r) -> Mul(w, .).
    const int add = next_binary(mean.outputs[0], "Add");
    const Tensor* epsilon =
        add >= 0 ? FloatScalar(g, OtherInput(g.nodes[add], mean.outputs[0])) : nullptr;
    if (!epsilon) continue;
    const int root = next_unary(g.nodes[add].outputs[0], "Sqrt");
    if (root < 0) continue;
    const int root_value = g.nodes[root].outputs[0];
    int reciprocal = next_unary(root_value, "Reciprocal");
    if (reciprocal < 0) {
      reciprocal = next_binary(root_value, "Div");
      const Tensor* one = reciprocal >= 0 && g.nodes[reciprocal].inputs[1] == root_value
                              ? FloatScalar(g, g.nodes[reciprocal].inputs[0])
                              : nullptr;
      if (!one || one->data<float>()[0] != 1.f) continue;
    }
    const int inverse = g.nodes[reciprocal].outputs[0];
    const int normalize = next_binary(inverse, "Mul");
    if (normalize < 0 || OtherInput(g.nodes[normalize], inverse) != x) continue;
    const int normalized = g.nodes[normalize].outputs[0];
    const int scale = next_binary(normalized, "Mul");
    if (scale < 0) continue;
    const int weight = OtherInput(g.nodes[scale], normalized);
    const Tensor* w = ConstantValue(g, weight);
    if (!w || w->dtype() != DType::kFloat32 || w->rank() > 1) continue;

    Node norm;
    norm.name = (mean.name.empty() ? "node" + std::to_string(n) : mean.name) + "/rms_norm";
    norm.op_type = "RMSNormalization";
    norm.domain = kOnnxDomain;
    norm.opset = 23;
    norm.inputs = {x, weight};
    norm.outputs = {g.nodes[scale].outputs[0]};
    norm.attributes["axis"] = Attribute::Int(-1);
    norm.attributes["epsilon"] = Attribute::Float(epsilon->data<float>()[0]);
    report.Fuse(mean,
                "ai.onnx.RMSNormalization (float; Pow, ReduceMean, Add, Sqrt, Reciprocal, Mul, "
                "Mul folded)");
    for (int node : {square, static_cast<int>(n), add, root, reciprocal, normalize})
      removed[node] = true;
    g.nodes[scale] = std::move(norm);
    changed = true;
  }
  if (changed) RemoveNodes(g, removed);
}

}  // namespace octet
