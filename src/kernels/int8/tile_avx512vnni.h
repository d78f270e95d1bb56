// The accumulation loop of the AVX-512 VNNI micro-tiles, written once for the
// GEMM tiles (gemm_avx512vnni.cc) and the convolution's requantizing tile
// (conv_gemm_avx512vnni.cc). Include only from files compiled with AVX-512 VNNI
// flags; internal linkage, so no copy can be mixed up with another file's.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace octet::gemm {
namespace {

// Columns of a packed B panel of the gemm_*_8x32c4_*avx512vnni kernels.
constexpr int kTileCols = 32;

// Accumulator sets for a tile of `rows` rows: few rows leave too few independent
// vpdpbusd chains to cover its latency, so consecutive groups go to separate
// sets, summed by the caller. Two sets give one row four chains, enough; more
// slow down a decoder's one-row tile, whose panel streams from memory
// (BM_GemmDecode, cold).
constexpr int AccumulatorSets(int rows) { return rows <= 2 ? 2 : 1; }

// acc[u][r][v] = the sum over k groups g (g % U == u) of row r's 4 bytes of A
// times the 4 bytes of columns 16v..16v+15 of B (vpdpbusd: exact).
// A: a packed panel (R rows x 4 bytes per group) or, kRowMajorA, rows a_ld
// apart; B: a packed panel of kTileCols columns (4 bytes each per group), the
// first 16 kVecs used. kUnsignedB: B is vpdpbusd's unsigned operand (else A);
// kFlipB: B is loaded XOR 0x80 (stored signed, used unsigned).
template <int R, int kVecs, int U, bool kUnsignedB, bool kRowMajorA, bool kFlipB>
[[gnu::always_inline]] inline void AccumulateTile(__m512i (&acc)[U][R][kVecs], const uint8_t* a,
                                                  int64_t a_ld, const void* b_panel,
                                                  int64_t k_groups) {
  constexpr int kGroupBytes = 4;
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  auto a_at = [&](const uint8_t* p, int r, int u) {  // row r, u groups on
    return kRowMajorA ? p + r * a_ld + u * kGroupBytes : p + (u * R + r) * kGroupBytes;
  };
  auto broadcast_a = [](const uint8_t* p) {
    int32_t v;
    std::memcpy(&v, p, sizeof(v));
    return _mm512_set1_epi32(v);
  };
  auto load_b = [&](const uint8_t* p) {
    const __m512i v = _mm512_loadu_si512(p);
    return kFlipB ? _mm512_xor_si512(v, flip) : v;
  };
  auto dot = [](__m512i sum, __m512i av, __m512i bv) {
    return kUnsignedB ? _mm512_dpbusd_epi32(sum, bv, av) : _mm512_dpbusd_epi32(sum, av, bv);
  };
  // Every loop over accumulators is fully unrolled: GCC 12 otherwise keeps the
  // array in memory and copies it between registers on every group.
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int v = 0; v < kVecs; ++v) acc[u][r][v] = _mm512_setzero_si512();
  const auto* b = static_cast<const uint8_t*>(b_panel);
  int64_t g = 0;
  for (; g + U <= k_groups; g += U) {
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u) {
      __m512i bv[kVecs];
#pragma GCC unroll 8
      for (int v = 0; v < kVecs; ++v) bv[v] = load_b(b + (u * kTileCols + v * 16) * kGroupBytes);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512i av = broadcast_a(a_at(a, r, u));
#pragma GCC unroll 8
        for (int v = 0; v < kVecs; ++v) acc[u][r][v] = dot(acc[u][r][v], av, bv[v]);
      }
    }
    a += U * (kRowMajorA ? 1 : R) * kGroupBytes;
    b += U * kTileCols * kGroupBytes;
  }
  // Leftover groups. With U == 1 the loop above took them all, and compiling this
  // loop anyway makes GCC shuffle the accumulators between registers.
  for (; U > 1 && g < k_groups; ++g) {
    __m512i bv[kVecs];
#pragma GCC unroll 8
    for (int v = 0; v < kVecs; ++v) bv[v] = load_b(b + v * 16 * kGroupBytes);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512i av = broadcast_a(a_at(a, r, 0));
#pragma GCC unroll 8
      for (int v = 0; v < kVecs; ++v) acc[0][r][v] = dot(acc[0][r][v], av, bv[v]);
    }
    a += (kRowMajorA ? 1 : R) * kGroupBytes;
    b += kTileCols * kGroupBytes;
  }
}

}  // namespace
}  // namespace octet::gemm
