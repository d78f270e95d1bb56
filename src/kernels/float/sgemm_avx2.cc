// AVX2 float micro-kernels: up to 6 rows x 16 columns (12 ymm accumulators),
// B read as two ymm per k (packed or in place), A broadcast one element at a time;
// and the 8 x 8 register transpose that packs B from its transpose.
#include <immintrin.h>

#include "kernels/float/sgemm_kernels.h"

namespace octet::sgemm {

namespace {

template <int kRows>
void TileKernel(int64_t kc, const float* a, int64_t a_row_step, int64_t a_k_step, const float* b,
                int64_t b_k_step, float* c, int64_t ldc, bool accumulate) {
  static_assert(kAvx2Cols == 16 && kRows <= kAvx2Rows);
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

// Transposes 8 lines x 8 elements from src (line stride `stride`) into 8 groups
// of 8 at out, group stride kAvx2Cols.
void Transpose8(const float* src, int64_t stride, float* out) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * stride);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  // r[4j + c]'s 128-bit lane l holds element 4l + c of lines 4j..4j+3.
  for (int j = 0; j < 8; j += 4) {
    r[j] = _mm256_shuffle_ps(t[j], t[j + 2], 0x44);
    r[j + 1] = _mm256_shuffle_ps(t[j], t[j + 2], 0xEE);
    r[j + 2] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0x44);
    r[j + 3] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0xEE);
  }
  for (int c = 0; c < 4; ++c) {
    _mm256_storeu_ps(out + c * kAvx2Cols, _mm256_permute2f128_ps(r[c], r[4 + c], 0x20));
    _mm256_storeu_ps(out + (4 + c) * kAvx2Cols, _mm256_permute2f128_ps(r[c], r[4 + c], 0x31));
  }
}

}  // namespace

const MicroKernel kAvx2Kernels[kAvx2Rows] = {TileKernel<1>, TileKernel<2>, TileKernel<3>,
                                             TileKernel<4>, TileKernel<5>, TileKernel<6>};

void TransposePanelAvx2(const float* src, int64_t stride, int64_t K, float* out) {
  int64_t p = 0;
  for (; p + 8 <= K; p += 8)
    for (int half = 0; half < kAvx2Cols; half += 8)
      Transpose8(src + half * stride + p, stride, out + p * kAvx2Cols + half);
  for (; p < K; ++p)
    for (int r = 0; r < kAvx2Cols; ++r) out[p * kAvx2Cols + r] = src[r * stride + p];
}

}  // namespace octet::sgemm
