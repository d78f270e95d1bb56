#include "rewrite/integer_matmul_float.h"

#include <optional>
#include <string>
#include <vector>

#include "rewrite/qdq_util.h"

namespace octet {

namespace {

bool IsOnnxOp(const Node& n, const char* op) { return n.domain == kOnnxDomain && n.op_type == op; }

// The shape of S as far as the graph proves it: a constant's, or for a Mul of constants
// and DynamicQuantizeLinear scales (one value each) the largest constant's. Empty
// optional when S is anything else.
std::optional<Shape> ScaleShape(const Graph& g, int s) {
  if (const Tensor* t = ConstantValue(g, s)) {
    if (t->dtype() != DType::kFloat32) return std::nullopt;
    return t->shape();
  }
  const int p = g.values[s].producer;
  if (p < 0) return std::nullopt;
  const Node& mul = g.nodes[p];
  if (!IsOnnxOp(mul, "Mul") || mul.inputs.size() != 2) return std::nullopt;
  Shape shape;
  for (int in : mul.inputs) {
    if (const Tensor* t = ConstantValue(g, in)) {
      if (t->dtype() != DType::kFloat32) return std::nullopt;
      if (t->rank() > shape.size()) shape = t->shape();
      continue;
    }
    const int q = in >= 0 ? g.values[in].producer : -1;
    if (q < 0 || !IsOnnxOp(g.nodes[q], "DynamicQuantizeLinear") || g.nodes[q].outputs.size() < 2 ||
        g.nodes[q].outputs[1] != in)
      return std::nullopt;
  }
  return shape;
}

// Omitted, a one-value constant, or DynamicQuantizeLinear's zero point output.
bool IsScalarZeroPoint(const Graph& g, int zero) {
  if (zero < 0) return true;
  if (const Tensor* t = ConstantValue(g, zero)) return t->numel() == 1;
  const int p = g.values[zero].producer;
  return p >= 0 && IsOnnxOp(g.nodes[p], "DynamicQuantizeLinear") && g.nodes[p].outputs.size() > 2 &&
         g.nodes[p].outputs[2] == zero;
}

}  // namespace

void FoldMatMulIntegerToFloat(Graph& g, QdqReport& report) {
  const std::vector<std::vector<int>> consumers = ConsumersOf(g);
  std::vector<bool> removed(g.nodes.size(), false);
  bool changed = false;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& mm = g.nodes[n];
    if (!IsOnnxOp(mm, "MatMulInteger") || mm.outputs.size() != 1) continue;
    const int cast = SoleConsumer(g, consumers, mm.outputs[0]);
    if (cast < 0 || !IsOnnxOp(g.nodes[cast], "Cast") ||
        g.nodes[cast].GetInt("to", 0) != static_cast<int64_t>(DType::kFloat32))
      continue;
    const int mul = SoleConsumer(g, consumers, g.nodes[cast].outputs[0]);
    if (mul < 0 || !IsOnnxOp(g.nodes[mul], "Mul") || g.nodes[mul].inputs.size() != 2) continue;
    const Node& mul_node = g.nodes[mul];
    const int scale =
        mul_node.inputs[0] == g.nodes[cast].outputs[0] ? mul_node.inputs[1] : mul_node.inputs[0];
    // N from a constant B; the scale must be one value or one per column, and the
    // zero point of A one value (MatMulIntegerToFloat's a_zero_point is per tensor).
    const Tensor* b = ConstantValue(g, InputAt(mm, 1));
    const std::optional<Shape> scale_shape = ScaleShape(g, scale);
    std::string why;
    if (!b || b->rank() != 2)
      why = "b_not_constant_matrix";
    else if (!scale_shape || scale_shape->size() > 1 ||
             (NumElements(*scale_shape) != 1 && NumElements(*scale_shape) != b->dim(1)))
      why = "scale_not_per_tensor_or_column";
    else if (!IsScalarZeroPoint(g, InputAt(mm, 2)))
      why = "a_zero_point_not_scalar";
    if (!why.empty()) {
      report.Refuse(why, mm);
      continue;
    }
    // An Add of a constant [N] float bias folds too.
    int add = SoleConsumer(g, consumers, mul_node.outputs[0]);
    int bias = -1;
    if (add >= 0 && IsOnnxOp(g.nodes[add], "Add") && g.nodes[add].inputs.size() == 2) {
      const Node& add_node = g.nodes[add];
      bias = add_node.inputs[0] == mul_node.outputs[0] ? add_node.inputs[1] : add_node.inputs[0];
      const Tensor* t = ConstantValue(g, bias);
      if (!t || t->dtype() != DType::kFloat32 || t->shape() != Shape{b->dim(1)}) bias = -1;
    }
    if (bias < 0) add = -1;

    Tensor one(DType::kFloat32, {});
    one.data<float>()[0] = 1.0f;
    Node fused;
    fused.name = (mm.name.empty() ? "node" + std::to_string(n) : mm.name) + "/to_float";
    fused.op_type = "MatMulIntegerToFloat";
    fused.domain = kMsDomain;
    fused.opset = 1;
    fused.inputs = {InputAt(mm, 0),
                    InputAt(mm, 1),
                    AddConstant(g, fused.name + "/one", one),
                    scale,
                    InputAt(mm, 2),
                    InputAt(mm, 3),
                    bias};
    fused.outputs = {g.nodes[add >= 0 ? add : mul].outputs[0]};
    report.Fuse(mm, std::string("com.microsoft.MatMulIntegerToFloat (Cast, Mul") +
                        (add >= 0 ? ", Add" : "") + " folded)");
    removed[cast] = removed[mul] = true;
    if (add >= 0) removed[add] = true;
    g.nodes[n] = std::move(fused);
    changed = true;
  }
  if (changed) RemoveNodes(g, removed);
}

}  // namespace octet
