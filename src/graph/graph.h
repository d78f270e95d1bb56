// The in-memory graph: values (edges) with dtype and possibly symbolic shape,
// nodes with domain/op/opset and attributes, constant initializers.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"

namespace octet {

// Domain names as they appear after normalization: "" and "ai.onnx" are both
// stored as kOnnxDomain.
inline constexpr const char* kOnnxDomain = "ai.onnx";
inline constexpr const char* kMsDomain = "com.microsoft";

// One dimension of a declared shape: a size, a symbol ("batch"), or unknown.
struct Dim {
  std::optional<int64_t> value;
  std::string symbol;  // non-empty only for named symbolic dims
  bool is_static() const { return value.has_value(); }
};

struct Value {
  std::string name;
  DType dtype = DType::kUndefined;        // kUndefined when the model does not say
  std::optional<std::vector<Dim>> shape;  // nullopt when the rank is unknown
  const Tensor* initializer = nullptr;    // points into Graph::initializers
  int producer = -1;                      // node index, -1 for inputs/initializers
};

struct Attribute {
  enum class Kind { kFloat, kInt, kString, kTensor, kFloats, kInts, kStrings, kGraph, kOther };
  Kind kind = Kind::kOther;
  float f = 0.f;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;

  static Attribute Int(int64_t value);
  static Attribute Float(float value);
  static Attribute String(std::string value);
  static Attribute Ints(std::vector<int64_t> values);
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;        // normalized, see kOnnxDomain
  int opset = 0;             // the model's opset import for `domain`
  std::vector<int> inputs;   // value ids; -1 for an omitted optional input
  std::vector<int> outputs;  // value ids; -1 for an omitted optional output
  std::map<std::string, Attribute> attributes;

  const Attribute* FindAttribute(const std::string& attr_name) const;
  // Typed getters with defaults; throw octet::Error when present with the wrong kind.
  int64_t GetInt(const std::string& attr_name, int64_t default_value) const;
  float GetFloat(const std::string& attr_name, float default_value) const;
  std::string GetString(const std::string& attr_name, const std::string& default_value) const;
  std::vector<int64_t> GetInts(const std::string& attr_name,
                               const std::vector<int64_t>& default_value = {}) const;
  // "QuantizeLinear(ai.onnx, opset 21) node 'q1'" for error messages.
  std::string Describe() const;
  // axis in [-rank, rank) as a non-negative index; throws octet::Error naming
  // this node when it is out of range.
  int64_t Axis(int64_t axis, int64_t rank) const;
};

struct Graph {
  std::vector<Value> values;
  std::vector<Node> nodes;  // in topological order after Graph::TopologicalSort
  std::vector<int> inputs;  // graph inputs that are not initializers
  std::vector<int> outputs;
  std::map<std::string, int> opset_imports;  // normalized domain -> version
  // Owned constant tensors, keyed by value id. std::map keeps addresses stable.
  std::map<int, Tensor> initializers;

  int FindValue(const std::string& name) const;  // -1 when absent
  // Returns the existing id if present. Values must be added only through here
  // so that FindValue stays a lookup.
  int AddValue(const std::string& name);
  // Orders nodes so every producer precedes its consumers; throws on a cycle
  // or on an input that nothing produces.
  void TopologicalSort();
  void SetInitializer(int value_id, Tensor t);

 private:
  std::unordered_map<std::string, int> value_ids_;
};

std::string NormalizeDomain(const std::string& domain);

}  // namespace octet
