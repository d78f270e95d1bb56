#include "kernels/int8/gemm_pack.h"

#include <algorithm>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/error.h"
#include "kernels/int8/gemm.h"

namespace octet::gemm {

TileShape TileShapeFor(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return {4, 8, true};  // the AVX2 layout, so both run the same bytes
    case Isa::kAvx2:
      return {4, 8, true};
    case Isa::kAvxVnni:
      return {6, 16, true};
    case Isa::kAvx512Vnni:
      return {8, 32, true};
    case Isa::kNeonDot:
      return {4, 16, false};
  }
  Fail("internal: unknown instruction set ", static_cast<int>(isa));
}

#if defined(__SSE2__)
// The common x86 case, 16 k at a time: rows (a multiple of 4) x 16 bytes are
// loaded, flipped, summed (psadbw) and transposed in 4 x 4 blocks of 32-bit
// groups, so each store writes 4 rows of one group. Covers groups [0, groups)
// (a multiple of 4); adds the sums of the packed (unsigned) values to row_sums.
namespace {
int64_t PackRowsBy4Sse2(const Int8Operand& A, int64_t p0, int64_t rows, int64_t groups,
                        uint32_t mask, uint8_t* panel, int32_t* row_sums) {
  const __m128i flip = _mm_set1_epi32(static_cast<int>(mask)), zero = _mm_setzero_si128();
  const int64_t step = rows * kGroup;
  for (int64_t r0 = 0; r0 < rows; r0 += 4) {
    const uint8_t* src[4];
    __m128i sums[4];
    for (int i = 0; i < 4; ++i) {
      src[i] = static_cast<const uint8_t*>(A.data) + (p0 + r0 + i) * A.ld;
      sums[i] = zero;
    }
    uint8_t* out = panel + r0 * kGroup;
    for (int64_t g = 0; g < groups; g += 4) {
      __m128i x[4];
      for (int i = 0; i < 4; ++i) {
        x[i] = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src[i] + g * kGroup)),
                             flip);
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
}  // namespace
#endif

void PackA(const Int8Operand& A, int64_t row_begin, int64_t row_end, int64_t K, const TileShape& s,
           uint8_t* dst, int32_t* row_sums) {
  const int64_t k_groups = (K + kGroup - 1) / kGroup, full_groups = K / kGroup;
  // Flipping the top bit maps int8 to A + 128 (uint8) and uint8 to A - 128 (int8).
  const bool flip = A.is_signed == s.a_unsigned;
  const uint32_t mask = flip ? 0x80808080u : 0u;
  const int32_t shift = !flip ? 0 : (A.is_signed ? 128 : -128);
  for (int64_t p0 = row_begin; p0 < row_end; p0 += s.mr) {
    const int64_t rows = std::min<int64_t>(s.mr, row_end - p0);
    uint8_t* panel = dst + p0 * k_groups * kGroup;
    int64_t done_groups = 0;  // packed (and summed) by the vector path
    for (int64_t r = 0; r < rows; ++r) row_sums[p0 + r] = 0;
#if defined(__SSE2__)
    if (rows % 4 == 0 && s.a_unsigned) {
      done_groups = PackRowsBy4Sse2(A, p0, rows, full_groups & ~int64_t{3}, mask, panel, row_sums);
    }
#endif
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* src = static_cast<const uint8_t*>(A.data) + (p0 + r) * A.ld;
      uint8_t* out = panel + r * kGroup;
      const int64_t step = rows * kGroup;
      for (int64_t g = done_groups; g < full_groups; ++g) {
        uint32_t v;
        std::memcpy(&v, src + g * kGroup, kGroup);
        v ^= mask;
        std::memcpy(out + g * step, &v, kGroup);
      }
      if (full_groups < k_groups) {  // zero-padded tail group
        uint8_t tail[kGroup] = {0, 0, 0, 0};
        for (int64_t k = full_groups * kGroup; k < K; ++k)
          tail[k - full_groups * kGroup] = src[k] ^ static_cast<uint8_t>(mask);
        std::memcpy(out + full_groups * step, tail, kGroup);
      }
      int32_t sum = 0;  // of the raw values not summed above; |sum| <= K * 128
      if (A.is_signed) {
        for (int64_t k = done_groups * kGroup; k < K; ++k) sum += static_cast<int8_t>(src[k]);
      } else {
        for (int64_t k = done_groups * kGroup; k < K; ++k) sum += src[k];
      }
      row_sums[p0 + r] += sum + shift * static_cast<int32_t>(K - done_groups * kGroup);
    }
  }
}

}  // namespace octet::gemm

