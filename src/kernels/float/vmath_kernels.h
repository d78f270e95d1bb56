// The per-path kernel tables behind kernels/float/vmath.h, one per
// instruction set, each built from the same templates (vmath_impl.h).
#pragma once

#include <cstdint>

#include "kernels/float/vmath.h"

namespace octet::vmath {

using UnaryKernel = void (*)(const float* x, float* y, int64_t n);

struct Kernels {
  UnaryKernel exp, erf, logistic, tanh, gelu_erf, gelu_tanh;
  void (*binary)(BinaryOp op, const float* a, int a_step, const float* b, int b_step, float* y,
                 int64_t n);
  void (*softmax_rows)(const float* x, float* y, int64_t n, int64_t rows, int64_t ld);
  void (*normalize_row)(float* y, int64_t n);
  void (*layer_norm_row)(const float* x, const float* scale, const float* bias, float epsilon,
                         float* y, int64_t n, float* mean, float* inv_std);
};

extern const Kernels kScalarKernels;
#if defined(__x86_64__) || defined(_M_X64)
extern const Kernels kAvx2Kernels;
extern const Kernels kAvx512Kernels;
#endif

}  // namespace octet::vmath
