// The NHWC indirect convolution's AVX-512 VNNI parts (conv_indirect.h): the
// micro-tile (8 pixels x 8-48 channels in zmm / ymm accumulators, one vpdpbusd
// per pixel, vector and channel group), its requantizing epilogue and the NCHW ->
// NHWC transpose of x. The requantization is requantize.h's, op for op
// (epilogue_impl.h).

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/int8/conv_indirect.h"
#include "kernels/int8/epilogue_impl.h"
#include "kernels/int8/interleave_avx512_inline.h"
#include "kernels/simd_avx512.h"

namespace octet::conv {

namespace {

using Requant = epilogue::Requant<simd::Avx512>;

constexpr int kPixels = static_cast<int>(kIndirectPixels);

// Requantized bytes of 8 pixels x 16 channels (q[r]: pixel r) transposed to
// 8 bytes per channel and stored to y + c * ld for channels c < channels,
// the first count bytes of each.
[[gnu::always_inline]] inline void StoreBytes(const __m512i q[kPixels], bool is_signed, uint8_t* y,
                                              int64_t ld, int64_t channels, int64_t count) {
  // Within 128-bit lane l, which holds channels 4l..4l+3 throughout: z0 has
  // pixels 0, 4, 2, 6 and z1 pixels 1, 5, 3, 7, 4 bytes each (the packs' lane
  // order); the byte unpacks pair pixels 0-1 and 4-5 (a) and 2-3 and 6-7 (b)
  // per channel, the word unpacks give each channel's pixels 0-3 and 4-7 as
  // dwords, and the dword unpacks put a channel's 8 pixels in one qword: i
  // holds channels 4l and 4l + 1, j 4l + 2 and 4l + 3. All in-lane shuffles.
  const __m512i z0 = NarrowToLaneBytes(q[0], q[4], q[2], q[6], is_signed);
  const __m512i z1 = NarrowToLaneBytes(q[1], q[5], q[3], q[7], is_signed);
  const __m512i a = _mm512_unpacklo_epi8(z0, z1), b = _mm512_unpackhi_epi8(z0, z1);
  const __m512i g = _mm512_unpacklo_epi16(a, b), h = _mm512_unpackhi_epi16(a, b);
  const __m512i i = _mm512_unpacklo_epi32(g, h), j = _mm512_unpackhi_epi32(g, h);
  if (count == kPixels) {
    const __m128i lanes[8] = {_mm512_castsi512_si128(i),       _mm512_castsi512_si128(j),
                              _mm512_extracti32x4_epi32(i, 1), _mm512_extracti32x4_epi32(j, 1),
                              _mm512_extracti32x4_epi32(i, 2), _mm512_extracti32x4_epi32(j, 2),
                              _mm512_extracti32x4_epi32(i, 3), _mm512_extracti32x4_epi32(j, 3)};
    // lanes[k] holds channels 2k and 2k + 1 (all 16 with no test when channels is 16)
    const int lanes_stored = channels == 16 ? 8 : static_cast<int>((channels + 1) / 2);
    for (int k = 0; k < lanes_stored; ++k) {
      _mm_storel_epi64(reinterpret_cast<__m128i*>(y + 2 * k * ld), lanes[k]);
      if (channels == 16 || 2 * k + 1 < channels)
        _mm_storeh_pi(reinterpret_cast<__m64*>(y + (2 * k + 1) * ld), _mm_castsi128_ps(lanes[k]));
    }
    return;
  }
  alignas(64) uint8_t buffer[2][64];
  _mm512_store_si512(buffer[0], i);
  _mm512_store_si512(buffer[1], j);
  for (int64_t ch = 0; ch < channels; ++ch) {
    // channel ch = 4l + 2s + e is in register s (i, j), lane l, qword e
    const int64_t s = (ch >> 1) & 1, lane = ch >> 2, e = ch & 1;
    std::memcpy(y + ch * ld, &buffer[s][lane * 16 + e * 8], count);
  }
}

// kVectors zmm of 16 channels and kHalf ymm of 8, for the first kRows pixels
// (t.count <= kRows): a tail of 1-4 pixels (the last tile of a 13 x 13 output
// has 1) does not pay for 8.
template <int kVectors, int kHalf, int kRows>
void Tile(const IndirectTile& t) {
  static_assert(kRows >= 1 && kRows <= kPixels);
  constexpr int kWidth = 16 * kVectors + 8 * kHalf;
  // The sums start at the channels' biases. Every loop over acc's indices
  // is unrolled, so GCC keeps acc in registers: one loop left rolled made it
  // a stack array, stored and reloaded around the accumulation of every tile.
  __m512i acc[kPixels][kVectors + 1];  // the last one unused without kHalf
  __m256i acc_half[kPixels];
#pragma GCC unroll 4
  for (int v = 0; v < kVectors; ++v) {
    const __m512i bias = _mm512_loadu_si512(t.requant.bias + v * 16);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) acc[r][v] = bias;
  }
  const __m256i bias_half =
      kHalf ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.requant.bias + kVectors * 16))
            : _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) acc_half[r] = bias_half;
  const uint8_t* w = t.w;
  const int64_t run_bytes = 4 * t.run_groups;
  for (int64_t run = 0; run < t.runs; ++run) {
    const uint8_t* row[kRows];
    for (int r = 0; r < kRows; ++r) row[r] = t.pixels[r] + t.run_offsets[run];
    for (int64_t off = 0; off < run_bytes; off += 4, w += kWidth * 4) {
      __m512i wv[kVectors + 1];
#pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v) wv[v] = _mm512_loadu_si512(w + v * 64);
      const __m256i w_half =
          kHalf ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + kVectors * 64))
                : _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        int32_t bytes;
        std::memcpy(&bytes, row[r] + off, 4);
        const __m512i xb = _mm512_set1_epi32(bytes);