namespace octet {

PackedB PackB(const void* b, bool b_signed, int64_t K, int64_t N, int64_t ldb, Isa isa) {
  PackedB packed;
  PackBInto(packed, b, b_signed, K, N, ldb, isa);
  return packed;
}

void PackBInto(PackedB& packed, const void* b, bool b_signed, int64_t K, int64_t N, int64_t ldb,
               Isa isa) {
  OCTET_CHECK(K >= 0 && N >= 0, "int8 GEMM: negative B shape K=", K, " N=", N);
  OCTET_CHECK(ldb >= N, "int8 GEMM: B leading dimension ", ldb, " < N=", N);
  OCTET_CHECK(K <= kGemmMaxK, "int8 GEMM: K=", K, " exceeds ", kGemmMaxK,
              ", the largest K whose int32 accumulation is exact for all 8-bit inputs");
  OCTET_CHECK(b != nullptr || K * N == 0, "int8 GEMM: B data is null");
  OCTET_CHECK(IsaSupported(isa), "int8 GEMM: instruction set ", IsaName(isa),
              " cannot run here: ", IsaUnsupportedReason(isa));
  const gemm::TileShape s = gemm::TileShapeFor(isa);
  packed.isa = isa;
  packed.K = K;
  packed.N = N;
  packed.b_signed = b_signed;
  packed.nr = s.nr;
  packed.k_groups = (K + gemm::kGroup - 1) / gemm::kGroup;
  const int64_t panels = (N + s.nr - 1) / s.nr;
  const int64_t panel_bytes = packed.k_groups * s.nr * gemm::kGroup;
  if (panels * panel_bytes > 0 && packed.data.numel() == panels * panel_bytes) {
    std::memset(packed.data.raw(), 0, static_cast<size_t>(panels * panel_bytes));  // the padding
  } else {
    packed.data = Tensor(DType::kInt8, {panels * panel_bytes});  // zero-filled: the padding
  }
  packed.col_sums.assign(panels * s.nr, 0);
  int8_t* out = packed.data.data<int8_t>();
  const uint8_t flip = b_signed ? 0 : 0x80;  // uint8 B is stored as B - 128
  const int64_t nr = s.nr, group_bytes = nr * gemm::kGroup;
  int32_t* col_sums = packed.col_sums.data();
#if defined(__x86_64__) || defined(_M_X64)
  // Summed from the packed panels afterwards (2 vpdpbusd per group of 32 columns).
  const bool sum_packed = isa == Isa::kAvx512Vnni;
#else
  const bool sum_packed = false;
#endif
  for (int64_t k = 0; k < K && !sum_packed; ++k) {
    const uint8_t* row = static_cast<const uint8_t*>(b) + k * ldb;
    for (int64_t n = 0; n < N; ++n) col_sums[n] += static_cast<int8_t>(row[n] ^ flip);
  }
  // Row k is byte k % 4 of every column's 4-byte group (k / 4) in each panel.
  for (int64_t g = 0; g < packed.k_groups; ++g) {
    const int64_t k0 = g * gemm::kGroup, group_rows = std::min<int64_t>(gemm::kGroup, K - k0);
    int8_t* group = out + g * group_bytes;
    int64_t n0 = 0;
#if defined(__SSE2__)
    if (group_rows == gemm::kGroup && nr % 16 == 0) {
      // 16 columns x 4 rows at a time: interleave bytes, then byte pairs, into 16
      // 4-byte groups (64 contiguous bytes of the panel).
      const __m128i flip_bytes = _mm_set1_epi8(static_cast<char>(flip));
      const uint8_t* rows = static_cast<const uint8_t*>(b) + k0 * ldb;
      for (; n0 + 16 <= N; n0 += 16) {
        auto load = [&](int r) {
          return _mm_xor_si128(
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows + r * ldb + n0)), flip_bytes);
        };
        const __m128i r0 = load(0), r1 = load(1), r2 = load(2), r3 = load(3);
        const __m128i t0 = _mm_unpacklo_epi8(r0, r1), t1 = _mm_unpackhi_epi8(r0, r1);
        const __m128i t2 = _mm_unpacklo_epi8(r2, r3), t3 = _mm_unpackhi_epi8(r2, r3);
        auto* dst =
            reinterpret_cast<__m128i*>(group + (n0 / nr) * panel_bytes + (n0 % nr) * gemm::kGroup);
        _mm_storeu_si128(dst + 0, _mm_unpacklo_epi16(t0, t2));
        _mm_storeu_si128(dst + 1, _mm_unpackhi_epi16(t0, t2));
        _mm_storeu_si128(dst + 2, _mm_unpacklo_epi16(t1, t3));
        _mm_storeu_si128(dst + 3, _mm_unpackhi_epi16(t1, t3));
      }
    }
#endif
    for (int64_t r = 0; r < group_rows; ++r) {
      const uint8_t* row = static_cast<const uint8_t*>(b) + (k0 + r) * ldb;
      for (int64_t n = n0; n < N; ++n)
        group[(n / nr) * panel_bytes + (n % nr) * gemm::kGroup + r] =
            static_cast<int8_t>(row[n] ^ flip);
    }
  }
#if defined(__x86_64__) || defined(_M_X64)
  if (sum_packed) gemm::ColumnSumsAvx512Vnni(out, panels, packed.k_groups, col_sums);
#endif
}

}  // namespace octet
