#include "rewrite/float_silu.h"

#include <string>
#include <vector>

#include "graph/octet_ops.h"
#include "rewrite/qdq_util.h"

namespace octet {

void FuseFloatGatedSilu(Graph& g, QdqReport& report) {
  const std::vector<std::vector<int>> consumers = ConsumersOf(g);
  std::vector<bool> removed(g.nodes.size(), false);
  bool changed = false;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& sigmoid = g.nodes[n];
    if (removed[n] || sigmoid.domain != kOnnxDomain || sigmoid.op_type != "Sigmoid" ||
        sigmoid.inputs.size() != 1 || sigmoid.inputs[0] < 0)
      continue;
    const int gate = sigmoid.inputs[0];
    const int silu = SoleConsumer(g, consumers, sigmoid.outputs[0]);
    if (silu < 0 || removed[silu] || !IsOnnxBinary(g.nodes[silu], "Mul") ||
        OtherInput(g.nodes[silu], sigmoid.outputs[0]) != gate)
      continue;
    const int product = SoleConsumer(g, consumers, g.nodes[silu].outputs[0]);
    if (product < 0 || removed[product] || !IsOnnxBinary(g.nodes[product], "Mul")) continue;
    const int up = OtherInput(g.nodes[product], g.nodes[silu].outputs[0]);
    if (up < 0 || !MayBeFloat32(g, gate) || !MayBeFloat32(g, up)) continue;

    Node fused;
    fused.name = (sigmoid.name.empty() ? "node" + std::to_string(n) : sigmoid.name) + "/gated_silu";
    fused.op_type = kGatedSiluOp;
    fused.domain = kOctetDomain;
    fused.opset = 1;
    fused.inputs = {gate, up};
    fused.outputs = {g.nodes[product].outputs[0]};
    report.Fuse(sigmoid,
                std::string("octet.") + kGatedSiluOp + " (float; Sigmoid, Mul, Mul folded)");
    removed[n] = removed[silu] = true;
    g.nodes[product] = std::move(fused);
    changed = true;
  }
  if (changed) RemoveNodes(g, removed);
}

}  // namespace octet
