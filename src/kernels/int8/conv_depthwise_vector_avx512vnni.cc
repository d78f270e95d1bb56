// The channel-vector depthwise micro-tile (conv_depthwise.h): 16 consecutive
// output pixels x 16 channels in 16 zmm accumulators, acc[G][k] with 128-bit
// lane l holding pixel 4 l + G and dword j channel 4 j + k, and its
// requantizing epilogue, which transposes the bytes to 16 pixels per channel
// for NCHW stores. The requantization is requantize.h's, op for op
// (epilogue_impl.h).

#include <immintrin.h>

#include <algorithm>

#include "kernels/int8/conv_depthwise.h"
#include "kernels/int8/epilogue_impl.h"
#include "kernels/int8/interleave_avx512_inline.h"
#include "kernels/simd_avx512.h"

namespace octet::conv {

using Requant = epilogue::Requant<simd::Avx512>;

void DepthwiseVectorTileAvx512Vnni(const DepthwiseVectorTile& t) {
  static_assert(kDepthwiseVectorPixels == 16);
  // Dword 4 j + m of quads is 4 m + j: across lanes, a 4 x 4 dword
  // transpose (lane j <- dword j of every lane); transpose4x4 is the same
  // within each lane's 16 bytes.
  const __m512i quads = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m512i transpose4x4 = _mm512_set4_epi32(0x0F0B0703, 0x0E0A0602, 0x0D090501, 0x0C080400);
  const __m512i bias16 = _mm512_loadu_si512(t.requant.bias);
  const __m512 multipliers16 = _mm512_loadu_ps(t.requant.multipliers);
  // Accumulator k's channels (4 j + k in dword j of every lane): their
  // multipliers, and their biases as the sums' starting values.
  __m512 multiplier[4];
  __m512i acc[4][4];
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    const __m512i order = _mm512_add_epi32(_mm512_set4_epi32(12, 8, 4, 0), _mm512_set1_epi32(k));
    multiplier[k] = _mm512_permutexvar_ps(order, multipliers16);
    const __m512i bias = _mm512_permutexvar_epi32(order, bias16);
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) acc[g][k] = bias;
  }
  const uint8_t* base[16];
#pragma GCC unroll 16
  for (int r = 0; r < 16; ++r) base[r] = t.pixels[r] + t.pixel_offset;
  const uint8_t* w = t.w;
  for (int64_t tap = 0; tap < t.taps; ++tap, w += 4 * 64) {
    const int64_t off = t.tap_offsets[tap];
    __m512i wk[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) wk[k] = _mm512_loadu_si512(w + 64 * k);
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      // Lane l: pixel 4 l + g's 16 channels.
      __m512i x =
          _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(base[g] + off)));
      x = _mm512_inserti32x4(
          x, _mm_loadu_si128(reinterpret_cast<const __m128i*>(base[4 + g] + off)), 1);
      x = _mm512_inserti32x4(
          x, _mm_loadu_si128(reinterpret_cast<const __m128i*>(base[8 + g] + off)), 2);
      x = _mm512_inserti32x4(
          x, _mm_loadu_si128(reinterpret_cast<const __m128i*>(base[12 + g] + off)), 3);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) acc[g][k] = _mm512_dpbusd_epi32(acc[g][k], x, wk[k]);
    }
  }

  const Requant requant(t.requant.lo, t.requant.hi, t.requant.zero_point);
  // z[g], lane l (pixel 4 l + g): byte 4 k + j is channel 4 j + k.
  __m512i z[4];
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    __m512i q[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      // The empty asm keeps GCC 12's tree PRE from tying this use to the
      // loop, which then copies every accumulator between registers per tap.
      asm("" : "+v"(acc[g][k]));
      q[k] = epilogue::Requantize<simd::Avx512>(acc[g][k], multiplier[k], requant);
    }
    z[g] = NarrowToLaneBytes(q[0], q[1], q[2], q[3], t.requant.signed_output);
  }
  // e[k], lane l: dword m is pixel 4 l + m's channels 4 j + k (byte j).
  __m512i e[4];
  TransposeDwords4<Zmm>(z[0], z[1], z[2], z[3], e);
  const __mmask16 pixel_mask =
      t.count >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << t.count) - 1);
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    // In-lane bytes to dword j = pixels 4 l .. 4 l + 3 of channel 4 j + k, then
    // lanes to lane j = channel 4 j + k's 16 pixels.
    const __m512i y = _mm512_permutexvar_epi32(quads, _mm512_shuffle_epi8(e[k], transpose4x4));
    const __m128i channel[4] = {_mm512_castsi512_si128(y), _mm512_extracti32x4_epi32(y, 1),
                                _mm512_extracti32x4_epi32(y, 2), _mm512_extracti32x4_epi32(y, 3)};
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const int64_t c = 4 * j + k;
      if (c >= t.channels) continue;
      _mm_mask_storeu_epi8(t.y + c * t.ld, pixel_mask, channel[j]);
    }
  }
}

