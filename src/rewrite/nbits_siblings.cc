#include "rewrite/nbits_siblings.h"

#include <map>
#include <string>
#include <vector>

#include "graph/octet_ops.h"
#include "rewrite/qdq_util.h"

namespace octet {

namespace {

bool IsMatMulNBits(const Node& n) { return n.domain == kMsDomain && n.op_type == "MatMulNBits"; }

bool IsBlockedDqMatMul(const Node& n) {
  return n.domain == kOctetDomain && n.op_type == kBlockedDqMatMulOp;
}

// What products must share to run as one: the op, its input and every attribute that
// fixes the arithmetic. Empty when `n` cannot join a merge.
std::string SiblingKey(const Graph& g, const Node& n) {
  const bool nbits = IsMatMulNBits(n);
  if (!nbits && !IsBlockedDqMatMul(n)) return "";
  if (InputAt(n, 0) < 0 || n.outputs.size() != 1 || n.outputs[0] < 0) return "";
  // MatMulNBits' g_idx and bias are not part of a merge.
  if (n.inputs.size() > 4 && (InputAt(n, 4) >= 0 || InputAt(n, 5) >= 0 || n.inputs.size() > 6))
    return "";
  const Tensor* w = ConstantValue(g, InputAt(n, 1));
  if (!w || !ConstantValue(g, InputAt(n, 2))) return "";
  const int zero = InputAt(n, 3);
  const Tensor* z = zero >= 0 ? ConstantValue(g, zero) : nullptr;
  if (zero >= 0 && !z) return "";
  const int64_t K = nbits ? n.GetInt("K", -1) : (w->rank() == 2 ? w->dim(0) : -1);
  if (K < 1) return "";
  std::string key = n.op_type + " x" + std::to_string(InputAt(n, 0)) + " K" + std::to_string(K) +
                    " block" + std::to_string(n.GetInt("block_size", 0)) + " level" +
                    std::to_string(n.GetInt("accuracy_level", 0));
  // A float zero point keeps MatMulNBits at level 4 in float (ops/matmul_nbits.cc).
  if (nbits)
    key += " bits" + std::to_string(n.GetInt("bits", 4)) +
           (z && z->dtype() == DType::kFloat32 ? " float_zero" : "");
  return key;
}

}  // namespace

void MergeNBitsSiblings(Graph& g, QdqReport& report) {
  std::map<std::string, std::vector<int>> siblings;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (const std::string key = SiblingKey(g, g.nodes[i]); !key.empty())
      siblings[key].push_back(static_cast<int>(i));
  std::vector<bool> removed(g.nodes.size(), false);
  bool changed = false;
  for (const auto& [key, nodes] : siblings) {
    if (nodes.size() < 2) continue;
    const Node& first = g.nodes[nodes[0]];
    Node merged;
    merged.op_type = kNBitsSiblingsOp;
    merged.domain = kOctetDomain;
    merged.opset = 1;
    merged.inputs = {first.inputs[0]};
    merged.attributes["of"] = Attribute::String(first.domain + "." + first.op_type);
    for (const char* shared : {"K", "bits", "block_size", "accuracy_level"})
      if (const Attribute* a = first.FindAttribute(shared)) merged.attributes[shared] = *a;
    std::vector<int64_t> widths;
    std::string names;
    for (int i : nodes) {
      const Node& n = g.nodes[i];
      merged.inputs.insert(merged.inputs.end(), {n.inputs[1], n.inputs[2], InputAt(n, 3)});
      merged.outputs.push_back(n.outputs[0]);
      widths.push_back(n.GetInt("N", -1));
      names += (names.empty() ? "" : "+") + n.name;
      report.Fuse(n, std::string(kOctetDomain) + "." + kNBitsSiblingsOp + " (" +
                         std::to_string(nodes.size()) + " products of one input)");
      removed[i] = i != nodes[0];
    }
    if (IsMatMulNBits(first)) merged.attributes["n"] = Attribute::Ints(widths);
    merged.name = names;
    g.nodes[nodes[0]] = std::move(merged);
    changed = true;
  }
  if (changed) RemoveNodes(g, removed);
}

}  // namespace octet
