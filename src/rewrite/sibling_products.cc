#include "rewrite/sibling_products.h"

#include <algorithm>
#include <climits>
#include <cstring>
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

bool IsFloatFusedMatMul(const Node& n) {
  return n.domain == kOctetDomain && n.op_type == kFusedMatMulOp && InputAt(n, kFusedYScale) < 0 &&
         InputAt(n, kFusedYZero) < 0 && n.GetInt("x_axis", -1) < 0;
}

// Every input of `n` from `first` on is omitted or an initializer.
bool ConstantFrom(const Graph& g, const Node& n, size_t first) {
  for (size_t i = first; i < n.inputs.size(); ++i)
    if (n.inputs[i] >= 0 && !ConstantValue(g, n.inputs[i])) return false;
  return true;
}

// What 4-bit products must share to run as one: the op, its input and every attribute
// that fixes the arithmetic. Empty when `n` cannot join a merge.
std::string NBitsKey(const Graph& g, const Node& n) {
  const bool nbits = IsMatMulNBits(n);
  // MatMulNBits' g_idx and bias are not part of a merge.
  if (n.inputs.size() > 4 && (InputAt(n, 4) >= 0 || InputAt(n, 5) >= 0 || n.inputs.size() > 6))
    return "";
  const Tensor* w = ConstantValue(g, InputAt(n, 1));
  if (!w || !ConstantValue(g, InputAt(n, 2)) || !ConstantFrom(g, n, 3)) return "";
  const Tensor* zero = InputAt(n, 3) >= 0 ? ConstantValue(g, InputAt(n, 3)) : nullptr;
  const int64_t K = nbits ? n.GetInt("K", -1) : (w->rank() == 2 ? w->dim(0) : -1);
  if (K < 1) return "";
  std::string key = " K" + std::to_string(K) + " block" +
                    std::to_string(n.GetInt("block_size", 0)) + " level" +
                    std::to_string(n.GetInt("accuracy_level", 0));
  // A float zero point keeps MatMulNBits at level 4 in float (ops/matmul_nbits.cc).
  if (nbits)
    key += " bits" + std::to_string(n.GetInt("bits", 4)) +
           (zero && zero->dtype() == DType::kFloat32 ? " float_zero" : "");
  return key;
}

// What int8 products must share: x's quantization (one scale and zero point, by value:
// a quantizer may write a copy per consumer) and the weights' type and K.
std::string FusedKey(const Graph& g, const Node& n) {
  const Tensor* w = ConstantValue(g, InputAt(n, kFusedW));
  const Tensor* x_scale = ConstantValue(g, InputAt(n, kFusedXScale));
  const Tensor* x_zero =
      InputAt(n, kFusedXZero) >= 0 ? ConstantValue(g, InputAt(n, kFusedXZero)) : nullptr;
  if (!w || w->rank() != 2 || !x_scale || x_scale->numel() != 1 ||
      x_scale->dtype() != DType::kFloat32 || (x_zero && x_zero->numel() != 1) ||
      !ConstantValue(g, InputAt(n, kFusedWScale)) || !ConstantFrom(g, n, kFusedXZero) ||
      n.inputs.size() != kFusedInputCount)
    return "";
  uint32_t scale_bits;
  std::memcpy(&scale_bits, x_scale->raw(), sizeof(scale_bits));
  // An absent zero point is 0.
  const int32_t zero = !x_zero                            ? 0
                       : x_zero->dtype() == DType::kInt8  ? x_zero->data<int8_t>()[0]
                       : x_zero->dtype() == DType::kUInt8 ? x_zero->data<uint8_t>()[0]
                                                          : INT32_MIN;
  if (zero == INT32_MIN) return "";
  const int64_t K = w->dim(n.GetInt("trans_b", 0) != 0 ? 1 : 0);
  return " scale" + std::to_string(scale_bits) + " zero" + std::to_string(zero) + " " +
         DTypeName(w->dtype()) + " K" + std::to_string(K);
}

// The product's output columns (N); 0 when unknown.
int64_t Columns(const Graph& g, const Node& n) {
  if (IsMatMulNBits(n)) return std::max<int64_t>(n.GetInt("N", 0), 0);
  const bool fused = IsFloatFusedMatMul(n);
  const Tensor* w = ConstantValue(g, InputAt(n, fused ? kFusedW : 1));
  if (!w || w->rank() != 2) return 0;
  return w->dim(fused && n.GetInt("trans_b", 0) != 0 ? 0 : 1);
}

