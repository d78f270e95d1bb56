// The exact int8 GEMM (kernels/int8/gemm.h) on every instruction-set path the
// CPU supports, against the naive int64 reference (GemmReferenceS32), with
// every epilogue output (int32, float, 8-bit) and operand layout (per tensor,
// per column, per row through a row index). Every operand lives right before a
// PROT_NONE guard page, so any over-read or over-write faults.
// (gemm_kernels_test.cc tests each micro-kernel of the table on its own.)
#include "kernels/int8/gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "guarded_buffer.h"
#include "kernels/int8/epilogue.h"
#include "kernels/int8/gemm_reference.h"

namespace octet {
namespace {

constexpr int kRandom = -1000;  // fill value meaning "uniform over the type's range"

struct Case {
  int64_t M = 1, N = 1, K = 1;
  bool a_signed = false, b_signed = true;
  int a_fill = kRandom, b_fill = kRandom;  // a value of the operand's type, or kRandom
  bool za_per_row = false, zb_per_col = false;
  // Per-tensor zero point, or kRandom; per row: always random; per column: the value
  // repeated (the GEMM treats equal ones as one), or random.
  int za = kRandom, zb = kRandom;
  int64_t lda_pad = 0, ldb_pad = 0, ldc_pad = 0;
  uint32_t seed = 1;
};

std::string Describe(const Case& c) {
  return "M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) +
         (c.a_signed ? " A=s8" : " A=u8") + (c.b_signed ? " B=s8" : " B=u8") +
         " a_fill=" + std::to_string(c.a_fill) + " b_fill=" + std::to_string(c.b_fill) +
         " za=" + (c.za_per_row ? "per-row" : std::to_string(c.za)) +
         " zb=" + (c.zb_per_col ? "per-col " : "") + std::to_string(c.zb) +
         " seed=" + std::to_string(c.seed);
}

int TypeMin(bool is_signed) { return is_signed ? -128 : 0; }
int TypeMax(bool is_signed) { return is_signed ? 127 : 255; }

void Fill8(uint8_t* p, size_t n, bool is_signed, int fill, std::mt19937& rng) {
  std::uniform_int_distribution<int> dist(TypeMin(is_signed), TypeMax(is_signed));
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(fill == kRandom ? dist(rng) : fill);
}

// Zero points: random over the type's range with both limits always present.
void FillZeros(int32_t* p, size_t n, bool is_signed, int value, std::mt19937& rng) {
  std::uniform_int_distribution<int> dist(TypeMin(is_signed), TypeMax(is_signed));
  for (size_t i = 0; i < n; ++i) p[i] = value == kRandom ? dist(rng) : value;
  if (value == kRandom && n >= 2) {
    p[0] = TypeMin(is_signed);
    p[n - 1] = TypeMax(is_signed);
  }
}

// Runs the case on `isa` (and the given pool) and returns C (M x N, ldc stripped). With
// `widths`, C's columns go to one matrix per width (kernels/output_columns.h), each with
// padding columns of its own, and come back side by side.
std::vector<int32_t> RunGemm(Isa isa, const Case& c, ThreadPool* pool,
                             const std::vector<int64_t>& widths = {}) {
  std::mt19937 rng(c.seed);
  const int64_t lda = c.K + c.lda_pad, ldb = c.N + c.ldb_pad, ldc = c.N + c.ldc_pad;
  GuardedBuffer<uint8_t> a(static_cast<size_t>(c.M * lda)), b(static_cast<size_t>(c.K * ldb));
  Fill8(a.data(), a.size(), c.a_signed, c.a_fill, rng);
  Fill8(b.data(), b.size(), c.b_signed, c.b_fill, rng);
  GuardedBuffer<int32_t> za(c.za_per_row ? c.M : 1), zb(c.zb_per_col ? c.N : 1);
  FillZeros(za.data(), za.size(), c.a_signed, c.za_per_row ? kRandom : c.za, rng);
  FillZeros(zb.data(), zb.size(), c.b_signed, c.zb, rng);

  const GemmPlan plan = PlanGemm(isa, c.a_signed);
  const PackedB packed = PackB(plan, b.data(), c.b_signed, c.K, c.N, ldb);
  GuardedBuffer<int32_t> out(static_cast<size_t>(c.M * ldc));
  std::memset(out.data(), 0xA5, out.size() * sizeof(int32_t));  // padding columns must keep this
  const Int8Operand a_op{a.data(), c.a_signed, lda};
  const GemmZeroPoints zero{za.data(), c.za_per_row, zb.data(), c.zb_per_col};
  if (widths.empty()) {
    Gemm(plan, c.M, a_op, zero, packed, Epilogue{}, out.data(), ldc, pool);
  } else {
    std::vector<std::vector<int32_t>> parts;
    std::vector<ColumnRange> ranges;
    for (int64_t w : widths) {
      const int64_t ld = w + 3;
      parts.emplace_back(static_cast<size_t>(c.M * ld), static_cast<int32_t>(0xA5A5A5A5u));
      ranges.push_back({ranges.empty() ? 0 : ranges.back().first + widths[ranges.size() - 1],
                        parts.back().data(), ld});
    }
    Gemm(plan, c.M, a_op, zero, packed, Epilogue{},
         OutputColumns{ranges.data(), static_cast<int64_t>(ranges.size())}, pool);
    for (size_t i = 0; i < widths.size(); ++i)
      for (int64_t m = 0; m < c.M; ++m)
        for (int64_t j = 0; j < widths[i] + 3; ++j) {
          const int32_t v = parts[i][m * (widths[i] + 3) + j];
          if (j < widths[i])
            out[m * ldc + ranges[i].first + j] = v;
          else if (v != static_cast<int32_t>(0xA5A5A5A5u))
            ADD_FAILURE() << "wrote range " << i << "'s padding at m=" << m << ": " << Describe(c);
        }
  }

  std::vector<int32_t> result(static_cast<size_t>(c.M * c.N));
  for (int64_t m = 0; m < c.M; ++m) {
    for (int64_t n = 0; n < ldc; ++n) {
      const int32_t v = out[m * ldc + n];
      if (n < c.N) {
        result[m * c.N + n] = v;
      } else if (v != static_cast<int32_t>(0xA5A5A5A5u)) {
        ADD_FAILURE() << "wrote C padding at m=" << m << " n=" << n << ": " << Describe(c);
      }
    }
  }
  return result;
}

std::vector<int32_t> RunReference(const Case& c) {
  std::mt19937 rng(c.seed);  // same draws, same order as RunGemm
  const int64_t lda = c.K + c.lda_pad, ldb = c.N + c.ldb_pad;
  std::vector<uint8_t> a(c.M * lda), b(c.K * ldb);
  Fill8(a.data(), a.size(), c.a_signed, c.a_fill, rng);
  Fill8(b.data(), b.size(), c.b_signed, c.b_fill, rng);
  std::vector<int32_t> za(c.za_per_row ? c.M : 1), zb(c.zb_per_col ? c.N : 1);
  FillZeros(za.data(), za.size(), c.a_signed, c.za_per_row ? kRandom : c.za, rng);
  FillZeros(zb.data(), zb.size(), c.b_signed, c.zb, rng);
  std::vector<int32_t> result(c.M * c.N);
  GemmReferenceS32(c.M, c.N, c.K, Int8Operand{a.data(), c.a_signed, lda}, za.data(), c.za_per_row,
                   Int8Operand{b.data(), c.b_signed, ldb}, zb.data(), c.zb_per_col, result.data(),
                   c.N);
  return result;
}

::testing::AssertionResult Matches(Isa isa, const Case& c, ThreadPool* pool = nullptr) {
  const std::vector<int32_t> got = RunGemm(isa, c, pool), want = RunReference(c);
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) {
      return ::testing::AssertionFailure()
             << IsaName(isa) << " " << Describe(c) << ": C[" << i / c.N << "," << i % c.N
             << "] = " << got[i] << ", reference " << want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

// Sets the case's signedness to pair p (0..3) and its zero points from seed.
void SetPair(Case& c, int p) {
  c.a_signed = p & 1;
  c.b_signed = p & 2;
}

class GemmIsaTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!IsaSupported(GetParam()))
      GTEST_SKIP() << IsaName(GetParam()) << ": " << IsaUnsupportedReason(GetParam());
  }
  Isa isa() const { return GetParam(); }
};

