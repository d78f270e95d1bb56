// The AVX-512BW table of kernels/nbits/nbits_kernels.h (vpmaddubsw dot products).
#include "kernels/nbits/nbits_avx512_impl.h"

namespace octet::nbits {

constinit const PanelKernels kAvx512Panels = Avx512PanelKernels<false>();

}  // namespace octet::nbits
