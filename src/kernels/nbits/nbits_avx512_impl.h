// The AVX-512 panels of kernels/nbits/nbits.h: a panel's 16 columns are one
// vector, and up to kNBitsGroup panels run at once, so that a single row
// still has several independent fma chains in flight. Written once for the
// AVX-512BW and the AVX-512 VNNI tables (nbits_avx512.cc, nbits_avx512vnni.cc),
// which differ in the kInt8 dot product only; internal linkage, so that each
// file keeps the code compiled for its own instruction set. Both arithmetics
// prefetch their group's bytes whenever the call's `fetch` asks, one row included:
// the hardware prefetchers alone follow the interleaved panels' stream less well.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <type_traits>

#include "kernels/for_count.h"
#include "kernels/nbits/nbits_kernels.h"
#include "kernels/simd_avx512.h"

namespace octet::nbits {

namespace {

using simd::Avx512;

// The panels one call runs at once: enough chains to hide the fma latency,
// few enough that the accumulators stay in registers.
constexpr int PanelsAtOnce(int rows) { return rows <= 2 ? 4 : 2; }

// 16 columns' bytes (zero codes), one per int32 lane.
inline __m512i LoadBytes(const uint8_t* p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// The operands of panels panel..panel + P - 1 (one group's).
template <int P>
void GroupOperands(const PackedNBits& w, int64_t panel, PanelOperands (&op)[P]) {
  for (int i = 0; i < P; ++i) op[i] = OperandsOf(w, panel + i);
}

// R rows x P panels of float accumulators: zeroed, and stored to acc (nbits_kernels.h).
template <int R, int P>
struct Accumulators {
  __m512 c[R][P];
  Accumulators() {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int i = 0; i < P; ++i) c[r][i] = _mm512_setzero_ps();
  }
  void Store(float* acc) const {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int i = 0; i < P; ++i)
        _mm512_storeu_ps(acc + r * kNBitsAccRow + i * kNBitsPanel, c[r][i]);
  }
};

// Codes t (low) and 4 + t (high) of a k octet's int32 lanes as floats: vpermps
// reads an index's low four bits, so a lane shifted to code p gives float(code p).
inline __m512 LowCodes(__m512i x, int t, __m512 table) {
  return _mm512_permutexvar_ps(t ? _mm512_srli_epi32(x, 8 * t) : x, table);
}
inline __m512 HighCodes(__m512i x, int t, __m512 table) {
  return _mm512_permutexvar_ps(_mm512_srli_epi32(x, 8 * t + 4), table);
}

// acc[r][i] += a[r x row_length] * q[i] for R rows and P panels.
template <int R, int P>
inline void FmaRows(const __m512 (&q)[P], const float* a, int64_t row_length,
                    Accumulators<R, P>& acc) {
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    const __m512 ar = _mm512_set1_ps(a[r * row_length]);
#pragma GCC unroll 4
    for (int i = 0; i < P; ++i) acc.c[r][i] = _mm512_fmadd_ps(ar, q[i], acc.c[r][i]);
  }
}