TEST_P(GemmIsaTest, AllSmallMAndNForSeveralK) {
  for (int64_t K : {1, 4, 7, 64}) {
    for (int64_t M = 1; M <= 64; ++M) {
      for (int64_t N = 1; N <= 64; ++N) {
        Case c;
        c.M = M, c.N = N, c.K = K;
        c.seed = static_cast<uint32_t>(M * 4099 + N * 67 + K);
        SetPair(c, static_cast<int>((M + N) % 4));
        c.za_per_row = (M + K) % 3 == 0;
        c.zb_per_col = (N + K) % 3 == 1;
        ASSERT_TRUE(Matches(isa(), c));
      }
    }
  }
}

TEST_P(GemmIsaTest, AllKUpTo64ForSeveralShapes) {
  const int64_t shapes[][2] = {{1, 1}, {1, 33}, {3, 17}, {8, 32}, {9, 31}, {13, 64}, {64, 48}};
  for (const auto& [M, N] : shapes) {
    for (int64_t K = 1; K <= 64; ++K) {
      for (int p = 0; p < 4; ++p) {
        Case c;
        c.M = M, c.N = N, c.K = K;
        c.seed = static_cast<uint32_t>(K * 31 + p);
        SetPair(c, p);
        c.za_per_row = p == 1;
        c.zb_per_col = p == 2;
        ASSERT_TRUE(Matches(isa(), c));
      }
    }
  }
}

