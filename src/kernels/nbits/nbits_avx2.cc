// The AVX2 panels of kernels/nbits/nbits.h: one k pair of 16 columns (16 bytes
// of packed weights) is unpacked once and used by every row of the tile.
#include <immintrin.h>

#include <algorithm>

#include "kernels/nbits/nbits_kernels.h"

namespace octet::nbits {

namespace {

// The 16 columns' nibbles of one k pair, each in its own int32 lane (columns
// 0-7 and 8-15).
struct PairBytes {
  __m256i lo, hi;
};

inline PairBytes LoadPair(const uint8_t* p) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return {_mm256_cvtepu8_epi32(x), _mm256_cvtepu8_epi32(_mm_srli_si128(x, 8))};
}

// w = (float(q) - zp) * s for 8 columns.
inline __m256 Dequantize(__m256i q, __m256 zero, __m256 scale) {
  return _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(q), zero), scale);
}

template <int R>
void FloatPanel(const PackedNBits& w, int64_t panel, const float* a, int64_t lda, float* acc) {
  const uint8_t* data = w.data.data() + panel * w.k_pairs * kNBitsPanel;
  const float* scale = w.scales.data() + panel * w.k_blocks * kNBitsPanel;
  const float* zero = w.zero_points.data() + panel * w.k_blocks * kNBitsPanel;
  const __m256i nibble = _mm256_set1_epi32(15);
  __m256 c[R][2];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) c[r][0] = c[r][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < w.k_blocks; ++b) {
    const __m256 s0 = _mm256_loadu_ps(scale + b * kNBitsPanel);
    const __m256 s1 = _mm256_loadu_ps(scale + b * kNBitsPanel + 8);
    const __m256 z0 = _mm256_loadu_ps(zero + b * kNBitsPanel);
    const __m256 z1 = _mm256_loadu_ps(zero + b * kNBitsPanel + 8);
    const int64_t k1 = std::min(w.K, (b + 1) * w.block_size);
    int64_t k = b * w.block_size;
    for (; k + 1 < k1; k += 2) {
      const PairBytes q = LoadPair(data + (k / 2) * kNBitsPanel);
      const __m256 w00 = Dequantize(_mm256_and_si256(q.lo, nibble), z0, s0);
      const __m256 w01 = Dequantize(_mm256_and_si256(q.hi, nibble), z1, s1);
      const __m256 w10 = Dequantize(_mm256_srli_epi32(q.lo, 4), z0, s0);
      const __m256 w11 = Dequantize(_mm256_srli_epi32(q.hi, 4), z1, s1);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256 a0 = _mm256_broadcast_ss(a + r * lda + k);
        c[r][0] = _mm256_fmadd_ps(a0, w00, c[r][0]);
        c[r][1] = _mm256_fmadd_ps(a0, w01, c[r][1]);
        const __m256 a1 = _mm256_broadcast_ss(a + r * lda + k + 1);
        c[r][0] = _mm256_fmadd_ps(a1, w10, c[r][0]);
        c[r][1] = _mm256_fmadd_ps(a1, w11, c[r][1]);
      }
    }
    if (k < k1) {  // odd K: the last k is a low nibble alone
      const PairBytes q = LoadPair(data + (k / 2) * kNBitsPanel);
      const __m256 w00 = Dequantize(_mm256_and_si256(q.lo, nibble), z0, s0);
      const __m256 w01 = Dequantize(_mm256_and_si256(q.hi, nibble), z1, s1);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256 a0 = _mm256_broadcast_ss(a + r * lda + k);
        c[r][0] = _mm256_fmadd_ps(a0, w00, c[r][0]);
        c[r][1] = _mm256_fmadd_ps(a0, w01, c[r][1]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(acc + r * kNBitsPanel, c[r][0]);
    _mm256_storeu_ps(acc + r * kNBitsPanel + 8, c[r][1]);
  }
}

