// The AVX-VNNI micro-kernels (VEX-encoded 256-bit vpdpbusd: Alder Lake and
// later Intel client cores, Zen 5 without AVX-512): up to 6 rows x 16 columns
// of int32 accumulators in ymm registers (12 accumulators + 2 B + 1 A of the 16
// registers).
//   gemm_u8s8_6x16c4_avxvnni  packed A unsigned, B signed
//   gemm_s8u8_6x16c4_avxvnni  packed A signed, B unsigned (the convolution's
//                             zero-point-free path, docs/conv.md)
#include <immintrin.h>

#include <cstring>

#include "kernels/int8/gemm_finish_impl.h"
#include "kernels/simd_avx2.h"

namespace octet::gemm {

namespace {

constexpr int kCols = 16;
constexpr int kGroup = 4;
constexpr int kVecs = kCols / 8;

inline __m256i BroadcastA(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_set1_epi32(v);
}

inline __m256i Load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// vpdpbusd's unsigned operand is B when kUnsignedB, else A.
template <bool kUnsignedB>
inline __m256i Dot(__m256i sum, __m256i av, __m256i bv) {
  return kUnsignedB ? _mm256_dpbusd_avx_epi32(sum, bv, av) : _mm256_dpbusd_avx_epi32(sum, av, bv);
}

template <int R, bool kUnsignedB>
void Tile(const TileArgs& t) {
  // Few rows: separate accumulator sets for consecutive groups hide latency.
  constexpr int U = R == 1 ? 4 : (R <= 3 ? 2 : 1);
  // Every loop over accumulators is fully unrolled: GCC 12 otherwise keeps the
  // array in memory and copies it between registers on every group.
  __m256i acc[U][R][kVecs];
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int v = 0; v < kVecs; ++v) acc[u][r][v] = _mm256_setzero_si256();

  const uint8_t* a = t.a;
  const int8_t* b = t.b;
  int64_t g = 0;
  for (; g + U <= t.k_groups; g += U) {
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u) {
      __m256i bv[kVecs];
#pragma GCC unroll 8
      for (int v = 0; v < kVecs; ++v) bv[v] = Load(b + (u * kCols + v * 8) * kGroup);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m256i av = BroadcastA(a + (u * R + r) * kGroup);
#pragma GCC unroll 8
        for (int v = 0; v < kVecs; ++v) acc[u][r][v] = Dot<kUnsignedB>(acc[u][r][v], av, bv[v]);
      }
    }
    a += U * R * kGroup;
    b += U * kCols * kGroup;
  }
  // Leftover groups. With U == 1 the loop above took them all, and compiling this
  // loop anyway makes GCC shuffle the accumulators between registers.
  for (; U > 1 && g < t.k_groups; ++g) {
    __m256i bv[kVecs];
#pragma GCC unroll 8
    for (int v = 0; v < kVecs; ++v) bv[v] = Load(b + v * 8 * kGroup);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256i av = BroadcastA(a + r * kGroup);
#pragma GCC unroll 8
      for (int v = 0; v < kVecs; ++v) acc[0][r][v] = Dot<kUnsignedB>(acc[0][r][v], av, bv[v]);
    }
    a += R * kGroup;
    b += kCols * kGroup;
  }

  __m256i sum[R][kVecs];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < kVecs; ++v) {
      sum[r][v] = acc[0][r][v];
#pragma GCC unroll 8
      for (int u = 1; u < U; ++u) sum[r][v] = _mm256_add_epi32(sum[r][v], acc[u][r][v]);
    }
  FinishTile<simd::Avx2, R, kVecs>(t, sum);
}

}  // namespace

void TileAvxVnni(int rows, const TileArgs& t) {
  ForCount<6>(rows, [&]<int R>() { Tile<R, false>(t); });
}

void TileAvxVnniUnsignedB(int rows, const TileArgs& t) {
  ForCount<6>(rows, [&]<int R>() { Tile<R, true>(t); });
}

}  // namespace octet::gemm
