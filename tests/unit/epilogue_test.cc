// The epilogue (kernels/int8/epilogue.h) on every instruction-set path: the
// reference ApplyEpilogue and each block path must give the documented formula
// written out independently here, on random inputs, .5 ties, NaN and infinite
// products, saturation at zero points on the type limits, and column counts
// around the vector widths, whole and in column blocks (as a product's blocks
// reach it). Every buffer ends right before an inaccessible page, so an
// over-read or over-write faults.
#include "kernels/int8/epilogue.h"

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

// docs/epilogue.md, written independently of epilogue.h: float32(acc + bias
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
        Epilogue p;
        p.output = EightBitOutput(type);
        p.multiplier = {multipliers.data(), false, c.multiplier_per_column};
        if (c.bias) p.bias = {bias.data(), false, c.bias_per_column};
        p.zero_point = zero;
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
        for (int64_t r = 0; r < c.rows; ++r) {
          for (int64_t col = 0; col < c.cols; ++col) {
            uint8_t got = 0;
            ApplyEpilogue(p, acc[r * c.ld_acc + col], r, col, &got);
            ASSERT_EQ(got, expected[r * c.ld_out + col]) << "ApplyEpilogue at " << r << "," << col;
          }
        }
        for (Isa isa : SupportedIsas()) {
          SCOPED_TRACE(std::string(IsaName(isa)) + " " + DTypeName(type) + " cols " +
                       std::to_string(c.cols) + " zero " + std::to_string(zero));
          GuardedBuffer<uint8_t> out(c.rows * c.ld_out);
          std::memset(out.data(), 0xA5, c.rows * c.ld_out);
          ApplyEpilogueBlock(p, acc.data(), c.ld_acc, 0, c.rows, 0, c.cols, out.data(), c.ld_out,
                             isa);
          ASSERT_EQ(std::vector<uint8_t>(out.data(), out.data() + c.rows * c.ld_out), expected);
          // The same in column blocks (col0 places each block's operands).
          std::memset(out.data(), 0xA5, c.rows * c.ld_out);
          for (const auto& [c0, c1] : ColumnBlocks(c.cols)) {
            ApplyEpilogueBlock(p, acc.data() + c0, c.ld_acc, 0, c.rows, c0, c1 - c0,
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
      Epilogue p;
      p.output = EpilogueOutput::kFloat;
      p.multiplier = {scales.data(), false, c.multiplier_per_column};
      if (c.bias) p.float_bias = {bias.data(), false, c.bias_per_column};
      if (acc_bias) p.bias = {int_bias.data(), false, c.bias_per_column};

      std::vector<uint32_t> expected(c.rows * c.ld_out, 0xDEADBEEF);
      for (int64_t r = 0; r < c.rows; ++r) {
        for (int64_t col = 0; col < n; ++col) {
          const int64_t pc = c.bias_per_column ? col : 0;
          expected[r * c.ld_out + col] = Bits(ExpectedFloat(
              acc[r * c.ld_acc + col], acc_bias ? int_bias[pc] : 0,
              scales[c.multiplier_per_column ? col : 0], c.bias ? &bias[pc] : nullptr));
        }
      }
      for (int64_t r = 0; r < c.rows; ++r) {
        for (int64_t col = 0; col < n; ++col) {
          float got = 0;
          ApplyEpilogue(p, acc[r * c.ld_acc + col], r, col, &got);
          ASSERT_EQ(Bits(got), expected[r * c.ld_out + col])
              << "ApplyEpilogue at " << r << "," << col;
        }
      }
      for (Isa isa : SupportedIsas()) {
        SCOPED_TRACE(std::string(IsaName(isa)) + " cols " + std::to_string(n));
        GuardedBuffer<float> out(c.rows * c.ld_out);
        std::vector<uint32_t> got(c.rows * c.ld_out, 0xDEADBEEF);
        std::memcpy(out.data(), got.data(), got.size() * sizeof(float));
        ApplyEpilogueBlock(p, acc.data(), c.ld_acc, 0, c.rows, 0, n, out.data(), c.ld_out, isa);
        std::memcpy(got.data(), out.data(), got.size() * sizeof(float));
        ASSERT_EQ(got, expected);
        // The same in column blocks (col0 places each block's operands).
        std::fill(got.begin(), got.end(), 0xDEADBEEF);
        std::memcpy(out.data(), got.data(), got.size() * sizeof(float));
        for (const auto& [c0, c1] : ColumnBlocks(n)) {
          ApplyEpilogueBlock(p, acc.data() + c0, c.ld_acc, 0, c.rows, c0, c1 - c0, out.data() + c0,
                             c.ld_out, isa);
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
  Epilogue p;
  p.output = EpilogueOutput::kUInt8;
  p.multiplier = {&one};
  for (Isa isa : kAllIsas) {
    if (IsaSupported(isa)) continue;
    EXPECT_THROW(ApplyEpilogueBlock(p, &acc, 1, 0, 1, 0, 1, &out, 1, isa), Error) << IsaName(isa);
  }
  p.multiplier = {};
  EXPECT_THROW(ApplyEpilogueBlock(p, &acc, 1, 0, 1, 0, 1, &out, 1, Isa::kScalar), Error);
  EXPECT_THROW(EightBitOutput(DType::kInt32), Error);
}

TEST(RequantizeEpilogue, RefusesAnEmptyClampAndAZeroPointOutsideTheType) {
  const float one = 1.f;
  const int32_t acc = 1;
  uint8_t out = 0;
  Epilogue p;
  p.output = EpilogueOutput::kUInt8;
  p.multiplier = {&one};
  p.y_min = 300;  // above uint8's range
  EXPECT_THROW(ApplyEpilogueBlock(p, &acc, 1, 0, 1, 0, 1, &out, 1, Isa::kScalar), Error);
  p.y_min = 10;
  p.y_max = 9;
  EXPECT_THROW(ApplyEpilogueBlock(p, &acc, 1, 0, 1, 0, 1, &out, 1, Isa::kScalar), Error);
  p.y_max = 10;
  ApplyEpilogueBlock(p, &acc, 1, 0, 1, 0, 1, &out, 1, Isa::kScalar);
  EXPECT_EQ(out, 10);
  p.y_min = INT32_MIN, p.y_max = INT32_MAX;
  p.zero_point = 256;
  EXPECT_THROW(ApplyEpilogueBlock(p, &acc, 1, 0, 1, 0, 1, &out, 1, Isa::kScalar), Error);
}

// Per-row operands: row r reads data + stride * r, or + stride * row_index[r];
// EpilogueFromRow makes the epilogue of rows from row0 on.
TEST(Epilogue, PerRowOperandsAndRowIndex) {
  const int32_t bias[6] = {10, -20, 30, -40, 50, -60};
  const float multipliers[4] = {0.5f, 2.0f, -1.0f, 0.25f};
  const int32_t row_index[3] = {1, 0, 1};
  Epilogue e;
  e.output = EpilogueOutput::kInt32;
  e.bias = {bias, true, true, 2};  // a [3, 2] bias
  for (Isa isa : SupportedIsas()) {
    const int32_t acc[6] = {1, 2, 3, 4, 5, 6};
    int32_t out[6] = {};
    ApplyEpilogueBlock(e, acc, 2, 0, 3, 0, 2, out, 2, isa);
    EXPECT_EQ(std::vector<int32_t>(out, out + 6), (std::vector<int32_t>{11, -18, 33, -36, 55, -54}))
        << IsaName(isa);
    // Rows 1 and 2 alone, as a product of their own.
    int32_t tail[4] = {};
    ApplyEpilogueBlock(EpilogueFromRow(e, 1), acc + 2, 2, 0, 2, 0, 2, tail, 2, isa);
    EXPECT_EQ(std::vector<int32_t>(tail, tail + 4), (std::vector<int32_t>{33, -36, 55, -54}));
  }
  Epilogue f;
  f.output = EpilogueOutput::kFloat;
  f.multiplier = {multipliers, true, true, 2, row_index};  // rows of a [2, 2] table
  for (Isa isa : SupportedIsas()) {
    const int32_t acc[6] = {4, 4, 4, 4, 4, 4};
    float out[6] = {};
    ApplyEpilogueBlock(f, acc, 2, 0, 3, 0, 2, out, 2, isa);
    EXPECT_EQ(std::vector<float>(out, out + 6),
              (std::vector<float>{-4.f, 1.f, 2.f, 8.f, -4.f, 1.f}))
        << IsaName(isa);
    float tail[2] = {};
    ApplyEpilogueBlock(EpilogueFromRow(f, 1), acc, 2, 0, 1, 0, 2, tail, 2, isa);
    EXPECT_EQ(std::vector<float>(tail, tail + 2), (std::vector<float>{2.f, 8.f}));
  }
}

}  // namespace
}  // namespace octet
