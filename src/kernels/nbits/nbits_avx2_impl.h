// The AVX2 panels of kernels/nbits/nbits.h: a k step of 16 columns is unpacked
// once and used by every row of the tile. One row runs the group's four panels
// at once (the float kernel two, in 8-column slices): its k steps are then read
// as one sequential stream (a pass per pair of panels reads half of each step's
// bytes, which the hardware prefetchers follow poorly), with independent chains
// to overlap. With one or two rows the weights stream from memory and are
// prefetched ahead; with more the loop is bound by its arithmetic, which the
// prefetches would only slow, and the float kernel runs each block in two
// passes (FloatSlicesTwoPass) to keep its chains in the 16 registers.
#include <immintrin.h>

#include <algorithm>

#include "kernels/for_count.h"
#include "kernels/nbits/nbits_kernels.h"

namespace octet::nbits {

namespace {

// The zero points of 8 columns of one block as floats.
inline __m256 LoadZero(const PanelOperands& op, int64_t at) {
  if (op.zero_codes == nullptr) return _mm256_loadu_ps(op.zero_points + at);
  const __m128i codes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(op.zero_codes + at));
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(codes));
}

// Panels per pass of the float kernels (each two slices of 8 columns): two for
// one row, one for more.
constexpr int FloatPanelsAtOnce(int rows) { return rows == 1 ? 2 : 1; }

// Zeroes R rows of U slices of acc.
template <int R, int U>
inline void ZeroSlices(float* acc) {
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u)
      _mm256_storeu_ps(acc + r * kNBitsAccRow + 8 * u, _mm256_setzero_ps());
}

// The zero point and the scale of block b applied to the chains of R rows on U
// slices: acc += (low + high - zp x sum_b) x s, in the order of nbits.h.
template <int R, int U>
inline void AddBlock(const PackedNBits& w, const PanelOperands& op, const SummedRows& a, int64_t b,
                     const __m256 (&low)[R][U], const __m256 (&high)[R][U], float* acc) {
#pragma GCC unroll 4
  for (int u = 0; u < U; ++u) {
    const int64_t at = b * op.stride + 8 * u;
    const __m256 scale = _mm256_loadu_ps(op.scales + at);
    const __m256 zero = LoadZero(op, at);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      float* y = acc + r * kNBitsAccRow + 8 * u;
      const __m256 v = _mm256_fnmadd_ps(zero, _mm256_set1_ps(a.sums[r * w.k_blocks + b]),
                                        _mm256_add_ps(low[r][u], high[r][u]));
      _mm256_storeu_ps(y, _mm256_fmadd_ps(v, scale, _mm256_loadu_ps(y)));
    }
  }
}

// The codes of one nibble (0: k % 8 < 4, 1: k % 8 >= 4) at step t of an octet's
// 8 columns, as floats: shifted down to float(q), or (kInPlace) masked where
// they lie, float(q) x 2^kMaskedCodeExponent[4 kHalf + t], which saves the shift.
template <int kHalf, bool kInPlace = false>
inline __m256 Codes(__m256i x, int t) {
  const int shift = 8 * t + 4 * kHalf;
  if (shift == 28) return _mm256_cvtepi32_ps(_mm256_srli_epi32(x, 28));
  if constexpr (kInPlace)
    return _mm256_cvtepi32_ps(_mm256_and_si256(x, _mm256_set1_epi32(15 << shift)));
  const __m256i lane = shift ? _mm256_srli_epi32(x, shift) : x;
  return _mm256_cvtepi32_ps(_mm256_and_si256(lane, _mm256_set1_epi32(15)));
}

// One or two rows on U slices from the call's first column (nbits.h's kFloat
// order): per block the low and the high codes' chains side by side, which
// gives a single row 2U independent chains, and the weights prefetched (they
// stream from memory at this rate), whatever the call's `fetch`: a test of it in
// this loop costs more than the prefetches it would spare a later tile of rows. The
// unpacking bounds this loop: with kScaled it reads A's scaled rows and the codes
// masked in place.
template <int R, int U, bool kScaled>
void FloatSlices(const PackedNBits& w, const PanelOperands& op, const SummedRows& a, float* acc) {
  const float* values = kScaled ? a.scaled : a.values;
  const int64_t block_octets = w.block_size / kNBitsStepK;
  ZeroSlices<R, U>(acc);
  for (int64_t b = 0; b < w.k_blocks; ++b) {
    PrefetchBlock(op, b + 2);
    __m256 low[R][U], high[R][U];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int u = 0; u < U; ++u) low[r][u] = high[r][u] = _mm256_setzero_ps();
    const int64_t o1 = std::min(w.k_steps, (b + 1) * block_octets);
    for (int64_t o = b * block_octets; o < o1; ++o) {
      Prefetch(op.data, o * op.data_stride + kPrefetchBytes, U * kNBitsStepBytes / 2);
#pragma GCC unroll 4
      for (int u = 0; u < U; ++u) {
        const __m256i x = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(op.data + o * op.data_stride + 32 * u));
#pragma GCC unroll 4
        for (int t = 0; t < 4; ++t) {
          const __m256 q_low = Codes<0, kScaled>(x, t), q_high = Codes<1, kScaled>(x, t);
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) {
            const float* ar = values + r * a.row_length + o * kNBitsStepK;
            low[r][u] = _mm256_fmadd_ps(_mm256_broadcast_ss(ar + t), q_low, low[r][u]);
            high[r][u] = _mm256_fmadd_ps(_mm256_broadcast_ss(ar + 4 + t), q_high, high[r][u]);
          }
        }
      }
    }
    AddBlock<R, U>(w, op, a, b, low, high, acc);
  }
}

