#include "ops/registry.h"

namespace octet {

const KernelRegistry& KernelRegistry::Global() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    RegisterQuantizeOps(r);
    RegisterIntegerMatMulOps(r);
    RegisterIntegerConvOps(r);
    RegisterFloatOps(r);
    RegisterFusedOps(r);
    return r;
  }();
  return registry;
}

}  // namespace octet
