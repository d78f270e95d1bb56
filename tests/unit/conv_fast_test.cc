// Int8Conv (kernels/int8/conv.h) against the naive int64 ConvReferenceS32 on
// every instruction-set path this CPU runs and on 1, 2 and 3 threads, over a
// generated grid of kernels, strides, dilations, pads, groupings, spatial
// sizes, channel counts around the tile widths and zero points at the type
// limits or 0 (symmetric weights); and its requantized output against docs/epilogue.md's formula
// applied to the reference accumulators.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "guarded_buffer.h"
#include "kernels/int8/conv.h"
#include "kernels/int8/conv_depthwise.h"
#include "kernels/int8/conv_pack.h"
#include "kernels/int8/conv_reference.h"
#include "kernels/int8/epilogue.h"

namespace octet {
namespace {

// docs/epilogue.md's 8-bit output, written out here: float(acc) * multiplier
// clamped to [lo, hi] (NaN -> lo), rounded half to even, + zero.
int32_t Requantized(int32_t acc, float multiplier, float lo, float hi, int32_t zero) {
  const float v = static_cast<float>(acc) * multiplier;
  const float clamped = std::isnan(v) ? lo : std::min(std::max(v, lo), hi);
  return static_cast<int32_t>(std::nearbyint(clamped)) + zero;
}

struct Case {
  ConvGeometry g;
  int64_t pad_bottom = 0, pad_right = 0;
  bool x_signed = false, w_signed = true;
  bool w_zero_per_channel = false;
  // 0: random, 1: at the type minimum, 2: at the type maximum, 3: w zero point 0
  // and x's random (symmetric weights: the AVX-512 VNNI unsigned-B path for int8
  // w, or the NHWC indirect path when dense and larger than 1x1), 4 / 5: w zero
  // point 0 and x's at the type minimum / maximum, the inputs at the other limit
  int zero_mode = 0;

