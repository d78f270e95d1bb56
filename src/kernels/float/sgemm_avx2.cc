// AVX2 float micro-kernel: 6 rows x 16 columns (12 ymm accumulators),
// B read as two ymm per k (packed or in place), A broadcast one element at a time.
#include <immintrin.h>

#include "kernels/float/sgemm_kernels.h"

namespace octet::sgemm {

void MicroKernelAvx2(int64_t kc, const float* a, int64_t a_row_step, int64_t a_k_step,
                     const float* b, int64_t b_k_step, float* c, int64_t ldc, bool accumulate) {
  constexpr int kRows = kAvx2Rows;
  static_assert(kAvx2Cols == 16);
  __m256 acc[kRows][2];
#pragma GCC unroll 6
  for (int i = 0; i < kRows; ++i) {
    acc[i][0] = accumulate ? _mm256_loadu_ps(c + i * ldc) : _mm256_setzero_ps();
    acc[i][1] = accumulate ? _mm256_loadu_ps(c + i * ldc + 8) : _mm256_setzero_ps();
  }
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 6
    for (int i = 0; i < kRows; ++i) {
      const __m256 ai = _mm256_broadcast_ss(a + i * a_row_step);
      acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
    }
    a += a_k_step;
    b += b_k_step;
  }
#pragma GCC unroll 6
  for (int i = 0; i < kRows; ++i) {
    _mm256_storeu_ps(c + i * ldc, acc[i][0]);
    _mm256_storeu_ps(c + i * ldc + 8, acc[i][1]);
  }
}

}  // namespace octet::sgemm
