// conv_pack_impl.h compiled with AVX-512 VNNI (masked row segments, column sums
// by vpdpbusd). Called only when Int8Conv runs the AVX-512 VNNI micro-kernel.

#include "kernels/int8/conv_pack_impl.h"

namespace octet::conv {

void BuildPhasePlanesAvx512Vnni(const ConvGeometry& g, const uint8_t* x_group, int64_t channels,
                                int64_t p0, int64_t count, uint8_t* planes) {
  BuildPhasePlanes(g, x_group, channels, p0, count, planes);
}

void PackIm2colAvx512Vnni(const Im2colBlock& b, int8_t* rows, int8_t* packed_b, int32_t* col_sum) {
  Pack(b, rows, packed_b, col_sum);
}

}  // namespace octet::conv
