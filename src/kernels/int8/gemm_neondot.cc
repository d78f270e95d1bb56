// Arm dot-product micro-kernel (Armv8.2 SDOT, int8 x int8 -> int32, exact):
// up to 4 rows x 16 columns. Per group of 4 k: four 16-byte loads of packed B
// (4 columns x 4 k each) and one of A (4 rows x 4 k); sdot by lane multiplies
// each B vector with one row's 4 bytes. Built only on aarch64.
#include <arm_neon.h>

#include <cstring>
#include <utility>

#include "kernels/int8/gemm_pack.h"

namespace octet::gemm {

namespace {

constexpr int kCols = 16;  // TileShapeFor(Isa::kNeonDot).nr
constexpr int kVecs = kCols / 4;

// The A group of R rows (R * 4 bytes), zero-filled to 16 bytes when R < 4.
template <int R>
inline int8x16_t LoadA(const uint8_t* p) {
  if constexpr (R == 4) {
    return vld1q_s8(reinterpret_cast<const int8_t*>(p));
  } else {
    int8_t buf[16] = {};
    std::memcpy(buf, p, R * kGroup);
    return vld1q_s8(buf);
  }
}

template <int R>
void Tile(const TileArgs& t) {
  int32x4_t acc[R][kVecs];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < kVecs; ++v) acc[r][v] = vdupq_n_s32(0);

  const uint8_t* a = t.a;
  const int8_t* b = t.b;
  for (int64_t g = 0; g < t.k_groups; ++g) {
    int8x16_t bv[kVecs];
    for (int v = 0; v < kVecs; ++v) bv[v] = vld1q_s8(b + v * 16);
    const int8x16_t av = LoadA<R>(a);
    // The lane index of sdot must be a compile-time constant.
    [&]<int... r>(std::integer_sequence<int, r...>) {
      ((acc[r][0] = vdotq_laneq_s32(acc[r][0], bv[0], av, r),
        acc[r][1] = vdotq_laneq_s32(acc[r][1], bv[1], av, r),
        acc[r][2] = vdotq_laneq_s32(acc[r][2], bv[2], av, r),
        acc[r][3] = vdotq_laneq_s32(acc[r][3], bv[3], av, r)),
       ...);
    }
    (std::make_integer_sequence<int, R>{});
    a += R * kGroup;
    b += kCols * kGroup;
  }

  for (int r = 0; r < R; ++r) {
    int32_t* c = t.c + r * t.ldc;
    for (int v = 0; v < kVecs; ++v) {
      int32x4_t sum = acc[r][v];
      if (t.accumulate) sum = vaddq_s32(sum, vld1q_s32(c + v * 4));
      if (t.row_neg_za) {
        sum = vmlaq_n_s32(sum, vld1q_s32(t.col_term + v * 4), t.row_neg_za[r]);
        sum = vmlaq_n_s32(sum, vld1q_s32(t.col_zb + v * 4), t.row_neg_sum[r]);
      }
      if (t.col_offset) {
        sum = vaddq_s32(sum,
                        vaddq_s32(vld1q_s32(t.col_offset + v * 4), vdupq_n_s32(t.row_offset[r])));
      }
      vst1q_s32(c + v * 4, sum);
    }
  }
}

}  // namespace

void TileNeonDot(int rows, const TileArgs& t) {
  switch (rows) {
    case 1:
      return Tile<1>(t);
    case 2:
      return Tile<2>(t);
    case 3:
      return Tile<3>(t);
    default:
      return Tile<4>(t);
  }
}

}  // namespace octet::gemm
