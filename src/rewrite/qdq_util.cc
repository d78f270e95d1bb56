#include "rewrite/qdq_util.h"

#include <algorithm>
#include <cmath>

namespace octet {

bool IsQdqDomain(const Node& n) { return n.domain == kOnnxDomain || n.domain == kMsDomain; }
bool IsDequantizeNode(const Node& n) { return IsQdqDomain(n) && n.op_type == "DequantizeLinear"; }
bool IsQuantizeNode(const Node& n) { return IsQdqDomain(n) && n.op_type == "QuantizeLinear"; }

int InputAt(const Node& n, size_t i) { return i < n.inputs.size() ? n.inputs[i] : -1; }

const Tensor* ConstantValue(const Graph& g, int value) {
  return value < 0 ? nullptr : g.values[value].initializer;
}

std::optional<std::vector<int64_t>> ConstantInts(const Graph& g, int value) {
  const Tensor* t = ConstantValue(g, value);
  if (t == nullptr || t->rank() > 1) return std::nullopt;
  std::vector<int64_t> v(static_cast<size_t>(t->numel()));
  for (int64_t i = 0; i < t->numel(); ++i) {
    if (t->dtype() == DType::kInt64)
      v[i] = t->data<int64_t>()[i];
    else if (t->dtype() == DType::kInt32)
      v[i] = t->data<int32_t>()[i];
    else
      return std::nullopt;
  }
  return v;
}

bool IsFloatConstant(const Graph& g, int value, float expected) {
  const Tensor* t = ConstantValue(g, value);
  return t && t->dtype() == DType::kFloat32 && t->numel() == 1 && t->data<float>()[0] == expected;
}

bool IsOnnxBinary(const Node& n, const char* op) {
  return n.domain == kOnnxDomain && n.op_type == op && n.inputs.size() == 2;
}

int OtherInput(const Node& n, int value) {
  if (n.inputs.size() != 2) return -1;
  if (n.inputs[0] == value) return n.inputs[1];
  if (n.inputs[1] == value) return n.inputs[0];
  return -1;
}

int64_t KnownRank(const Graph& g, int value) {
  const auto& shape = g.values[value].shape;
  return shape ? static_cast<int64_t>(shape->size()) : -1;
}

std::optional<SliceParams> ReadSlice(const Graph& g, const Node& n, int64_t rank) {
  if (n.domain != kOnnxDomain || n.op_type != "Slice" || n.opset < 10 || n.inputs.size() < 3 ||
      n.inputs.size() > 5)
    return std::nullopt;
  const auto starts = ConstantInts(g, n.inputs[1]);
  const auto ends = ConstantInts(g, n.inputs[2]);
  if (!starts || !ends || ends->size() != starts->size()) return std::nullopt;
  SliceParams p{*starts, *ends, {}, {}};
  const int axes_input = InputAt(n, 3), steps_input = InputAt(n, 4);
  if (axes_input >= 0) {
    const auto axes = ConstantInts(g, axes_input);
    if (!axes) return std::nullopt;
    p.axes = *axes;
  } else {
    for (size_t i = 0; i < p.starts.size(); ++i) p.axes.push_back(static_cast<int64_t>(i));
  }
  if (steps_input >= 0) {
    const auto steps = ConstantInts(g, steps_input);
    if (!steps) return std::nullopt;
    p.steps = *steps;
  } else {
    p.steps.assign(p.starts.size(), 1);
  }
  if (p.axes.size() != p.starts.size() || p.steps.size() != p.starts.size()) return std::nullopt;
  if (rank >= 0) {
    for (int64_t& a : p.axes) {
      const std::optional<int64_t> axis = NormalizeAxis(a, rank);
      if (!axis) return std::nullopt;
      a = *axis;
    }
  }
  if (std::count(p.steps.begin(), p.steps.end(), 0) > 0) return std::nullopt;
  std::vector<int64_t> sorted = p.axes;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return std::nullopt;
  return p;
}

DType KnownDType(const Graph& g, int value) {
  const Value& v = g.values[value];
  if (v.initializer) return v.initializer->dtype();
  if (v.dtype != DType::kUndefined) return v.dtype;
  if (v.producer < 0) return DType::kUndefined;
  const Node& p = g.nodes[v.producer];
  if (IsQuantizeNode(p) && !p.outputs.empty() && p.outputs[0] == value) {
    if (const Tensor* zp = ConstantValue(g, InputAt(p, 2))) return zp->dtype();
    const int64_t out = p.domain == kOnnxDomain ? p.GetInt("output_dtype", 0) : 0;
    return out ? static_cast<DType>(out) : DType::kUInt8;
  }
  return DType::kUndefined;
}

bool MayBeFloat32(const Graph& g, int value) {
  const DType type = KnownDType(g, value);
  return type == DType::kFloat32 || type == DType::kUndefined;
}

std::string ReadScalarQdq(const Graph& g, const Node& n, ScalarQParams& p) {
  const Tensor* scale = ConstantValue(g, InputAt(n, 1));
  const Tensor* zero = ConstantValue(g, InputAt(n, 2));
  if (!scale || (InputAt(n, 2) >= 0 && !zero)) return "param_not_constant";
  if (scale->dtype() != DType::kFloat32) return "scale_dtype";
  if (scale->numel() != 1 || (zero && zero->numel() != 1)) return "param_not_scalar";
  if (n.GetInt("block_size", 0) != 0) return "dq_blocked";
  p.scale = scale->data<float>()[0];
  if (!std::isnormal(p.scale) || p.scale < 0.f) return "scale_not_normal";
  p.type = zero ? zero->dtype() : DType::kUInt8;
  if (!zero && n.op_type == "DequantizeLinear") {
    // An omitted zero point says nothing about the data's type; the data does.
    p.type = KnownDType(g, InputAt(n, 0));
    if (p.type == DType::kUndefined) return "type_unknown";
  } else if (!zero && n.domain == kOnnxDomain && n.op_type == "QuantizeLinear") {
    const int64_t out = n.GetInt("output_dtype", 0);
    if (out != 0) p.type = static_cast<DType>(out);
  }
  if (p.type == DType::kUInt8) {
    p.zero = zero ? zero->data<uint8_t>()[0] : 0;
  } else if (p.type == DType::kInt8) {
    p.zero = zero ? zero->data<int8_t>()[0] : 0;
  } else {
    return "not_8bit";
  }
  if (n.op_type == "DequantizeLinear") {
    const int64_t out = n.GetInt("output_dtype", 0);
    if (out != 0 && out != static_cast<int64_t>(DType::kFloat32)) return "dq_output_dtype";
  }
  return "";
}

std::string ReadDq(const Graph& g, const Node& dq, DqParams& p) {
  p.data = InputAt(dq, 0);
  p.scale = InputAt(dq, 1);
  p.zero = InputAt(dq, 2);
  if (p.data < 0 || p.scale < 0) return "dq_malformed";
  if (dq.GetInt("block_size", 0) != 0) return "dq_blocked";
  const int64_t out_type = dq.GetInt("output_dtype", 0);
  if (out_type != 0 && out_type != static_cast<int64_t>(DType::kFloat32)) return "dq_output_dtype";
  const Tensor* scale = ConstantValue(g, p.scale);
  if (!scale) return "scale_not_constant";
  if (scale->dtype() != DType::kFloat32) return "scale_dtype";
  p.data_type = KnownDType(g, p.data);
  const Tensor* zero = ConstantValue(g, p.zero);
  if (p.zero >= 0 && !zero) return "zero_point_not_constant";
  if (p.data_type == DType::kUndefined && zero) p.data_type = zero->dtype();
  if (zero && zero->dtype() != p.data_type) return "zero_point_dtype";
  if (zero && zero->numel() != scale->numel()) return "zero_point_shape";
  p.count = scale->numel();
  p.per_axis = p.count != 1;
  if (p.per_axis && scale->rank() != 1) return "scale_shape";
  p.axis = dq.GetInt("axis", 1);
  return "";
}

int FoldableQuantize(const Graph& g, int product, const std::vector<std::vector<int>>& consumers,
                     const std::set<int>& graph_outputs, std::string& note, DType& out_type) {
  if (graph_outputs.count(product) || consumers[product].size() != 1) return -1;
  const int q_index = consumers[product][0];
  const Node& q = g.nodes[q_index];
  if (!IsQuantizeNode(q) || InputAt(q, 0) != product) return -1;
  const Tensor* scale = ConstantValue(g, InputAt(q, 1));
  const Tensor* zero = ConstantValue(g, InputAt(q, 2));
  if (!scale || (InputAt(q, 2) >= 0 && !zero)) {
    note = "q_param_not_constant";
  } else if (scale->dtype() != DType::kFloat32) {
    note = "q_scale_dtype";
  } else if (scale->numel() != 1 || (zero && zero->numel() != 1)) {
    note = "q_per_axis";
  } else if (q.GetInt("block_size", 0) != 0) {
    note = "q_blocked";
  } else {
    out_type = KnownDType(g, q.outputs[0]);
    if (zero) out_type = zero->dtype();
    if (!Is8Bit(out_type)) note = "q_output_type";
  }
  return note.empty() ? q_index : -1;
}

std::vector<std::vector<int>> ConsumersOf(const Graph& g) {
  std::vector<std::vector<int>> consumers(g.values.size());
  for (size_t n = 0; n < g.nodes.size(); ++n)
    for (int in : g.nodes[n].inputs)
      if (in >= 0) consumers[in].push_back(static_cast<int>(n));
  return consumers;
}

int SoleConsumer(const Graph& g, const std::vector<std::vector<int>>& consumers, int value) {
  if (value < 0 || consumers[value].size() != 1) return -1;
  if (std::find(g.outputs.begin(), g.outputs.end(), value) != g.outputs.end()) return -1;
  return consumers[value][0];
}

Tensor Int64Tensor(const std::vector<int64_t>& v) {
  Tensor t(DType::kInt64, Shape{static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

int AddUniqueValue(Graph& g, const std::string& base_name) {
  std::string name = base_name;
  for (int suffix = 2; g.FindValue(name) >= 0; ++suffix)
    name = base_name + "/" + std::to_string(suffix);
  return g.AddValue(name);
}

int AddConstant(Graph& g, const std::string& base_name, Tensor t) {
  const int value = AddUniqueValue(g, base_name);
  g.SetInitializer(value, std::move(t));
  return value;
}

void RemoveNodes(Graph& g, const std::vector<bool>& removed) {
  std::vector<Node> kept;
  kept.reserve(g.nodes.size());
  for (size_t n = 0; n < g.nodes.size(); ++n)
    if (!removed[n]) kept.push_back(std::move(g.nodes[n]));
  g.nodes = std::move(kept);
  for (Value& v : g.values) v.producer = -1;
  for (size_t n = 0; n < g.nodes.size(); ++n)
    for (int out : g.nodes[n].outputs)
      if (out >= 0) g.values[out].producer = static_cast<int>(n);
}

void DropUnreadDequantize(Graph& g) {
  std::vector<int> uses(g.values.size(), 0);
  for (const Node& node : g.nodes)
    for (int in : node.inputs)
      if (in >= 0) ++uses[in];
  for (int v : g.outputs) ++uses[v];
  std::vector<bool> drop(g.nodes.size(), false);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& node = g.nodes[i];
    if (!IsDequantizeNode(node) || uses[node.outputs[0]] != 0) continue;
    drop[i] = true;
    for (int in : node.inputs)
      if (in >= 0) --uses[in];
  }
  RemoveNodes(g, drop);
}

}  // namespace octet