  std::string Describe() const {
    std::ostringstream s;
    s << "N" << g.batch << " C" << g.in_channels << " M" << g.out_channels << " group" << g.group
      << " in" << g.in_h << "x" << g.in_w << " k" << g.kernel_h << "x" << g.kernel_w << " s"
      << g.stride_h << "," << g.stride_w << " d" << g.dilation_h << "," << g.dilation_w << " pads"
      << g.pad_top << "," << g.pad_left << "," << pad_bottom << "," << pad_right
      << (x_signed ? " s8" : " u8") << (w_signed ? "xs8" : "xu8")
      << (w_zero_per_channel ? " wzp/ch" : "") << " zeros" << zero_mode;
    return s.str();
  }
};

// Output sizes from the explicit pads (false when the dilated kernel does not fit).
bool Resolve(Case& c) {
  ConvGeometry& g = c.g;
  const int64_t eh = (g.kernel_h - 1) * g.dilation_h + 1, ew = (g.kernel_w - 1) * g.dilation_w + 1;
  const int64_t ph = g.in_h + g.pad_top + c.pad_bottom, pw = g.in_w + g.pad_left + c.pad_right;
  if (ph < eh || pw < ew) return false;
  g.out_h = (ph - eh) / g.stride_h + 1;
  g.out_w = (pw - ew) / g.stride_w + 1;
  return true;
}

int TypeMin(bool is_signed) { return is_signed ? -128 : 0; }
int TypeMax(bool is_signed) { return is_signed ? 127 : 255; }

struct Data {
  // x ends right before a guard page: sessions feed caller memory with no
  // padding after it to the convolution (ReadsOnlyInputBytes in ops/registry.h).
  std::unique_ptr<GuardedBuffer<uint8_t>> x;
  std::vector<uint8_t> w;
  std::vector<int32_t> x_zero, w_zero, bias;
  std::vector<float> multipliers;
  Int8ConvOperand x_op, w_op;
};

Data MakeData(const Case& c, std::mt19937& rng) {
  const ConvGeometry& g = c.g;
  Data d;
  std::uniform_int_distribution<int> byte(0, 255);
  d.x = std::make_unique<GuardedBuffer<uint8_t>>(g.batch * g.in_channels * g.in_h * g.in_w);
  GuardedBuffer<uint8_t>& x = *d.x;
  d.w.resize(g.out_channels * (g.in_channels / g.group) * g.kernel_h * g.kernel_w);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint8_t>(byte(rng));
  for (auto& v : d.w) v = static_cast<uint8_t>(byte(rng));
  const bool w_zero_0 = c.zero_mode >= 3;
  const bool at_min = c.zero_mode == 1 || c.zero_mode == 4;
  const bool at_max = c.zero_mode == 2 || c.zero_mode == 5;
  auto zero = [&](bool is_signed) {
    if (at_min) return TypeMin(is_signed);
    if (at_max) return TypeMax(is_signed);
    return std::uniform_int_distribution<int>(TypeMin(is_signed), TypeMax(is_signed))(rng);
  };
  d.x_zero = {zero(c.x_signed)};
  d.w_zero.resize(c.w_zero_per_channel ? g.out_channels : 1);
  for (auto& z : d.w_zero) z = w_zero_0 ? 0 : zero(c.w_signed);
  if (at_min || at_max) {  // the extreme products: inputs at the other limit
    const int x_far = at_min ? TypeMax(c.x_signed) : TypeMin(c.x_signed);
    // with w zero point 0 the largest |w - 0| is -128 (int8) or 255 (uint8)
    const bool w_at_min = w_zero_0 ? c.w_signed : at_max;
    const int w_far = w_at_min ? TypeMin(c.w_signed) : TypeMax(c.w_signed);
    for (size_t i = 0; i < x.size(); i += 2) x[i] = static_cast<uint8_t>(x_far);
    for (size_t i = 0; i < d.w.size(); i += 2) d.w[i] = static_cast<uint8_t>(w_far);
  }
  // Biases and multipliers scaled to the sums' spread (about 9500 sqrt(K) for
  // random bytes), so that most requantized outputs fall inside the output
  // range and a wrong sum shows: fixed ranges left a 3x3 depthwise
  // convolution's outputs clamped by the bias alone.
  const double k = static_cast<double>(g.in_channels / std::max<int64_t>(1, g.group)) *
                   static_cast<double>(g.kernel_h * g.kernel_w);
  const double spread = 9500.0 * std::sqrt(std::max(1.0, k));
  std::uniform_int_distribution<int32_t> bias(static_cast<int32_t>(-spread / 2),
                                              static_cast<int32_t>(spread / 2));
  std::uniform_real_distribution<float> mult(static_cast<float>(30 / spread),
                                             static_cast<float>(150 / spread));
  d.bias.resize(g.out_channels);
  d.multipliers.resize(g.out_channels);
  for (auto& b : d.bias) b = bias(rng);
  for (auto& m : d.multipliers) m = mult(rng);
  d.x_op = {x.data(), c.x_signed, d.x_zero.data(), false};
  d.w_op = {d.w.data(), c.w_signed, d.w_zero.data(), c.w_zero_per_channel};
  return d;
}

ThreadPool* Pool(int threads) {
  static ThreadPool one(1), two(2), three(3);
  return threads == 1 ? &one : (threads == 2 ? &two : &three);
}

constexpr int32_t kSentinel = 0x5A5A5A5A;

// How CheckCase requantizes: not at all, per output channel, or with one
// multiplier and an output clamp (an absorbed Relu / Clip).
enum class Requant { kNone, kPerChannel, kPerTensorClamped };

// Runs every path and thread count on one case; returns the number of failures.
int CheckCase(const Case& c, std::mt19937& rng, Requant mode) {
  const ConvGeometry& g = c.g;
  const Data d = MakeData(c, rng);
  const int64_t out_size = g.batch * g.out_channels * g.out_h * g.out_w;
  std::vector<int32_t> want(out_size);
  ConvReferenceS32(g, d.x_op, d.w_op, want.data());
  const DType out_type = c.x_signed ? DType::kInt8 : DType::kUInt8;
  const int32_t y_zero = c.x_signed ? -3 : 131;
  const bool requantize = mode != Requant::kNone, per_channel = mode == Requant::kPerChannel;
  // The clamped mode keeps [y_zero - 20, y_zero + 30] of the type's range.
  const int32_t y_min = per_channel ? INT32_MIN : y_zero - 20;
  const int32_t y_max = per_channel ? INT32_MAX : y_zero + 30;
  std::vector<uint8_t> want_q(out_size);
  if (requantize) {
    const float lo = static_cast<float>(std::max(TypeMin(c.x_signed), y_min) - y_zero);
    const float hi = static_cast<float>(std::min(TypeMax(c.x_signed), y_max) - y_zero);
    const int64_t pixels = g.out_h * g.out_w;
    for (int64_t i = 0; i < out_size; ++i) {
      const int64_t o = (i / pixels) % g.out_channels;
      const int32_t acc =
          static_cast<int32_t>(static_cast<uint32_t>(want[i]) + static_cast<uint32_t>(d.bias[o]));
      const float multiplier = d.multipliers[per_channel ? o : 0];
      want_q[i] = static_cast<uint8_t>(Requantized(acc, multiplier, lo, hi, y_zero));
    }
  }
  int failures = 0;
  for (Isa isa : SupportedIsas()) {
    const Int8Conv conv(g, d.w_op, isa);
    for (int threads : {1, 2, 3}) {
      std::vector<int32_t> got(out_size + 16, kSentinel);
      conv.Run(g, d.x_op, Epilogue{}, got.data(), Pool(threads));
      bool ok = std::equal(want.begin(), want.end(), got.begin());
      for (int i = 0; i < 16; ++i) ok = ok && got[out_size + i] == kSentinel;
      if (requantize) {
        Epilogue rq;
        rq.output = EightBitOutput(out_type);
        rq.multiplier = {d.multipliers.data(), per_channel};
        rq.bias = {d.bias.data(), true};
        rq.zero_point = y_zero;
        rq.y_min = y_min;
        rq.y_max = y_max;
        std::vector<uint8_t> got_q(out_size + 64, 0xA5);
        conv.Run(g, d.x_op, rq, got_q.data(), Pool(threads));
        ok = ok && std::equal(want_q.begin(), want_q.end(), got_q.begin());
        for (int i = 0; i < 64; ++i) ok = ok && got_q[out_size + i] == 0xA5;
      }
      if (!ok) {
        ADD_FAILURE() << c.Describe() << " on " << IsaName(isa) << " with " << threads
                      << " threads (path " << conv.path_name() << ")";
        ++failures;
      }
    }
  }
  return failures;
}

TEST(Int8Conv, GridAgainstReferenceOnEveryPathAndThreadCount) {
  std::mt19937 rng(2026);
  const std::vector<std::pair<int64_t, int64_t>> kernels = {{1, 1}, {3, 3}, {5, 5}, {7, 1}};
  // {in_channels, out_channels, group}: dense with output channels around the
  // row tiles (4, 6, 8) and K around groups of 4, grouped, depthwise (x1, x2).
  const std::vector<std::array<int64_t, 3>> groupings = {
      {3, 7, 1}, {5, 9, 1}, {8, 17, 1}, {6, 12, 2}, {12, 6, 3}, {7, 7, 7}, {5, 10, 5}};
  const std::vector<std::array<int64_t, 4>> pad_sets = {
      {0, 0, 0, 0}, {1, 1, 1, 1}, {2, 0, 1, 3}};  // top, left, bottom, right
  const std::vector<std::array<int64_t, 2>> sizes = {{7, 9}, {5, 13}, {11, 6}};
  int cases = 0, failures = 0, index = 0;
  for (auto [kh, kw] : kernels)
    for (int64_t stride : {1, 2})
      for (int64_t dilation : {1, 2})
        for (const auto& pads : pad_sets)
          for (const auto& [channels, out_channels, group] : groupings)
            for (int size_choice = 0; size_choice < 2; ++size_choice) {
              ++index;
              Case c;
              const auto& size = sizes[(index + size_choice) % sizes.size()];
              c.g.batch = 1 + index % 2;
              c.g.in_channels = channels;
              c.g.out_channels = out_channels;
              c.g.group = group;
              c.g.in_h = size[0];
              c.g.in_w = size[1];
              c.g.kernel_h = kh;
              c.g.kernel_w = kw;
              c.g.stride_h = stride;
              c.g.stride_w = index % 3 == 0 ? 1 : stride;  // unequal strides too
              c.g.dilation_h = dilation;
              c.g.dilation_w = dilation;
              c.g.pad_top = pads[0];
              c.g.pad_left = pads[1];
              c.pad_bottom = pads[2];
              c.pad_right = pads[3];
              c.x_signed = index % 4 >= 2;
              c.w_signed = index % 2 == 0;
              c.w_zero_per_channel = index % 5 < 2;
              c.zero_mode = std::array{1, 2, 3, 4, 0, 5, 0}[index % 7];
              if (!Resolve(c)) continue;
              ++cases;
              failures += CheckCase(c, rng, index % 3 == 0 ? Requant::kPerChannel : Requant::kNone);
              if (failures > 10) FAIL() << "stopping after " << failures << " failures";
            }
  EXPECT_GT(cases, 500) << "the grid shrank";
}

// A convolution shape with the same stride and pad on every side (none above
// and below a 1-D input).
struct Shape {
  int64_t n, c, m, group, h, w, kh, kw, stride, pad;
};
Case CaseOf(const Shape& s) {
  Case c;
  c.g.batch = s.n;
  c.g.in_channels = s.c;
  c.g.out_channels = s.m;
  c.g.group = s.group;
  c.g.in_h = s.h;
  c.g.in_w = s.w;
  c.g.kernel_h = s.kh;
  c.g.kernel_w = s.kw;
  c.g.stride_h = c.g.stride_w = s.stride;
  c.g.pad_top = c.g.pad_left = c.pad_bottom = c.pad_right = s.pad;
  if (s.h == 1) c.g.pad_top = c.pad_bottom = 0;
  return c;
}

// Shapes that cross the blocking: pixel blocks (> 256 pixels), k blocks
// (K > 512), several row panels and row blocks, one row panel, 1-D.
TEST(Int8Conv, LargerShapesCrossTheBlocking) {
  std::mt19937 rng(7);
  const Shape shapes[] = {
      {1, 64, 40, 1, 9, 9, 3, 3, 1, 1},    // K = 576: two k blocks, 5 row panels
      {1, 16, 33, 1, 19, 17, 1, 1, 1, 0},  // 323 pixels: two pixel blocks
      {2, 130, 8, 1, 6, 5, 3, 3, 2, 1},    // K = 1170, one row panel
      // Few pixels, at least 1 M multiply-adds (smaller convolutions are not
      // split for threads): the output channels (GEMM path) or panels
      // (indirect path) split over 2 and 3 threads.
      {1, 96, 96, 1, 4, 4, 3, 3, 1, 1},
      {1, 256, 64, 1, 8, 8, 1, 1, 1, 0},    // 1x1, 2 x-panels: channels split over 3 threads
      {1, 40, 48, 1, 26, 26, 3, 3, 1, 1},   // 85 micro-tiles / 22 x-panels in balanced blocks
      {1, 32, 48, 2, 15, 15, 3, 3, 2, 1},   // grouped, stride 2
      {1, 24, 24, 24, 29, 31, 3, 3, 1, 1},  // depthwise, wide rows (AVX-512 tails)
      {1, 16, 16, 16, 21, 70, 5, 5, 2, 2},  // depthwise 5x5 stride 2, > 64 columns
      {2, 40, 56, 1, 1, 300, 1, 7, 1, 3},   // 1-D
      {1, 1, 16, 1, 12, 12, 3, 3, 1, 1},    // one input channel, 16 outputs: depthwise x16
      {1, 8, 8, 8, 150, 150, 3, 3, 1, 1},   // depthwise, rows > 64 wide, several row bands
      {1, 8, 8, 8, 150, 150, 3, 3, 2, 1},   // the same at stride 2
      // Channel-vector depthwise path (int8 w, zero point 0, more than one
      // block of 16 channels): 3 blocks (the last with 8 channels) on
      // 13-pixel rows; 70-pixel rows at stride 2 (a 64-pixel step and a
      // 6-pixel tail per row); no padding (x's rows rearranged as one run).
      {1, 40, 40, 40, 13, 13, 3, 3, 1, 1},
      {1, 40, 40, 40, 9, 70, 3, 3, 2, 1},
      {2, 33, 33, 33, 10, 10, 3, 3, 1, 0},
      // NHWC indirect path (int8 w, zero point 0): a 48-wide panel with a
      // 12-channel tail vector, C not a multiple of 4, batch 2, 357 pixels
      // (items of up to 8 micro-tiles and a partial one); two 32-wide panels, stride
      // 2; an 8-wide (ymm) panel, 5x5 with a large pad (padding-only taps).
      {2, 21, 44, 1, 17, 21, 3, 3, 1, 1},
      {1, 13, 50, 1, 23, 19, 3, 3, 2, 1},
      {1, 6, 3, 1, 9, 11, 5, 5, 1, 4},
      // Indirect path, rows wide enough for several bands (kBandBytes in
      // conv.cc): 5 padded rows of 203 x 96 bytes, 2 output rows of 101
      // pixels (25 micro-tiles) a band, so bands start mid-row, and the first
      // and last reach into the padding.
      {1, 96, 16, 1, 11, 201, 3, 3, 2, 1},
  };
  for (const Shape& s : shapes) {
    // 0: u8 x, s8 w, random zero points; 1: s8 x, u8 w, per-channel zero points
    // at the type maximum; 2, 3: u8 / s8 x, s8 w with zero point 0 (per tensor /
    // per channel); 4, 5: u8 / s8 x with zero points at the type minimum /
    // maximum, s8 w with zero point 0.
    for (int variant = 0; variant < 6; ++variant) {
      Case c = CaseOf(s);
      c.x_signed = variant == 1 || variant == 3 || variant == 5;
      c.w_signed = variant != 1;
      c.w_zero_per_channel = variant == 1 || variant == 3;
      c.zero_mode = std::array{0, 2, 3, 3, 4, 5}[variant];
      ASSERT_TRUE(Resolve(c)) << c.Describe();
      EXPECT_EQ(CheckCase(c, rng, Requant::kPerChannel), 0);
    }
  }
}

// The GEMM path's requantizing tile (AVX-512 VNNI, int8 w with zero point 0,
// requantized, K <= 1024; conv_pack.h RequantTile): row panels of 8 and a
// tail of 1-7 rows, x panels with a tail of 1-31 columns, per-tensor
// multipliers with an output clamp, and K = 1100 staying on the int32 path.
TEST(Int8Conv, RequantizingTilesOnTheGemmPath) {
  std::mt19937 rng(11);
  const Shape shapes[] = {
      {1, 96, 21, 1, 13, 13, 1, 1, 1, 0},  // 169 pixels: a 9-column tail; rows 8, 8, 5
      {2, 40, 8, 1, 7, 5, 1, 1, 1, 0},     // 35 pixels: a 3-column tail
      {1, 17, 3, 1, 9, 40, 1, 1, 2, 0},    // stride 2 (phase planes): 100 pixels
      {1, 1024, 9, 1, 4, 8, 1, 1, 1, 0},   // K = 1024, the largest on the requantizing tile
      {1, 1100, 9, 1, 4, 8, 1, 1, 1, 0},   // K = 1100: the int32 block path
  };
  for (const Shape& s : shapes) {
    for (int variant = 0; variant < 4; ++variant) {
      Case c = CaseOf(s);
      c.x_signed = variant % 2 == 1;
      c.zero_mode = std::array{3, 4, 5, 3}[variant];
      ASSERT_TRUE(Resolve(c)) << c.Describe();
      EXPECT_EQ(CheckCase(c, rng, variant < 2 ? Requant::kPerTensorClamped : Requant::kPerChannel),
                0);
    }
  }
}

// The GEMM path on AVX2 and AVX-512BW (gemm_i16s8_6x16c2_pairb_avx2,
// gemm_i16s8_12x32c2_pairb_avx512): paired B words whose low column is stored
// + 128, removed with the weights' row sums on the last k block. Pixel counts
// ending in either half of a 16- or 32-column panel, output channels around
// the 6- and 12-row tiles, K = 2 (1x1 on 2 channels), odd K, K over 2-5 k
// blocks (1024 k on avx2, 512 on avx512), zero points at the type limits and
// w zero points of 0 (no column sums: the row sums alone).
TEST(Int8Conv, PairedBOnTheVpmaddwdPaths) {
  if (!IsaSupported(Isa::kAvx2) && !IsaSupported(Isa::kAvx512))
    GTEST_SKIP() << "needs AVX2 or AVX-512BW (the paired-B kernels)";
  std::mt19937 rng(14);
  const Shape shapes[] = {
      {1, 2, 13, 1, 1, 5, 1, 1, 1, 0},     // K = 2, 5 pixels: a low half only
      {1, 2, 7, 1, 3, 4, 1, 1, 1, 0},      // 12 pixels: into the high half of 16
      {1, 3, 25, 1, 5, 5, 3, 3, 1, 1},     // K = 27, 25 pixels: 16 + 9, or 32's high half
      {2, 5, 12, 1, 7, 7, 3, 3, 2, 1},     // stride 2, 16 pixels, batch 2
      {1, 1100, 7, 1, 3, 3, 1, 1, 1, 0},   // K = 1100: 2 / 3 k blocks
      {1, 230, 14, 1, 6, 6, 3, 3, 1, 1},   // K = 2070: 3 / 5 k blocks, 36 pixels (3 panels of 16)
      {1, 64, 40, 1, 17, 17, 1, 1, 1, 0},  // 289 pixels: two pixel blocks
  };
  // {x signed, w signed, w zero point per channel, zero mode}
  const std::array<std::array<int, 4>, 7> variants = {{{0, 1, 0, 0},
                                                       {1, 0, 1, 2},
                                                       {0, 0, 0, 1},
                                                       {1, 1, 0, 4},
                                                       {0, 1, 1, 5},
                                                       {1, 1, 1, 2},
                                                       {0, 0, 0, 5}}};
  for (const Shape& s : shapes) {
    for (const auto& [x_signed, w_signed, per_channel, zero_mode] : variants) {
      Case c = CaseOf(s);
      c.x_signed = x_signed != 0;
      c.w_signed = w_signed != 0;
      c.w_zero_per_channel = per_channel != 0;
      c.zero_mode = zero_mode;
      ASSERT_TRUE(Resolve(c)) << c.Describe();
      EXPECT_EQ(CheckCase(c, rng, Requant::kPerChannel), 0);
    }
  }
}

#if defined(__x86_64__) || defined(_M_X64)
// The AVX2 shifted-run packer (the paired words of the vpmaddwd kernels and
// AVX-VNNI's 4-byte groups; phase planes for other strides) against the
// baseline general packer, byte for byte: padded, dilated, strided and 1x1
// geometries, blocks at the start, inside and at the end of the image (the
// loads that fall back to byte copies), counts ending mid-panel, K not a
// multiple of the group. Runs on any AVX2 CPU, so the AVX-VNNI layout is
// checked on hosts that cannot run its kernel.
TEST(Int8Conv, ShiftedRunPackersMatchTheGeneralPacker) {
  if (!IsaSupported(Isa::kAvx2)) GTEST_SKIP() << "needs AVX2";
  struct Shape {
    int64_t c, h, w, k, stride, pad, dilation;
  };
  const Shape shapes[] = {{3, 9, 11, 3, 1, 1, 1}, {5, 7, 40, 5, 1, 2, 1},  {4, 10, 9, 3, 1, 2, 2},
                          {7, 6, 37, 1, 1, 0, 1}, {6, 13, 15, 3, 2, 1, 1}, {3, 12, 70, 3, 2, 1, 1},
                          {5, 9, 9, 1, 2, 0, 1},  {2, 8, 8, 7, 1, 3, 1}};
  struct Layout {
    int k_group, nr;
    bool paired;
  };
  const Layout layouts[] = {{2, 16, true}, {2, 32, true}, {4, 16, false}};
  std::mt19937 rng(11);
  for (const Shape& s : shapes) {
    Case shape_case;
    ConvGeometry& g = shape_case.g;
    g.batch = g.out_channels = 1;
    g.in_channels = s.c;
    g.in_h = s.h;
    g.in_w = s.w;
    g.kernel_h = g.kernel_w = s.k;
    g.stride_h = g.stride_w = s.stride;
    g.pad_top = g.pad_left = shape_case.pad_bottom = shape_case.pad_right = s.pad;
    g.dilation_h = g.dilation_w = s.dilation;
    ASSERT_TRUE(Resolve(shape_case));
    const bool planes = conv::UsesPhasePlanes(g);
    ASSERT_TRUE(planes || (s.stride == 1 && g.out_w == s.w)) << "not a shifted-run shape";
    const int64_t k = s.c * s.k * s.k, pixels = g.out_h * g.out_w;
    std::vector<uint8_t> x(s.c * s.h * s.w);
    for (auto& v : x) v = static_cast<uint8_t>(rng());
    for (const Layout& l : layouts) {
      for (auto [p0, count] : {std::pair<int64_t, int64_t>{0, std::min<int64_t>(pixels, 45)},
                               {pixels / 3, pixels / 2},
                               {pixels - 37, 37},
                               {0, pixels}}) {
        conv::Im2colBlock block{&g,
                                x.data(),
                                k,
                                p0,
                                count,
                                (count + l.nr - 1) / l.nr * l.nr,
                                l.nr,
                                l.k_group,
                                static_cast<uint8_t>(rng() & 0x80),
                                static_cast<int8_t>(rng())};
        block.paired = l.paired;
        const int64_t bytes = (k + l.k_group - 1) / l.k_group * l.k_group * block.cols;
        std::vector<int8_t> rows(l.k_group * block.cols), want(bytes, 0x5A), got(bytes, 0x5A);
        conv::PackIm2col(block, rows.data(), want.data(), nullptr);
        std::vector<uint8_t> phases;
        if (planes) {
          phases.resize(s.c * s.stride * s.stride * conv::PhasePlaneSize(g));
          conv::BuildPhasePlanesAvx2(g, x.data(), s.c, p0, count, phases.data());
          block.phases = phases.data();
        }
        conv::PackIm2colAvx2(block, rows.data(), got.data(), nullptr);
        ASSERT_EQ(got, want) << shape_case.Describe() << ", group " << l.k_group << " nr " << l.nr
                             << ", pixels " << p0 << "+" << count;
      }
    }
  }
}

// The channel-vector depthwise path's rearrangement of x into 16-byte pixels
// (conv_depthwise.h) against a scalar loop: every run length through the
// 64-pixel steps and the 1-16-pixel tail, each channel count of a block, with
// and without the int8 flip, and nothing written past the run.
TEST(Int8Conv, ToBlocked16AgainstAScalarLoop) {
  if (!IsaSupported(Isa::kAvx512Vnni)) GTEST_SKIP() << "needs AVX-512 VNNI";
  std::mt19937 rng(5);
  for (int64_t count = 1; count <= 150; ++count) {
    for (int64_t channels : {1, 3, 4, 7, 13, 16}) {
      for (uint8_t flip : {0, 0x80}) {
        const int64_t stride = count + 3;
        std::vector<uint8_t> x(16 * stride);
        for (auto& v : x) v = static_cast<uint8_t>(rng());
        std::vector<uint8_t> got(16 * count + 64, 0xA5), want(16 * count + 64, 0xA5);
        for (int64_t p = 0; p < count; ++p)
          for (int64_t c = 0; c < 16; ++c)
            want[p * 16 + c] = c < channels ? static_cast<uint8_t>(x[c * stride + p] ^ flip) : 0;
        conv::ToBlocked16Avx512Vnni(x.data(), channels, stride, count, flip, got.data());
        ASSERT_EQ(got, want) << count << " pixels, " << channels << " channels, flip " << int{flip};
      }
    }
  }
}
#endif

TEST(Int8Conv, EmptyShapesWriteNothing) {
  std::mt19937 rng(3);
  Case c;
  c.g.batch = 0;
  c.g.in_channels = 4;
  c.g.out_channels = 8;
  c.g.in_h = 5;
  c.g.in_w = 5;
  c.g.kernel_h = c.g.kernel_w = 3;
  ASSERT_TRUE(Resolve(c));
  EXPECT_EQ(CheckCase(c, rng, Requant::kPerChannel), 0);
  c.g.batch = 2;
  c.g.in_channels = 0;  // K = 0: every accumulator is 0
  EXPECT_EQ(CheckCase(c, rng, Requant::kPerChannel), 0);
}

TEST(Int8Conv, Errors) {
  ConvGeometry g;
  g.batch = 1;
  g.in_channels = 4;
  g.out_channels = 4;
  g.in_h = g.in_w = 4;
  g.out_h = g.out_w = 4;
  std::vector<uint8_t> w(16, 1), x(64, 1);
  const int32_t zero = 0, bad_zero = 300;
  const Int8ConvOperand w_op{w.data(), true, &zero, false};
  const Int8Conv conv(g, w_op, ActiveIsa());
  std::vector<int32_t> y(64);
  auto expect_error = [](auto&& fn, const std::string& fragment) {
    try {
      fn();
      ADD_FAILURE() << "no error; expected one containing '" << fragment << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_error(
      [&] {
        conv.Run(g, {x.data(), false, &bad_zero, false}, Epilogue{}, y.data(), nullptr);
      },
      "x zero point 300 is outside the uint8 range");
  expect_error(
      [&] {
        conv.Run(g, {x.data(), false, &zero, true}, Epilogue{}, y.data(), nullptr);
      },
      "x zero point must be per tensor");
  ConvGeometry other = g;
  other.kernel_w = 3;
  expect_error(
      [&] {
        conv.Run(other, {x.data(), false, &zero, false}, Epilogue{}, y.data(), nullptr);
      },
      "differs from the packed weights");
  ConvGeometry huge = g;
  huge.in_channels = 4000;
  huge.kernel_h = huge.kernel_w = 3;
  expect_error([&] { const Int8Conv too_long(huge, w_op, ActiveIsa()); }, "exceed 33025");
  for (Isa isa : kAllIsas) {
    if (!IsaSupported(isa))
      expect_error([&] { const Int8Conv unsupported(g, w_op, isa); }, "cannot run here");
  }
}

}  // namespace
}  // namespace octet
