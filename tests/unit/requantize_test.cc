// The epilogues (kernels/int8/requantize.h) on every instruction-set path:
// each vectorized path must give the scalar path's bytes, and the scalar path
// must give the documented formula written out independently here, on random
// inputs, .5 ties, NaN and infinite products, saturation at zero points on the
// type limits, and column counts around the vector widths, whole and in column
// blocks with ColumnsFrom (as the GEMM's fused epilogue calls them). Every buffer ends
// right before an inaccessible page, so an over-read or over-write faults.
#include "kernels/int8/requantize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "core/error.h"
#include "guarded_buffer.h"
#include "int_op_test_util.h"

namespace octet {
namespace {

using int_test::RoundHalfEven;
using int_test::TypeMax;
using int_test::TypeMin;

// docs/int8.md, written independently of requantize.h: float32(acc + bias
// with int32 wrap) * multiplier, clamp in float with NaN -> low bound, round
// half to even (by comparison with the floor), + zero point.
int ExpectedValue(int32_t acc, int32_t bias, float multiplier, int zero, DType type) {
  const int32_t sum =
      static_cast<int32_t>(static_cast<uint32_t>(acc) + static_cast<uint32_t>(bias));
  const float product = static_cast<float>(sum) * multiplier;
  const double lo = TypeMin(type) - zero, hi = TypeMax(type) - zero;
  double v = std::isnan(product) ? lo : std::min(std::max<double>(product, lo), hi);
  return static_cast<int>(RoundHalfEven(v)) + zero;
}

// Accumulators that exercise the epilogue: random over several magnitudes,
// small odd values (ties with multiplier 0.5 / 1.5), 0 (NaN with an infinite
// multiplier), the int32 limits (wrap with a bias, saturation).
int32_t InterestingAcc(std::mt19937& rng) {
  switch (rng() % 6) {
    case 0:
      return static_cast<int32_t>(rng());
    case 1:
      return static_cast<int32_t>(rng() % 2001) - 1000;
    case 2:
      return static_cast<int32_t>(rng() % 21) - 10;
    case 3:
      return rng() % 2 ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int32_t>::min();
    case 4:
      return 0;
    default:
      return static_cast<int32_t>(rng() % 200001) - 100000;
  }
}

float InterestingMultiplier(std::mt19937& rng) {
  static const float kSpecial[] = {0.5f,
                                   1.5f,
                                   1.f,
                                   -0.5f,
                                   1e30f,
                                   -1e30f,
                                   std::numeric_limits<float>::infinity(),
                                   -std::numeric_limits<float>::infinity(),
                                   std::numeric_limits<float>::quiet_NaN(),
                                   0.f,
                                   std::numeric_limits<float>::denorm_min(),
                                   std::ldexp(1.f, -25)};
  if (rng() % 3 == 0) return kSpecial[rng() % (sizeof(kSpecial) / sizeof(kSpecial[0]))];
  return std::ldexp(static_cast<float>(rng() % 100000) / 100000.f, -static_cast<int>(rng() % 20));
}

struct EpilogueCase {
  int64_t rows, cols, ld_acc, ld_out;
  bool multiplier_per_column, bias, bias_per_column;
};

std::vector<EpilogueCase> Cases() {
  std::vector<EpilogueCase> cases;
  for (int64_t cols : {1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 100, 128, 129, 200})
    for (int flags = 0; flags < 6; ++flags)
      cases.push_back({3, cols, cols + (flags % 2) * 5, cols + (flags % 3), flags % 2 == 1,
                       flags >= 2, flags >= 4});
  return cases;
}

// [0, cols) cut into consecutive blocks of uneven widths (1, 17, 32, 5, ...),
// the way an epilogue gets a product from the GEMM's work items.
std::vector<std::pair<int64_t, int64_t>> ColumnBlocks(int64_t cols) {
  static const int64_t kWidths[] = {1, 17, 32, 5, 64, 3};
  std::vector<std::pair<int64_t, int64_t>> blocks;
  for (int64_t c0 = 0, i = 0; c0 < cols; ++i) {
    const int64_t c1 = std::min(cols, c0 + kWidths[i % 6]);
    blocks.emplace_back(c0, c1);
    c0 = c1;
  }
  return blocks;
}

TEST(RequantizeEpilogue, EveryPathMatchesTheFormulaOnRandomTiesNaNAndSaturation) {
  std::mt19937 rng(17);
  for (DType type : {DType::kUInt8, DType::kInt8}) {
    for (const EpilogueCase& c : Cases()) {
      for (int zero : {TypeMin(type), TypeMax(type), TypeMin(type) + 128, TypeMin(type) + 3}) {
        GuardedBuffer<int32_t> acc(c.rows * c.ld_acc);
        GuardedBuffer<float> multipliers(c.multiplier_per_column ? c.cols : 1);
        GuardedBuffer<int32_t> bias(c.bias_per_column ? c.cols : 1);
        for (int64_t i = 0; i < c.rows * c.ld_acc; ++i) acc[i] = InterestingAcc(rng);
        for (int64_t i = 0; i < (c.multiplier_per_column ? c.cols : 1); ++i)
          multipliers[i] = InterestingMultiplier(rng);
        for (int64_t i = 0; i < (c.bias_per_column ? c.cols : 1); ++i)
          bias[i] = rng() % 4 == 0 ? static_cast<int32_t>(rng())
                                   : static_cast<int32_t>(rng() % 2001) - 1000;
        RequantizeParams p;
        p.multiplier = multipliers.data();
        p.multiplier_per_column = c.multiplier_per_column;
        p.bias = c.bias ? bias.data() : nullptr;
        p.bias_per_column = c.bias_per_column;
        p.zero_point = zero;
        p.output_type = type;
        // Every other case also clamps the output (an absorbed Relu / Clip):
        // bounds inside the type, on its limits or beyond them.
        int y_min = TypeMin(type), y_max = TypeMax(type);
        if (rng() % 2 == 0) {
          y_min = TypeMin(type) - 5 + static_cast<int>(rng() % 150);
          y_max = std::max(y_min, TypeMin(type) + 100 + static_cast<int>(rng() % 165));
          p.y_min = y_min;
          p.y_max = y_max;
        }

        std::vector<uint8_t> expected(c.rows * c.ld_out, 0xA5);
        for (int64_t r = 0; r < c.rows; ++r)
          for (int64_t col = 0; col < c.cols; ++col)
            expected[r * c.ld_out + col] = static_cast<uint8_t>(std::clamp(
                ExpectedValue(acc[r * c.ld_acc + col],
                              c.bias ? bias[c.bias_per_column ? col : 0] : 0,
                              multipliers[c.multiplier_per_column ? col : 0], zero, type),
                y_min, y_max));
        for (Isa isa : SupportedIsas()) {
          SCOPED_TRACE(std::string(IsaName(isa)) + " " + DTypeName(type) + " cols " +
                       std::to_string(c.cols) + " zero " + std::to_string(zero));
          GuardedBuffer<uint8_t> out(c.rows * c.ld_out);
          std::memset(out.data(), 0xA5, c.rows * c.ld_out);
          RequantizeS32(acc.data(), c.ld_acc, c.rows, c.cols, p, out.data(), c.ld_out, isa);
          ASSERT_EQ(std::vector<uint8_t>(out.data(), out.data() + c.rows * c.ld_out), expected);
          // The same in column blocks, as the GEMM hands them over (ColumnsFrom).
          std::memset(out.data(), 0xA5, c.rows * c.ld_out);
          for (const auto& [c0, c1] : ColumnBlocks(c.cols)) {
            RequantizeS32(acc.data() + c0, c.ld_acc, c.rows, c1 - c0, ColumnsFrom(p, c0),
                          out.data() + c0, c.ld_out, isa);
          }
          ASSERT_EQ(std::vector<uint8_t>(out.data(), out.data() + c.rows * c.ld_out), expected)
              << "in column blocks";
        }
      }
    }
  }
}

// float(acc (+ int32 bias)) * scale (+ float bias): the product rounded to
// float32 before the addition (ONNX Runtime's order, no fused multiply-add).
// The double product of two floats is exact, so rounding it once is the
// float32 product; the sum is done the same way.
float ExpectedFloat(int32_t acc, int32_t acc_bias, float scale, const float* bias) {
  const int32_t sum =
      static_cast<int32_t>(static_cast<uint32_t>(acc) + static_cast<uint32_t>(acc_bias));
  const float product = static_cast<float>(static_cast<double>(static_cast<float>(sum)) * scale);
  if (bias == nullptr) return product;
  return static_cast<float>(static_cast<double>(product) + static_cast<double>(*bias));
}

uint32_t Bits(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return bits;
}

TEST(FloatEpilogue, EveryPathMatchesTheFormulaBitForBit) {
  std::mt19937 rng(29);
  std::uniform_real_distribution<float> scale_dist(1e-5f, 1e-1f), bias_dist(-50.f, 50.f);
  for (const EpilogueCase& c : Cases()) {
    for (bool acc_bias : {false, true}) {
      const int64_t n = c.cols;
      GuardedBuffer<int32_t> acc(c.rows * c.ld_acc);
      GuardedBuffer<float> scales(c.multiplier_per_column ? n : 1), bias(c.bias_per_column ? n : 1);
      GuardedBuffer<int32_t> int_bias(c.bias_per_column ? n : 1);
      for (int64_t i = 0; i < c.rows * c.ld_acc; ++i) acc[i] = InterestingAcc(rng);
      for (int64_t i = 0; i < (c.multiplier_per_column ? n : 1); ++i) scales[i] = scale_dist(rng);
      if (c.multiplier_per_column && n > 3) scales[3] = std::numeric_limits<float>::infinity();
      for (int64_t i = 0; i < (c.bias_per_column ? n : 1); ++i) {
        bias[i] = bias_dist(rng);
        int_bias[i] = static_cast<int32_t>(rng());
      }
      FloatOutputParams p;
      p.scale = scales.data();
      p.scale_per_column = c.multiplier_per_column;
      p.bias = c.bias ? bias.data() : nullptr;
      p.bias_per_column = c.bias_per_column;
      p.acc_bias = acc_bias ? int_bias.data() : nullptr;
      p.acc_bias_per_column = c.bias_per_column;

      std::vector<uint32_t> expected(c.rows * c.ld_out, 0xDEADBEEF);
      for (int64_t r = 0; r < c.rows; ++r) {
        for (int64_t col = 0; col < n; ++col) {
          const int64_t pc = c.bias_per_column ? col : 0;
          expected[r * c.ld_out + col] = Bits(ExpectedFloat(
              acc[r * c.ld_acc + col], acc_bias ? int_bias[pc] : 0,
              scales[c.multiplier_per_column ? col : 0], c.bias ? &bias[pc] : nullptr));
        }
      }
      for (Isa isa : SupportedIsas()) {
        SCOPED_TRACE(std::string(IsaName(isa)) + " cols " + std::to_string(n));
        GuardedBuffer<float> out(c.rows * c.ld_out);
        std::vector<uint32_t> got(c.rows * c.ld_out, 0xDEADBEEF);
        std::memcpy(out.data(), got.data(), got.size() * sizeof(float));
        ScaleS32ToFloat(acc.data(), c.ld_acc, c.rows, n, p, out.data(), c.ld_out, isa);
        std::memcpy(got.data(), out.data(), got.size() * sizeof(float));
        ASSERT_EQ(got, expected);
        // The same in column blocks, as the GEMM hands them over (ColumnsFrom).
        std::fill(got.begin(), got.end(), 0xDEADBEEF);
        std::memcpy(out.data(), got.data(), got.size() * sizeof(float));
        for (const auto& [c0, c1] : ColumnBlocks(n)) {
          ScaleS32ToFloat(acc.data() + c0, c.ld_acc, c.rows, c1 - c0, ColumnsFrom(p, c0),
                          out.data() + c0, c.ld_out, isa);
        }
        std::memcpy(got.data(), out.data(), got.size() * sizeof(float));
        ASSERT_EQ(got, expected) << "in column blocks";
      }
    }
  }
}

TEST(RequantizeEpilogue, RefusesAPathThisMachineLacks) {
  const float one = 1.f;
  const int32_t acc = 1;
  uint8_t out = 0;
  float out_float = 0.f;
  RequantizeParams p;
  p.multiplier = &one;
  FloatOutputParams f;
  f.scale = &one;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512Vnni, Isa::kNeonDot}) {
    if (IsaSupported(isa)) continue;
    EXPECT_THROW(RequantizeS32(&acc, 1, 1, 1, p, &out, 1, isa), Error) << IsaName(isa);
    EXPECT_THROW(ScaleS32ToFloat(&acc, 1, 1, 1, f, &out_float, 1, isa), Error) << IsaName(isa);
  }
  p.output_type = DType::kInt32;
  EXPECT_THROW(RequantizeS32(&acc, 1, 1, 1, p, &out, 1, Isa::kScalar), Error);
}

TEST(RequantizeEpilogue, RefusesAnEmptyClamp) {
  const float one = 1.f;
  const int32_t acc = 1;
  uint8_t out = 0;
  RequantizeParams p;
  p.multiplier = &one;
  p.y_min = 300;  // above uint8's range
  EXPECT_THROW(RequantizeS32(&acc, 1, 1, 1, p, &out, 1, Isa::kScalar), Error);
  p.y_min = 10;
  p.y_max = 9;
  EXPECT_THROW(RequantizeS32(&acc, 1, 1, 1, p, &out, 1, Isa::kScalar), Error);
  p.y_max = 10;
  RequantizeS32(&acc, 1, 1, 1, p, &out, 1, Isa::kScalar);
  EXPECT_EQ(out, 10);
}

}  // namespace
}  // namespace octet
