#include "ops/registry.h"

namespace octet {

const Tensor& KernelContext::input(size_t i) const {
  if (!has_input(i)) Fail(node_.Describe(), ": required input ", i, " is missing");
  return *inputs_[i];
}

Tensor& KernelContext::AllocateOutput(size_t i, DType dtype, Shape shape) {
  outputs_.at(i) = Tensor(dtype, std::move(shape));
  return outputs_[i];
}

Tensor& KernelContext::AllocateUninitializedOutput(size_t i, DType dtype, Shape shape) {
  outputs_.at(i) = Tensor::Uninitialized(dtype, std::move(shape));
  return outputs_[i];
}

void KernelContext::SetOutput(size_t i, Tensor t) { outputs_.at(i) = std::move(t); }

void KernelRegistry::Register(KernelDef def) { defs_.push_back(std::move(def)); }

bool KernelRegistry::HasOp(const std::string& domain, const std::string& op_type) const {
  for (const auto& d : defs_)
    if (d.domain == domain && d.op_type == op_type) return true;
  return false;
}

const KernelDef& KernelRegistry::Find(const Node& node, const std::vector<DType>& types) const {
  bool op_known = false, version_known = false;
  for (const auto& d : defs_) {
    if (d.domain != node.domain || d.op_type != node.op_type) continue;
    op_known = true;
    if (node.opset < d.since_version || node.opset > d.end_version) continue;
    version_known = true;
    if (d.accepts(node, types)) return d;
  }
  if (!op_known)
    Fail("unsupported operator ", node.op_type, " (domain ", node.domain, ", opset ", node.opset,
         ")", node.name.empty() ? "" : " in node '" + node.name + "'");
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