// The kFloat order of nbits.h: per block the low and the high codes' fma chains,
// then the zero point and the scale, added into acc (zeroed first).
template <int R, int P>
void FloatPanels(const PackedNBits& w, int64_t panel, const SummedRows& a, bool fetch, float* acc) {
  PanelOperands op[P];
  GroupOperands(w, panel, op);
  const int64_t data_stride = op[0].data_stride, stride = op[0].stride;
  const int64_t block_octets = w.block_size / kNBitsStepK;
  const __m512 codes = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  Accumulators<R, P>().Store(acc);
  for (int64_t b = 0; b < w.k_blocks; ++b) {
    if (fetch) PrefetchBlock(op[0], b + 2);
    Accumulators<R, P> low, high;
    const int64_t o1 = std::min(w.k_steps, (b + 1) * block_octets);
    for (int64_t o = b * block_octets; o < o1; ++o) {
      if (fetch) Prefetch(op[0].data, o * data_stride + kPrefetchBytes, data_stride);
      __m512i x[P];
#pragma GCC unroll 4
      for (int i = 0; i < P; ++i) x[i] = _mm512_loadu_si512(op[i].data + o * data_stride);
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) {
        const float* a_t = a.values + o * kNBitsStepK + t;  // k = 8 o + t of row 0
        if constexpr (R == 1) {
          const __m512 a_low = _mm512_set1_ps(a_t[0]), a_high = _mm512_set1_ps(a_t[4]);
#pragma GCC unroll 4
          for (int i = 0; i < P; ++i) {
            low.c[0][i] = _mm512_fmadd_ps(a_low, LowCodes(x[i], t, codes), low.c[0][i]);
            high.c[0][i] = _mm512_fmadd_ps(a_high, HighCodes(x[i], t, codes), high.c[0][i]);
          }
        } else {
          // The panels' low codes, then each row's broadcast and fmas; then the high
          // ones: fewer registers live than every row's two broadcasts at once.
          __m512 q[P];
#pragma GCC unroll 4
          for (int i = 0; i < P; ++i) q[i] = LowCodes(x[i], t, codes);
          FmaRows(q, a_t, a.row_length, low);
#pragma GCC unroll 4
          for (int i = 0; i < P; ++i) q[i] = HighCodes(x[i], t, codes);
          FmaRows(q, a_t + 4, a.row_length, high);
        }
      }
    }
#pragma GCC unroll 4
    for (int i = 0; i < P; ++i) {
      const int64_t at = b * stride;
      const __m512 scale = _mm512_loadu_ps(op[i].scales + at);
      const __m512 zero = op[i].zero_codes ? _mm512_cvtepi32_ps(LoadBytes(op[i].zero_codes + at))
                                           : _mm512_loadu_ps(op[i].zero_points + at);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        float* y = acc + r * kNBitsAccRow + i * kNBitsPanel;
        const __m512 u = _mm512_fnmadd_ps(zero, _mm512_set1_ps(a.sums[r * w.k_blocks + b]),
                                          _mm512_add_ps(low.c[r][i], high.c[r][i]));
        _mm512_storeu_ps(y, _mm512_fmadd_ps(u, scale, _mm512_loadu_ps(y)));
      }
    }
  }
}

// Adds the u8 x s8 products of four bytes per int32 lane to t: vpdpbusd with
// VNNI, else vpmaddubsw (q <= 15 and |a| <= 127: pair sums fit int16 without
// saturating) and vpmaddwd. Both exact.
template <bool kVnni>
inline __m512i DotAdd(__m512i t, __m512i low, __m512i high, __m512i a_low, __m512i a_high) {
  if constexpr (kVnni) {
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(t, low, a_low), high, a_high);
  } else {
    const __m512i sums16 =
        _mm512_add_epi16(_mm512_maddubs_epi16(low, a_low), _mm512_maddubs_epi16(high, a_high));
    return _mm512_add_epi32(t, _mm512_madd_epi16(sums16, _mm512_set1_epi16(1)));
  }
}

template <int R, int P, bool kVnni>
void Int8Panels(const PackedNBits& w, int64_t panel, const QuantizedRows& a, bool fetch,
                float* acc) {
  PanelOperands op[P];
  GroupOperands(w, panel, op);
  const int64_t data_stride = op[0].data_stride, stride = op[0].stride;
  const int64_t block_octets = w.block_size / 8;
  const __m512i nibbles = _mm512_set1_epi8(15);
  Accumulators<R, P> accumulators;
  auto& c = accumulators.c;
  for (int64_t b = 0; b < w.k_blocks; ++b) {
    if (fetch) PrefetchBlock(op[0], b + 2);
    __m512i t[R][P];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int i = 0; i < P; ++i) t[r][i] = _mm512_setzero_si512();
    const int64_t o1 = std::min(w.k_steps, (b + 1) * block_octets);
    for (int64_t o = b * block_octets; o < o1; ++o) {
      if (fetch) Prefetch(op[0].data, o * data_stride + kPrefetchBytes, data_stride);
#pragma GCC unroll 4
      for (int i = 0; i < P; ++i) {
        // Per int32 lane (column): q[8o..8o+3] in the low nibbles, q[8o+4..8o+7] in the high.
        const __m512i x = _mm512_loadu_si512(op[i].data + o * data_stride);
        const __m512i low = _mm512_and_si512(x, nibbles);
        const __m512i high = _mm512_and_si512(_mm512_srli_epi16(x, 4), nibbles);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const int8_t* ar = a.values + r * a.row_length + 8 * o;
          t[r][i] = DotAdd<kVnni>(t[r][i], low, high, _mm512_set1_epi32(Int32At(ar)),
                                  _mm512_set1_epi32(Int32At(ar + 4)));
        }
      }
    }
