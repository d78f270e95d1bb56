// gemm_i16s8_4x16c2_scalar: the portable micro-kernel over the AVX2 kernel's
// layouts (int16 A, int8 pairs of B, 16 columns); the fallback on any CPU.
#include <cstring>

#include "kernels/int8/gemm_finish_impl.h"
#include "kernels/simd_scalar.h"

namespace octet::gemm {

namespace {

constexpr int kCols = 16;

template <int R>
void Tile(const TileArgs& t) {
  int32_t acc[R][kCols] = {};
  for (int64_t g = 0; g < t.k_groups; ++g) {
    const int8_t* b = t.b + g * kCols * 2;
    for (int r = 0; r < R; ++r) {
      int16_t a[2];
      std::memcpy(a, t.a + (g * R + r) * 4, sizeof(a));
      for (int j = 0; j < kCols; ++j) {
        const int32_t dot = a[0] * b[2 * j] + a[1] * b[2 * j + 1];
        acc[r][j] =
            static_cast<int32_t>(static_cast<uint32_t>(acc[r][j]) + static_cast<uint32_t>(dot));
      }
    }
  }
  FinishTile<simd::Scalar, R, kCols>(t, acc);
}

}  // namespace

void TileScalar(int rows, const TileArgs& t) {
  ForCount<4>(rows, [&]<int R>() { Tile<R>(t); });
}

}  // namespace octet::gemm