#pragma GCC unroll 4
        for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], xb, wv[v]);
        if (kHalf)
          acc_half[r] = _mm256_dpbusd_epi32(acc_half[r], _mm512_castsi512_si256(xb), w_half);
      }
    }
  }
  if (kHalf) {
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) acc[r][kVectors] = _mm512_zextsi256_si512(acc_half[r]);
  }
  // The epilogue loops are unrolled: acc is indexed by constants.
  if (t.requant.multipliers == nullptr) {  // int32 output
#pragma GCC unroll 4
    for (int v = 0; v < kVectors + kHalf; ++v) {
      const int64_t channels = std::min<int64_t>(t.channels - v * 16, 16);
      alignas(64) int32_t sums[kPixels][16];
      for (int r = 0; r < kRows; ++r) _mm512_store_si512(sums[r], acc[r][v]);
      auto* y = static_cast<int32_t*>(t.y) + v * 16 * t.ld;
      for (int64_t ch = 0; ch < channels; ++ch)
        for (int64_t r = 0; r < t.count; ++r) y[ch * t.ld + r] = sums[r][ch];
    }
    return;
  }
  const Requant requant(t.requant.lo, t.requant.hi, t.requant.zero_point);
#pragma GCC unroll 4
  for (int v = 0; v < kVectors + kHalf; ++v) {
    const int64_t channels = std::min<int64_t>(t.channels - v * 16, 16);
    if (channels <= 0) break;
    const __m512 multiplier = _mm512_loadu_ps(t.requant.multipliers + v * 16);
    __m512i q[kPixels];
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r)
      q[r] = epilogue::Requantize<simd::Avx512>(acc[r][v], multiplier, requant);
    for (int r = kRows; r < kPixels; ++r) q[r] = q[0];  // transposed along, never stored
    StoreBytes(q, t.requant.signed_output, static_cast<uint8_t*>(t.y) + v * 16 * t.ld, t.ld,
               channels, t.count);
  }
}

// 4 x 4 dword transposes within each 128-bit lane of m[q..q+3], for q = 0, 4,
// .. < n: u[q + k] holds dword k of m[q], m[q + 1], m[q + 2], m[q + 3].
[[gnu::always_inline]] inline void TransposeDwordQuads(const __m512i* m, int n, __m512i* u) {
  for (int q = 0; q < n; q += 4) TransposeDwords4<Zmm>(m[q], m[q + 1], m[q + 2], m[q + 3], u + q);
}

