#include "rewrite/float_gelu.h"

#include <string>
#include <vector>

#include "rewrite/qdq_util.h"

namespace octet {

void FuseFloatGelu(Graph& g, QdqReport& report) {
  constexpr float kSqrtHalf = 0.70710678118654752f;
  const std::vector<std::vector<int>> consumers = ConsumersOf(g);
  std::vector<bool> removed(g.nodes.size(), false);
  bool changed = false;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& erf = g.nodes[n];
    if (erf.domain != kOnnxDomain || erf.op_type != "Erf" || erf.inputs.size() != 1 || removed[n])
      continue;
    // Erf's input: Mul(x, 1/sqrt(2)).
    const int scaled = erf.inputs[0];
    const int scale_node = scaled >= 0 ? g.values[scaled].producer : -1;
    if (scale_node < 0 || !IsOnnxBinary(g.nodes[scale_node], "Mul") ||
        SoleConsumer(g, consumers, scaled) != static_cast<int>(n))
      continue;
    const Node& scale = g.nodes[scale_node];
    int x = -1;
    for (int i = 0; i < 2; ++i)
      if (IsFloatConstant(g, scale.inputs[1 - i], kSqrtHalf)) x = scale.inputs[i];
    if (x < 0) continue;
    // Add(e, 1).
    const int add = SoleConsumer(g, consumers, erf.outputs[0]);
    if (add < 0 || !IsOnnxBinary(g.nodes[add], "Add") ||
        !IsFloatConstant(g, OtherInput(g.nodes[add], erf.outputs[0]), 1.f))
      continue;
    const int one_plus = g.nodes[add].outputs[0];
    // Then x and 0.5, in either order: Mul(Mul(x, one_plus), 0.5) or Mul(Mul(x, 0.5), one_plus).
    const int mul = SoleConsumer(g, consumers, one_plus);
    if (mul < 0 || !IsOnnxBinary(g.nodes[mul], "Mul")) continue;
    const int partner = OtherInput(g.nodes[mul], one_plus);
    int last = -1;
    int half_node = -1;
    if (partner == x) {
      last = SoleConsumer(g, consumers, g.nodes[mul].outputs[0]);
      if (last < 0 || !IsOnnxBinary(g.nodes[last], "Mul") ||
          !IsFloatConstant(g, OtherInput(g.nodes[last], g.nodes[mul].outputs[0]), 0.5f))
        continue;
    } else {
      half_node = partner >= 0 ? g.values[partner].producer : -1;
      if (half_node < 0 || !IsOnnxBinary(g.nodes[half_node], "Mul") ||
          SoleConsumer(g, consumers, partner) != mul || OtherInput(g.nodes[half_node], x) < 0 ||
          !IsFloatConstant(g, OtherInput(g.nodes[half_node], x), 0.5f))
        continue;
      last = mul;
    }
    // x must be float32 and the constants one value each, so the output keeps x's shape.
    if (!MayBeFloat32(g, x)) continue;

    Node gelu;
    gelu.name = (erf.name.empty() ? "node" + std::to_string(n) : erf.name) + "/gelu";
    gelu.op_type = "Gelu";
    gelu.domain = kOnnxDomain;
    gelu.opset = 20;
    gelu.inputs = {x};
    gelu.outputs = {g.nodes[last].outputs[0]};
    gelu.attributes["approximate"] = Attribute::String("none");
    report.Fuse(erf, "ai.onnx.Gelu (float; Mul, Erf, Add, Mul, Mul folded)");
    for (int node : {scale_node, static_cast<int>(n), add, mul, last, half_node})
      if (node >= 0) removed[node] = true;
    removed[last] = false;
    g.nodes[last] = std::move(gelu);
    changed = true;
  }
  if (changed) RemoveNodes(g, removed);
}

}  // namespace octet
