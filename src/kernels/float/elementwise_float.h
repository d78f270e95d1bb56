// Float32 element-wise kernels with numpy-style broadcasting.
#pragma once

#include "core/tensor.h"

namespace octet {

enum class BinaryOp { kAdd, kSub, kMul, kDiv };

// out = a op b, elementwise; out must already have the broadcast shape of a and b.
void BinaryFloat32(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out);

// out[i] = max(x[i], 0); NaN stays NaN. out has x's shape.
void ReluFloat32(const Tensor& x, Tensor& out);

}  // namespace octet