TEST_P(GemmIsaTest, KAroundTheBlockAndNAroundTheTile) {
  // 4096 is the k block (1024 and 512 before); M > 8 rows gives several row
  // panels, so k blocking applies.
  for (int64_t K : {508, 511, 1020, 1024, 1027, 1536, 4092, 4095, 4096, 4097, 4100, 8196}) {
    for (int64_t N : {15, 16, 17, 31, 32, 33, 47, 48, 49, 255, 257}) {
      Case c;
      c.M = 19, c.N = N, c.K = K;
      c.seed = static_cast<uint32_t>(K + N);
      SetPair(c, static_cast<int>((K + N) % 4));
      c.za_per_row = N % 2 == 0;
      c.zb_per_col = N % 3 == 0;
      ASSERT_TRUE(Matches(isa(), c));
    }
  }
}

TEST_P(GemmIsaTest, LongK) {
  for (int64_t K : {4096, 16384}) {
    for (int p = 0; p < 4; ++p) {
      Case c;
      c.M = p == 0 ? 1 : 11, c.N = 37, c.K = K;
      c.seed = static_cast<uint32_t>(K + p);
      SetPair(c, p);
      c.zb_per_col = p % 2 == 0;
      ASSERT_TRUE(Matches(isa(), c));
    }
  }
}

TEST_P(GemmIsaTest, ZeroPointsAndValuesAtTypeLimits) {
  // Constant operands at the limits (-128/127, 0/255) make every product maximal;
  // a saturating kernel (vpmaddubsw, vpdpbusds) gets these wrong.
  for (int p = 0; p < 4; ++p) {
    Case c;
    SetPair(c, p);
    for (int a_fill : {TypeMin(c.a_signed), TypeMax(c.a_signed), kRandom}) {
      for (int b_fill : {TypeMin(c.b_signed), TypeMax(c.b_signed), kRandom}) {
        for (int za : {TypeMin(c.a_signed), TypeMax(c.a_signed)}) {
          for (int zb : {TypeMin(c.b_signed), TypeMax(c.b_signed)}) {
            c.M = 10, c.N = 35, c.K = 1030;
            c.a_fill = a_fill, c.b_fill = b_fill, c.za = za, c.zb = zb;
            c.seed = static_cast<uint32_t>(p * 1000 + a_fill * 7 + b_fill * 3 + za + zb);
            ASSERT_TRUE(Matches(isa(), c));
          }
        }
      }
    }
  }
}

TEST_P(GemmIsaTest, LargestExactKWithTheLargestProducts) {
  // |A - zA| = |B - zB| = 255 at every k: the result is -K * 255 * 255 or +K * 255 * 255,
  // the extreme int32 values the kernel promises to get exactly.
  for (int p = 0; p < 4; ++p) {
    Case c;
    SetPair(c, p);
    c.M = 9, c.N = 33, c.K = kGemmMaxK;
    c.a_fill = TypeMax(c.a_signed), c.za = TypeMin(c.a_signed);
    c.b_fill = p < 2 ? TypeMin(c.b_signed) : TypeMax(c.b_signed);
    c.zb = p < 2 ? TypeMax(c.b_signed) : TypeMin(c.b_signed);
    ASSERT_TRUE(Matches(isa(), c));
  }
}

