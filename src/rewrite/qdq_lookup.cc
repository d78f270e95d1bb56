#include "rewrite/qdq_lookup.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "graph/octet_ops.h"
#include "rewrite/qdq_binary.h"
#include "rewrite/qdq_util.h"

namespace octet {

namespace {

// Operators whose every output element depends only on the input elements at the same
// position, given one-element constants for every input not computed from x.
bool IsPointwise(const Node& n) {
  static const std::set<std::pair<std::string, std::string>> kOps = {
      {kOnnxDomain, "DequantizeLinear"},
      {kOnnxDomain, "QuantizeLinear"},
      {kOnnxDomain, "Add"},
      {kOnnxDomain, "Sub"},
      {kOnnxDomain, "Mul"},
      {kOnnxDomain, "Div"},
      {kOnnxDomain, "Pow"},
      {kOnnxDomain, "Max"},
      {kOnnxDomain, "Min"},
      {kOnnxDomain, "Sigmoid"},
      {kOnnxDomain, "Tanh"},
      {kOnnxDomain, "Erf"},
      {kOnnxDomain, "Relu"},
      {kOnnxDomain, "Clip"},
      {kOnnxDomain, "LeakyRelu"},
      {kOnnxDomain, "HardSigmoid"},
      {kOnnxDomain, "HardSwish"},
      {kOnnxDomain, "Exp"},
      {kOnnxDomain, "Log"},
      {kOnnxDomain, "Neg"},
      {kOnnxDomain, "Abs"},
      {kOnnxDomain, "Sqrt"},
      {kOnnxDomain, "Reciprocal"},
      {kOnnxDomain, "Softplus"},
      {kOnnxDomain, "Elu"},
      {kOnnxDomain, "Gelu"},
      {kOnnxDomain, "Identity"},
      {kOnnxDomain, "Cast"},
      {kMsDomain, "DequantizeLinear"},
      {kMsDomain, "QuantizeLinear"},
      {kMsDomain, "QLinearAdd"},
      {kMsDomain, "QLinearMul"},
      {kMsDomain, "QLinearSigmoid"},
      {kMsDomain, "QLinearLeakyRelu"},
      {kMsDomain, "Gelu"},
      {kOctetDomain, kQdqAddOp},
      {kOctetDomain, kQdqMulOp},
  };
  return kOps.count({n.domain, n.op_type}) > 0;
}

// Whether input i of n is broadcast against the others: a constant of rank r there
// makes the output's rank at least r.
bool IsBroadcastInput(const Node& n, size_t i) {
  static const std::set<std::string> kOnnxOps = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"};
  if (n.domain == kOnnxDomain) return kOnnxOps.count(n.op_type) > 0;
  const bool qlinear_binary =
      (n.domain == kMsDomain && (n.op_type == "QLinearAdd" || n.op_type == "QLinearMul")) ||
      (n.domain == kOctetDomain && (n.op_type == kQdqAddOp || n.op_type == kQdqMulOp));
  return qlinear_binary && (i == 0 || i == 3);  // A and B; the rest are scales and zero points
}

bool IsMovement(const Node& n) {
  return n.op_type == "DequantizeLinear" || n.op_type == "QuantizeLinear" ||
         n.op_type == "Identity" || n.op_type == "Cast";
}

class ChainFolder {
 public:
  ChainFolder(Graph& g, QdqReport& report, const NodeEvaluator& evaluate)
      : g_(g), report_(report), evaluate_(evaluate) {
    for (int v : g.outputs) graph_outputs_.insert(v);
  }

  void Run() {
    const std::vector<std::vector<int>> consumers = ConsumersOf(g_);
    std::vector<bool> removed(g_.nodes.size(), false);
    std::vector<bool> claimed(g_.nodes.size(), false);
    bool changed = false;
    // Folds add table values; only the values the consumer lists cover are roots.
    const size_t value_count = consumers.size();
    for (size_t v = 0; v < value_count; ++v) {
      const int root = static_cast<int>(v);
      if (consumers[root].empty() || g_.values[root].initializer) continue;
      const DType type = RootType(root, consumers);
      if (!Is8Bit(type)) continue;
      std::vector<int> chain = LargestChain(root, consumers, claimed);
      if (chain.empty()) continue;
      changed |= Fold(root, type, chain, Removable(chain, consumers), removed, claimed);
    }
    if (!changed) return;
    RemoveNodes(g_, removed);
    DropUnreadDequantize(g_);
  }

 private:
  // The 8-bit type of root as far as the graph says, or the zero point of a node that
  // reads it (DequantizeLinear's x; QLinearAdd/Mul and octet.QdqAdd/Mul's A or B).
  DType RootType(int root, const std::vector<std::vector<int>>& consumers) const {
    const DType known = KnownDType(g_, root);
    if (known != DType::kUndefined) return known;
    for (int c : consumers[root]) {
      const Node& n = g_.nodes[c];
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        if (n.inputs[i] != root) continue;
        size_t zero_input = 0;
        if (IsDequantizeNode(n) && i == 0) zero_input = 2;
        if (IsBroadcastInput(n, i) && n.domain != kOnnxDomain) zero_input = i + 2;
        if (zero_input == 0) continue;
        if (const Tensor* zp = ConstantValue(g_, InputAt(n, zero_input))) return zp->dtype();
      }
    }
    return DType::kUndefined;
  }

