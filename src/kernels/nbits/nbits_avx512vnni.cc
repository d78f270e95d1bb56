// The AVX-512 VNNI table of kernels/nbits/nbits_kernels.h (vpdpbusd dot products).
#include "kernels/nbits/nbits_avx512_impl.h"

namespace octet::nbits {

constinit const PanelKernels kAvx512VnniPanels = Avx512PanelKernels<true>();

}  // namespace octet::nbits