namespace {

// ToBlocked16Avx512Vnni with the flip known (0 for uint8 x: no XOR at all).
// Per 64 pixels: the byte and word unpacks of each 4-channel group's rows
// give q[g][j], whose 128-bit lane l holds pixels 16 l + 4 j .. + 3 as 4
// bytes each; a 4 x 4 dword transpose over the groups gives u[m], lane l =
// pixel 16 l + 4 j + m's 16 bytes; a 4 x 4 transpose of the lanes puts 4
// consecutive pixels in each vector, stored whole. The last 1-16 pixels take
// the same steps in xmm, without the lane transpose.
template <bool kFlip>
void ToBlocked16(const uint8_t* x, int64_t channels, int64_t channel_stride, int64_t count,
                 uint8_t flip, uint8_t* out) {
  const __m512i flip_bytes = _mm512_set1_epi8(static_cast<char>(flip));
  int64_t p = 0;
  for (; count - p > 16; p += 64) {
    const int64_t n = std::min<int64_t>(64, count - p);
    const __mmask64 pixel_mask = n == 64 ? ~__mmask64{0} : (__mmask64{1} << n) - 1;
    auto load = [&](int64_t ch) {  // 0 past the channels
      if (ch >= channels) return _mm512_setzero_si512();
      const __m512i bytes = _mm512_maskz_loadu_epi8(pixel_mask, x + ch * channel_stride + p);
      return kFlip ? _mm512_xor_si512(bytes, flip_bytes) : bytes;
    };
    __m512i q[4][4];
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g)
      InterleaveRows4<Zmm>(load(4 * g), load(4 * g + 1), load(4 * g + 2), load(4 * g + 3), q[g]);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      __m512i u[4];
      TransposeDwords4<Zmm>(q[0][j], q[1][j], q[2][j], q[3][j], u);
      const __m512i a = _mm512_shuffle_i32x4(u[0], u[1], 0x44);
      const __m512i b = _mm512_shuffle_i32x4(u[0], u[1], 0xEE);
      const __m512i c = _mm512_shuffle_i32x4(u[2], u[3], 0x44);
      const __m512i d = _mm512_shuffle_i32x4(u[2], u[3], 0xEE);
      const __m512i v[4] = {_mm512_shuffle_i32x4(a, c, 0x88), _mm512_shuffle_i32x4(a, c, 0xDD),
                            _mm512_shuffle_i32x4(b, d, 0x88), _mm512_shuffle_i32x4(b, d, 0xDD)};
#pragma GCC unroll 4
      for (int l = 0; l < 4; ++l) {  // pixels 16 l + 4 j .. + 3
        const int64_t first = 16 * l + 4 * j;
        uint8_t* const dst = out + (p + first) * 16;
        if (first + 4 <= n) {
          _mm512_storeu_si512(dst, v[l]);
        } else if (first < n) {
          const __mmask16 mask = static_cast<__mmask16>((1u << (4 * (n - first))) - 1);
          _mm512_mask_storeu_epi32(dst, mask, v[l]);
        }
      }
    }
  }
  if (p < count) {  // the last 1-16 pixels (a narrow image's whole row) in xmm
    const int64_t n = count - p;
    const __mmask16 pixel_mask = static_cast<__mmask16>((1u << n) - 1);
    auto load = [&](int64_t ch) {
      if (ch >= channels) return _mm_setzero_si128();
      const __m128i bytes = _mm_maskz_loadu_epi8(pixel_mask, x + ch * channel_stride + p);
      return kFlip ? _mm_xor_si128(bytes, _mm512_castsi512_si128(flip_bytes)) : bytes;
    };
    __m128i q[4][4];  // q[g][j]: pixels 4 j .. 4 j + 3, channels 4 g .. 4 g + 3
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g)
      InterleaveRows4<Xmm>(load(4 * g), load(4 * g + 1), load(4 * g + 2), load(4 * g + 3), q[g]);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      __m128i u[4];
      TransposeDwords4<Xmm>(q[0][j], q[1][j], q[2][j], q[3][j], u);
#pragma GCC unroll 4
      for (int m = 0; m < 4; ++m) {  // pixel 4 j + m's 16 bytes
        if (4 * j + m < n)
          _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (p + 4 * j + m) * 16), u[m]);
      }
    }
  }
}

}  // namespace

void ToBlocked16Avx512Vnni(const uint8_t* x, int64_t channels, int64_t channel_stride,
                           int64_t count, uint8_t flip, uint8_t* out) {
  if (flip != 0) return ToBlocked16<true>(x, channels, channel_stride, count, flip, out);
  ToBlocked16<false>(x, channels, channel_stride, count, flip, out);
}

}  // namespace octet::conv
