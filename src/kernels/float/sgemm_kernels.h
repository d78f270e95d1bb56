// The float micro-kernels behind Sgemm (kernels/float/sgemm.h), one table per path.
#pragma once

#include <cstdint>

namespace octet::sgemm {

// Computes one R x nr tile of C (row stride ldc), R = 1..mr: starting from +0,
// or from the tile's current values when `accumulate`, each element takes kc
// fused multiply-adds in order:
// c = fma(a[i * a_row_step + p * a_k_step], b[p * b_k_step + j], c), p = 0..kc-1.
// A is either a packed panel (steps 1, mr) or R rows of a row-major matrix read
// in place (steps lda, 1); B is either a packed panel (step nr) or nr columns of
// a row-major matrix read in place (step ldb).
using MicroKernel = void (*)(int64_t kc, const float* a, int64_t a_row_step, int64_t a_k_step,
                             const float* b, int64_t b_k_step, float* c, int64_t ldc,
                             bool accumulate);

// Writes one full panel of nr lines of B's transpose (line r, element p at
// src[r * stride + p]) as K groups of nr values: out[p * nr + r].
using PanelTransposer = void (*)(const float* src, int64_t stride, int64_t K, float* out);

constexpr int kAvx512Rows = 12, kAvx512Cols = 32;
constexpr int kAvx2Rows = 6, kAvx2Cols = 16;
constexpr int kScalarRows = 4, kScalarCols = 4;

// kernels[R - 1] computes R rows.
extern const MicroKernel kAvx512Kernels[kAvx512Rows];
extern const MicroKernel kAvx2Kernels[kAvx2Rows];

void TransposePanelAvx512(const float* src, int64_t stride, int64_t K, float* out);
void TransposePanelAvx2(const float* src, int64_t stride, int64_t K, float* out);

}  // namespace octet::sgemm
