#include "runtime/introspect.h"

#include <algorithm>
#include <exception>
#include <functional>
#include <map>
#include <set>

#include "core/thread_pool.h"
#include "graph/octet_ops.h"
#include "kernels/isa.h"
#include "model/onnx_loader.h"
#include "ops/evaluate.h"
#include "ops/registry.h"
#include "rewrite/rewrite.h"
#include "runtime/guarded.h"

namespace octet {

std::vector<KernelInfo> RegisteredKernels() {
  std::vector<KernelInfo> kernels;
  for (const KernelDef& d : KernelRegistry::Global().defs())
    kernels.push_back({d.domain, d.op_type, d.since_version, d.end_version});
  return kernels;
}

std::string DescribeModelRewrites(const std::string& path) {
  return Guarded(DefaultMaxTensorBytes(),
                 [&] { return DescribeRewrites(LoadModelFromFile(path).graph, EvaluateNode); });
}

std::string ActiveIsaName() { return IsaName(ActiveIsa()); }

std::vector<std::string> SupportedIsaNames() {
  std::vector<std::string> names;
  for (Isa isa : SupportedIsas()) names.push_back(IsaName(isa));
  return names;
}

}  // namespace octet

namespace octet {

namespace {

enum class NodeClass { kNotRunnable, kFloat, kExact, kInt8 };

bool IsIntegerOp(const Node& n) {
  if (n.domain == kOctetDomain) return n.op_type != kFloatAttentionOp;
  if (n.domain != kOnnxDomain && n.domain != kMsDomain) return false;
  static const std::set<std::string> kOps = {
      "MatMulInteger",         "ConvInteger", "MatMulIntegerToFloat",
      "DynamicQuantizeMatMul", "QGemm",       "QAttention"};
  return kOps.count(n.op_type) || n.op_type.rfind("QLinear", 0) == 0;
}

// Nodes whose results are the same bytes in every engine: quantization steps and
// data movement (octet's Q / DQ equal ORT's bit for bit, docs/qdq.md).
bool IsExactOp(const Node& n) {
  if (n.domain != kOnnxDomain && n.domain != kMsDomain) return false;
  static const std::set<std::string> kOps = {"QuantizeLinear",
                                             "DequantizeLinear",
                                             "DynamicQuantizeLinear",
                                             "Reshape",
                                             "Transpose",
                                             "Squeeze",
                                             "Unsqueeze",
                                             "Flatten",
                                             "Gather",
                                             "Slice",
                                             "Split",
                                             "Concat",
                                             "Identity",
                                             "Shape",
                                             "Size",
                                             "Expand",
                                             "Tile"};
  return kOps.count(n.op_type) > 0;
}

}  // namespace

ClaimPlan PlanClaims(const Graph& graph, const ClaimOptions& options) {
  ClaimPlan plan;
  const size_t n_orig = graph.nodes.size();
  plan.unclaimed_why.assign(n_orig, "");
  if (n_orig == 0) return plan;

  Graph g = graph;  // initializers stay shared with `graph`; the passes add their own
  const RewriteOptions rewrite_options{options.session.rewrites,
                                       options.session.float_matmul == FloatMatMul::kInt8};
  plan.report = FormatQdqReport(ApplyRewrites(g, EvaluateNode, rewrite_options));

  // Which rewritten nodes octet runs: types inferred in graph order as a session does,
  // and every kernel created once (a kernel may refuse its node only at creation).
  std::vector<DType> types(g.values.size(), DType::kUndefined);
  for (size_t v = 0; v < g.values.size(); ++v) types[v] = g.values[v].dtype;
  for (const auto& [v, t] : g.initializers) types[v] = t.dtype();
  ThreadPool pool(1);
  const KernelRegistry& registry = KernelRegistry::Global();
  std::vector<NodeClass> cls(g.nodes.size(), NodeClass::kNotRunnable);
  std::vector<std::string> no_kernel(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& node = g.nodes[i];
    std::vector<DType> in_types;
    std::vector<const Tensor*> constants;
    for (int in : node.inputs) {
      in_types.push_back(in < 0 ? DType::kUndefined : types[in]);
      constants.push_back(in < 0 ? nullptr : g.values[in].initializer);
    }
    try {
      bool typed = true;
      for (size_t k = 0; k < node.inputs.size(); ++k)
        if (node.inputs[k] >= 0 && in_types[k] == DType::kUndefined) typed = false;
      OCTET_CHECK(typed, node.Describe(), ": an input's type is unknown");
      const KernelDef& def = registry.Find(node, in_types);
      const std::vector<DType> out_types = def.infer_types(node, in_types);
      for (size_t k = 0; k < node.outputs.size() && k < out_types.size(); ++k) {
        const int out = node.outputs[k];
        if (out < 0) continue;
        OCTET_CHECK(types[out] == DType::kUndefined || types[out] == out_types[k], node.Describe(),
                    ": output '", g.values[out].name, "' is declared ", DTypeName(types[out]),
                    " but octet's kernel makes ", DTypeName(out_types[k]));
        types[out] = out_types[k];
      }
      std::vector<Tensor> unpacked;
      UnpackNibblesFor(def, constants, unpacked);
      def.create(KernelInit{node, in_types, constants, &pool});
      cls[i] = IsIntegerOp(node) ? NodeClass::kInt8
               : IsExactOp(node) ? NodeClass::kExact
                                 : NodeClass::kFloat;
    } catch (const std::exception& e) {  // octet::Error, or a kernel's own refusal
      no_kernel[i] = e.what();
    }
  }

  // Which original nodes each rewritten node stands for: walking back from its outputs
  // through values that no longer exist (nothing produces them after the rewrites) up to
  // values that still do. A node the passes kept stands for itself.
  std::vector<bool> alive(g.values.size(), false);
  for (int v : g.inputs) alive[v] = true;
  for (const auto& [v, t] : g.initializers) alive[v] = true;
  for (const auto& [v, t] : graph.initializers) alive[v] = true;
  for (const Node& node : g.nodes)
    for (int out : node.outputs)
      if (out >= 0) alive[out] = true;
  std::vector<NodeClass> orig_cls(n_orig, NodeClass::kNotRunnable);
  std::vector<bool> covered(n_orig, false), int8_cover(n_orig, false), blocked(n_orig, false);
  std::vector<std::string> orig_why(n_orig);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    std::vector<int> stack;
    std::set<int> seen;
    for (int out : g.nodes[i].outputs)
      if (out >= 0 && out < static_cast<int>(graph.values.size()) &&
          graph.values[out].producer >= 0)
        stack.push_back(graph.values[out].producer);
    while (!stack.empty()) {
      const int o = stack.back();
      stack.pop_back();
      if (!seen.insert(o).second) continue;
      // Not runnable if any node standing for it is not; else its most int8 class.
      if (cls[i] == NodeClass::kNotRunnable) {
        blocked[o] = true;
        orig_why[o] = "no_kernel: " + no_kernel[i];
      }
      orig_cls[o] = std::max(orig_cls[o], cls[i]);
      if (cls[i] == NodeClass::kInt8) int8_cover[o] = true;
      covered[o] = true;
      for (int in : graph.nodes[o].inputs) {
        if (in < 0 || (in < static_cast<int>(alive.size()) && alive[in])) continue;
        if (graph.values[in].producer >= 0) stack.push_back(graph.values[in].producer);
      }
    }
  }

