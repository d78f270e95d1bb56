// Portable micro-kernel over the packed layout (gemm_pack.h); reference
// behaviour for the vector paths and the fallback on any CPU.
#include "kernels/int8/gemm_pack.h"

namespace octet::gemm {

void TileScalar(int rows, const TileArgs& t) {
  constexpr int kCols = 8;  // TileShapeFor(Isa::kScalar).nr
  for (int r = 0; r < rows; ++r) {
    uint32_t acc[kCols] = {};
    for (int64_t g = 0; g < t.k_groups; ++g) {
      const uint8_t* a = t.a + (g * rows + r) * kGroup;
      const int8_t* b = t.b + g * kCols * kGroup;
      for (int j = 0; j < kCols; ++j) {
        int32_t dot = 0;
        for (int i = 0; i < kGroup; ++i) dot += a[i] * b[j * kGroup + i];
        acc[j] += static_cast<uint32_t>(dot);
      }
    }
    int32_t* c = t.c + r * t.ldc;
    for (int j = 0; j < kCols; ++j) {
      uint32_t v = acc[j];
      if (t.accumulate) v += static_cast<uint32_t>(c[j]);
      if (t.row_neg_za) {
        v += static_cast<uint32_t>(t.row_neg_za[r]) * static_cast<uint32_t>(t.col_term[j]) +
             static_cast<uint32_t>(t.row_neg_sum[r]) * static_cast<uint32_t>(t.col_zb[j]);
      }
      if (t.col_offset) {
        v += static_cast<uint32_t>(t.col_offset[j]) + static_cast<uint32_t>(t.row_offset[r]);
      }
      c[j] = static_cast<int32_t>(v);
    }
  }
}

}  // namespace octet::gemm
