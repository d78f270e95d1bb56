// The float micro-kernels behind Sgemm (kernels/float/sgemm.h), one per path.
#pragma once

#include <cstdint>

namespace octet::sgemm {

// Computes one mr x nr tile of C (row stride ldc): starting from +0, or from
// the tile's current values when `accumulate`, each element takes kc fused
// multiply-adds in order: c = fma(a[i * a_row_step + p * a_k_step], b[p * b_k_step + j], c),
// p = 0..kc-1. A is either a packed panel (steps 1, mr) or mr rows of a row-major
// matrix read in place (steps lda, 1); B is either a packed panel (step nr) or nr
// columns of a row-major matrix read in place (step ldb).
using MicroKernel = void (*)(int64_t kc, const float* a, int64_t a_row_step, int64_t a_k_step,
                             const float* b, int64_t b_k_step, float* c, int64_t ldc,
                             bool accumulate);

constexpr int kAvx512Rows = 12, kAvx512Cols = 32;
constexpr int kAvx2Rows = 6, kAvx2Cols = 16;
constexpr int kScalarRows = 4, kScalarCols = 4;

void MicroKernelAvx512(int64_t kc, const float* a, int64_t a_row_step, int64_t a_k_step,
                       const float* b, int64_t b_k_step, float* c, int64_t ldc, bool accumulate);
void MicroKernelAvx2(int64_t kc, const float* a, int64_t a_row_step, int64_t a_k_step,
                     const float* b, int64_t b_k_step, float* c, int64_t ldc, bool accumulate);

}  // namespace octet::sgemm