// Stores the 16 pixels of a 16 x group_count dword matrix (m[j]: group
// g0 + j, 128-bit lane l and dword k holding pixel pixel0 + lane_pixels * l
// + k; m[j] for j >= group_count are 0) as group_count dwords per pixel at
// nhwc + pixel * cp; only pixels before `end` are stored.
template <int kVectors>
[[gnu::always_inline]] inline void StoreGroupColumns(const __m512i* m, int64_t group_count,
                                                     int64_t pixel0, int64_t lane_pixels,
                                                     int64_t end, int64_t cp, uint8_t* nhwc) {
  static_assert(kVectors == 4 || kVectors == 8 || kVectors == 16);
  auto at = [&](int l, int k) { return nhwc + (pixel0 + lane_pixels * l + k) * cp; };
  auto stored = [&](int l, int k) { return pixel0 + lane_pixels * l + k < end; };
  __m512i u[kVectors];
  if constexpr (kVectors == 4) {
    // A 4 x 16 transpose: each 128-bit lane one pixel's groups.
    TransposeDwordQuads(m, 4, u);
    const __mmask8 group_mask = static_cast<__mmask8>((1u << group_count) - 1);
    for (int k = 0; k < 4; ++k) {
      const __m128i lanes[4] = {_mm512_castsi512_si128(u[k]), _mm512_extracti32x4_epi32(u[k], 1),
                                _mm512_extracti32x4_epi32(u[k], 2),
                                _mm512_extracti32x4_epi32(u[k], 3)};
      for (int l = 0; l < 4; ++l) {
        if (stored(l, k)) _mm_mask_storeu_epi32(at(l, k), group_mask, lanes[l]);
      }
    }
  } else if constexpr (kVectors == 8) {
    // An 8 x 16 transpose: a pixel's groups in two 128-bit lanes.
    TransposeDwordQuads(m, 8, u);
    // u[4q + k], lane l: groups 4q..4q+3 of lane l's pixel k; lo / hi: lanes 0, 2 / 1, 3.
    const __mmask8 group_mask = static_cast<__mmask8>((1u << group_count) - 1);
    for (int k = 0; k < 4; ++k) {
      const __m512i lo = _mm512_shuffle_i32x4(u[k], u[4 + k], 0x88);  // l = 0, 2
      const __m512i hi = _mm512_shuffle_i32x4(u[k], u[4 + k], 0xDD);  // l = 1, 3
      const __m512i order = _mm512_setr_epi64(0, 1, 4, 5, 2, 3, 6, 7);
      const __m512i pixels[2] = {_mm512_permutexvar_epi64(order, lo),
                                 _mm512_permutexvar_epi64(order, hi)};
      for (int l = 0; l < 4; ++l) {  // 256-bit half l / 2 of pixels[l % 2]
        if (!stored(l, k)) continue;
        const __m256i groups8 = l < 2 ? _mm512_castsi512_si256(pixels[l % 2])
                                      : _mm512_extracti64x4_epi64(pixels[l % 2], 1);
        _mm256_mask_storeu_epi32(at(l, k), group_mask, groups8);
      }
    }
  } else {
    // A 16 x 16 transpose.
    TransposeDwordQuads(m, 16, u);
    // u[4q + k], lane l: groups 4q..4q+3 of lane l's pixel k.
    const __mmask16 group_mask = static_cast<__mmask16>((1u << group_count) - 1);
    for (int k = 0; k < 4; ++k) {
      const __m512i v0 = _mm512_shuffle_i32x4(u[k], u[4 + k], 0x88);
      const __m512i v1 = _mm512_shuffle_i32x4(u[k], u[4 + k], 0xDD);
      const __m512i w0 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0x88);
      const __m512i w1 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0xDD);
      const __m512i columns[4] = {
          _mm512_shuffle_i32x4(v0, w0, 0x88), _mm512_shuffle_i32x4(v1, w1, 0x88),
          _mm512_shuffle_i32x4(v0, w0, 0xDD), _mm512_shuffle_i32x4(v1, w1, 0xDD)};
      for (int l = 0; l < 4; ++l) {
        if (stored(l, k)) _mm512_mask_storeu_epi32(at(l, k), group_mask, columns[l]);
      }
    }
  }
}

