// Internal to Int8Conv (conv.cc): im2col fused into the packing of the GEMM's
// B operand. A block of output pixels [p0, p0 + count) of one (batch, group)
// is written straight into the micro-kernel's B panels (gemm_kernels.h: panels
// of nr columns, group g of a panel holds G bytes k = G g .. G g + G - 1 per
// column, G the kernel's k group of 4 or 2; or the paired words of the
// vpmaddwd kernels), k = (input channel, ky, kx) as in the weights, with the
// column sums (of the B-domain values, without the paired + 128). Values
// are in the B domain, x ^ flip: int8 for TileAvx512Vnni and the other
// kernels (uint8 x stored as x - 128, flip = 0x80), uint8 for
// gemm_s8u8_8x32c4_avx512vnni (int8 x stored as x + 128); the padding holds
// the x zero point in that domain, so it contributes 0.
//
// The same code (conv_pack_impl.h) is compiled for the baseline and with
// AVX-512 VNNI flags; both write the same bytes.
#pragma once

#include <cstdint>

#include "kernels/int8/conv_reference.h"
#include "kernels/int8/conv_requant.h"

namespace octet::conv {

struct Im2colBlock {
  const ConvGeometry* g;
  const uint8_t* x_group;  // the group's first input channel of this batch item
  int64_t k;               // in_channels / group * kernel_h * kernel_w
  int64_t p0, count;       // output pixels
  int64_t cols;            // count rounded up to a multiple of nr
  int nr;
  int k_group;   // 4 or 2 bytes of k per column in a group
  uint8_t flip;  // 0x80 when x's type differs from the B domain's, else 0
  int8_t pad;    // x zero point in the B domain
  // The group's phase planes (BuildPhasePlanesAvx512Vnni), or null to read x_group.
  const uint8_t* phases = nullptr;
  bool paired = false;  // the b_paired layout (gemm_kernels.h): k_group 2, nr 16 or 32
};

// Phase planes, the AVX-512 VNNI packer's view of a strided input: per input
// channel c and stride phase (ry, rx), plane row i, column j holds
// x[c][i * stride_h + ry][j * stride_w + rx], rows out_w bytes apart, so every
// tap reads one shifted run of a plane (conv_pack_impl.h). Bytes per plane:
inline int64_t PhasePlaneSize(const ConvGeometry& g) {
  return (g.in_h + g.stride_h - 1) / g.stride_h * g.out_w;
}

// Whether the packer takes the phase planes for g: not needed for stride 1 with
// in_w == out_w (x itself has row pitch out_w), and only when no tap reads a
// plane column at or past out_w (true for the usual padded strided layers).
inline bool UsesPhasePlanes(const ConvGeometry& g) {
  if (g.stride_h == 1 && g.stride_w == 1 && g.in_w == g.out_w) return false;
  for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
    const int64_t offset = kx * g.dilation_w - g.pad_left;
    const int64_t rx = ((offset % g.stride_w) + g.stride_w) % g.stride_w;
    const int64_t shift = (offset - rx) / g.stride_w;
    const int64_t phase_cols = (g.in_w - rx + g.stride_w - 1) / g.stride_w;
    if (shift > 0 && phase_cols > g.out_w) return false;
  }
  return true;
}

// Whether PackIm2colAvx2 packs a B layout from shifted runs (and phase planes): the
// paired vpmaddwd words or AVX-VNNI's 4-byte groups of 16 columns, without column sums.
inline bool UsesAvx2ShiftedRuns(int k_group, int nr, bool paired, bool column_sums) {
  return !column_sums && (paired || (k_group == 4 && nr == 16));
}

// Writes ceil(k / G) groups of cols / nr panels to packed_b (panel stride
// ceil(k / G) * nr * G bytes) and col_sum[j] = sum over k of the packed values
// of column j (j < count); col_sum may be null (no sums wanted). rows: G * cols
// bytes of scratch. PackIm2colAvx512Vnni takes G = 4 and nr = 32 only.
void PackIm2col(const Im2colBlock& b, int8_t* rows, int8_t* packed_b, int32_t* col_sum);
#if defined(__x86_64__) || defined(_M_X64)
// Fills the phase planes of `channels` input channels from x_group
// (channels * stride_h * stride_w * PhasePlaneSize(g) bytes), the rows that
// output pixels [p0, p0 + count) read; other rows, and plane columns at or past
// the phase's width, are left as they are: the packer never reads them.
void BuildPhasePlanesAvx512Vnni(const ConvGeometry& g, const uint8_t* x_group, int64_t channels,
                                int64_t p0, int64_t count, uint8_t* planes);
void PackIm2colAvx512Vnni(const Im2colBlock& b, int8_t* rows, int8_t* packed_b, int32_t* col_sum);
// PackIm2col compiled with AVX2 (the same bytes), for the AVX2-class micro-kernels;
// it packs shifted runs (reading phase planes when given) for the layouts
// UsesAvx2ShiftedRuns accepts.
void BuildPhasePlanesAvx2(const ConvGeometry& g, const uint8_t* x_group, int64_t channels,
                          int64_t p0, int64_t count, uint8_t* planes);
void PackIm2colAvx2(const Im2colBlock& b, int8_t* rows, int8_t* packed_b, int32_t* col_sum);

// The unsigned-B micro-tile (gemm_s8u8_8x32c4_avx512vnni's operands: a packed
// weight panel of `rows` <= 8 signed rows, a packed uint8 x panel of 32
// columns) over all of k, requantized in registers and stored as bytes:
//   y[r * ld + j] = requantize(sum_k a[r][k] * b[k][j] + bias[r], multipliers[r])
// for j < count (epilogue_impl.h's Requantize). Nothing past count is written.
struct RequantTile {
  const uint8_t* a = nullptr;  // weight panel (int8 bytes), first group
  const uint8_t* b = nullptr;  // x panel (uint8), first group
  int64_t k_groups = 0;
  ChannelRequant requant;  // from the tile's first row
  uint8_t* y = nullptr;
  int64_t ld = 0;     // bytes from one row's output to the next
  int64_t count = 0;  // columns stored, <= 32
};
void RequantTileAvx512Vnni(int rows, const RequantTile& t);
#endif

}  // namespace octet::conv
