// conv_pack_impl.h compiled with AVX2: the row builds, column sums and pair
// interleave vectorized 32 bytes wide. Called when Int8Conv runs an AVX2-class
// micro-kernel (AVX2, AVX-VNNI, AVX-512 without VNNI).

#include "kernels/int8/conv_pack_impl.h"

namespace octet::conv {

void BuildPhasePlanesAvx2(const ConvGeometry& g, const uint8_t* x_group, int64_t channels,
                          int64_t p0, int64_t count, uint8_t* planes) {
  BuildPhasePlanes(g, x_group, channels, p0, count, planes);
}

void PackIm2colAvx2(const Im2colBlock& b, int8_t* rows, int8_t* packed_b, int32_t* col_sum) {
  Pack(b, rows, packed_b, col_sum);
}

}  // namespace octet::conv
