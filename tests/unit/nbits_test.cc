// The 4-bit weight product (kernels/nbits/nbits.h): every path the CPU runs
// against the naive reference, bit for bit, and the reference against
// products written out independently.
#include "kernels/nbits/nbits.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "expect_error.h"

namespace octet {
namespace {

struct Case {
  int64_t M, K, N, block_size;
  std::vector<uint8_t> q;  // N x K
  std::vector<float> scales, zero, a, bias;
  bool has_zero = true, has_bias = false;
  int64_t k_blocks() const { return (K + block_size - 1) / block_size; }
};

// zero_mode: -1 absent, -2 random codes, -3 random floats (not integers), else
// every zero point that value.
Case MakeCase(int64_t M, int64_t K, int64_t N, int64_t bs, int zero_mode, bool bias,
              uint32_t seed) {
  std::mt19937 rng(seed);
  Case c{M, K, N, bs, {}, {}, {}, {}, {}};
  std::uniform_int_distribution<int> nibble(0, 15);
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  c.q.resize(N * K);
  for (auto& v : c.q) v = static_cast<uint8_t>(nibble(rng));
  c.scales.resize(N * c.k_blocks());
  for (auto& s : c.scales) s = std::ldexp(0.5f + std::fabs(unit(rng)), -(nibble(rng) % 6));
  c.has_zero = zero_mode != -1;
  if (c.has_zero) {
    c.zero.resize(N * c.k_blocks());
    for (auto& z : c.zero) {
      z = static_cast<float>(zero_mode == -2 ? nibble(rng) : zero_mode);
      if (zero_mode == -3) z = nibble(rng) + 0.25f + 0.5f * std::fabs(unit(rng));
    }
  }
  c.a.resize(M * K);
  for (auto& v : c.a) v = unit(rng) * std::ldexp(1.f, nibble(rng) % 8 - 4);
  // Edge rows: an all-zero block, equal values, one large value.
  if (M > 1)
    for (int64_t k = 0; k < std::min(K, bs); ++k) c.a[K + k] = 0.f;
  if (M > 2)
    for (int64_t k = 0; k < K; ++k) c.a[2 * K + k] = k % 3 == 0 ? 1e6f : -0.25f;
  c.has_bias = bias;
  if (bias) {
    c.bias.resize(N);
    for (auto& b : c.bias) b = unit(rng);
  }
  return c;
}

std::vector<float> Reference(const Case& c, NBitsArithmetic arith) {
  std::vector<float> y(c.M * c.N);
  NBitsMatMulReference(c.q.data(), c.scales.data(), c.has_zero ? c.zero.data() : nullptr, c.K, c.N,
                       c.block_size, arith, c.M, c.a.data(), c.has_bias ? c.bias.data() : nullptr,
                       y.data());
  return y;
}

std::vector<float> RunPacked(const Case& c, NBitsArithmetic arith, Isa isa, ThreadPool* pool) {
  const PackedNBits w = PackNBits(c.q.data(), c.scales.data(), c.has_zero ? c.zero.data() : nullptr,
                                  c.K, c.N, c.block_size, arith);
  std::vector<float> y(c.M * c.N, -7.f);
  NBitsMatMul(w, c.M, c.a.data(), c.K, c.has_bias ? c.bias.data() : nullptr, y.data(), c.N, pool,
              isa);
  return y;
}

// The same bits in every value, except that a NaN matches any NaN: which NaN an
// fma returns (its sign) depends on how the compiler spells fma(-zp, sum, t) (a
// negated operand or vfnmadd), not on the arithmetic's order.
bool SameBytes(const std::vector<float>& x, const std::vector<float>& y) {
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) && std::isnan(y[i])) continue;
    if (std::memcmp(&x[i], &y[i], sizeof(float)) != 0) return false;
  }
  return true;
}

class NBitsIsaTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!IsaSupported(GetParam()))
      GTEST_SKIP() << IsaName(GetParam()) << ": " << IsaUnsupportedReason(GetParam());
  }
};

