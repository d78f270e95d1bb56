// Internal to Int8Conv (conv.cc): im2col fused into the packing of the GEMM's
// B operand. A block of output pixels [p0, p0 + count) of one (batch, group)
// is written straight into the micro-kernel's B panels (gemm_pack.h: panels
// of nr columns, group g of a panel holds 4 bytes k = 4g..4g+3 per column),
// k = (input channel, ky, kx) as in the weights, with the column sums. Values
// are in the B domain (int8; uint8 x stored as x - 128, flip = 0x80) and the
// padding holds the x zero point in that domain, so it contributes 0.
//
// The same code (conv_pack_impl.h) is compiled for the baseline and with
// AVX-512 VNNI flags; both write the same bytes.
#pragma once

#include <cstdint>

#include "kernels/int8/conv_reference.h"

namespace octet::conv {

struct Im2colBlock {
  const ConvGeometry* g;
  const uint8_t* x_group;  // the group's first input channel of this batch item
  int64_t k;               // in_channels / group * kernel_h * kernel_w
  int64_t p0, count;       // output pixels
  int64_t cols;            // count rounded up to a multiple of nr
  int nr;
  uint8_t flip;  // 0x80 for uint8 x, 0 for int8
  int8_t pad;    // x zero point in the B domain
};

// Writes ceil(k / 4) groups of cols / nr panels to packed_b (panel stride
// ceil(k / 4) * nr * 4 bytes) and col_sum[j] = sum over k of the packed values
// of column j (j < count). rows: 4 * cols bytes of scratch.
void PackIm2col(const Im2colBlock& b, int8_t* rows, int8_t* packed_b, int32_t* col_sum);
#if defined(__x86_64__) || defined(_M_X64)
void PackIm2colAvx512Vnni(const Im2colBlock& b, int8_t* rows, int8_t* packed_b, int32_t* col_sum);
#endif

}  // namespace octet::conv