TEST_P(GemmIsaTest, SmallProductsOfAttentionShapes) {
  // With K a multiple of 4, AVX-512 VNNI reads A in place (int8 A as the
  // signed operand with B flipped); small products skip the pool: attention's head
  // shapes, operands and zero points at the type limits, padded rows (the
  // last row of A ends at the guard page), per-row / per-column zero points.
  for (int p = 0; p < 4; ++p) {
    Case c;
    SetPair(c, p);
    for (const auto& [M, K, N] : {std::array<int64_t, 3>{128, 32, 128},
                                  {128, 128, 32},
                                  {77, 64, 45},
                                  {9, 1024, 33},
                                  {3, 4, 100}}) {
      c.M = M, c.K = K, c.N = N;
      for (int fill : {TypeMin(c.a_signed), TypeMax(c.a_signed), kRandom}) {
        for (int z : {TypeMin(c.a_signed), TypeMax(c.a_signed)}) {
          c.a_fill = fill, c.b_fill = fill == kRandom ? kRandom : TypeMax(c.b_signed);
          c.za = z, c.zb = z == TypeMin(c.a_signed) ? TypeMax(c.b_signed) : TypeMin(c.b_signed);
          c.seed = static_cast<uint32_t>(p * 100 + M + K + N + fill + z);
          ASSERT_TRUE(Matches(isa(), c));
        }
      }
      c.a_fill = c.b_fill = kRandom;
      c.za_per_row = c.zb_per_col = true, c.lda_pad = 12, c.ldb_pad = 5, c.zb = kRandom;
      ASSERT_TRUE(Matches(isa(), c));
      c.za_per_row = c.zb_per_col = false, c.lda_pad = c.ldb_pad = 0;
    }
  }
}

TEST_P(GemmIsaTest, EqualPerColumnZeroPointsActAsOne) {
  // Per-column B zero points that are all equal take the per-tensor correction.
  for (int p = 0; p < 4; ++p) {
    Case c;
    SetPair(c, p);
    c.M = 19, c.N = 70, c.K = 1030, c.zb_per_col = true, c.seed = 7 + p;
    for (int zb : {TypeMin(c.b_signed), 0, TypeMax(c.b_signed)}) {
      c.zb = zb;
      ASSERT_TRUE(Matches(isa(), c));
    }
  }
}

TEST_P(GemmIsaTest, LeadingDimensionsLargerThanTheMatrix) {
  for (int p = 0; p < 4; ++p) {
    Case c;
    SetPair(c, p);
    c.M = 21, c.N = 45, c.K = 77, c.lda_pad = 5, c.ldb_pad = 3, c.ldc_pad = 7;
    c.za_per_row = true, c.zb_per_col = true, c.seed = 99 + p;
    ASSERT_TRUE(Matches(isa(), c));
  }
}

TEST_P(GemmIsaTest, EmptyProducts) {
  for (const auto& [M, N, K] : {std::array<int64_t, 3>{0, 5, 7}, {5, 0, 7}, {5, 7, 0}, {0, 0, 0}}) {
    Case c;
    c.M = M, c.N = N, c.K = K;
    ASSERT_TRUE(Matches(isa(), c));  // K = 0: every C is 0
  }
}

// C's columns written to three matrices of their own (products of one input run as one):
// the reference's, on one and two threads, also for K = 0 and M = 0.
TEST_P(GemmIsaTest, OutputColumnRanges) {
  ThreadPool two(2);
  for (const auto& [M, K] : {std::array<int64_t, 2>{1, 96}, {3, 64}, {40, 300}, {9, 0}, {0, 5}}) {
    Case c;
    c.M = M, c.N = 64 + 128 + 7, c.K = K, c.za_per_row = M == 3, c.zb_per_col = true;
    c.seed = static_cast<uint32_t>(M + K);
    const std::vector<int32_t> want = RunReference(c);
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &two})
      EXPECT_EQ(RunGemm(isa(), c, pool, {64, 128, 7}), want) << Describe(c);
  }
}

TEST_P(GemmIsaTest, SameBytesForOneTwoAndThreeThreads) {
  ThreadPool two(2), three(3);
  for (const auto& [M, N, K] :
       {std::array<int64_t, 3>{1, 3000, 1000}, {1, 600, 500}, {200, 300, 700}, {131, 530, 1100}}) {
    Case c;
    // Per-row zero points (two multiplies per output vector) and per-tensor ones
    // (precomputed offsets).
    c.M = M, c.N = N, c.K = K, c.za_per_row = M != 200, c.seed = static_cast<uint32_t>(M);
    const std::vector<int32_t> want = RunReference(c);
    EXPECT_EQ(RunGemm(isa(), c, nullptr), want);
    EXPECT_EQ(RunGemm(isa(), c, &two), want);
    EXPECT_EQ(RunGemm(isa(), c, &three), want);
  }
}

// The requantized and float outputs against the int64 reference finished by
// the formula of docs/epilogue.md written out here, into an output that ends at
// a guard page, with padding columns that must keep their bytes.
// An int32 bias of the epilogues: none, one value, or one per column.
enum class Bias { kNone, kTensor, kColumn };