#pragma GCC unroll 4
    for (int i = 0; i < P; ++i) {
      const __m512i zero = LoadBytes(op[i].zero_codes + b * stride);
      const __m512 scale = _mm512_loadu_ps(op[i].scales + b * stride);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512i sum = _mm512_set1_epi32(a.sums[r * w.k_blocks + b]);
        const __m512 sa = _mm512_set1_ps(a.scales[r * w.k_blocks + b]);
        const __m512i dot = _mm512_sub_epi32(t[r][i], _mm512_mullo_epi32(zero, sum));
        c[r][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(sa, scale), c[r][i]);
      }
    }
  }
  accumulators.Store(acc);
}

// Runs `panels` panels for R rows, PanelsAtOnce(R) at a time.
template <int R>
void FloatRows(const PackedNBits& w, int64_t panel, int panels, const SummedRows& a, bool fetch,
               float* acc) {
  for (int i = 0; i < panels;) {
    const int n = std::min(PanelsAtOnce(R), panels - i);
    ForCount<PanelsAtOnce(R)>(
        n, [&]<int N>() { FloatPanels<R, N>(w, panel + i, a, fetch, acc + i * kNBitsPanel); });
    i += n;
  }
}

template <int R, bool kVnni>
void Int8Rows(const PackedNBits& w, int64_t panel, int panels, const QuantizedRows& a, bool fetch,
              float* acc) {
  for (int i = 0; i < panels;) {
    const int n = std::min(PanelsAtOnce(R), panels - i);
    float* out = acc + i * kNBitsPanel;
    ForCount<PanelsAtOnce(R)>(
        n, [&]<int N>() { Int8Panels<R, N, kVnni>(w, panel + i, a, fetch, out); });
    i += n;
  }
}

// QuantizeBlockScalar's bits: max is exact in any order (a NaN is skipped, as
// std::max skips it), the conversion rounds to nearest even as nearbyint does,
// and the clamp sends NaN to 0 and +-inf to +-127.
void QuantizeBlockAvx512(const float* a, int64_t count, int8_t* q, int32_t* sum, float* scale) {
  const __m512 sign = _mm512_set1_ps(-0.f);
  __m512 amax = _mm512_setzero_ps();
  for (int64_t k = 0; k < count; k += 16) {
    const __mmask16 lanes = Avx512::FirstLanes(static_cast<int>(std::min<int64_t>(count - k, 16)));
    // max(x, amax) returns amax when x is NaN.
    amax = _mm512_max_ps(_mm512_andnot_ps(sign, _mm512_maskz_loadu_ps(lanes, a + k)), amax);
  }
  const float block_max = _mm512_reduce_max_ps(amax);
  const __m512 inverse = _mm512_set1_ps(block_max != 0.f ? 127.f / block_max : 0.f);
  const __m512 low = _mm512_set1_ps(-127.f), high = _mm512_set1_ps(127.f);
  __m512i total = _mm512_setzero_si512();
  for (int64_t k = 0; k < count; k += 16) {
    const __mmask16 lanes = Avx512::FirstLanes(static_cast<int>(std::min<int64_t>(count - k, 16)));
    const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, a + k), inverse);
    const __mmask16 numbers = _mm512_cmp_ps_mask(v, v, _CMP_ORD_Q);
    const __m512i r = _mm512_maskz_cvtps_epi32(numbers, _mm512_min_ps(_mm512_max_ps(v, low), high));
    total = _mm512_add_epi32(total, r);
    _mm512_mask_cvtepi32_storeu_epi8(q + k, lanes, r);
  }
  *sum = _mm512_reduce_add_epi32(total);
  *scale = block_max / 127.f;
}

void FloatPanelAvx512(const PackedNBits& w, int64_t panel, int panels, int rows,
                      const SummedRows& a, bool fetch, float* acc) {
  ForCount<kNBitsRows>(rows, [&]<int R>() { FloatRows<R>(w, panel, panels, a, fetch, acc); });
}

template <bool kVnni>
void Int8PanelAvx512(const PackedNBits& w, int64_t panel, int panels, int rows,
                     const QuantizedRows& a, bool fetch, float* acc) {
  ForCount<kNBitsRows>(rows, [&]<int R>() { Int8Rows<R, kVnni>(w, panel, panels, a, fetch, acc); });
}

// The table of one of the two instruction sets.
template <bool kVnni>
constexpr PanelKernels Avx512PanelKernels() {
  return {FloatPanelAvx512, Int8PanelAvx512<kVnni>, QuantizeBlockAvx512, false};
}

}  // namespace

}  // namespace octet::nbits
