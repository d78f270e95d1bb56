#include "rewrite/int8_attention.h"

#include <string>
#include <vector>

#include "graph/octet_ops.h"
#include "rewrite/qdq_util.h"

namespace octet {

namespace {

const std::vector<int64_t> kHeadsSwap = {0, 2, 1, 3};       // [B, S, H, D] <-> [B, H, S, D]
const std::vector<int64_t> kKeysTransposed = {0, 2, 3, 1};  // [B, S, H, D] -> [B, H, D, S]

bool IsTranspose(const Node& n) {
  return n.domain == kOnnxDomain && n.op_type == "Transpose" && n.inputs.size() == 1 &&
         n.inputs[0] >= 0 && n.outputs.size() == 1;
}

// A single-value (per-tensor) constant; an omitted optional input counts too.
bool IsPerTensorConstant(const Graph& g, int value) {
  if (value < 0) return true;
  const Tensor* t = ConstantValue(g, value);
  return t != nullptr && t->numel() == 1;
}

}  // namespace

void FoldInt8HeadTransposes(Graph& g, QdqReport& report) {
  const std::vector<std::vector<int>> consumers = ConsumersOf(g);
  std::vector<bool> removed(g.nodes.size(), false);
  bool changed = false;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    Node& mm = g.nodes[n];
    if (mm.domain != kOnnxDomain || mm.op_type != "QLinearMatMul" || mm.inputs.size() != 8 ||
        mm.outputs.size() != 1 || mm.outputs[0] < 0)
      continue;
    std::string folded;
    // The Transpose feeding input `index` when it has one of `perms` and only this reader.
    auto feeding_transpose = [&](size_t index, bool keys_allowed) -> int {
      const int value = mm.inputs[index];
      const int producer = value >= 0 ? g.values[value].producer : -1;
      if (producer < 0 || removed[producer] || !IsTranspose(g.nodes[producer]) ||
          SoleConsumer(g, consumers, value) != static_cast<int>(n))
        return -1;
      const Node& t = g.nodes[producer];
      // A constant source would be packed as stored at kernel creation.
      if (ConstantValue(g, t.inputs[0]) != nullptr) return -1;
      const std::vector<int64_t> perm = t.GetInts("perm");
      return perm == kHeadsSwap || (keys_allowed && perm == kKeysTransposed) ? producer : -1;
    };
    const int a_transpose = feeding_transpose(0, false);
    if (a_transpose >= 0) {
      mm.attributes[kAPermAttr] = Attribute::Ints(kHeadsSwap);
      mm.inputs[0] = g.nodes[a_transpose].inputs[0];
      removed[a_transpose] = true;
      folded += " A '" + g.nodes[a_transpose].name + "'";
    }
    // B's parameters must be per tensor: per-column ones follow the transposed shape.
    const int b_transpose =
        IsPerTensorConstant(g, mm.inputs[4]) && IsPerTensorConstant(g, mm.inputs[5])
            ? feeding_transpose(3, true)
            : -1;
    if (b_transpose >= 0) {
      mm.attributes[kBPermAttr] = Attribute::Ints(g.nodes[b_transpose].GetInts("perm"));
      mm.inputs[3] = g.nodes[b_transpose].inputs[0];
      removed[b_transpose] = true;
      folded += " B '" + g.nodes[b_transpose].name + "'";
    }
    const int merge = SoleConsumer(g, consumers, mm.outputs[0]);
    if (merge >= 0 && !removed[merge] && IsTranspose(g.nodes[merge]) &&
        g.nodes[merge].GetInts("perm") == kHeadsSwap) {
      mm.attributes[kYPermAttr] = Attribute::Ints(kHeadsSwap);
      mm.outputs[0] = g.nodes[merge].outputs[0];
      removed[merge] = true;
      folded += " Y '" + g.nodes[merge].name + "'";
    }
    if (folded.empty()) continue;
    report.Fuse(mm, "ai.onnx.QLinearMatMul (head Transposes folded:" + folded + ")");
    changed = true;
  }
  if (changed) RemoveNodes(g, removed);
}

}  // namespace octet