// The chains from +0 of R rows over octets o0..o1 of U slices for the codes of
// one nibble.
template <int R, int U, int kHalf>
inline void SliceChains(const PanelOperands& op, const SummedRows& a, int64_t o0, int64_t o1,
                        __m256 (&c)[R][U]) {
  // A pointer per row, stepped with the octets, spares the loop an address
  // computation per broadcast.
  const float* ar[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u) c[r][u] = _mm256_setzero_ps();
    ar[r] = a.values + r * a.row_length + o0 * kNBitsStepK + 4 * kHalf;
  }
  for (int64_t o = o0; o < o1; ++o) {
    __m256i x[U];
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u)
      x[u] = _mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(op.data + o * op.data_stride + 32 * u));
#pragma GCC unroll 4
    for (int t = 0; t < 4; ++t) {
      __m256 q[U];
#pragma GCC unroll 4
      for (int u = 0; u < U; ++u) q[u] = Codes<kHalf>(x[u], t);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256 ar_t = _mm256_broadcast_ss(ar[r] + t);
#pragma GCC unroll 4
        for (int u = 0; u < U; ++u) c[r][u] = _mm256_fmadd_ps(ar_t, q[u], c[r][u]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) ar[r] += kNBitsStepK;
  }
}

// Three or more rows on U slices, each block in two passes: the low codes'
// chains of every row, then the high codes'. One set of chains is live at a
// time, so that the 16 registers hold 4 rows x 2 slices of them and each
// broadcast of A feeds two fmas. The loop is bound by its arithmetic; the
// weights are not prefetched.
template <int R, int U>
void FloatSlicesTwoPass(const PackedNBits& w, const PanelOperands& op, const SummedRows& a,
                        float* acc) {
  const int64_t block_octets = w.block_size / kNBitsStepK;
  ZeroSlices<R, U>(acc);
  for (int64_t b = 0; b < w.k_blocks; ++b) {
    const int64_t o0 = b * block_octets, o1 = std::min(w.k_steps, o0 + block_octets);
    __m256 low[R][U], high[R][U];
    SliceChains<R, U, 0>(op, a, o0, o1, low);
    SliceChains<R, U, 1>(op, a, o0, o1, high);
    AddBlock<R, U>(w, op, a, b, low, high, acc);
  }
}

// Adds the u8 x s8 products of four bytes per int32 lane to t. On AVX2
// |q a| <= 15 x 127 keeps vpmaddubsw's pair sums and their pairs exact in int16.
template <bool kVnni>
inline __m256i DotCodes(__m256i t, __m256i low, __m256i a_low, __m256i high, __m256i a_high) {
  if constexpr (kVnni) {
    return _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(t, low, a_low), high, a_high);
  } else {
    const __m256i sums16 =
        _mm256_add_epi16(_mm256_maddubs_epi16(low, a_low), _mm256_maddubs_epi16(high, a_high));
    return _mm256_add_epi32(t, _mm256_madd_epi16(sums16, _mm256_set1_epi16(1)));
  }
}

template <int R, int P, bool kVnni>
void Int8Panels(const PackedNBits& w, int64_t panel, const QuantizedRows& a, bool fetch,
                float* acc) {
  PanelOperands op[P];
  for (int i = 0; i < P; ++i) op[i] = OperandsOf(w, panel + i);
  const int64_t data_stride = op[0].data_stride, stride = op[0].stride;
  const int64_t block_octets = w.block_size / 8;
  const __m256i nibbles = _mm256_set1_epi8(15);
  __m256 c[R][P][2];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int i = 0; i < P; ++i) c[r][i][0] = c[r][i][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < w.k_blocks; ++b) {
    __m256i t[R][P][2];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int i = 0; i < P; ++i) t[r][i][0] = t[r][i][1] = _mm256_setzero_si256();
    if (R <= 2 && fetch) PrefetchBlock(op[0], b + 2);
    const int64_t o1 = std::min(w.k_steps, (b + 1) * block_octets);
    for (int64_t o = b * block_octets; o < o1; ++o) {
      if (R <= 2 && fetch)
        Prefetch(op[0].data, o * data_stride + kPrefetchBytes, P * kNBitsStepBytes);
#pragma GCC unroll 4
      for (int i = 0; i < P; ++i) {
        // Per int32 lane (column): q[8o..8o+3] in the low nibbles, q[8o+4..8o+7] in the
        // high; columns 0-7, then 8-15.
        __m256i low[2], high[2];
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          const __m256i x = _mm256_loadu_si256(
              reinterpret_cast<const __m256i*>(op[i].data + o * data_stride + 32 * h));
          low[h] = _mm256_and_si256(x, nibbles);
          high[h] = _mm256_and_si256(_mm256_srli_epi16(x, 4), nibbles);
        }
        // Row by row, so that only one row's two broadcasts are live: with all of them
        // the four-row tile's accumulators spill.
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const int8_t* ar = a.values + r * a.row_length + 8 * o;
          const __m256i a_low = _mm256_set1_epi32(Int32At(ar));
          const __m256i a_high = _mm256_set1_epi32(Int32At(ar + 4));
#pragma GCC unroll 2
          for (int h = 0; h < 2; ++h)
            t[r][i][h] = DotCodes<kVnni>(t[r][i][h], low[h], a_low, high[h], a_high);
        }
      }
    }
