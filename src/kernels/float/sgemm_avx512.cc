// AVX-512 float micro-kernel: 12 rows x 32 columns (24 zmm accumulators),
// B read as two zmm per k (packed or in place), A broadcast one element at a time.
#include <immintrin.h>

#include "kernels/float/sgemm_kernels.h"

namespace octet::sgemm {

void MicroKernelAvx512(int64_t kc, const float* a, int64_t a_row_step, int64_t a_k_step,
                       const float* b, int64_t b_k_step, float* c, int64_t ldc, bool accumulate) {
  constexpr int kRows = kAvx512Rows;
  static_assert(kAvx512Cols == 32);
  __m512 acc[kRows][2];
#pragma GCC unroll 12
  for (int i = 0; i < kRows; ++i) {
    acc[i][0] = accumulate ? _mm512_loadu_ps(c + i * ldc) : _mm512_setzero_ps();
    acc[i][1] = accumulate ? _mm512_loadu_ps(c + i * ldc + 16) : _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 12
    for (int i = 0; i < kRows; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i * a_row_step]);
      acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
    }
    a += a_k_step;
    b += b_k_step;
  }
#pragma GCC unroll 12
  for (int i = 0; i < kRows; ++i) {
    _mm512_storeu_ps(c + i * ldc, acc[i][0]);
    _mm512_storeu_ps(c + i * ldc + 16, acc[i][1]);
  }
}

}  // namespace octet::sgemm
