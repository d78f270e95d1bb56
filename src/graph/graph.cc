#include "graph/graph.h"

#include <queue>

namespace octet {

std::string NormalizeDomain(const std::string& domain) {
  return domain.empty() ? std::string(kOnnxDomain) : domain;
}

Attribute Attribute::Int(int64_t value) {
  Attribute a;
  a.kind = Kind::kInt;
  a.i = value;
  return a;
}

Attribute Attribute::Float(float value) {
  Attribute a;
  a.kind = Kind::kFloat;
  a.f = value;
  return a;
}

Attribute Attribute::String(std::string value) {
  Attribute a;
  a.kind = Kind::kString;
  a.s = std::move(value);
  return a;
}

Attribute Attribute::Ints(std::vector<int64_t> values) {
  Attribute a;
  a.kind = Kind::kInts;
  a.ints = std::move(values);
  return a;
}

const Attribute* Node::FindAttribute(const std::string& attr_name) const {
  auto it = attributes.find(attr_name);
  return it == attributes.end() ? nullptr : &it->second;
}

namespace {
const Attribute* Expect(const Node& n, const std::string& name, Attribute::Kind kind,
                        const char* kind_name) {
  const Attribute* a = n.FindAttribute(name);
  if (a && a->kind != kind) Fail(n.Describe(), ": attribute '", name, "' must be ", kind_name);
  return a;
}
}  // namespace

int64_t Node::GetInt(const std::string& n, int64_t d) const {
  const Attribute* a = Expect(*this, n, Attribute::Kind::kInt, "an int");
  return a ? a->i : d;
}
float Node::GetFloat(const std::string& n, float d) const {
  const Attribute* a = Expect(*this, n, Attribute::Kind::kFloat, "a float");
  return a ? a->f : d;
}
std::string Node::GetString(const std::string& n, const std::string& d) const {
  const Attribute* a = Expect(*this, n, Attribute::Kind::kString, "a string");
  return a ? a->s : d;
}
std::vector<int64_t> Node::GetInts(const std::string& n, const std::vector<int64_t>& d) const {
  const Attribute* a = Expect(*this, n, Attribute::Kind::kInts, "a list of ints");
  return a ? a->ints : d;
}

std::string Node::Describe() const {
  std::string s = op_type + "(" + domain + ", opset " + std::to_string(opset) + ")";
  if (!name.empty()) s += " node '" + name + "'";
  return s;
}

int64_t Node::Axis(int64_t axis, int64_t rank) const {
  const std::optional<int64_t> a = NormalizeAxis(axis, rank);
  OCTET_CHECK(a.has_value(), Describe(), ": axis ", axis, " is out of range for rank ", rank);
  return *a;
}

int Graph::FindValue(const std::string& name) const {
  auto it = value_ids_.find(name);
  return it == value_ids_.end() ? -1 : it->second;
}

int Graph::AddValue(const std::string& name) {
  int id = FindValue(name);
  if (id >= 0) return id;
  Value v;
  v.name = name;
  values.push_back(std::move(v));
  id = static_cast<int>(values.size() - 1);
  value_ids_.emplace(name, id);
  return id;
}

void Graph::SetInitializer(int value_id, Tensor t) {
  auto [it, inserted] = initializers.insert_or_assign(value_id, std::move(t));
  (void)inserted;
  values[value_id].initializer = &it->second;
  values[value_id].dtype = it->second.dtype();
  std::vector<Dim> dims;
  for (int64_t d : it->second.shape()) dims.push_back(Dim{d, {}});
  values[value_id].shape = dims;
}

void Graph::TopologicalSort() {
  std::vector<int> producer(values.size(), -1);
  for (size_t n = 0; n < nodes.size(); ++n)
    for (int out : nodes[n].outputs) {
      if (out < 0) continue;
      if (producer[out] >= 0 || values[out].initializer)
        Fail("value '", values[out].name, "' is produced more than once");
      producer[out] = static_cast<int>(n);
    }
  std::vector<bool> available(values.size(), false);
  for (int v : inputs) available[v] = true;
  for (auto& [v, t] : initializers) available[v] = true;

  std::vector<int> pending(nodes.size(), 0);
  std::vector<std::vector<int>> consumers(values.size());
  for (size_t n = 0; n < nodes.size(); ++n)
    for (int in : nodes[n].inputs) {
      if (in < 0 || available[in]) continue;
      if (producer[in] < 0)
        Fail(nodes[n].Describe(), ": input '", values[in].name,
             "' is not a graph input, an initializer or a node output");
      ++pending[n];
      consumers[in].push_back(static_cast<int>(n));
    }
  std::queue<int> ready;
  for (size_t n = 0; n < nodes.size(); ++n)
    if (pending[n] == 0) ready.push(static_cast<int>(n));
  std::vector<Node> sorted;
  sorted.reserve(nodes.size());
  while (!ready.empty()) {
    int n = ready.front();
    ready.pop();
    for (int out : nodes[n].outputs)
      if (out >= 0)
        for (int c : consumers[out])
          if (--pending[c] == 0) ready.push(c);
    sorted.push_back(std::move(nodes[n]));
  }
  if (sorted.size() != nodes.size()) Fail("the graph has a cycle");
  nodes = std::move(sorted);
  for (auto& v : values) v.producer = -1;
  for (size_t n = 0; n < nodes.size(); ++n)
    for (int out : nodes[n].outputs)
      if (out >= 0) values[out].producer = static_cast<int>(n);
}

}  // namespace octet