// float(sum) * multiplier, clamped to [lo - zero, hi - zero] (NaN -> low
// bound), rounded half to even, + zero: docs/epilogue.md's 8-bit output.
int32_t ExpectedRequantized(int32_t sum, float multiplier, int32_t lo, int32_t hi, int32_t zero) {
  const float v = static_cast<float>(sum) * multiplier;
  const float low = static_cast<float>(lo - zero), high = static_cast<float>(hi - zero);
  const float clamped = std::isnan(v) ? low : std::min(std::max(v, low), high);
  return static_cast<int32_t>(std::nearbyint(clamped)) + zero;
}

// The bias values for N columns (empty for kNone), wrapping sums included.
std::vector<int32_t> MakeBias(Bias bias, int64_t N) {
  if (bias == Bias::kNone) return {};
  std::vector<int32_t> values(bias == Bias::kTensor ? 1 : N);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] =
        (i % 3 == 2) ? INT32_MAX - static_cast<int32_t>(i) : static_cast<int32_t>(i * 977) - 4000;
  return values;
}

int32_t WrappingAdd(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}

// A Case's operands drawn as RunReference draws them, B packed for `isa`, and
// the reference product: what the epilogue tests below finish.
struct DrawnOperands {
  DrawnOperands(const Case& c, Isa isa)
      : lda(c.K + c.lda_pad),
        ld_out(c.N + c.ldc_pad),
        a(static_cast<size_t>(c.M * lda)),
        b(static_cast<size_t>(c.K * (c.N + c.ldb_pad))),
        za(c.za_per_row ? c.M : 1),
        zb(c.zb_per_col ? c.N : 1) {
    std::mt19937 rng(c.seed);  // same draws, same order as RunReference
    Fill8(a.data(), a.size(), c.a_signed, c.a_fill, rng);
    Fill8(b.data(), b.size(), c.b_signed, c.b_fill, rng);
    FillZeros(za.data(), za.size(), c.a_signed, c.za_per_row ? kRandom : c.za, rng);
    FillZeros(zb.data(), zb.size(), c.b_signed, c.zb, rng);
    acc = RunReference(c);
    plan = PlanGemm(isa, c.a_signed);
    packed = PackB(plan, b.data(), c.b_signed, c.K, c.N, c.N + c.ldb_pad);
  }
  GemmZeroPoints Zero(const Case& c) {
    return GemmZeroPoints{za.data(), c.za_per_row, zb.data(), c.zb_per_col};
  }
  Int8Operand A(const Case& c) { return Int8Operand{a.data(), c.a_signed, lda}; }

  int64_t lda, ld_out;
  GuardedBuffer<uint8_t> a, b;
  GuardedBuffer<int32_t> za, zb;
  std::vector<int32_t> acc;
  GemmPlan plan;
  PackedB packed;
};

