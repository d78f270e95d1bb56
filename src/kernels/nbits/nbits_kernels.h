// The panel kernels behind kernels/nbits/nbits.h, one table per instruction
// set. A panel kernel computes the kNBitsPanel columns of one packed panel for
// 1..kNBitsRows rows and writes them to acc (rows x kNBitsPanel, before the bias).
#pragma once

#include <cstdint>

#include "kernels/nbits/nbits.h"

namespace octet::nbits {

inline constexpr int kNBitsRows = 4;

// Rows of A for the kInt8 arithmetic, quantized per block: pairs holds
// q_a[2p] and q_a[2p + 1] as the low and high int16 of one int32 (k_pairs per
// row), sums the per-block sums of q_a and scales s_a (k_blocks per row).
struct QuantizedRows {
  const int32_t* pairs;
  const int32_t* sums;
  const float* scales;
};

using FloatPanelFn = void (*)(const PackedNBits& w, int64_t panel, int rows, const float* a,
                              int64_t lda, float* acc);
using Int8PanelFn = void (*)(const PackedNBits& w, int64_t panel, int rows,
                             const QuantizedRows& a, float* acc);

struct PanelKernels {
  FloatPanelFn float_panel;
  Int8PanelFn int8_panel;
};

extern const PanelKernels kScalarPanels;
#if defined(__x86_64__) || defined(_M_X64)
extern const PanelKernels kAvx2Panels;
#endif

}  // namespace octet::nbits
