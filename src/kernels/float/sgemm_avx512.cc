// AVX-512 float micro-kernels: up to 12 rows x 32 columns (24 zmm accumulators),
// B read as two zmm per k (packed or in place), A broadcast one element at a time;
// and the 16 x 16 register transpose that packs B from its transpose.
#include <immintrin.h>

#include "kernels/float/sgemm_kernels.h"

namespace octet::sgemm {

namespace {

template <int kRows>
void TileKernel(int64_t kc, const float* a, int64_t a_row_step, int64_t a_k_step, const float* b,
                int64_t b_k_step, float* c, int64_t ldc, bool accumulate) {
  static_assert(kAvx512Cols == 32 && kRows <= kAvx512Rows);
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

// Transposes 16 lines x `count` (<= 16) elements from src (line stride `stride`)
// into `count` groups of 16 at out, group stride kAvx512Cols.
void Transpose16(const float* src, int64_t stride, int count, float* out) {
  const __mmask16 valid = static_cast<__mmask16>((1u << count) - 1);
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_maskz_loadu_ps(valid, src + i * stride);
  // Pairs of lines interleaved by element, then by element pair, within each 128-bit lane:
  // afterwards t[4j + c]'s lane l holds element 4l + c of lines 4j..4j+3.
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int j = 0; j < 16; j += 4) {
    const __m512d t0 = _mm512_castps_pd(t[j]), t1 = _mm512_castps_pd(t[j + 1]);
    const __m512d t2 = _mm512_castps_pd(t[j + 2]), t3 = _mm512_castps_pd(t[j + 3]);
    r[j] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    r[j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    r[j + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    r[j + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
  // Element 4l + c of all 16 lines: lane l of r[c], r[4 + c], r[8 + c], r[12 + c].
  for (int c = 0; c < 4; ++c) {
    const __m512 even_lo = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88);
    const __m512 odd_lo = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xDD);
    const __m512 even_hi = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88);
    const __m512 odd_hi = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xDD);
    t[c] = _mm512_shuffle_f32x4(even_lo, even_hi, 0x88);
    t[8 + c] = _mm512_shuffle_f32x4(even_lo, even_hi, 0xDD);
    t[4 + c] = _mm512_shuffle_f32x4(odd_lo, odd_hi, 0x88);
    t[12 + c] = _mm512_shuffle_f32x4(odd_lo, odd_hi, 0xDD);
  }
  for (int p = 0; p < count; ++p) _mm512_storeu_ps(out + p * kAvx512Cols, t[p]);
}

}  // namespace

const MicroKernel kAvx512Kernels[kAvx512Rows] = {
    TileKernel<1>, TileKernel<2>, TileKernel<3>, TileKernel<4>,  TileKernel<5>,  TileKernel<6>,
    TileKernel<7>, TileKernel<8>, TileKernel<9>, TileKernel<10>, TileKernel<11>, TileKernel<12>};

void TransposePanelAvx512(const float* src, int64_t stride, int64_t K, float* out) {
  for (int64_t p = 0; p < K; p += 16) {
    const int count = static_cast<int>(K - p < 16 ? K - p : 16);
    for (int half = 0; half < kAvx512Cols; half += 16)
      Transpose16(src + half * stride + p, stride, count, out + p * kAvx512Cols + half);
  }
}

}  // namespace octet::sgemm
