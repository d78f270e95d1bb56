#include "runtime/introspect.h"

#include "kernels/isa.h"
#include "model/onnx_loader.h"
#include "ops/evaluate.h"
#include "ops/registry.h"
#include "rewrite/rewrite.h"

namespace octet {

std::vector<KernelInfo> RegisteredKernels() {
  std::vector<KernelInfo> kernels;
  for (const KernelDef& d : KernelRegistry::Global().defs())
    kernels.push_back({d.domain, d.op_type, d.since_version, d.end_version});
  return kernels;
}

std::string DescribeModelRewrites(const std::string& path) {
  return DescribeRewrites(LoadModelFromFile(path).graph, EvaluateNode);
}

std::string ActiveIsaName() { return IsaName(ActiveIsa()); }

std::vector<std::string> SupportedIsaNames() {
  std::vector<std::string> names;
  for (Isa isa : SupportedIsas()) names.push_back(IsaName(isa));
  return names;
}

}  // namespace octet
