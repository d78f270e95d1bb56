// A small graph builder for the rewrite-pass tests: values by name, constant
// initializers with a simple fill, and ai.onnx nodes (opset 21) that record
// themselves as their outputs' producers; the names of a graph's nodes.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "graph/graph.h"

namespace octet::test {

class GraphBuilder {
 public:
  // The value named `name`, added on first use.
  int V(const std::string& name) {
    const int id = g.FindValue(name);
    return id >= 0 ? id : g.AddValue(name);
  }
  // A constant `shape` tensor whose element i is fill + i % 7.
  template <typename T>
  void Init(const std::string& name, Shape shape, T fill) {
    Tensor t(DTypeOf<T>::value, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = static_cast<T>(fill + i % 7);
    g.SetInitializer(V(name), std::move(t));
  }
  // An empty input name is an omitted optional input.
  Node& Add(const std::string& op, std::vector<std::string> in, std::string out,
            const std::string& name = "") {
    Node n;
    n.name = name.empty() ? op + std::to_string(g.nodes.size()) : name;
    n.op_type = op;
    n.domain = kOnnxDomain;
    n.opset = 21;
    for (const auto& i : in) n.inputs.push_back(i.empty() ? -1 : V(i));
    n.outputs.push_back(V(out));
    g.values[V(out)].producer = static_cast<int>(g.nodes.size());
    g.nodes.push_back(n);
    return g.nodes.back();
  }
  Graph g;
};

// The graph's node names in order.
inline std::vector<std::string> NodeNames(const Graph& g) {
  std::vector<std::string> names;
  for (const Node& n : g.nodes) names.push_back(n.name);
  return names;
}

}  // namespace octet::test
