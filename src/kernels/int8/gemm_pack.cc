// The GEMM's packed layouts (gemm_kernels.h): PackA for every A domain, PackB
// for every B layout.
#include <algorithm>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/error.h"
#include "core/weight_arena.h"
#include "kernels/int8/gemm.h"
#include "kernels/int8/gemm_kernels.h"

namespace octet::gemm {

namespace {

#if defined(__SSE2__)
// The 8-bit domains, 16 k at a time: rows (a multiple of 4) x 16 bytes are
// loaded, flipped, summed (psadbw) and transposed in 4 x 4 blocks of 32-bit
// groups, so each store writes 4 rows of one group. Covers groups [0, groups)
// (a multiple of 4); adds the sums of the stored (unsigned) values to row_sums.
int64_t PackRowsBy4Sse2(const uint8_t* a, int64_t ld, int64_t p0, int64_t rows, int64_t groups,
                        uint32_t mask, uint8_t* panel, int32_t* row_sums) {
  const __m128i flip = _mm_set1_epi32(static_cast<int>(mask)), zero = _mm_setzero_si128();
  const int64_t step = rows * 4;
  for (int64_t r0 = 0; r0 < rows; r0 += 4) {
    const uint8_t* src[4];
    __m128i sums[4];
    for (int i = 0; i < 4; ++i) {
      src[i] = a + (p0 + r0 + i) * ld;
      sums[i] = zero;
    }
    uint8_t* out = panel + r0 * 4;
    for (int64_t g = 0; g < groups; g += 4) {
      __m128i x[4];
      for (int i = 0; i < 4; ++i) {
        x[i] =
            _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src[i] + g * 4)), flip);
        sums[i] = _mm_add_epi64(sums[i], _mm_sad_epu8(x[i], zero));
      }
      const __m128i t0 = _mm_unpacklo_epi32(x[0], x[1]), t1 = _mm_unpacklo_epi32(x[2], x[3]);
      const __m128i t2 = _mm_unpackhi_epi32(x[0], x[1]), t3 = _mm_unpackhi_epi32(x[2], x[3]);
      const __m128i column[4] = {_mm_unpacklo_epi64(t0, t1), _mm_unpackhi_epi64(t0, t1),
                                 _mm_unpacklo_epi64(t2, t3), _mm_unpackhi_epi64(t2, t3)};
      for (int i = 0; i < 4; ++i)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (g + i) * step), column[i]);
    }
    for (int i = 0; i < 4; ++i) {
      row_sums[p0 + r0 + i] +=
          _mm_cvtsi128_si32(sums[i]) + _mm_cvtsi128_si32(_mm_unpackhi_epi64(sums[i], sums[i]));
    }
  }
  return groups;
}
#endif

// An 8-bit domain (k groups of 4 bytes): int8 A as A + 128 (kUnsigned8) or
// uint8 A as A - 128 (kSigned8) by flipping the top bit, else as stored.
void PackBytes(const MicroKernel& kernel, const uint8_t* a, bool a_signed, int64_t ld,
               int64_t row_begin, int64_t row_end, int64_t K, uint8_t* dst, int32_t* row_sums) {
  const int g_size = kernel.k_group;
  const int64_t k_groups = (K + g_size - 1) / g_size;
  const bool unsigned_domain = kernel.a_domain == ADomain::kUnsigned8;
  const bool flip = a_signed == unsigned_domain;
  const uint8_t mask = flip ? 0x80 : 0;
  const int32_t shift = !flip ? 0 : (a_signed ? 128 : -128);
  for (int64_t p0 = row_begin; p0 < row_end; p0 += kernel.mr) {
    const int64_t rows = std::min<int64_t>(kernel.mr, row_end - p0);
    uint8_t* panel = dst + p0 * k_groups * g_size;
    int64_t done_groups = 0;  // packed (and summed) by the vector path
    for (int64_t r = 0; r < rows; ++r) row_sums[p0 + r] = 0;
#if defined(__SSE2__)
    if (rows % 4 == 0 && unsigned_domain && g_size == 4) {
      done_groups = PackRowsBy4Sse2(a, ld, p0, rows, (K / g_size) & ~int64_t{3},
                                    flip ? 0x80808080u : 0u, panel, row_sums);
    }
#endif
    const int64_t step = rows * g_size;
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* src = a + (p0 + r) * ld;
      uint8_t* out = panel + r * g_size;
      for (int64_t g = done_groups; g < k_groups; ++g) {
        for (int i = 0; i < g_size; ++i) {
          const int64_t k = g * g_size + i;
          out[g * step + i] = k < K ? static_cast<uint8_t>(src[k] ^ mask) : 0;
        }
      }
      int32_t sum = 0;  // of the raw values not summed above; |sum| <= K * 128
      for (int64_t k = done_groups * g_size; k < K; ++k)
        sum += a_signed ? static_cast<int8_t>(src[k]) : src[k];
      row_sums[p0 + r] += sum + shift * static_cast<int32_t>(K - done_groups * g_size);
    }
  }
}