#pragma GCC unroll 4
    for (int i = 0; i < P; ++i) {
      const uint8_t* zero = op[i].zero_codes + b * stride;
      const __m256i zp0 =
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(zero)));
      const __m256i zp1 =
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(zero + 8)));
      const __m256 s0 = _mm256_loadu_ps(op[i].scales + b * stride);
      const __m256 s1 = _mm256_loadu_ps(op[i].scales + b * stride + 8);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256i sum = _mm256_set1_epi32(a.sums[r * w.k_blocks + b]);
        const __m256 sa = _mm256_set1_ps(a.scales[r * w.k_blocks + b]);
        const __m256i d0 = _mm256_sub_epi32(t[r][i][0], _mm256_mullo_epi32(zp0, sum));
        const __m256i d1 = _mm256_sub_epi32(t[r][i][1], _mm256_mullo_epi32(zp1, sum));
        c[r][i][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d0), _mm256_mul_ps(sa, s0), c[r][i][0]);
        c[r][i][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d1), _mm256_mul_ps(sa, s1), c[r][i][1]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int i = 0; i < P; ++i) {
      _mm256_storeu_ps(acc + r * kNBitsAccRow + i * kNBitsPanel, c[r][i][0]);
      _mm256_storeu_ps(acc + r * kNBitsAccRow + i * kNBitsPanel + 8, c[r][i][1]);
    }
  }
}

// Runs `panels` panels for R rows, FloatPanelsAtOnce(R) at a time as twice as
// many slices. A group's panels sit side by side, so panel i of the call starts
// 16 i columns past the first.
template <int R>
void FloatRows(const PackedNBits& w, int64_t panel, int panels, const SummedRows& a, float* acc) {
  constexpr int kAtOnce = FloatPanelsAtOnce(R);
  PanelOperands op = OperandsOf(w, panel);
  for (int i = 0; i < panels;) {
    const int n = std::min(kAtOnce, panels - i);
    float* out = acc + i * kNBitsPanel;
    ForCount<kAtOnce>(n, [&]<int P>() {
      if constexpr (R <= 2) {
        if (a.scaled)
          FloatSlices<R, 2 * P, true>(w, op, a, out);
        else
          FloatSlices<R, 2 * P, false>(w, op, a, out);
      } else {
        FloatSlicesTwoPass<R, 2 * P>(w, op, a, out);
      }
    });
    op.data += kNBitsStepBytes * n;
    op.scales += kNBitsPanel * n;
    if (op.zero_codes) op.zero_codes += kNBitsPanel * n;
    if (op.zero_points) op.zero_points += kNBitsPanel * n;
    i += n;
  }
}

// Panels per call of the int8 arithmetic: four (a group) for one row, two for
// two, one for more.
constexpr int PanelsAtOnce(int rows) { return rows == 1 ? 4 : rows == 2 ? 2 : 1; }

template <int R, bool kVnni>
void Int8Rows(const PackedNBits& w, int64_t panel, int panels, const QuantizedRows& a, bool fetch,
              float* acc) {
  constexpr int kAtOnce = PanelsAtOnce(R);
  int i = 0;
  for (; i + kAtOnce <= panels; i += kAtOnce)
    Int8Panels<R, kAtOnce, kVnni>(w, panel + i, a, fetch, acc + i * kNBitsPanel);
  for (; i < panels; ++i) Int8Panels<R, 1, kVnni>(w, panel + i, a, fetch, acc + i * kNBitsPanel);
}

void FloatPanelAvx2(const PackedNBits& w, int64_t panel, int panels, int rows, const SummedRows& a,
                    bool /*fetch*/, float* acc) {
  ForCount<kNBitsRows>(rows, [&]<int R>() { FloatRows<R>(w, panel, panels, a, acc); });
}

template <bool kVnni>
void Int8PanelAvx2(const PackedNBits& w, int64_t panel, int panels, int rows,
                   const QuantizedRows& a, bool fetch, float* acc) {
  ForCount<kNBitsRows>(rows, [&]<int R>() { Int8Rows<R, kVnni>(w, panel, panels, a, fetch, acc); });
}

// The table of one of the two instruction sets.
template <bool kVnni>
constexpr PanelKernels Avx2PanelKernels() {
  return {FloatPanelAvx2, Int8PanelAvx2<kVnni>, QuantizeBlockScalar, true};
}

}  // namespace

}  // namespace octet::nbits