std::string SiblingKey(const Graph& g, const Node& n) {
  if (InputAt(n, 0) < 0 || n.outputs.size() != 1 || n.outputs[0] < 0) return "";
  std::string key;
  if (IsMatMulNBits(n) || IsBlockedDqMatMul(n)) {
    key = NBitsKey(g, n);
  } else if (IsFloatFusedMatMul(n)) {
    key = FusedKey(g, n);
  }
  if (key.empty() || Columns(g, n) < 1) return "";
  return n.op_type + " x" + std::to_string(InputAt(n, 0)) + key;
}

Node Merged(const std::vector<const Node*>& products) {
  const Node& first = *products[0];
  Node merged;
  merged.domain = kOctetDomain;
  merged.opset = 1;
  std::vector<int64_t> per_product;
  if (IsFloatFusedMatMul(first)) {
    merged.op_type = kFusedMatMulSiblingsOp;
    merged.inputs = {first.inputs[kFusedX], first.inputs[kFusedXScale],
                     InputAt(first, kFusedXZero)};
    for (const Node* n : products) {
      for (int i : {kFusedW, kFusedWScale, kFusedWZero, kFusedBias})
        merged.inputs.push_back(InputAt(*n, i));
      per_product.push_back(n->GetInt("trans_b", 0));
    }
    merged.attributes["trans_b"] = Attribute::Ints(per_product);
  } else {
    merged.op_type = kNBitsSiblingsOp;
    merged.inputs = {first.inputs[0]};
    merged.attributes["of"] = Attribute::String(first.domain + "." + first.op_type);
    for (const char* shared : {"K", "bits", "block_size", "accuracy_level"})
      if (const Attribute* a = first.FindAttribute(shared)) merged.attributes[shared] = *a;
    for (const Node* n : products) {
      merged.inputs.insert(merged.inputs.end(), {n->inputs[1], n->inputs[2], InputAt(*n, 3)});
      per_product.push_back(n->GetInt("N", -1));
    }
    if (IsMatMulNBits(first)) merged.attributes["n"] = Attribute::Ints(per_product);
  }
  for (const Node* n : products) {
    merged.outputs.push_back(n->outputs[0]);
    merged.name += (merged.name.empty() ? "" : "+") + n->name;
  }
  return merged;
}

}  // namespace

void MergeSiblingProducts(Graph& g, QdqReport& report) {
  std::map<std::string, std::vector<int>> siblings;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (const std::string key = SiblingKey(g, g.nodes[i]); !key.empty())
      siblings[key].push_back(static_cast<int>(i));
  std::vector<bool> removed(g.nodes.size(), false);
  bool changed = false;
  for (const auto& [key, candidates] : siblings) {
    // Every product's columns but the last's start and end on a multiple of
    // kSiblingColumnsAlign: the aligned ones and the first other one merge.
    std::vector<int> nodes;
    bool unaligned = false;
    for (int i : candidates) {
      const bool aligned = Columns(g, g.nodes[i]) % kSiblingColumnsAlign == 0;
      if (aligned || !unaligned) nodes.push_back(i);
      unaligned = unaligned || !aligned;
    }
    if (nodes.size() < 2) continue;
    // The unaligned one, if any, goes last.
    std::stable_partition(nodes.begin(), nodes.end(), [&](int i) {
      return Columns(g, g.nodes[i]) % kSiblingColumnsAlign == 0;
    });
    std::vector<const Node*> products;
    for (int i : nodes) products.push_back(&g.nodes[i]);
    Node merged = Merged(products);
    for (int i : nodes) {
      report.Fuse(g.nodes[i], std::string(kOctetDomain) + "." + merged.op_type + " (" +
                                  std::to_string(nodes.size()) + " products of one input)");
      removed[i] = true;
    }
    const int at = *std::min_element(nodes.begin(), nodes.end());
    removed[at] = false;
    g.nodes[at] = std::move(merged);
    changed = true;
  }
  if (changed) RemoveNodes(g, removed);
}

}  // namespace octet