// kInt16: A's own values as int16, k groups of k_group values.
void PackInt16(const MicroKernel& kernel, const uint8_t* a, bool a_signed, int64_t ld,
               int64_t row_begin, int64_t row_end, int64_t K, int16_t* dst, int32_t* row_sums) {
  const int g_size = kernel.k_group;
  const int64_t k_groups = (K + g_size - 1) / g_size;
  for (int64_t p0 = row_begin; p0 < row_end; p0 += kernel.mr) {
    const int64_t rows = std::min<int64_t>(kernel.mr, row_end - p0);
    int16_t* panel = dst + p0 * k_groups * g_size;
    const int64_t step = rows * g_size;
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* src = a + (p0 + r) * ld;
      int16_t* out = panel + r * g_size;
      int32_t sum = 0;
      int64_t k = 0, g = 0;
#if defined(__SSE2__)
      if (g_size == 2) {
        // 8 k at a time: widened to int16 and stored as 4 groups of one 4-byte pair.
        const __m128i zero = _mm_setzero_si128(), ones = _mm_set1_epi16(1);
        __m128i sums = zero;
        for (; k + 8 <= K; k += 8, g += 4) {
          const __m128i x = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + k));
          const __m128i w =
              a_signed ? _mm_srai_epi16(_mm_unpacklo_epi8(x, x), 8) : _mm_unpacklo_epi8(x, zero);
          sums = _mm_add_epi32(sums, _mm_madd_epi16(w, ones));
          const int32_t pairs[4] = {_mm_cvtsi128_si32(w), _mm_cvtsi128_si32(_mm_srli_si128(w, 4)),
                                    _mm_cvtsi128_si32(_mm_srli_si128(w, 8)),
                                    _mm_cvtsi128_si32(_mm_srli_si128(w, 12))};
          for (int i = 0; i < 4; ++i) std::memcpy(out + (g + i) * step, &pairs[i], sizeof(int32_t));
        }
        alignas(16) int32_t lanes[4];
        _mm_store_si128(reinterpret_cast<__m128i*>(lanes), sums);
        sum = lanes[0] + lanes[1] + lanes[2] + lanes[3];
      }
#endif
      for (; g < k_groups; ++g) {
        for (int i = 0; i < g_size; ++i, ++k) {
          const int16_t v = k >= K ? 0 : a_signed ? static_cast<int8_t>(src[k]) : src[k];
          out[g * step + i] = v;
          sum += v;
        }
      }
      row_sums[p0 + r] = sum;
    }
  }
}

}  // namespace

void PackA(const MicroKernel& kernel, const void* a, bool a_signed, int64_t ld, int64_t row_begin,
           int64_t row_end, int64_t K, void* dst, int32_t* row_sums) {
  if (K == 0) {  // nothing to pack, and a and dst may be null (an empty tensor's data)
    std::fill(row_sums + row_begin, row_sums + row_end, 0);
    return;
  }
  const auto* bytes = static_cast<const uint8_t*>(a);
  if (kernel.a_domain == ADomain::kInt16) {
    PackInt16(kernel, bytes, a_signed, ld, row_begin, row_end, K, static_cast<int16_t*>(dst),
              row_sums);
  } else {
    PackBytes(kernel, bytes, a_signed, ld, row_begin, row_end, K, static_cast<uint8_t*>(dst),
              row_sums);
  }
}

}  // namespace octet::gemm

