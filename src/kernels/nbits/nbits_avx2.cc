// The AVX2 table of kernels/nbits/nbits_kernels.h (vpmaddubsw dot products).
#include "kernels/nbits/nbits_avx2_impl.h"

namespace octet::nbits {

constinit const PanelKernels kAvx2Panels = Avx2PanelKernels<false>();

}  // namespace octet::nbits
