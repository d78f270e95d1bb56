// Vectorized float32 math over contiguous arrays: exp, erf, logistic, tanh,
// Gelu, element-wise arithmetic, and the row kernels of Softmax and
// LayerNormalization.
//
// Every function has an AVX-512, an AVX2 and a scalar path, chosen by `isa`
// (kAvx512 / kAvx512Vnni -> AVX-512, kAvx2/kAvxVnni -> AVX2, anything else -> scalar).
// All paths evaluate the same operations in the same order on every element
// (explicit fused multiply-adds, no contraction, row sums over 16 fixed lanes
// added as one fixed tree), so they give the same bits as each other, and the
// result never depends on how a caller splits an array between threads.
//
// Accuracy: exp, erf, logistic and tanh are within a few float ulps of the
// exact function, subnormal results included; +-inf and NaN give what
// std::exp / std::erf / std::tanh / 1 / (1 + exp(-x)) give.
#pragma once

#include <cstdint>
#include <functional>

#include "kernels/isa.h"

namespace octet {

class ThreadPool;

enum class BinaryOp { kAdd, kSub, kMul, kDiv };

namespace vmath {

// y[i] = f(x[i]) for i < n. x and y may be the same array.
void Exp(const float* x, float* y, int64_t n, Isa isa = ActiveIsa());
void Erf(const float* x, float* y, int64_t n, Isa isa = ActiveIsa());
// 1 / (1 + exp(-x)).
void Logistic(const float* x, float* y, int64_t n, Isa isa = ActiveIsa());
void Tanh(const float* x, float* y, int64_t n, Isa isa = ActiveIsa());
// 0.5 * x * (1 + erf(x / sqrt(2))).
void GeluErf(const float* x, float* y, int64_t n, Isa isa = ActiveIsa());
// 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))).
void GeluTanh(const float* x, float* y, int64_t n, Isa isa = ActiveIsa());

// y[i] = a[i * a_step] op b[i * b_step] for i < n, with steps 0 (one value
// repeated) or 1. Each result is the correctly rounded IEEE operation.
void Binary(BinaryOp op, const float* a, int a_step, const float* b, int b_step, float* y,
            int64_t n, Isa isa = ActiveIsa());

// y = exp(x - max(x)) / sum: sums are float, the division one reciprocal
// and a multiply. A row with NaN or +inf, or with every entry -inf, is all NaN.
void SoftmaxRow(const float* x, float* y, int64_t n, Isa isa = ActiveIsa());

// SoftmaxRow of `rows` rows of n, row r at x + r * ld and y + r * ld (x == y
// allowed): the same bits as one call per row, faster.
void SoftmaxRows(const float* x, float* y, int64_t n, int64_t rows, int64_t ld,
                 Isa isa = ActiveIsa());

// y = y / sum(y) with SoftmaxRow's sum and division, so that SoftmaxRow(x)
// equals NormalizeRow(exp(x - max(x))) bit for bit: softmax from exps computed
// elsewhere (a lookup table). n > 0 finite non-negative values with a positive sum.
void NormalizeRow(float* y, int64_t n, Isa isa = ActiveIsa());

// y = (x - mean) * inv_std * scale + bias (bias may be null, meaning 0),
// inv_std = 1 / sqrt(variance + epsilon), over one row of n > 0 values;
// scale and bias have n values. Writes the row's mean and inv_std.
void LayerNormRow(const float* x, const float* scale, const float* bias, float epsilon, float* y,
                  int64_t n, float* mean, float* inv_std, Isa isa = ActiveIsa());

// fn(begin, end) over [0, items), on the pool when `work` (about one unit per
// simple float operation) is large enough to pay for the hand-off, else on
// the caller. pool may be null.
void ParallelForWork(ThreadPool* pool, int64_t items, int64_t work,
                     const std::function<void(int64_t, int64_t)>& fn);

// SoftmaxRows of `rows` consecutive rows of n (x == y allowed), split over pool
// (may be null) as ParallelForWork splits its items.
void ParallelSoftmaxRows(ThreadPool* pool, const float* x, float* y, int64_t n, int64_t rows);

}  // namespace vmath
}  // namespace octet
