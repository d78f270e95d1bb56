#include "ops/registry.h"

#include "graph/octet_ops.h"

namespace octet {

const Tensor& KernelContext::input(size_t i) const {
  if (!has_input(i)) Fail(node_.Describe(), ": required input ", i, " is missing");
  return *inputs_[i];
}

Tensor& KernelContext::Slot(size_t i) {
  if (i < outputs_.size()) return outputs_[i];
  const size_t extra = i - outputs_.size();
  if (unlisted_outputs_.size() <= extra) unlisted_outputs_.resize(extra + 1);
  return unlisted_outputs_[extra];
}

Tensor& KernelContext::AllocateOutput(size_t i, DType dtype, Shape shape) {
  Tensor& slot = Slot(i);
  slot = Tensor(dtype, std::move(shape));
  return slot;
}

Tensor& KernelContext::AllocateUninitializedOutput(size_t i, DType dtype, Shape shape) {
  Tensor& slot = Slot(i);
  slot = Tensor::Uninitialized(dtype, std::move(shape));
  return slot;
}

void KernelContext::SetOutput(size_t i, Tensor t) { Slot(i) = std::move(t); }

static_assert(kSiblingColumnsAlign == kOutputColumnsAlign,
              "the rewrite merges the products whose columns the kernels can write in place");

std::vector<ColumnRange> KernelContext::AllocateColumnOutputs(DType dtype, Shape shape,
                                                              const std::vector<int64_t>& widths) {
  std::vector<ColumnRange> ranges;
  int64_t first = 0;
  for (size_t i = 0; i < widths.size(); ++i) {
    shape.back() = widths[i];
    ranges.push_back({first, AllocateUninitializedOutput(i, dtype, shape).raw(), widths[i]});
    first += widths[i];
  }
  return ranges;
}

void UnpackNibblesFor(const KernelDef& def, std::vector<const Tensor*>& inputs,
                      std::vector<Tensor>& unpacked) {
  unpacked.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!NeedsUnpackedNibbles(def, inputs[i])) continue;
    unpacked[i] = UnpackedNibbles(*inputs[i]);
    inputs[i] = &unpacked[i];
  }
}

std::vector<DType> FloatOutput(const Node&, const std::vector<DType>&) { return {DType::kFloat32}; }

std::vector<DType> FloatOutputs(const Node& node, const std::vector<DType>&) {
  return std::vector<DType>(node.outputs.size(), DType::kFloat32);
}

void KernelRegistry::Register(KernelDef def) { defs_.push_back(std::move(def)); }

bool KernelRegistry::HasOp(const std::string& domain, const std::string& op_type) const {
  for (const auto& d : defs_)
    if (d.domain == domain && d.op_type == op_type) return true;
  return false;
}

namespace {

// com.microsoft operators that ONNX Runtime's graph optimizations write in place of plain
// ONNX subgraphs (onnxruntime.transformers' optimize_model, a session's
// optimized_model_filepath and the tools built on them), and its quantizer's forms of them.
bool IsOrtFusion(const Node& node) {
  static constexpr const char* kFusions[] = {"Attention",
                                             "MultiHeadAttention",
                                             "GroupQueryAttention",
                                             "QAttention",
                                             "EmbedLayerNormalization",
                                             "QEmbedLayerNormalization",
                                             "RotaryEmbedding",
                                             "SkipLayerNormalization",
                                             "SkipSimplifiedLayerNormalization",
                                             "BiasGelu",
                                             "BiasSoftmax",
                                             "QuickGelu",
                                             "FusedConv",
                                             "FusedGemm",
                                             "FusedMatMul",
                                             "NhwcConv"};
  if (node.domain != kMsDomain) return false;
  for (const char* op : kFusions)
    if (node.op_type == op) return true;
  return false;
}

// The inputs a node must list before a kernel's dtype checks (KernelDef::accepts and
// infer_types, which read them by position) may look at it: every operator's first
// but Constant's, all eight of QLinearConv's and QLinearMatMul's. A hostile model's node
// with fewer is refused here instead of being read past its end.
size_t RequiredInputs(const Node& node) {
  if (node.domain != kOnnxDomain) return 1;
  if (node.op_type == "Constant") return 0;
  if (node.op_type == "QLinearConv" || node.op_type == "QLinearMatMul") return 8;
  return 1;
}

}  // namespace

const KernelDef& KernelRegistry::Find(const Node& node, const std::vector<DType>& types) const {
  bool op_known = false, version_known = false;
  for (const auto& d : defs_) {
    if (d.domain != node.domain || d.op_type != node.op_type) continue;
    op_known = true;
    if (node.opset < d.since_version || node.opset > d.end_version) continue;
    version_known = true;
    OCTET_CHECK(types.size() >= RequiredInputs(node), node.Describe(), ": has ", types.size(),
                " inputs, needs at least ", RequiredInputs(node));
    if (d.accepts(node, types)) return d;
  }
  if (!op_known)
    Fail("unsupported operator ", node.op_type, " (domain ", node.domain, ", opset ", node.opset,
         ")", node.name.empty() ? "" : " in node '" + node.name + "'",
         IsOrtFusion(node) ? ": a fusion that ONNX Runtime's graph optimizations write "
                             "(onnxruntime.transformers' optimize_model, or a session's "
                             "optimized_model_filepath); octet runs the model as exported, so "
                             "quantize the model from before that step"
                           : "");
  if (!version_known)
    Fail("unsupported opset for ", node.Describe(), ": no kernel for this version");
  Fail(node.Describe(), ": unsupported input types ", DTypeList(types));
}

bool OneOf(DType t, std::initializer_list<DType> allowed) {
  for (DType a : allowed)
    if (a == t) return true;
  return false;
}

std::string DTypeList(const std::vector<DType>& types) {
  std::string s = "(";
  for (size_t i = 0; i < types.size(); ++i) {
    if (i) s += ", ";
    s += types[i] == DType::kUndefined ? "-" : DTypeName(types[i]);
  }
  return s + ")";
}

}  // namespace octet