::testing::AssertionResult RequantizedMatches(Isa isa, const Case& c, DType y_type, bool per_column,
                                              float scale, int32_t y_zero, int32_t y_min,
                                              int32_t y_max, ThreadPool* pool,
                                              Bias bias = Bias::kNone) {
  DrawnOperands d(c, isa);
  const int64_t ld_out = d.ld_out;
  const std::vector<int32_t>& acc = d.acc;

  GuardedBuffer<float> multipliers(per_column ? c.N : 1);
  for (size_t i = 0; i < multipliers.size(); ++i)
    multipliers[i] = scale * (1.0f + 0.37f * static_cast<float>(i % 5));
  Epilogue e;
  e.output = y_type == DType::kInt8 ? EpilogueOutput::kInt8 : EpilogueOutput::kUInt8;
  e.multiplier = {multipliers.data(), false, per_column};
  e.zero_point = y_zero;
  e.y_min = y_min;
  e.y_max = y_max;
  const std::vector<int32_t> bias_values = MakeBias(bias, c.N);
  if (!bias_values.empty()) e.bias = {bias_values.data(), false, bias == Bias::kColumn};
  GuardedBuffer<uint8_t> out(static_cast<size_t>(c.M * ld_out));
  std::memset(out.data(), 0xA5, out.size());
  Gemm(d.plan, c.M, d.A(c), d.Zero(c), d.packed, e, out.data(), ld_out, pool);

  const bool y_signed = y_type == DType::kInt8;
  const int32_t lo = std::max(TypeMin(y_signed), y_min), hi = std::min(TypeMax(y_signed), y_max);
  for (int64_t m = 0; m < c.M; ++m) {
    for (int64_t n = 0; n < ld_out; ++n) {
      const uint8_t got = out[m * ld_out + n];
      uint8_t want = 0xA5;
      if (n < c.N) {
        const float multiplier = multipliers[per_column ? n : 0];
        const int32_t sum =
            bias_values.empty()
                ? acc[m * c.N + n]
                : WrappingAdd(acc[m * c.N + n], bias_values[bias == Bias::kColumn ? n : 0]);
        want = static_cast<uint8_t>(ExpectedRequantized(sum, multiplier, lo, hi, y_zero));
      }
      if (got != want) {
        return ::testing::AssertionFailure()
               << IsaName(isa) << " " << Describe(c) << " y=" << DTypeName(y_type)
               << " scale=" << scale << ": out[" << m << "," << n << "] = " << int{got} << ", want "
               << int{want} << " (acc " << (n < c.N ? acc[m * c.N + n] : 0) << ")";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// GemmS32ToFloat against the int64 reference: float(acc + acc_bias) * scale,
// then + bias, each rounded to float (this file is built without FMA).
::testing::AssertionResult FloatOutputMatches(Isa isa, const Case& c, bool per_column,
                                              Bias acc_bias, bool float_bias, ThreadPool* pool) {
  DrawnOperands d(c, isa);
  const int64_t ld_out = d.ld_out;
  const std::vector<int32_t>& acc = d.acc;

  GuardedBuffer<float> scales(per_column ? c.N : 1), biases(per_column ? c.N : 1);
  for (size_t i = 0; i < scales.size(); ++i) {
    scales[i] = 3.1e-5f * (1.0f + 0.37f * static_cast<float>(i % 7));
    biases[i] = 0.25f - 0.0137f * static_cast<float>(i % 11);
  }
  const std::vector<int32_t> acc_bias_values = MakeBias(acc_bias, c.N);
  Epilogue e;
  e.output = EpilogueOutput::kFloat;
  e.multiplier = {scales.data(), false, per_column};
  if (!acc_bias_values.empty()) e.bias = {acc_bias_values.data(), false, acc_bias == Bias::kColumn};
  if (float_bias) e.float_bias = {biases.data(), false, per_column};
  GuardedBuffer<float> out(static_cast<size_t>(c.M * ld_out));
  std::fill(out.data(), out.data() + out.size(), -7.5f);
  Gemm(d.plan, c.M, d.A(c), d.Zero(c), d.packed, e, out.data(), ld_out, pool);

  for (int64_t m = 0; m < c.M; ++m) {
    for (int64_t n = 0; n < ld_out; ++n) {
      float want = -7.5f;
      if (n < c.N) {
        int32_t sum = acc[m * c.N + n];
        if (!acc_bias_values.empty())
          sum = WrappingAdd(sum, acc_bias_values[acc_bias == Bias::kColumn ? n : 0]);
        want = static_cast<float>(sum) * scales[per_column ? n : 0];
        if (float_bias) want = want + biases[per_column ? n : 0];
      }
      const float got = out[m * ld_out + n];
      if (std::memcmp(&got, &want, sizeof(float)) != 0) {
        return ::testing::AssertionFailure()
               << IsaName(isa) << " " << Describe(c) << ": out[" << m << "," << n << "] = " << got
               << ", want " << want << " (acc " << (n < c.N ? acc[m * c.N + n] : 0) << ")";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

TEST_P(GemmIsaTest, RequantizedAndFloatOutputOfSmallAndLargeProducts) {
  // On AVX-512 VNNI, products with K <= 4096 requantize in the tile: small ones
  // reading A in place, the others (K not a multiple of 4, large) from packed A;
  // masked right edges (N = 45, 70, 100), per-tensor offsets and per-row / per-column
  // zero points. K = 4100 (two k blocks) and the other paths take the block
  // epilogue. Scales from saturating to fine, both output types, a clamp,
  // per-column multipliers.
  ThreadPool two(2), three(3);
  for (int p = 0; p < 4; ++p) {
    Case c;
    SetPair(c, p);
    for (const auto& [M, K, N] : {std::array<int64_t, 3>{128, 32, 128},
                                  {128, 128, 32},
                                  {77, 64, 45},
                                  {3, 4, 100},
                                  {13, 30, 40},
                                  {150, 512, 70},
                                  {21, 4100, 50}}) {
      c.M = M, c.K = K, c.N = N, c.seed = static_cast<uint32_t>(p + M + K + N);
      c.za = TypeMax(c.a_signed), c.zb = TypeMin(c.b_signed);
      for (DType y_type : {DType::kInt8, DType::kUInt8}) {
        const int32_t y_zero = y_type == DType::kInt8 ? -3 : 131;
        for (float scale : {1e-5f, 3e-4f, 0.01f, 1.0f}) {
          ASSERT_TRUE(RequantizedMatches(isa(), c, y_type, false, scale, y_zero, INT32_MIN,
                                         INT32_MAX, nullptr));
        }
        ASSERT_TRUE(
            RequantizedMatches(isa(), c, y_type, true, 3e-4f, y_zero, y_zero, y_zero + 60, &two));
        ASSERT_TRUE(RequantizedMatches(isa(), c, y_type, true, 3e-4f, y_zero, INT32_MIN, INT32_MAX,
                                       nullptr, Bias::kColumn));
        ASSERT_TRUE(RequantizedMatches(isa(), c, y_type, false, 1e-3f, y_zero, INT32_MIN, INT32_MAX,
                                       &three, Bias::kTensor));
      }
      ASSERT_TRUE(FloatOutputMatches(isa(), c, false, Bias::kNone, false, nullptr));
      ASSERT_TRUE(FloatOutputMatches(isa(), c, true, Bias::kNone, true, &two));
      ASSERT_TRUE(FloatOutputMatches(isa(), c, true, Bias::kColumn, true, nullptr));
      ASSERT_TRUE(FloatOutputMatches(isa(), c, false, Bias::kTensor, true, &three));
      c.za_per_row = c.zb_per_col = true, c.lda_pad = 3, c.ldc_pad = 5, c.zb = kRandom;
      ASSERT_TRUE(RequantizedMatches(isa(), c, DType::kUInt8, true, 1e-3f, 7, INT32_MIN, INT32_MAX,
                                     &three));
      ASSERT_TRUE(FloatOutputMatches(isa(), c, true, Bias::kColumn, true, &three));
      c.za_per_row = c.zb_per_col = false, c.lda_pad = c.ldc_pad = 0;
    }
  }
}

TEST_P(GemmIsaTest, RefusesKBeyondTheExactLimit) {
  std::vector<uint8_t> b(kGemmMaxK + 1, 0);
  const GemmPlan plan = PlanGemm(isa(), true);
  EXPECT_THROW(PackB(plan, b.data(), true, kGemmMaxK + 1, 1, 1), Error);
  const PackedB packed = PackB(plan, b.data(), true, 4, 2, 2);
  int32_t out[4];
  uint8_t a[8] = {};
  EXPECT_THROW(Gemm(plan, 2, Int8Operand{a, true, 3}, {}, packed, Epilogue{}, out, 2, nullptr),
               Error);  // lda < K
  // A of the other signedness, an incomplete epilogue, a B packed for another path.
  EXPECT_THROW(Gemm(plan, 2, Int8Operand{a, false, 4}, {}, packed, Epilogue{}, out, 2, nullptr),
               Error);
  Epilogue no_multiplier;
  no_multiplier.output = EpilogueOutput::kFloat;
  EXPECT_THROW(Gemm(plan, 2, Int8Operand{a, true, 4}, {}, packed, no_multiplier, out, 2, nullptr),
               Error);
  for (Isa other : SupportedIsas()) {
    const GemmPlan other_plan = PlanGemm(other, true);
    if (other_plan.packed->nr != plan.packed->nr ||
        other_plan.packed->k_group != plan.packed->k_group) {
      EXPECT_THROW(
          Gemm(other_plan, 2, Int8Operand{a, true, 4}, {}, packed, Epilogue{}, out, 2, nullptr),
          Error);
    }
  }
}

// Per-row epilogue operands (QGemm's [M, N] and [M, 1] C, the fused matmul's
// per-axis x scales through a row index): value(r, c) = data[row(r) * stride + c].
TEST_P(GemmIsaTest, PerRowAndPerColumnEpilogueOperands) {
  for (const auto& [M, K, N] :
       {std::array<int64_t, 3>{37, 40, 53}, {130, 300, 70}, {5, 4100, 33}}) {
    Case c;
    c.M = M, c.K = K, c.N = N, c.seed = static_cast<uint32_t>(M * 7 + N);
    DrawnOperands d(c, isa());
    std::vector<int32_t> bias(M * N), row_index(M);
    std::vector<float> multipliers(3 * N);
    for (int64_t i = 0; i < M * N; ++i) bias[i] = static_cast<int32_t>(i * 131 % 20001) - 10000;
    for (int64_t i = 0; i < 3 * N; ++i) multipliers[i] = 1e-4f * static_cast<float>(1 + i % 17);
    for (int64_t m = 0; m < M; ++m) row_index[m] = static_cast<int32_t>((m / 2) % 3);
    Epilogue e;
    e.output = EpilogueOutput::kInt8;
    e.bias = {bias.data(), true, true, N};
    e.multiplier = {multipliers.data(), true, true, N, row_index.data()};
    e.zero_point = 5;
    GuardedBuffer<uint8_t> out(static_cast<size_t>(M * N));
    ThreadPool two(2);
    Gemm(d.plan, M, d.A(c), d.Zero(c), d.packed, e, out.data(), N, &two);
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) {
        const int32_t sum = WrappingAdd(d.acc[m * N + n], bias[m * N + n]);
        const int32_t want =
            ExpectedRequantized(sum, multipliers[row_index[m] * N + n], -128, 127, 5);
        ASSERT_EQ(static_cast<int8_t>(out[m * N + n]), want)
            << IsaName(isa()) << " " << Describe(c) << " at " << m << "," << n;
      }
    }
    // Per-row only ([M, 1] C) with one multiplier, float output.
    Epilogue f;
    f.output = EpilogueOutput::kFloat;
    f.bias = {bias.data(), true, false, 1};
    f.multiplier = {multipliers.data()};
    GuardedBuffer<float> fout(static_cast<size_t>(M * N));
    Gemm(d.plan, M, d.A(c), d.Zero(c), d.packed, f, fout.data(), N, nullptr);
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) {
        const float want =
            static_cast<float>(WrappingAdd(d.acc[m * N + n], bias[m])) * multipliers[0];
        ASSERT_EQ(fout[m * N + n], want) << IsaName(isa()) << " " << Describe(c);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, GemmIsaTest, ::testing::ValuesIn(kAllIsas),
                         [](const ::testing::TestParamInfo<Isa>& info) {
                           return std::string(IsaName(info.param));
                         });

TEST(GemmIsa, EveryPathGivesTheSameBytes) {
  Case c;
  c.M = 77, c.N = 95, c.K = 600, c.a_signed = true, c.b_signed = false, c.zb_per_col = true;
  const std::vector<int32_t> want = RunReference(c);
  for (Isa isa : kAllIsas) {
    if (IsaSupported(isa)) {
      EXPECT_EQ(RunGemm(isa, c, nullptr), want) << IsaName(isa);
    }
  }
}

TEST(GemmIsa, NamesAndDispatch) {
  for (Isa isa : kAllIsas) EXPECT_EQ(ParseIsa(IsaName(isa)), isa);
  EXPECT_THROW(ParseIsa("avx1024"), Error);
  EXPECT_TRUE(IsaSupported(Isa::kScalar));
  EXPECT_TRUE(IsaSupported(BestIsa()));
  EXPECT_TRUE(IsaSupported(ActiveIsa()));
  for (Isa isa : {Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512, Isa::kAvx512Vnni, Isa::kNeonDot}) {
    if (!IsaSupported(isa)) {
      EXPECT_THROW(PlanGemm(isa, true), Error) << IsaName(isa);
    }
  }
}

// OCTET_ISA is read once per process, so each case runs in a fresh process
// (the "threadsafe" death-test style re-executes the test binary).
int ActiveIsaExitCode(const char* forced) {
  setenv("OCTET_ISA", forced, 1);
  try {
    return 10 + static_cast<int>(ActiveIsa());
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}

TEST(GemmIsaDeathTest, OctetIsaForcesAPathOrFailsClearly) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_EXIT(std::exit(ActiveIsaExitCode("scalar")), ::testing::ExitedWithCode(10), "");
  EXPECT_EXIT(
      std::exit(ActiveIsaExitCode("avx1024")), ::testing::ExitedWithCode(1),
      "OCTET_ISA='avx1024' is not one of scalar, avx2, avxvnni, avx512, avx512vnni, neondot");
  for (Isa isa : {Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512, Isa::kAvx512Vnni, Isa::kNeonDot}) {
    if (IsaSupported(isa)) {
      EXPECT_EXIT(std::exit(ActiveIsaExitCode(IsaName(isa))),
                  ::testing::ExitedWithCode(10 + static_cast<int>(isa)), "");
    } else {
      EXPECT_EXIT(std::exit(ActiveIsaExitCode(IsaName(isa))), ::testing::ExitedWithCode(1),
                  std::string("OCTET_ISA=") + IsaName(isa) + ": ");
    }
  }
}

}  // namespace
}  // namespace octet
