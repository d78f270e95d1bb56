// conv_pack_impl.h compiled with AVX-512 (wider vectorized copies and sums).
#include "kernels/int8/conv_pack_impl.h"

namespace octet::conv {

void PackIm2colAvx512(const Im2colBlock& b, int8_t* rows, int8_t* packed_b, int32_t* col_sum) {
  Pack(b, rows, packed_b, col_sum);
}

}  // namespace octet::conv