TEST_P(NBitsIsaTest, MatchesTheReferenceBitForBit) {
  uint32_t seed = 1;
  for (NBitsArithmetic arith : {NBitsArithmetic::kFloat, NBitsArithmetic::kInt8}) {
    for (int64_t bs : {16, 32, 128}) {
      // K = one block, several, not a multiple of the block, odd, and one k.
      for (int64_t K : {bs, 3 * bs, bs + 5, 2 * bs - 1, int64_t{1}}) {
        // N: one column, part of a panel, a panel, a group of 3 panels, groups of 4 and 3.
        for (int64_t N : {1, 7, 16, 33, 100}) {
          // M 9: three tiles of rows, the last of one row.
          for (int64_t M : {0, 1, 2, 3, 4, 5, 9}) {
            for (int zero_mode : {-1, -2, -3, 0, 15}) {
              // The int8 arithmetic refuses float zero points (NBits.Refusals).
              if (zero_mode == -3 && arith == NBitsArithmetic::kInt8) continue;
              const Case c = MakeCase(M, K, N, bs, zero_mode, seed % 2 == 0, seed);
              ++seed;
              ASSERT_TRUE(SameBytes(RunPacked(c, arith, GetParam(), nullptr), Reference(c, arith)))
                  << "arith " << static_cast<int>(arith) << " M " << M << " K " << K << " N " << N
                  << " bs " << bs << " zero " << zero_mode;
            }
          }
        }
      }
    }
  }
}

TEST_P(NBitsIsaTest, ThreadCountsGiveTheSameBytes) {
  ThreadPool two(2), three(3);
  for (NBitsArithmetic arith : {NBitsArithmetic::kFloat, NBitsArithmetic::kInt8}) {
    // 14 panels: the threads' shares end inside groups of panels; M 5, 20 and 40: a
    // partial last tile of rows, whole tiles, many.
    for (int64_t M : {5, 20, 40}) {
      const Case c = MakeCase(M, 640, 211, 32, -2, true, 99);
      const std::vector<float> one = RunPacked(c, arith, GetParam(), nullptr);
      EXPECT_TRUE(SameBytes(one, Reference(c, arith))) << M;
      EXPECT_TRUE(SameBytes(one, RunPacked(c, arith, GetParam(), &two))) << M;
      EXPECT_TRUE(SameBytes(one, RunPacked(c, arith, GetParam(), &three))) << M;
    }
  }
}

// y's columns written to three matrices of their own (products of one input run as one),
// at one row, a few and many, on one and two threads, with a bias and without.
TEST_P(NBitsIsaTest, OutputColumnRanges) {
  ThreadPool two(2);
  const std::vector<int64_t> widths = {64, 128, 7};
  for (NBitsArithmetic arith : {NBitsArithmetic::kFloat, NBitsArithmetic::kInt8}) {
    for (auto [M, has_bias] :
         {std::pair{1, true}, {3, true}, {20, true}, {1, false}, {20, false}}) {
      const Case c = MakeCase(M, 100, 64 + 128 + 7, 32, -2, has_bias, 17);
      const std::vector<float> want = Reference(c, arith);
      const PackedNBits w =
          PackNBits(c.q.data(), c.scales.data(), c.zero.data(), c.K, c.N, c.block_size, arith);
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &two}) {
        std::vector<std::vector<float>> parts;
        std::vector<ColumnRange> ranges;
        for (size_t i = 0; i < widths.size(); ++i) {
          parts.emplace_back(static_cast<size_t>(M * (widths[i] + 2)), -7.f);
          ranges.push_back({i == 0 ? 0 : ranges.back().first + widths[i - 1], parts.back().data(),
                            widths[i] + 2});
        }
        NBitsMatMul(w, M, c.a.data(), c.K, has_bias ? c.bias.data() : nullptr,
                    OutputColumns{ranges.data(), static_cast<int64_t>(ranges.size())}, pool,
                    GetParam());
        std::vector<float> got(want.size());
        for (size_t i = 0; i < widths.size(); ++i)
          for (int64_t m = 0; m < M; ++m)
            for (int64_t j = 0; j < widths[i] + 2; ++j) {
              const float v = parts[i][m * (widths[i] + 2) + j];
              if (j < widths[i])
                got[m * c.N + ranges[i].first + j] = v;
              else
                EXPECT_EQ(v, -7.f) << "range " << i << "'s padding written";
            }
        EXPECT_TRUE(SameBytes(got, want))
            << "arith " << static_cast<int>(arith) << " M " << M << " bias " << has_bias;
      }
    }
  }
}