namespace octet {

PackedB PackB(const GemmPlan& plan, const void* b, bool b_signed, int64_t K, int64_t N, int64_t ldb,
              WeightArena* arena) {
  PackedB packed;
  PackBInto(plan, packed, b, b_signed, K, N, ldb, arena);
  return packed;
}

void PackBInto(const GemmPlan& plan, PackedB& packed, const void* b, bool b_signed, int64_t K,
               int64_t N, int64_t ldb, WeightArena* arena) {
  OCTET_CHECK(K >= 0 && N >= 0, "int8 GEMM: negative B shape K=", K, " N=", N);
  OCTET_CHECK(ldb >= N, "int8 GEMM: B leading dimension ", ldb, " < N=", N);
  OCTET_CHECK(K <= kGemmMaxK, "int8 GEMM: K=", K, " exceeds ", kGemmMaxK,
              ", the largest K whose int32 accumulation is exact for all 8-bit inputs");
  OCTET_CHECK(b != nullptr || K * N == 0, "int8 GEMM: B data is null");
  const gemm::MicroKernel& kernel = *plan.packed;
  const int64_t nr = kernel.nr, g_size = kernel.k_group;
  packed.kernel = &kernel;
  packed.K = K;
  packed.N = N;
  packed.b_signed = b_signed;
  packed.k_groups = (K + g_size - 1) / g_size;
  const int64_t panels = (N + nr - 1) / nr;
  const int64_t panel_bytes = packed.k_groups * nr * g_size;
  if (panels * panel_bytes > 0 && packed.data.numel() == panels * panel_bytes) {
    std::memset(packed.data.raw(), 0, static_cast<size_t>(panels * panel_bytes));  // the padding
  } else if (arena != nullptr) {
    packed.data = ArenaTensor(*arena, DType::kInt8, {panels * panel_bytes});
  } else {
    packed.data = Tensor(DType::kInt8, {panels * panel_bytes});  // zero-filled: the padding
  }
  packed.col_sums.assign(panels * nr, 0);
  int8_t* out = packed.data.data<int8_t>();
  // The stored bytes: int8 B as is and uint8 B - 128 (kSigned8), or int8 B + 128
  // and uint8 B as is (kUnsigned8), by flipping the top bit.
  const bool unsigned_domain = kernel.b_domain == gemm::BDomain::kUnsigned8;
  const uint8_t flip = b_signed == unsigned_domain ? 0x80 : 0;
  const int64_t group_bytes = nr * g_size;
  int32_t* col_sums = packed.col_sums.data();
#if defined(__x86_64__) || defined(_M_X64)
  // Summed from the packed panels afterwards (2 vpdpbusd per group of 32 columns).
  const bool sum_packed =
      kernel.isa == Isa::kAvx512Vnni && nr == 32 && g_size == 4 && !unsigned_domain;
#else
  const bool sum_packed = false;
#endif
  for (int64_t k = 0; k < K && !sum_packed; ++k) {
    const uint8_t* row = static_cast<const uint8_t*>(b) + k * ldb;
    if (unsigned_domain) {
      for (int64_t n = 0; n < N; ++n) col_sums[n] += static_cast<uint8_t>(row[n] ^ flip);
    } else {
      for (int64_t n = 0; n < N; ++n) col_sums[n] += static_cast<int8_t>(row[n] ^ flip);
    }
  }
  // Row k is byte k % G of every column's G-byte group (k / G) in each panel.
  for (int64_t g = 0; g < packed.k_groups; ++g) {
    const int64_t k0 = g * g_size, group_rows = std::min<int64_t>(g_size, K - k0);
    int8_t* group = out + g * group_bytes;
    int64_t n0 = 0;
#if defined(__SSE2__)
    const uint8_t* rows = static_cast<const uint8_t*>(b) + k0 * ldb;
    const __m128i flip_bytes = _mm_set1_epi8(static_cast<char>(flip));
    auto load = [&](int r, int64_t n) {
      return _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows + r * ldb + n)),
                           flip_bytes);
    };
    if (group_rows == 4 && g_size == 4 && nr % 16 == 0) {
      // 16 columns x 4 rows at a time: interleave bytes, then byte pairs, into 16
      // 4-byte groups (64 contiguous bytes of the panel).
      for (; n0 + 16 <= N; n0 += 16) {
        const __m128i r0 = load(0, n0), r1 = load(1, n0), r2 = load(2, n0), r3 = load(3, n0);
        const __m128i t0 = _mm_unpacklo_epi8(r0, r1), t1 = _mm_unpackhi_epi8(r0, r1);
        const __m128i t2 = _mm_unpacklo_epi8(r2, r3), t3 = _mm_unpackhi_epi8(r2, r3);
        auto* dst = reinterpret_cast<__m128i*>(group + (n0 / nr) * panel_bytes + (n0 % nr) * 4);
        _mm_storeu_si128(dst + 0, _mm_unpacklo_epi16(t0, t2));
        _mm_storeu_si128(dst + 1, _mm_unpackhi_epi16(t0, t2));
        _mm_storeu_si128(dst + 2, _mm_unpacklo_epi16(t1, t3));
        _mm_storeu_si128(dst + 3, _mm_unpackhi_epi16(t1, t3));
      }
    } else if (group_rows == 2 && kernel.b_paired && (nr == 16 || nr == 32)) {
      // nr columns x 2 rows: the low half's bytes + 128 interleaved with the high
      // half's into words, then the two rows' words.
      const __m128i low_flip = nr == 16
                                   ? _mm_set_epi64x(0, static_cast<int64_t>(0x8080808080808080))
                                   : _mm_set1_epi8(static_cast<char>(0x80));
      for (; n0 + nr <= N; n0 += nr) {
        __m128i first[2], second[2];  // words of columns 0-7 / 8-15 of the low half
        for (int r = 0; r < 2; ++r) {
          const __m128i low = _mm_xor_si128(load(r, n0), low_flip);
          const __m128i high = nr == 16 ? _mm_srli_si128(low, 8) : load(r, n0 + 16);
          first[r] = _mm_unpacklo_epi8(low, high);
          second[r] = _mm_unpackhi_epi8(low, high);
        }
        auto* dst = reinterpret_cast<__m128i*>(group + (n0 / nr) * panel_bytes);
        _mm_storeu_si128(dst + 0, _mm_unpacklo_epi16(first[0], first[1]));
        _mm_storeu_si128(dst + 1, _mm_unpackhi_epi16(first[0], first[1]));
        if (nr == 32) {
          _mm_storeu_si128(dst + 2, _mm_unpacklo_epi16(second[0], second[1]));
          _mm_storeu_si128(dst + 3, _mm_unpackhi_epi16(second[0], second[1]));
        }
      }
    } else if (group_rows == 2 && g_size == 2 && nr % 16 == 0 && !kernel.b_paired) {
      // 16 columns x 2 rows: one byte interleave gives their 16 2-byte groups.
      for (; n0 + 16 <= N; n0 += 16) {
        const __m128i r0 = load(0, n0), r1 = load(1, n0);
        auto* dst = reinterpret_cast<__m128i*>(group + (n0 / nr) * panel_bytes + (n0 % nr) * 2);
        _mm_storeu_si128(dst + 0, _mm_unpacklo_epi8(r0, r1));
        _mm_storeu_si128(dst + 1, _mm_unpackhi_epi8(r0, r1));
      }
    }
#endif
    for (int64_t r = 0; r < group_rows; ++r) {
      const uint8_t* row = static_cast<const uint8_t*>(b) + (k0 + r) * ldb;
      for (int64_t n = n0; n < N; ++n) {
        const int64_t j = n % nr, half = nr / 2;
        int8_t* panel = group + (n / nr) * panel_bytes;
        if (!kernel.b_paired) {
          panel[j * g_size + r] = static_cast<int8_t>(row[n] ^ flip);
        } else if (j < half) {
          panel[4 * j + 2 * r] = static_cast<int8_t>(row[n] ^ flip ^ 0x80);
        } else {
          panel[4 * (j - half) + 1 + 2 * r] = static_cast<int8_t>(row[n] ^ flip);
        }
      }
    }
  }
#if defined(__x86_64__) || defined(_M_X64)
  if (sum_packed) gemm::ColumnSumsAvx512Vnni(out, panels, packed.k_groups, col_sums);
#endif
}

}  // namespace octet
