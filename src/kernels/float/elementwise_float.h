// Float32 element-wise kernels with numpy-style broadcasting.
#pragma once

#include "core/tensor.h"
#include "kernels/float/vmath.h"

namespace octet {

class ThreadPool;

// out = a op b, elementwise; out must already have the broadcast shape of a
// and b. Every element is the one IEEE operation, whatever the pool.
void BinaryFloat32(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out, ThreadPool* pool);

// out[i] = max(x[i], 0); NaN stays NaN. out has x's shape.
void ReluFloat32(const Tensor& x, Tensor& out, ThreadPool* pool);

}  // namespace octet