  // The claimable set, and the int8 nodes that make a piece worth claiming.
  std::vector<bool> in_set(n_orig, false);
  for (size_t o = 0; o < n_orig; ++o) {
    if (!covered[o]) {
      plan.unclaimed_why[o] = "not_run";  // nothing the rewrites kept needs it
      continue;
    }
    if (o < options.excluded.size() && options.excluded[o]) {
      plan.unclaimed_why[o] = "excluded";
      continue;
    }
    if (blocked[o] || orig_cls[o] == NodeClass::kNotRunnable) {
      plan.unclaimed_why[o] = orig_why[o].empty() ? "no_kernel" : orig_why[o];
      continue;
    }
    if (!options.regions && orig_cls[o] == NodeClass::kFloat && !int8_cover[o]) {
      plan.unclaimed_why[o] = "not_int8";
      continue;
    }
    in_set[o] = true;
  }

  // Cut the set so that no path between two nodes of a piece leaves it: level(n) counts
  // the nodes outside the set that a path from a set node to n passes; a piece is one
  // level's connected nodes.
  std::vector<int> level(n_orig, 0);
  std::vector<bool> after_set(n_orig, false);  // a set node is n or an ancestor of it
  for (size_t o = 0; o < n_orig; ++o) {
    after_set[o] = in_set[o];
    for (int in : graph.nodes[o].inputs) {
      if (in < 0) continue;
      const int p = graph.values[in].producer;
      if (p < 0) continue;
      OCTET_CHECK(p < static_cast<int>(o), "internal: the graph is not topologically sorted");
      const bool crossing = !in_set[p] && after_set[p];
      level[o] = std::max(level[o], level[p] + (crossing ? 1 : 0));
      after_set[o] = after_set[o] || after_set[p];
    }
  }
  // A set node fed only by graph inputs, initializers and other such nodes, all of whose
  // consumers are in the set (a weight's DequantizeLinear), has no path into it from the
  // set and none out of it but through its consumers: it joins its lowest consumer's level.
  std::vector<std::vector<int>> consumers(n_orig);
  std::vector<bool> leaves_set(n_orig, false);  // a consumer outside the set, or a graph output
  for (size_t o = 0; o < n_orig; ++o)
    for (int in : graph.nodes[o].inputs)
      if (in >= 0 && graph.values[in].producer >= 0)
        consumers[graph.values[in].producer].push_back(static_cast<int>(o));
  for (int v : graph.outputs)
    if (graph.values[v].producer >= 0) leaves_set[graph.values[v].producer] = true;
  std::vector<bool> source(n_orig, false);
  for (size_t o = 0; o < n_orig; ++o) {
    if (!in_set[o] || leaves_set[o] || consumers[o].empty()) continue;
    bool ok = true;
    for (int c : consumers[o]) ok = ok && in_set[c];
    for (int in : graph.nodes[o].inputs) {
      const int p = in >= 0 ? graph.values[in].producer : -1;
      ok = ok && (p < 0 || source[p]);
    }
    source[o] = ok;
  }
  for (size_t r = n_orig; r-- > 0;) {
    if (!source[r]) continue;
    int lowest = level[consumers[r][0]];
    for (int c : consumers[r]) lowest = std::min(lowest, level[c]);
    level[r] = lowest;
  }
  // Connected components of set nodes with equal level (union-find over the edges).
  std::vector<int> parent(n_orig);
  for (size_t o = 0; o < n_orig; ++o) parent[o] = static_cast<int>(o);
  std::function<int(int)> find = [&](int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  for (size_t o = 0; o < n_orig; ++o) {
    if (!in_set[o]) continue;
    for (int in : graph.nodes[o].inputs) {
      if (in < 0) continue;
      const int p = graph.values[in].producer;
      if (p >= 0 && in_set[p] && level[p] == level[o]) parent[find(p)] = find(static_cast<int>(o));
    }
  }
  std::map<int, std::vector<int>> by_root;
  for (size_t o = 0; o < n_orig; ++o)
    if (in_set[o]) by_root[find(static_cast<int>(o))].push_back(static_cast<int>(o));
  std::vector<std::vector<int>> pieces;
  for (auto& [root, nodes] : by_root) {
    bool has_int8 = false;
    for (int o : nodes) has_int8 = has_int8 || int8_cover[o];
    if (!has_int8) {
      for (int o : nodes) plan.unclaimed_why[o] = "float_only";
      continue;
    }
    pieces.push_back(std::move(nodes));
  }
  std::sort(pieces.begin(), pieces.end());
  for (const auto& piece : pieces) plan.claimed_nodes += static_cast<int>(piece.size());
  // int8 nodes octet makes of the claimed nodes (a fused group counts once).
  std::vector<bool> claimed(n_orig, false);
  for (const auto& piece : pieces)
    for (int o : piece) claimed[o] = true;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (cls[i] != NodeClass::kInt8) continue;
    for (int out : g.nodes[i].outputs) {
      if (out < 0 || out >= static_cast<int>(graph.values.size())) continue;
      const int p = graph.values[out].producer;
      if (p >= 0 && claimed[p]) {
        ++plan.int8_nodes;
        break;
      }
    }
  }
  plan.pieces = std::move(pieces);
  return plan;
}

}  // namespace octet
