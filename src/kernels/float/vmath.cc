// Rounding after every Add and Mul on every path (see vmath_impl.h); must
// precede the includes so that inlined functions agree.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif
#include "kernels/float/vmath.h"

#include <cmath>

#include "core/thread_pool.h"
#include "kernels/float/vmath_impl.h"
#include "kernels/simd_scalar.h"

namespace octet::vmath {

namespace {

using Scalar = simd::Scalar;  // one float at a time, the vector paths' operations

// Below this much work (about one unit per simple float operation) the pool's
// hand-off costs more than it saves.
constexpr int64_t kParallelMinWork = int64_t{1} << 15;

const Kernels& KernelsFor(Isa isa) {
#if defined(__x86_64__) || defined(_M_X64)
  return *PickKernel(isa, "float vector math", &kScalarKernels, &kAvx2Kernels, &kAvx512Kernels);
#else
  return *PickKernel(isa, "float vector math", &kScalarKernels, &kScalarKernels, &kScalarKernels);
#endif
}

}  // namespace

constinit const Kernels kScalarKernels = MakeKernels<Scalar>();

void Exp(const float* x, float* y, int64_t n, Isa isa) { KernelsFor(isa).exp(x, y, n); }
void Erf(const float* x, float* y, int64_t n, Isa isa) { KernelsFor(isa).erf(x, y, n); }
void Logistic(const float* x, float* y, int64_t n, Isa isa) { KernelsFor(isa).logistic(x, y, n); }
void Tanh(const float* x, float* y, int64_t n, Isa isa) { KernelsFor(isa).tanh(x, y, n); }
void GeluErf(const float* x, float* y, int64_t n, Isa isa) { KernelsFor(isa).gelu_erf(x, y, n); }
void GeluTanh(const float* x, float* y, int64_t n, Isa isa) { KernelsFor(isa).gelu_tanh(x, y, n); }

void Binary(BinaryOp op, const float* a, int a_step, const float* b, int b_step, float* y,
            int64_t n, Isa isa) {
  KernelsFor(isa).binary(op, a, a_step, b, b_step, y, n);
}

void SoftmaxRow(const float* x, float* y, int64_t n, Isa isa) {
  KernelsFor(isa).softmax_rows(x, y, n, 1, n);
}

void SoftmaxRows(const float* x, float* y, int64_t n, int64_t rows, int64_t ld, Isa isa) {
  KernelsFor(isa).softmax_rows(x, y, n, rows, ld);
}

void NormalizeRow(float* y, int64_t n, Isa isa) { KernelsFor(isa).normalize_row(y, n); }

void LayerNormRow(const float* x, const float* scale, const float* bias, float epsilon, float* y,
                  int64_t n, float* mean, float* inv_std, Isa isa) {
  KernelsFor(isa).layer_norm_row(x, scale, bias, epsilon, y, n, mean, inv_std);
}

void ParallelForWork(ThreadPool* pool, int64_t items, int64_t work,
                     const std::function<void(int64_t, int64_t)>& fn) {
  if (items <= 0) return;
  if (pool && pool->num_threads() > 1 && items > 1 && work >= kParallelMinWork) {
    pool->ParallelFor(items, fn);
  } else {
    fn(0, items);
  }
}

void ParallelSoftmaxRows(ThreadPool* pool, const float* x, float* y, int64_t n, int64_t rows) {
  // About 16 simple operations per element: the exp's polynomial and the passes.
  ParallelForWork(pool, rows, rows * n * 16, [&](int64_t begin, int64_t end) {
    SoftmaxRows(x + begin * n, y + begin * n, n, end - begin, n);
  });
}

}  // namespace octet::vmath