// One step's block of 16 channel groups (g0 onward, group_count of them) of
// ToNhwc, as kVectors-wide dword transposes (4, 8 or 16: group_count rounded up).
// Byte and word unpacks of a group's 4 channel rows give the group's 4 bytes of
// each pixel as dwords: in a 64-pixel step quads[j][q], lane l holding pixels
// 16 l + 4 q .. + 3; in a 16-pixel step m[j], lane l pixels 4 l .. + 3. A dword
// transpose over the groups then gives each of those pixels' bytes.
template <bool kFlip, int kVectors>
void TransposeBlock(const uint8_t* x, int64_t channels, int64_t channel_stride, int64_t p,
                    int64_t count, __mmask64 pixel_mask, bool wide, int64_t g0, int64_t group_count,
                    uint8_t flip, int64_t cp, uint8_t* nhwc) {
  const __m512i flip_bytes = _mm512_set1_epi8(static_cast<char>(flip));
  auto load = [&](int64_t ch) {  // 0 past the channels
    if (ch >= channels) return _mm512_setzero_si512();
    const __m512i bytes = _mm512_maskz_loadu_epi8(pixel_mask, x + ch * channel_stride + p);
    return kFlip ? _mm512_xor_si512(bytes, flip_bytes) : bytes;
  };
  auto load16 = [&](int64_t ch) {  // the same for a 16-pixel step
    if (ch >= channels) return _mm_setzero_si128();
    const __m128i bytes =
        _mm_maskz_loadu_epi8(static_cast<__mmask16>(pixel_mask), x + ch * channel_stride + p);
    return kFlip ? _mm_xor_si128(bytes, _mm512_castsi512_si128(flip_bytes)) : bytes;
  };
  if (!wide) {
    __m512i m[kVectors];
#pragma GCC unroll 16
    for (int j = 0; j < kVectors; ++j) {
      if (j >= group_count) {
        m[j] = _mm512_setzero_si512();
        continue;
      }
      const int64_t c = 4 * (g0 + j);
      __m128i q[4];
      InterleaveRows4<Xmm>(load16(c), load16(c + 1), load16(c + 2), load16(c + 3), q);
      const __m256i first = _mm256_inserti128_si256(_mm256_castsi128_si256(q[0]), q[1], 1);
      const __m256i second = _mm256_inserti128_si256(_mm256_castsi128_si256(q[2]), q[3], 1);
      m[j] = _mm512_inserti64x4(_mm512_castsi256_si512(first), second, 1);
    }
    StoreGroupColumns<kVectors>(m, group_count, p, 4, count, cp, nhwc + 4 * g0);
    return;
  }
  __m512i quads[kVectors][4];
#pragma GCC unroll 16
  for (int j = 0; j < kVectors; ++j) {
    if (j >= group_count) {
      for (auto& quad : quads[j]) quad = _mm512_setzero_si512();
      continue;
    }
    const int64_t c = 4 * (g0 + j);
    InterleaveRows4<Zmm>(load(c), load(c + 1), load(c + 2), load(c + 3), quads[j]);
  }
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    __m512i m[kVectors];
#pragma GCC unroll 16
    for (int j = 0; j < kVectors; ++j) m[j] = quads[j][q];
    StoreGroupColumns<kVectors>(m, group_count, p + 4 * q, 16, count, cp, nhwc + 4 * g0);
  }
}

// ToNhwcAvx512Vnni with the flip known (0 for uint8 x: no XOR at all): 64
// pixels at a time while that many are left, then 16 at a time (a 64-pixel step
// costs four dword transposes however few pixels it has); 16 channel groups (64
// channels) at a time.
template <bool kFlip>
void ToNhwc(const uint8_t* x, int64_t channels, int64_t channel_stride, int64_t count, uint8_t flip,
            int64_t cp, uint8_t* nhwc) {
  const int64_t groups = cp / 4;
  for (int64_t p = 0; p < count;) {
    const bool wide = count - p >= 64;
    const int64_t n = std::min<int64_t>(wide ? 64 : 16, count - p);
    const __mmask64 pixel_mask = n == 64 ? ~__mmask64{0} : (__mmask64{1} << n) - 1;
    for (int64_t g0 = 0; g0 < groups; g0 += 16) {
      const int64_t group_count = std::min<int64_t>(16, groups - g0);
      if (group_count <= 4) {
        TransposeBlock<kFlip, 4>(x, channels, channel_stride, p, count, pixel_mask, wide, g0,
                                 group_count, flip, cp, nhwc);
      } else if (group_count <= 8) {
        TransposeBlock<kFlip, 8>(x, channels, channel_stride, p, count, pixel_mask, wide, g0,
                                 group_count, flip, cp, nhwc);
      } else {
        TransposeBlock<kFlip, 16>(x, channels, channel_stride, p, count, pixel_mask, wide, g0,
                                  group_count, flip, cp, nhwc);
      }
    }
    p += n;
  }
}

}  // namespace

namespace {

template <int kRows>
void TileRows(int64_t panel_width, const IndirectTile& t) {
  switch (panel_width) {
    case 8:
      return Tile<0, 1, kRows>(t);
    case 16:
      return Tile<1, 0, kRows>(t);
    case 24:
      return Tile<1, 1, kRows>(t);
    case 32:
      return Tile<2, 0, kRows>(t);
    case 40:
      return Tile<2, 1, kRows>(t);
    default:
      return Tile<3, 0, kRows>(t);
  }
}

}  // namespace

void IndirectTileAvx512Vnni(int64_t panel_width, const IndirectTile& t) {
  if (t.count == 1) return TileRows<1>(panel_width, t);
  if (t.count == 2) return TileRows<2>(panel_width, t);
  if (t.count <= 4) return TileRows<4>(panel_width, t);
  TileRows<kPixels>(panel_width, t);
}

void ToNhwcAvx512Vnni(const uint8_t* x, int64_t channels, int64_t channel_stride, int64_t count,
                      uint8_t flip, int64_t cp, uint8_t* nhwc) {
  if (flip != 0) return ToNhwc<true>(x, channels, channel_stride, count, flip, cp, nhwc);
  ToNhwc<false>(x, channels, channel_stride, count, flip, cp, nhwc);
}

}  // namespace octet::conv
