// gemm_s8s8_4x16c4_neondot: the Arm dot-product micro-kernel (Armv8.2 SDOT,
// int8 x int8 -> int32, exact):
// up to 4 rows x 16 columns. Per group of 4 k: four 16-byte loads of packed B
// (4 columns x 4 k each) and one of A (4 rows x 4 k); sdot by lane multiplies
// each B vector with one row's 4 bytes. Built only on aarch64.
#include <arm_neon.h>

#include <cstring>
#include <utility>

#include "kernels/int8/gemm_finish_impl.h"
#include "kernels/simd_scalar.h"

namespace octet::gemm {

namespace {

constexpr int kCols = 16;
constexpr int kGroup = 4;
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

  // NEON's max/min keep NaN where x86's return the bound, so the sums finish
  // one lane at a time (simd::Scalar has the x86 semantics).
  int32_t sum[R][kCols];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < kVecs; ++v) vst1q_s32(sum[r] + v * 4, acc[r][v]);
  FinishTile<simd::Scalar, R, kCols>(t, sum);
}

}  // namespace

void TileNeonDot(int rows, const TileArgs& t) {
  ForCount<4>(rows, [&]<int R>() { Tile<R>(t); });
}

}  // namespace octet::gemm
