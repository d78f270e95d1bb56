// The AVX-VNNI table of kernels/nbits/nbits_kernels.h (VEX vpdpbusd dot products).
#include "kernels/nbits/nbits_avx2_impl.h"

namespace octet::nbits {

constinit const PanelKernels kAvxVnniPanels = Avx2PanelKernels<true>();

}  // namespace octet::nbits