// A's rows further apart than K (lda > K), with K whole octets (read in place)
// and not (copied), at the row counts of each kind of tile.
TEST_P(NBitsIsaTest, RowsApartInA) {
  for (NBitsArithmetic arith : {NBitsArithmetic::kFloat, NBitsArithmetic::kInt8}) {
    for (int64_t K : {96, 100}) {
      for (int64_t M : {1, 2, 5}) {
        const Case c = MakeCase(M, K, 40, 32, -2, true, 31);
        const int64_t lda = K + 3;
        std::vector<float> a(M * lda, std::numeric_limits<float>::quiet_NaN());
        for (int64_t m = 0; m < M; ++m) std::copy_n(c.a.begin() + m * K, K, a.begin() + m * lda);
        const PackedNBits w =
            PackNBits(c.q.data(), c.scales.data(), c.zero.data(), c.K, c.N, c.block_size, arith);
        std::vector<float> y(M * c.N);
        NBitsMatMul(w, M, a.data(), lda, c.bias.data(), y.data(), c.N, nullptr, GetParam());
        EXPECT_TRUE(SameBytes(y, Reference(c, arith)))
            << "arith " << static_cast<int>(arith) << " K " << K << " M " << M;
      }
    }
  }
}

// The int8 arithmetic's quantization of A on values at its edges: NaN (skipped
// by amax, quantized to 0), infinities, signed zeros, subnormals, ties of the
// rounding (amax 127: a * (127 / amax) = a) and a block's partial vector.
TEST_P(NBitsIsaTest, Int8QuantizationEdgeCases) {
  Case c = MakeCase(4, 70, 20, 32, -2, true, 5);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> edges = {nan,  -0.f,  1e-40f, -1e-40f, 0.5f, 1.5f,
                                    2.5f, -2.5f, 127.f,  -126.5f, nan};
  // Row 0's first block and its partial last one, an infinity in rows 1 and 2.
  for (size_t i = 0; i < edges.size(); ++i) c.a[i] = edges[i];
  for (int64_t k = 64; k < 70; ++k) c.a[k] = edges[k - 60];
  c.a[c.K + 40] = inf;
  c.a[2 * c.K + 3] = -inf;
  ASSERT_TRUE(SameBytes(RunPacked(c, NBitsArithmetic::kInt8, GetParam(), nullptr),
                        Reference(c, NBitsArithmetic::kInt8)));
}

// The float arithmetic's scales and activations at their edges: negative, zero
// and subnormal scales; an infinity and a NaN in A (the block's sum carries them).
// M 2: the tiles that read A's scaled rows on AVX2 (nbits_kernels.h).
TEST_P(NBitsIsaTest, FloatEdges) {
  for (int64_t M : {2, 5}) {
    for (int zero_mode : {-1, -2, -3}) {
      Case c = MakeCase(M, 200, 40, 32, zero_mode, true, 17);
      for (size_t i = 0; i < c.scales.size(); ++i) {
        if (i % 5 == 1) c.scales[i] = -c.scales[i];
        if (i % 7 == 2) c.scales[i] = 0.f;
        if (i % 11 == 3) c.scales[i] = std::ldexp(1.5f, -126);
        if (i % 13 == 4) c.scales[i] = 3 * std::numeric_limits<float>::denorm_min();
      }
      c.a[(M - 2) * c.K + 43] = std::numeric_limits<float>::infinity();
      c.a[(M - 1) * c.K + 70] = std::numeric_limits<float>::quiet_NaN();
      EXPECT_TRUE(SameBytes(RunPacked(c, NBitsArithmetic::kFloat, GetParam(), nullptr),
                            Reference(c, NBitsArithmetic::kFloat)))
          << "M " << M << " zero " << zero_mode;
    }
  }
}