// The lanes of one k pair as int16 pairs (q[2p], q[2p + 1]) for vpmaddwd.
inline __m256i Int16Pairs(__m256i bytes) {
  const __m256i lo = _mm256_and_si256(bytes, _mm256_set1_epi32(0x0F));
  const __m256i hi = _mm256_and_si256(bytes, _mm256_set1_epi32(0xF0));
  return _mm256_or_si256(lo, _mm256_slli_epi32(hi, 12));
}

template <int R>
void Int8Panel(const PackedNBits& w, int64_t panel, const QuantizedRows& a, float* acc) {
  const uint8_t* data = w.data.data() + panel * w.k_pairs * kNBitsPanel;
  const float* scale = w.scales.data() + panel * w.k_blocks * kNBitsPanel;
  const int32_t* zero = w.int_zero_points.data() + panel * w.k_blocks * kNBitsPanel;
  const int64_t block_pairs = w.block_size / 2;
  __m256 c[R][2];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) c[r][0] = c[r][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < w.k_blocks; ++b) {
    __m256i t[R][2];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) t[r][0] = t[r][1] = _mm256_setzero_si256();
    const int64_t p1 = std::min(w.k_pairs, (b + 1) * block_pairs);
    for (int64_t p = b * block_pairs; p < p1; ++p) {
      const PairBytes q = LoadPair(data + p * kNBitsPanel);
      const __m256i q0 = Int16Pairs(q.lo), q1 = Int16Pairs(q.hi);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256i ap = _mm256_set1_epi32(a.pairs[r * w.k_pairs + p]);
        t[r][0] = _mm256_add_epi32(t[r][0], _mm256_madd_epi16(q0, ap));
        t[r][1] = _mm256_add_epi32(t[r][1], _mm256_madd_epi16(q1, ap));
      }
    }
    const auto* zp = reinterpret_cast<const __m256i*>(zero + b * kNBitsPanel);
    const __m256i zp0 = _mm256_loadu_si256(zp), zp1 = _mm256_loadu_si256(zp + 1);
    const __m256 s0 = _mm256_loadu_ps(scale + b * kNBitsPanel);
    const __m256 s1 = _mm256_loadu_ps(scale + b * kNBitsPanel + 8);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256i sum = _mm256_set1_epi32(a.sums[r * w.k_blocks + b]);
      const __m256 sa = _mm256_set1_ps(a.scales[r * w.k_blocks + b]);
      const __m256i d0 = _mm256_sub_epi32(t[r][0], _mm256_mullo_epi32(zp0, sum));
      const __m256i d1 = _mm256_sub_epi32(t[r][1], _mm256_mullo_epi32(zp1, sum));
      c[r][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d0), _mm256_mul_ps(sa, s0), c[r][0]);
      c[r][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d1), _mm256_mul_ps(sa, s1), c[r][1]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(acc + r * kNBitsPanel, c[r][0]);
    _mm256_storeu_ps(acc + r * kNBitsPanel + 8, c[r][1]);
  }
}

void FloatPanelAvx2(const PackedNBits& w, int64_t panel, int rows, const float* a, int64_t lda,
                    float* acc) {
  switch (rows) {
    case 1: return FloatPanel<1>(w, panel, a, lda, acc);
    case 2: return FloatPanel<2>(w, panel, a, lda, acc);
    case 3: return FloatPanel<3>(w, panel, a, lda, acc);
    default: return FloatPanel<4>(w, panel, a, lda, acc);
  }
}

void Int8PanelAvx2(const PackedNBits& w, int64_t panel, int rows, const QuantizedRows& a,
                   float* acc) {
  switch (rows) {
    case 1: return Int8Panel<1>(w, panel, a, acc);
    case 2: return Int8Panel<2>(w, panel, a, acc);
    case 3: return Int8Panel<3>(w, panel, a, acc);
    default: return Int8Panel<4>(w, panel, a, acc);
  }
}

}  // namespace

constinit const PanelKernels kAvx2Panels = {FloatPanelAvx2, Int8PanelAvx2};

}  // namespace octet::nbits
