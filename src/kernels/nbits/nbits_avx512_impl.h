// The AVX-512 panels of kernels/nbits/nbits.h: a panel's 16 columns are one
// vector, and up to kNBitsGroup panels run at once, so that a single row
// still has several independent fma chains in flight. Written once for the
// AVX-512BW and the AVX-512 VNNI tables (nbits_avx512.cc, nbits_avx512vnni.cc),
// which differ in the kInt8 dot product only; internal linkage, so that each
// file keeps the code compiled for its own instruction set.
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

// Whether R rows prefetch their group's bytes. One row's loop reads its stream fast
// enough for the hardware prefetchers to follow it (the packed weights sit on huge
// pages, core/weight_arena.h), and the prefetch instructions would only take load
// slots; more rows spend longer per byte, and the prefetch keeps the next ones coming.
template <int R>
constexpr bool kSoftwarePrefetch = R > 1;

// 2^23 as float bits: or-ing a value v < 2^23 into its mantissa gives the float 2^23 + v.
constexpr int kMagic = 0x4B000000;
// The _mm512_ternarylogic_epi32 immediate of (a & b) | c.
constexpr int kAndOr = 0xEA;

// 16 columns' bytes of one k pair (or 16 zero codes), one per int32 lane.
inline __m512i LoadBytes(const uint8_t* p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// How the kFloat kernels unpack a byte's two codes into w = (q - zp) * s.
// kConvert: float(q) - zp as written (float zero points). kCodes: the zero
// points are integers, and 2^23 + q - (2^23 + zp) is exactly float(q) - zp, so
// a code unpacks straight into a float (no conversion). kCodesHighInPlace: as
// kCodes, but the high nibble stays at bits 4-7 (no shift): 2^23 + 16 q -
// (2^23 + 16 zp) = 16 (q - zp) exactly, times s / 16, which is exact when
// PackedNBits::exact_sixteenth_scales, gives the bits of (q - zp) * s.
enum class Unpack { kConvert, kCodes, kCodesHighInPlace };

template <Unpack kUnpack>
struct FloatCodes {
  static constexpr bool kCodes = kUnpack != Unpack::kConvert;
  static constexpr bool kHighInPlace = kUnpack == Unpack::kCodesHighInPlace;
  // The block's value subtracted from the unpacked low codes.
  static __m512 Offset(const PanelOperands& op, int64_t at) {
    if constexpr (kCodes)
      return _mm512_castsi512_ps(
          _mm512_or_si512(LoadBytes(op.zero_codes + at), _mm512_set1_epi32(kMagic)));
    else
      return _mm512_loadu_ps(op.zero_points + at);
  }
  // The same for the high codes, and the scale they take (low: the block's).
  static __m512 HighOffset(const PanelOperands& op, int64_t at, __m512 low_offset) {
    if constexpr (kHighInPlace)
      return _mm512_castsi512_ps(_mm512_or_si512(
          _mm512_slli_epi32(LoadBytes(op.zero_codes + at), 4), _mm512_set1_epi32(kMagic)));
    else
      return low_offset;
  }
  static __m512 HighScale(__m512 scale) {
    if constexpr (kHighInPlace)
      return _mm512_mul_ps(scale, _mm512_set1_ps(1.f / 16));
    else
      return scale;
  }
  // The low and the high nibble of each lane's byte x.
  static __m512 Low(__m512i x) {
    const __m512i nibble = _mm512_set1_epi32(15);
    if constexpr (kCodes)
      return _mm512_castsi512_ps(
          _mm512_ternarylogic_epi32(x, nibble, _mm512_set1_epi32(kMagic), kAndOr));
    else
      return _mm512_cvtepi32_ps(_mm512_and_si512(x, nibble));
  }
  static __m512 High(__m512i x) {
    if constexpr (kHighInPlace)
      return _mm512_castsi512_ps(
          _mm512_ternarylogic_epi32(x, _mm512_set1_epi32(0xF0), _mm512_set1_epi32(kMagic), kAndOr));
    const __m512i high = _mm512_srli_epi32(x, 4);
    if constexpr (kCodes)
      return _mm512_castsi512_ps(_mm512_or_si512(high, _mm512_set1_epi32(kMagic)));
    else
      return _mm512_cvtepi32_ps(high);
  }
};

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

template <int R, int P, Unpack kUnpack>
void FloatPanels(const PackedNBits& w, int64_t panel, const float* a, int64_t lda, float* acc) {
  using Codes = FloatCodes<kUnpack>;
  PanelOperands op[P];
  GroupOperands(w, panel, op);
  const int64_t data_stride = op[0].data_stride, stride = op[0].stride;
  Accumulators<R, P> accumulators;
  auto& c = accumulators.c;
  for (int64_t b = 0; b < w.k_blocks; ++b) {
    if constexpr (kSoftwarePrefetch<R>) PrefetchBlock(op[0], b + 2);
    // w = (unpacked q - offset) * scale, for the low and the high codes.
    __m512 scale[P], offset[P], high_scale[P], high_offset[P];
#pragma GCC unroll 4
    for (int i = 0; i < P; ++i) {
      scale[i] = _mm512_loadu_ps(op[i].scales + b * stride);
      offset[i] = Codes::Offset(op[i], b * stride);
      high_scale[i] = Codes::HighScale(scale[i]);
      high_offset[i] = Codes::HighOffset(op[i], b * stride, offset[i]);
    }
    // One k pair, or (kPair false) odd K's last k, a low nibble alone.
    auto step = [&](int64_t k, auto pair) {
      if constexpr (kSoftwarePrefetch<R>)
        Prefetch(op[0].data, (k / 2) * data_stride + kPrefetchBytes, data_stride);
#pragma GCC unroll 4
      for (int i = 0; i < P; ++i) {
        const __m512i x = LoadBytes(op[i].data + (k / 2) * data_stride);
        const __m512 w0 = _mm512_mul_ps(_mm512_sub_ps(Codes::Low(x), offset[i]), scale[i]);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r)
          c[r][i] = _mm512_fmadd_ps(_mm512_set1_ps(a[r * lda + k]), w0, c[r][i]);
        if constexpr (decltype(pair)::value) {
          const __m512 w1 =
              _mm512_mul_ps(_mm512_sub_ps(Codes::High(x), high_offset[i]), high_scale[i]);
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r)
            c[r][i] = _mm512_fmadd_ps(_mm512_set1_ps(a[r * lda + k + 1]), w1, c[r][i]);
        }
      }
    };
    const int64_t k1 = std::min(w.K, (b + 1) * w.block_size);
    int64_t k = b * w.block_size;
    for (; k + 1 < k1; k += 2) step(k, std::true_type{});
    if (k < k1) step(k, std::false_type{});
  }
  accumulators.Store(acc);
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
void Int8Panels(const PackedNBits& w, int64_t panel, const QuantizedRows& a, float* acc) {
  PanelOperands op[P];
  GroupOperands(w, panel, op);
  const int64_t data_stride = op[0].data_stride, stride = op[0].stride;
  const int64_t block_octets = w.block_size / 8;
  const __m512i nibbles = _mm512_set1_epi8(15);
  Accumulators<R, P> accumulators;
  auto& c = accumulators.c;
  for (int64_t b = 0; b < w.k_blocks; ++b) {
    if constexpr (kSoftwarePrefetch<R>) PrefetchBlock(op[0], b + 2);
    __m512i t[R][P];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int i = 0; i < P; ++i) t[r][i] = _mm512_setzero_si512();
    const int64_t o1 = std::min(w.k_steps, (b + 1) * block_octets);
    for (int64_t o = b * block_octets; o < o1; ++o) {
      if constexpr (kSoftwarePrefetch<R>)
        Prefetch(op[0].data, o * data_stride + kPrefetchBytes, data_stride);
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
void FloatRows(const PackedNBits& w, int64_t panel, int panels, const float* a, int64_t lda,
               float* acc) {
  const bool codes = !w.zero_codes.empty();
  for (int i = 0; i < panels;) {
    const int n = std::min(PanelsAtOnce(R), panels - i);
    float* out = acc + i * kNBitsPanel;
    auto run = [&]<Unpack kUnpack>() {
      ForCount<PanelsAtOnce(R)>(
          n, [&]<int N>() { FloatPanels<R, N, kUnpack>(w, panel + i, a, lda, out); });
    };
    if (codes && w.exact_sixteenth_scales) {
      run.template operator()<Unpack::kCodesHighInPlace>();
    } else if (codes) {
      run.template operator()<Unpack::kCodes>();
    } else {
      run.template operator()<Unpack::kConvert>();
    }
    i += n;
  }
}

template <int R, bool kVnni>
void Int8Rows(const PackedNBits& w, int64_t panel, int panels, const QuantizedRows& a, float* acc) {
  for (int i = 0; i < panels;) {
    const int n = std::min(PanelsAtOnce(R), panels - i);
    float* out = acc + i * kNBitsPanel;
    ForCount<PanelsAtOnce(R)>(n, [&]<int N>() { Int8Panels<R, N, kVnni>(w, panel + i, a, out); });
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

template <Unpack kUnpack>
void DequantizePanel(const PackedNBits& w, int64_t panel, float* out, int64_t ldb) {
  using Codes = FloatCodes<kUnpack>;
  const PanelOperands op = OperandsOf(w, panel);
  for (int64_t b = 0; b < w.k_blocks; ++b) {
    const __m512 scale = _mm512_loadu_ps(op.scales + b * op.stride);
    const __m512 offset = Codes::Offset(op, b * op.stride);
    const int64_t k1 = std::min(w.K, (b + 1) * w.block_size);
    for (int64_t k = b * w.block_size; k < k1; k += 2) {
      const __m512i x = LoadBytes(op.data + (k / 2) * op.data_stride);
      _mm512_storeu_ps(out + k * ldb, _mm512_mul_ps(_mm512_sub_ps(Codes::Low(x), offset), scale));
      if (k + 1 < k1)
        _mm512_storeu_ps(out + (k + 1) * ldb,
                         _mm512_mul_ps(_mm512_sub_ps(Codes::High(x), offset), scale));
    }
  }
}

void DequantizePanelAvx512(const PackedNBits& w, int64_t panel, float* out, int64_t ldb) {
  if (w.zero_codes.empty())
    DequantizePanel<Unpack::kConvert>(w, panel, out, ldb);
  else
    DequantizePanel<Unpack::kCodes>(w, panel, out, ldb);
}

void FloatPanelAvx512(const PackedNBits& w, int64_t panel, int panels, int rows, const float* a,
                      int64_t lda, float* acc) {
  ForCount<kNBitsRows>(rows, [&]<int R>() { FloatRows<R>(w, panel, panels, a, lda, acc); });
}

template <bool kVnni>
void Int8PanelAvx512(const PackedNBits& w, int64_t panel, int panels, int rows,
                     const QuantizedRows& a, float* acc) {
  ForCount<kNBitsRows>(rows, [&]<int R>() { Int8Rows<R, kVnni>(w, panel, panels, a, acc); });
}

// The table of one of the two instruction sets.
template <bool kVnni>
constexpr PanelKernels Avx512PanelKernels() {
  return {FloatPanelAvx512, Int8PanelAvx512<kVnni>, QuantizeBlockAvx512, DequantizePanelAvx512};
}

}  // namespace

}  // namespace octet::nbits
