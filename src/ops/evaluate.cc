#include "ops/evaluate.h"

#include <memory>
#include <utility>

#include "ops/registry.h"

namespace octet {

std::vector<Tensor> EvaluateNode(const Node& node, const std::vector<const Tensor*>& given) {
  std::vector<DType> types;
  for (const Tensor* t : given) types.push_back(t ? t->dtype() : DType::kUndefined);
  const KernelDef& def = KernelRegistry::Global().Find(node, types);
  std::vector<const Tensor*> inputs = given;
  std::vector<Tensor> unpacked;
  UnpackNibblesFor(def, inputs, unpacked);
  KernelInit init{node, types, inputs, nullptr};
  std::unique_ptr<OpKernel> kernel = def.create(init);
  KernelContext ctx(node, inputs, nullptr);
  kernel->Run(ctx);
  return std::move(ctx.outputs());
}

}  // namespace octet
