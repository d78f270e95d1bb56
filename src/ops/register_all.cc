#include "ops/registry.h"

namespace octet {

const KernelRegistry& KernelRegistry::Global() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    RegisterQuantizeOps(r);
    RegisterIntegerMatMulOps(r);
    RegisterIntegerConvOps(r);
    RegisterFloatOps(r);
    RegisterFloatMathOps(r);
    RegisterFloatNnOps(r);
    RegisterTensorOps(r);
    RegisterFusedOps(r);
    RegisterFusedConvOps(r);
    RegisterMsQuantMatMulOps(r);
    RegisterQGemmOps(r);
    RegisterShapeOps(r);
    RegisterQLinearBinaryOps(r);
    RegisterQLinearMiscOps(r);
    RegisterQLinearPoolOps(r);
    RegisterLookupTableOps(r);
    RegisterInt8DynamicMatMulOps(r);
    RegisterNBitsOps(r);
    return r;
  }();
  return registry;
}

}  // namespace octet