  // A one-element constant: an initializer, or a pointwise node of constants (the
  // DequantizeLinear of a constant the QDQ quantizer writes); nullptr otherwise. Depth
  // first with an explicit stack: a hostile model's chain of pointwise nodes may be as
  // long as the graph, too deep to recurse along.
  const Tensor* ScalarConstant(int value) {
    if (value < 0) return nullptr;
    std::vector<std::pair<int, bool>> stack = {{value, false}};  // (value, inputs pushed)
    std::set<int> in_progress;
    while (!stack.empty()) {
      const auto [v, expanded] = stack.back();
      stack.pop_back();
      if (constants_.count(v)) continue;
      const int p = g_.values[v].producer;
      const bool pointwise = !ConstantValue(g_, v) && p >= 0 && IsPointwise(g_.nodes[p]);
      if (pointwise && !expanded) {
        stack.push_back({v, true});
        in_progress.insert(v);
        for (int in : g_.nodes[p].inputs)
          if (in >= 0 && !constants_.count(in) && !in_progress.count(in))
            stack.push_back({in, false});
        continue;
      }
      constants_[v] = EvaluateScalar(v);
      in_progress.erase(v);
    }
    const Tensor& slot = constants_[value];
    return slot.defined() ? &slot : nullptr;
  }

  // The one-element constant value v is, given that its producer's inputs are settled in
  // constants_ (an input not there is not a constant); an undefined tensor when none.
  Tensor EvaluateScalar(int v) {
    if (const Tensor* t = ConstantValue(g_, v)) return t->numel() == 1 ? *t : Tensor();
    const int p = g_.values[v].producer;
    if (p < 0 || !IsPointwise(g_.nodes[p])) return Tensor();
    const Node& node = g_.nodes[p];
    std::vector<const Tensor*> inputs;
    for (int in : node.inputs) {
      if (in < 0) {
        inputs.push_back(nullptr);
        continue;
      }
      const auto known = constants_.find(in);
      if (known == constants_.end() || !known->second.defined()) return Tensor();
      inputs.push_back(&known->second);
    }
    try {
      std::vector<Tensor> outs = evaluate_(node, inputs);
      for (size_t i = 0; i < node.outputs.size() && i < outs.size(); ++i)
        if (node.outputs[i] == v && outs[i].numel() == 1) return outs[i];
    } catch (const Error&) {
      // Not evaluable here: the value is simply not a constant for this pass.
    }
    return Tensor();
  }

  // Nodes (graph order) of the largest pointwise chain from root with one exit value.
  std::vector<int> LargestChain(int root, const std::vector<std::vector<int>>& consumers,
                                const std::vector<bool>& claimed) {
    // Grow forward: nodes in topological order whose inputs are all in the region or
    // one-element constants.
    std::set<int> region_values = {root};
    std::vector<int> region;
    int first = static_cast<int>(g_.nodes.size());
    for (int c : consumers[root]) first = std::min(first, c);
    for (int n = first; n < static_cast<int>(g_.nodes.size()); ++n) {
      const Node& node = g_.nodes[n];
      if (claimed[n] || !IsPointwise(node)) continue;
      bool reads_region = false, others_constant = true;
      for (int in : node.inputs) {
        if (in < 0) continue;
        if (region_values.count(in))
          reads_region = true;
        else if (!ScalarConstant(in))
          others_constant = false;
      }
      if (!reads_region || !others_constant) continue;
      region.push_back(n);
      for (int out : node.outputs)
        if (out >= 0) region_values.insert(out);
    }
    region_values.erase(root);  // the chain's input, not something it computes
    // Pick the exit that lets the most nodes go: a node of its backward cone goes when
    // nothing outside the cone reads it (one that is read outside keeps running too).
    std::vector<int> best;
    size_t best_removed = 0;
    for (auto exit_node = region.rbegin(); exit_node != region.rend(); ++exit_node) {
      const Node& last = g_.nodes[*exit_node];
      if (last.outputs.size() != 1 || last.outputs[0] < 0) continue;
      std::vector<int> cone = Cone(*exit_node, region_values);
      const size_t removable = Removable(cone, consumers).size();
      if (removable <= best_removed) continue;
      best = std::move(cone);
      best_removed = removable;
    }
    return best;
  }

