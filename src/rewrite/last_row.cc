#include "rewrite/last_row.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "core/error.h"
#include "rewrite/qdq_util.h"

namespace octet {

namespace {

// Per value, whether it is computed from initializers alone (no graph input
// reaches it). The nodes are in topological order.
std::vector<bool> ConstantOnlyValues(const Graph& g) {
  std::vector<bool> constant(g.values.size(), false);
  for (size_t v = 0; v < g.values.size(); ++v) constant[v] = g.values[v].initializer != nullptr;
  for (const Node& node : g.nodes) {
    const bool all = std::all_of(node.inputs.begin(), node.inputs.end(),
                                 [&](int in) { return in < 0 || constant[in]; });
    for (int out : node.outputs)
      if (out >= 0) constant[out] = all;
  }
  return constant;
}

bool IsRowProduct(const Node& n) {
  return (n.domain == kOnnxDomain && n.op_type == "MatMul") ||
         (n.domain == kMsDomain && n.op_type == "MatMulNBits");
}

bool IsQuantizeOrDequantize(const Node& n) {
  return (n.domain == kOnnxDomain || n.domain == kMsDomain) &&
         (n.op_type == "QuantizeLinear" || n.op_type == "DequantizeLinear");
}

// The rank of a product's weight: of the constant, or of the constant a
// DequantizeLinear reads; -1 when the graph does not say.
int64_t WeightRank(const Graph& g, int weight) {
  const int producer = g.values[weight].producer;
  if (producer >= 0 && g.nodes[producer].op_type == "DequantizeLinear") {
    const int data = g.nodes[producer].inputs[0];
    if (data >= 0 && g.values[data].initializer) return g.values[data].initializer->rank();
  }
  if (g.values[weight].initializer) return g.values[weight].initializer->rank();
  return KnownRank(g, weight);
}

// Sets axis -2 of a declared shape to 1 (the value holds one row now).
void OneRow(Value& v) {
  if (v.shape && v.shape->size() >= 2) (*v.shape)[v.shape->size() - 2] = Dim{1, ""};
}

// The pass on one output; returns why it does not apply, empty when it did.
std::string KeepLastRow(Graph& g, int out) {
  const std::vector<bool> constant = ConstantOnlyValues(g);
  const std::vector<std::vector<int>> consumers = ConsumersOf(g);
  std::vector<int> one_row = {out};  // the values that hold one row afterwards
  int node = g.values[out].producer;
  if (node < 0) return "not_computed";
  if (!consumers[out].empty()) return "output_read_in_graph";
  // A bias added to every row.
  if (IsOnnxBinary(g.nodes[node], "Add")) {
    const Node& add = g.nodes[node];
    const bool first_constant = constant[add.inputs[0]], second_constant = constant[add.inputs[1]];
    if (first_constant == second_constant) return "add_not_a_bias";
    const int bias = add.inputs[first_constant ? 0 : 1];
    const int64_t rank =
        g.values[bias].initializer ? g.values[bias].initializer->rank() : KnownRank(g, bias);
    if (rank < 0 || rank > 1) return "add_not_a_bias";
    const int product = add.inputs[first_constant ? 1 : 0];
    if (SoleConsumer(g, consumers, product) != node) return "product_read_elsewhere";
    one_row.push_back(product);
    node = g.values[product].producer;
    if (node < 0) return "not_computed";
  }
  if (!IsRowProduct(g.nodes[node])) return "not_a_product op=" + g.nodes[node].op_type;
  for (size_t i = 1; i < g.nodes[node].inputs.size(); ++i) {
    const int weight = g.nodes[node].inputs[i];
    if (weight >= 0 && !constant[weight]) return "weights_not_constant";
  }
  // A matrix times a vector has no row axis left in its output.
  if (g.nodes[node].op_type == "MatMul") {
    const int64_t weight_rank = WeightRank(g, g.nodes[node].inputs[1]);
    if (weight_rank < 0) return "weights_rank_unknown";
    if (weight_rank < 2) return "weights_not_a_matrix";
  }
  // Back through the product input's per-tensor QuantizeLinear / DequantizeLinear.
  int a = g.nodes[node].inputs[0];
  for (;;) {
    if (a < 0) return "no_input";
    if (constant[a]) return "input_constant";
    const int producer = g.values[a].producer;
    if (producer < 0 || !IsQuantizeOrDequantize(g.nodes[producer])) break;
    ScalarQParams params;
    const std::string not_per_tensor = ReadScalarQdq(g, g.nodes[producer], params);
    if (!not_per_tensor.empty()) return "input_quantized_" + not_per_tensor;
    if (SoleConsumer(g, consumers, a) != node) return "quantized_input_read_elsewhere";
    one_row.push_back(a);
    node = producer;
    a = g.nodes[node].inputs[0];
  }
  const int64_t rank = KnownRank(g, a);
  if (rank >= 0 && rank < 2) return "input_rank_below_2";
  const auto opset = g.opset_imports.find(kOnnxDomain);
  if (opset == g.opset_imports.end() || opset->second < 13) return "onnx_opset_below_13";

  const std::string base = g.values[out].name + "/last_row";
  Node slice;
  slice.name = base;
  slice.op_type = "Slice";
  slice.domain = kOnnxDomain;
  slice.opset = opset->second;
  slice.inputs = {
      a, AddConstant(g, base + "/starts", Int64Tensor({-1})),
      AddConstant(g, base + "/ends", Int64Tensor({std::numeric_limits<int64_t>::max()})),
      AddConstant(g, base + "/axes", Int64Tensor({-2}))};
  const int row = AddUniqueValue(g, base);
  g.values[row].dtype = g.values[a].dtype;
  g.values[row].shape = g.values[a].shape;
  one_row.push_back(row);
  slice.outputs = {row};
  g.nodes[node].inputs[0] = row;
  g.nodes.push_back(std::move(slice));
  g.TopologicalSort();
  for (int v : one_row) OneRow(g.values[v]);
  return "";
}

}  // namespace

std::vector<std::string> KeepLastRows(Graph& g, const std::vector<std::string>& outputs) {
  std::vector<std::string> lines;
  for (const std::string& name : outputs) {
    const int out = g.FindValue(name);
    if (out < 0 || std::find(g.outputs.begin(), g.outputs.end(), out) == g.outputs.end()) {
      std::string names;
      for (int v : g.outputs) names += (names.empty() ? "'" : ", '") + g.values[v].name + "'";
      Fail("last_row_outputs: '", name, "' is not an output of the graph (its outputs: ", names,
           ")");
    }
    const std::string why = KeepLastRow(g, out);
    lines.push_back(why.empty() ? "last_row output=" + name
                                : "last_row_refused output=" + name + " why=" + why);
  }
  return lines;
}

}  // namespace octet