// Activations at the bound of the rows scaled for codes read in place (AVX2's
// one- and two-row float kernels, kMinScaledExactly in nbits_kernels.h): rows
// of magnitudes in [2^e, 2^(e + 1)) with zeros of both signs. From the bound
// (e = -102) the scaled rows are exact; below it (e = -103, and subnormals) they
// would lose bits, and the kernels take the shifted codes. The outputs are of
// the values' size, so a lost bit shows.
TEST_P(NBitsIsaTest, FloatActivationsAtTheScalingBound) {
  for (int64_t M : {1, 2}) {
    for (int e : {-102, -103, -140}) {
      Case c = MakeCase(M, 200, 40, 32, -2, true, 29);
      for (size_t i = 0; i < c.a.size(); ++i)
        c.a[i] = std::ldexp(std::copysign(1.f + std::fabs(c.a[i]) / 8.f, c.a[i]), e);
      for (float& b : c.bias) b = std::ldexp(b, e);
      c.a[3] = 0.f;
      c.a[11] = -0.f;
      EXPECT_TRUE(SameBytes(RunPacked(c, NBitsArithmetic::kFloat, GetParam(), nullptr),
                            Reference(c, NBitsArithmetic::kFloat)))
          << "M " << M << " 2^" << e;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, NBitsIsaTest, ::testing::ValuesIn(kAllIsas),
                         [](const ::testing::TestParamInfo<Isa>& info) {
                           return std::string(IsaName(info.param));
                         });

// The reference on products whose value is known: the float arithmetic within
// its error bound of the exact (double) product (block_size + k_blocks + 2
// roundings over sum |a| |s| (q + |zp|)), and the int8 arithmetic on A of
// integers with amax 127, which it quantizes to themselves (s_a = 1).
TEST(NBitsReference, FloatArithmeticIsTheDequantizedProduct) {
  for (int zero_mode : {-2, -3}) {
    const Case c = MakeCase(3, 77, 5, 32, zero_mode, false, 7);
    const std::vector<float> y = Reference(c, NBitsArithmetic::kFloat);
    for (int64_t m = 0; m < c.M; ++m) {
      for (int64_t n = 0; n < c.N; ++n) {
        double exact = 0, magnitude = 0;
        for (int64_t k = 0; k < c.K; ++k) {
          const int64_t b = k / c.block_size;
          const double s = c.scales[n * c.k_blocks() + b], zero = c.zero[n * c.k_blocks() + b];
          exact += c.a[m * c.K + k] * (c.q[n * c.K + k] - zero) * s;
          magnitude += std::fabs(c.a[m * c.K + k] * s) * (c.q[n * c.K + k] + std::fabs(zero));
        }
        const double roundings = static_cast<double>(c.block_size + c.k_blocks() + 2);
        EXPECT_NEAR(y[m * c.N + n], exact, roundings * std::ldexp(1.0, -23) * magnitude);
      }
    }
  }
}

TEST(NBitsReference, Int8ArithmeticOnIntegerActivations) {
  const int64_t K = 40, N = 3, bs = 16;
  std::vector<float> a(K);
  for (int64_t k = 0; k < K; ++k) a[k] = static_cast<float>((k * 37) % 255 - 127);
  a[0] = a[16] = a[32] = 127.f;  // every block's amax
  std::vector<uint8_t> q(N * K);
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<uint8_t>((i * 7) % 16);
  const std::vector<float> scales = {0.5f, 0.25f, 2.f, 1.f, 1.f, 1.f, 0.125f, 4.f, 0.5f};
  const std::vector<float> zero = {8, 0, 15, 3, 3, 3, 1, 2, 9};
  std::vector<float> y(N);
  NBitsMatMulReference(q.data(), scales.data(), zero.data(), K, N, bs, NBitsArithmetic::kInt8, 1,
                       a.data(), nullptr, y.data());
  for (int64_t n = 0; n < N; ++n) {
    double expected = 0;
    for (int64_t k = 0; k < K; ++k)
      expected += a[k] * (q[n * K + k] - zero[n * 3 + k / bs]) * scales[n * 3 + k / bs];
    EXPECT_EQ(y[n], static_cast<float>(expected)) << n;  // every step exact here
  }
}

TEST(NBits, Refusals) {
  const std::vector<uint8_t> q(64, 1);
  const std::vector<float> s(4, 1.f), half(4, 7.5f);
  auto pack = [&](const uint8_t* codes, const float* zero, int64_t bs, NBitsArithmetic arith) {
    return [=, &s] { PackNBits(codes, s.data(), zero, 32, 2, bs, arith); };
  };
  ExpectContains(ErrorOf(pack(q.data(), nullptr, 24, NBitsArithmetic::kFloat)),
                 {"block_size 24 must be a power of two"});
  ExpectContains(ErrorOf(pack(q.data(), nullptr, 8, NBitsArithmetic::kFloat)), {"block_size 8"});
  ExpectContains(ErrorOf(pack(q.data(), half.data(), 16, NBitsArithmetic::kInt8)),
                 {"zero points that are integers in [0, 15]"});
  std::vector<uint8_t> bad = q;
  bad[5] = 16;
  ExpectContains(ErrorOf(pack(bad.data(), nullptr, 16, NBitsArithmetic::kFloat)),
                 {"is not a 4-bit value"});
}

// Packing split among threads gives the bytes of packing on one; each thread's reader
// is its own copy, asked for increasing columns (this one keeps state, as the fold's
// transposing reader does), and a bad code in any thread's part is the same error.
TEST(NBits, PackingThreadsGiveTheSameBytes) {
  const Case c = MakeCase(1, 520, 600, 32, -2, false, 11);  // K x N past the parallel size
  auto reader = [&c](const std::vector<uint8_t>& q) -> NBitsColumnReader {
    return [&c, &q, last = int64_t{-1}](int64_t n, uint8_t* codes) mutable {
      EXPECT_GT(n, last);
      last = n;
      std::copy_n(q.data() + n * c.K, c.K, codes);
    };
  };
  const PackedNBits one = PackNBits(reader(c.q), c.scales.data(), c.zero.data(), c.K, c.N,
                                    c.block_size, NBitsArithmetic::kInt8);
  ThreadPool two(2), three(3);
  for (ThreadPool* pool : {&two, &three}) {
    const PackedNBits split = PackNBits(reader(c.q), c.scales.data(), c.zero.data(), c.K, c.N,
                                        c.block_size, NBitsArithmetic::kInt8, nullptr, pool);
    EXPECT_TRUE(std::equal(one.data.begin(), one.data.end(), split.data.begin(), split.data.end()));
    EXPECT_TRUE(
        std::equal(one.scales.begin(), one.scales.end(), split.scales.begin(), split.scales.end()));
    EXPECT_TRUE(std::equal(one.zero_codes.begin(), one.zero_codes.end(), split.zero_codes.begin(),
                           split.zero_codes.end()));
    std::vector<uint8_t> bad = c.q;
    bad[(c.N - 3) * c.K + 7] = 17;  // in the last thread's part
    ExpectContains(ErrorOf([&] {
                     PackNBits(reader(bad), c.scales.data(), c.zero.data(), c.K, c.N, c.block_size,
                               NBitsArithmetic::kFloat, nullptr, pool);
                   }),
                   {"weight value 17 is not a 4-bit value"});
  }
}

}  // namespace
}  // namespace octet