  // exit_node and its ancestors computed in the region (not the root's producer), in graph
  // order.
  std::vector<int> Cone(int exit_node, const std::set<int>& region_values) const {
    std::set<int> cone = {exit_node};
    std::vector<int> stack = {exit_node};
    while (!stack.empty()) {
      const Node& node = g_.nodes[stack.back()];
      stack.pop_back();
      for (int in : node.inputs) {
        if (in < 0 || !region_values.count(in)) continue;
        const int p = g_.values[in].producer;
        if (p >= 0 && cone.insert(p).second) stack.push_back(p);
      }
    }
    return {cone.begin(), cone.end()};
  }

  // The cone's nodes the lookup replaces: the exit (last) and, going backwards, every
  // node whose outputs only removable nodes read.
  std::set<int> Removable(const std::vector<int>& cone,
                          const std::vector<std::vector<int>>& consumers) const {
    std::set<int> removable = {cone.back()};
    for (auto n = cone.rbegin() + 1; n != cone.rend(); ++n) {
      bool only_inside = true;
      for (int out : g_.nodes[*n].outputs) {
        if (out < 0) continue;
        only_inside &= !graph_outputs_.count(out);
        for (int c : consumers[out]) only_inside &= removable.count(c) > 0;
      }
      if (only_inside) removable.insert(*n);
    }
    return removable;
  }

  // Replaces the chain's exit node by the lookup and removes the other nodes in
  // `replaced`; false (graph unchanged) when the chain is not worth a table.
  bool Fold(int root, DType type, const std::vector<int>& chain, const std::set<int>& replaced,
            std::vector<bool>& removed, std::vector<bool>& claimed) {
    // One node alone, or DQ/Q/Cast steps only, already run as fast as a lookup.
    const bool all_movement = std::all_of(replaced.begin(), replaced.end(),
                                          [&](int n) { return IsMovement(g_.nodes[n]); });
    if (replaced.size() < 2 || all_movement) return false;
    const Node& last = g_.nodes[chain.back()];
    const int exit_value = last.outputs[0];
    // The 256 inputs in index order: uint8 0..255, int8 -128..127.
    Tensor x(type, {256});
    for (int i = 0; i < 256; ++i) {
      if (type == DType::kUInt8)
        x.data<uint8_t>()[i] = static_cast<uint8_t>(i);
      else
        x.data<int8_t>()[i] = static_cast<int8_t>(i - 128);
    }
    std::map<int, Tensor> values = {{root, x}};
    int64_t min_rank = 0;
    try {
      for (int n : chain) {
        const Node& node = g_.nodes[n];
        std::vector<const Tensor*> inputs;
        for (size_t i = 0; i < node.inputs.size(); ++i) {
          const int in = node.inputs[i];
          auto computed = values.find(in);
          const Tensor* t = in < 0                     ? nullptr
                            : computed != values.end() ? &computed->second
                                                       : ScalarConstant(in);
          if (t && computed == values.end() && IsBroadcastInput(node, i))
            min_rank = std::max<int64_t>(min_rank, static_cast<int64_t>(t->rank()));
          inputs.push_back(t);
        }
        std::vector<Tensor> outs = evaluate_(node, inputs);
        for (size_t i = 0; i < node.outputs.size(); ++i)
          if (node.outputs[i] >= 0) values[node.outputs[i]] = std::move(outs[i]);
      }
    } catch (const Error&) {
      report_.Refuse("lookup_not_evaluable", last);
      return false;
    }
    const Tensor& table = values[exit_value];
    const DType out_type = table.dtype();
    if (table.numel() != 256 || out_type == DType::kInt4 || out_type == DType::kUInt4 ||
        out_type == DType::kString)
      return false;

    Node lookup;
    lookup.name =
        (last.name.empty() ? "node" + std::to_string(chain.back()) : last.name) + "/lookup";
    lookup.op_type = kLookupTableOp;
    lookup.domain = kOctetDomain;
    lookup.opset = 1;
    const int table_value = AddConstant(g_, lookup.name + "/table", table.Reshaped({256}));
    lookup.inputs = {root, table_value};
    lookup.outputs = {exit_value};
    lookup.attributes["min_rank"] = Attribute::Int(min_rank);
    std::string ops;
    for (int n : replaced) ops += (ops.empty() ? "" : " -> ") + g_.nodes[n].op_type;
    report_.Fuse(last, std::string(kOctetDomain) + "." + kLookupTableOp + " (" + DTypeName(type) +
                           " -> " + DTypeName(out_type) + ", 256 entries: " + ops + ")");
    for (int n : replaced) removed[n] = claimed[n] = true;
    removed[chain.back()] = false;
    g_.nodes[chain.back()] = std::move(lookup);
    return true;
  }

  Graph& g_;
  QdqReport& report_;
  const NodeEvaluator& evaluate_;
  std::set<int> graph_outputs_;
  std::map<int, Tensor> constants_;  // ScalarConstant's answers; undefined = not constant
};

}  // namespace

void FoldPointwiseChainsToTables(Graph& g, QdqReport& report, const NodeEvaluator& evaluate) {
  ChainFolder(g, report, evaluate).Run();
}

}  // namespace octet
