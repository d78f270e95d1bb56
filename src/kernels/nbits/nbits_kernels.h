// The panel kernels behind kernels/nbits/nbits.h, one table per instruction
// set. A panel kernel computes `panels` (1..kNBitsGroup) consecutive panels of
// one group for 1..kNBitsRows rows and writes them to acc (row r, panel i,
// column j at acc[r * kNBitsAccRow + i * kNBitsPanel + j], before the bias).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/nbits/nbits.h"

namespace octet::nbits {

inline constexpr int kNBitsRows = 4;
inline constexpr int kNBitsAccRow = kNBitsGroup * kNBitsPanel;

// One panel's operands in the grouped layout: its bytes of k step s start at
// data + s * data_stride, column j's parameters of block b are at
// b * stride + j of scales (and of the zero points).
struct PanelOperands {
  const uint8_t* data;
  const float* scales;
  const uint8_t* zero_codes;  // null when the zero points are floats
  const float* zero_points;   // null when they are codes
  int64_t data_stride, stride;
};

inline PanelOperands OperandsOf(const PackedNBits& w, int64_t panel) {
  const int64_t first = panel / kNBitsGroup * kNBitsGroup, at = panel - first;
  const int64_t width = std::min<int64_t>(kNBitsGroup, w.panels - first);
  const int64_t params = first * w.k_blocks * kNBitsPanel + at * kNBitsPanel;
  return {w.data.data() + (first * w.k_steps + at) * kNBitsStepBytes,
          w.scales.data() + params,
          w.zero_codes.empty() ? nullptr : w.zero_codes.data() + params,
          w.zero_points.empty() ? nullptr : w.zero_points.data() + params,
          width * kNBitsStepBytes,
          width * kNBitsPanel};
}

// How far ahead of the k step being read the panel kernels fetch its group's bytes.
inline constexpr int64_t kPrefetchBytes = 8192;

// Prefetches `bytes` bytes from `offset` bytes past p into L1. The address may
// lie past the weights' end (a prefetch never faults), so it is formed as an
// integer.
inline void Prefetch(const void* p, int64_t offset, int64_t bytes) {
  const uintptr_t start = reinterpret_cast<uintptr_t>(p) + offset;
  for (int64_t line = 0; line < bytes; line += 64)
    __builtin_prefetch(reinterpret_cast<const void*>(start + line), 0, 3);
}

// Fetches the scales and zero codes of block b (its group's row of each).
inline void PrefetchBlock(const PanelOperands& op, int64_t b) {
  Prefetch(op.scales, b * op.stride * 4, op.stride * 4);
  if (op.zero_codes) Prefetch(op.zero_codes, b * op.stride, 1);
}

// Rows of A for the kFloat arithmetic: values holds row r at r x row_length,
// k_steps x 8 values readable (those past K 0), sums the per-block sums of a
// (k_blocks per row; nbits.h). scaled, when not null, holds the same rows with
// value k times 2^-kMaskedCodeExponent[k % 8], for a kernel that reads the codes
// masked in place (PanelKernels::reads_scaled_rows).
struct SummedRows {
  const float* values;
  int64_t row_length;
  const float* sums;
  const float* scaled = nullptr;
};

// Where code k % 8 lies in its column's int32 lane (nbits.h): masked in place,
// not shifted down, it converts to float(q) x 2^exponent (the last code, in bits
// 28-31, would make the lane negative and is shifted down). A scaled by
// 2^-exponent keeps each product a x q, and so every fma, exact, as long as the
// scaled value is a normal float (|a| >= kMinScaledExactly), zero or not finite.
inline constexpr int kMaskedCodeExponent[kNBitsStepK] = {0, 8, 16, 24, 4, 12, 20, 0};
inline constexpr float kMinScaledExactly = 0x1p-102f;
// Rows per call up to which the driver prepares SummedRows::scaled.
inline constexpr int64_t kScaledRowsMax = 2;

// Rows of A for the kInt8 arithmetic, quantized per block: values holds q_a
// (row_length = k_steps x 8 int8 per row, padding 0), sums the per-block sums
// of q_a and scales s_a (k_blocks per row).
struct QuantizedRows {
  const int8_t* values;
  int64_t row_length;
  const int32_t* sums;
  const float* scales;
};

// Four int8 of quantized A as one int32, for a broadcast to every lane.
inline int32_t Int32At(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// fetch: whether the call prefetches the panels' bytes ahead of its loop (where its
// kernel does at that row count): set for the driver's first tile of rows on these
// panels, which may read them from memory; the later tiles find them in the caches.
using FloatPanelFn = void (*)(const PackedNBits& w, int64_t panel, int panels, int rows,
                              const SummedRows& a, bool fetch, float* acc);
using Int8PanelFn = void (*)(const PackedNBits& w, int64_t panel, int panels, int rows,
                             const QuantizedRows& a, bool fetch, float* acc);

// Quantizes one block of A (count values) for the kInt8 arithmetic: q_a to q,
// their sum and s_a (nbits.h).
using QuantizeBlockFn = void (*)(const float* a, int64_t count, int8_t* q, int32_t* sum,
                                 float* scale);

struct PanelKernels {
  FloatPanelFn float_panel;
  Int8PanelFn int8_panel;
  QuantizeBlockFn quantize_block;
  // Whether float_panel reads SummedRows::scaled (when not null) for its one- and
  // two-row tiles.
  bool reads_scaled_rows;
};

void QuantizeBlockScalar(const float* a, int64_t count, int8_t* q, int32_t* sum, float* scale);

extern const PanelKernels kScalarPanels;
#if defined(__x86_64__) || defined(_M_X64)
extern const PanelKernels kAvx2Panels;
extern const PanelKernels kAvxVnniPanels;
extern const PanelKernels kAvx512Panels;
extern const PanelKernels kAvx512VnniPanels;
#endif

}  // namespace octet::nbits
