// Every micro-kernel of the table (kernels/int8/gemm_kernels.h) that this CPU
// runs, on its own against the tile contract written out here (XNNPACK's
// per-kernel tester): sums of the multiplied domains over one or two k blocks
// (the partial sums kept between them), both zero-point corrections, and every
// epilogue output, for every row count up to mr, stored column counts around
// the vector widths, K = 1 and odd K (zero-padded groups), operands at the type
// limits. The output ends right before an inaccessible page.
#include "kernels/int8/gemm_kernels.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "guarded_buffer.h"
#include "kernels/int8/epilogue.h"
#include "kernels/int8/gemm.h"

namespace octet {
namespace {

using gemm::ADomain;
using gemm::BDomain;
using gemm::MicroKernel;
using gemm::TileArgs;

std::vector<const MicroKernel*> KernelsHere() {
  std::vector<const MicroKernel*> kernels;
  for (const MicroKernel& k : gemm::MicroKernels())
    if (IsaSupported(k.isa)) kernels.push_back(&k);
  return kernels;
}

int32_t Wrap(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }

// One tile's operands: A (rows x K, of `a_signed` bytes) and B (K x nr, of
// `b_signed` bytes), and what the kernel multiplies: a'[r][k] and b'[k][j].
struct TileCase {
  const MicroKernel& kernel;
  int rows;
  int64_t K;
  bool a_signed, b_signed;
  std::vector<uint8_t> a, b;

  // The value the kernel multiplies for A byte `v`: its stored domain.
  int32_t AValue(uint8_t v) const {
    const int32_t value = a_signed ? static_cast<int8_t>(v) : v;
    return value + gemm::AShift(kernel, a_signed);
  }
  int32_t BValue(uint8_t v) const {
    const int32_t value = b_signed ? static_cast<int8_t>(v) : v;
    return value + gemm::BShift(kernel, b_signed);
  }
  int64_t Sum(int r, int j, int64_t k0, int64_t k1) const {
    int64_t s = 0;
    for (int64_t k = k0; k < k1; ++k)
      s += int64_t{AValue(a[r * K + k])} * BValue(b[k * kernel.nr + j]);
    return s;
  }
};

TileCase MakeCase(const MicroKernel& kernel, int rows, int64_t K, std::mt19937& rng) {
  // Row-major kernels read the signedness they were made for; packed ones take both.
  const bool a_signed = kernel.a_row_major ? kernel.a_signed : rng() % 2 == 0;
  TileCase c{kernel, rows, K, a_signed, rng() % 2 == 0, {}, {}};
  c.a.resize(static_cast<size_t>(rows * K));
  c.b.resize(static_cast<size_t>(K * kernel.nr));
  // Values at the limits (0x00, 0x7F, 0x80, 0xFF) and random ones.
  static const uint8_t kLimits[] = {0x00, 0x7F, 0x80, 0xFF};
  for (auto& v : c.a) v = rng() % 3 == 0 ? kLimits[rng() % 4] : static_cast<uint8_t>(rng());
  for (auto& v : c.b) v = rng() % 3 == 0 ? kLimits[rng() % 4] : static_cast<uint8_t>(rng());
  return c;
}

// The kernel's packed A (or A itself for row-major kernels) and packed B.
struct Packed {
  std::vector<uint8_t> a;
  int64_t a_ld = 0;
  PackedB b;
};

Packed Pack(const TileCase& c) {
  Packed p;
  const MicroKernel& k = c.kernel;
  const int64_t groups = (c.K + k.k_group - 1) / k.k_group;
  if (k.a_row_major) {
    p.a = c.a;  // whole k groups: K is a multiple of the group here
    p.a_ld = c.K;
  } else {
    p.a.resize(static_cast<size_t>(c.rows * groups * k.k_group * gemm::ADomainBytes(k.a_domain)));
    std::vector<int32_t> row_sums(c.rows);
    gemm::PackA(k, c.a.data(), c.a_signed, c.K, 0, c.rows, c.K, p.a.data(), row_sums.data());
    for (int r = 0; r < c.rows; ++r) {
      int64_t want = 0;
      for (int64_t i = 0; i < c.K; ++i) want += c.AValue(c.a[r * c.K + i]);
      EXPECT_EQ(row_sums[r], want) << k.name << " PackA row sum of row " << r;
    }
  }
  GemmPlan plan;
  plan.packed = &k;  // the kernel's B layout
  p.b = PackB(plan, c.b.data(), c.b_signed, c.K, k.nr, k.nr);
  for (int j = 0; j < k.nr; ++j) {
    int64_t want = 0;
    for (int64_t i = 0; i < c.K; ++i) {
      const int32_t value = c.b_signed ? static_cast<int8_t>(c.b[i * k.nr + j]) : c.b[i * k.nr + j];
      want += value +
              (k.b_domain == BDomain::kSigned8 ? (c.b_signed ? 0 : -128) : (c.b_signed ? 128 : 0));
    }
    EXPECT_EQ(p.b.col_sums[j], want) << k.name << " PackB column sum " << j;
  }
  return p;
}

struct Corrections {
  bool rank_one;  // col_offset + row_offset, else the two products
  std::vector<int32_t> row_neg_za, row_neg_sum, col_term, col_zb, col_offset, row_offset;
};

Corrections MakeCorrections(int mr, int nr, bool rank_one, std::mt19937& rng) {
  Corrections z{rank_one, {}, {}, {}, {}, {}, {}};
  auto fill = [&](std::vector<int32_t>& v, int n) {
    v.resize(n);
    for (auto& x : v) x = static_cast<int32_t>(rng() % 2001) - 1000;
  };
  fill(z.row_neg_za, mr);
  fill(z.row_neg_sum, mr);
  fill(z.col_term, nr);
  fill(z.col_zb, nr);
  fill(z.col_offset, nr);
  fill(z.row_offset, mr);
  return z;
}

int64_t Correction(const Corrections& z, int r, int j) {
  if (z.rank_one) return int64_t{z.col_offset[j]} + z.row_offset[r];
  return int64_t{z.row_neg_za[r]} * z.col_term[j] + int64_t{z.row_neg_sum[r]} * z.col_zb[j];
}

// row_neg_sum as the driver sets it on every last block: -(row sum of stored A),
// which paired-B kernels use themselves.
void SetRowSums(const TileCase& c, Corrections& z) {
  for (int r = 0; r < c.rows; ++r) {
    int64_t sum = 0;
    for (int64_t k = 0; k < c.K; ++k) sum += c.AValue(c.a[r * c.K + k]);
    z.row_neg_sum[r] = Wrap(-sum);
  }
}

// The epilogues under test, for a product whose element (0, 0) is (row0, col0).
struct Epilogues {
  std::vector<int32_t> bias;
  std::vector<float> multiplier, float_bias;
  std::vector<Epilogue> all;
};

Epilogues MakeEpilogues(int64_t rows, int64_t cols, std::mt19937& rng) {
  Epilogues e;
  e.bias.resize(rows * cols);
  e.multiplier.resize(rows * cols);
  e.float_bias.resize(cols);
  for (auto& v : e.bias) v = static_cast<int32_t>(rng() % 20001) - 10000;
  for (auto& v : e.multiplier) v = 1e-5f * static_cast<float>(1 + rng() % 300);
  for (auto& v : e.float_bias) v = 0.01f * static_cast<float>(static_cast<int>(rng() % 201) - 100);
  Epilogue int32;
  Epilogue biased;
  biased.bias = {e.bias.data(), true, true, cols};
  Epilogue to_float;
  to_float.output = EpilogueOutput::kFloat;
  to_float.multiplier = {e.multiplier.data(), false, true};
  to_float.bias = {e.bias.data(), false, true};
  to_float.float_bias = {e.float_bias.data(), false, true};
  Epilogue u8;
  u8.output = EpilogueOutput::kUInt8;
  u8.multiplier = {e.multiplier.data(), true, false, cols};  // per row (a convolution's channels)
  u8.bias = {e.bias.data(), true, false, cols};
  u8.zero_point = 131;
  u8.y_min = 140;  // an absorbed Relu-like clamp
  Epilogue s8;
  s8.output = EpilogueOutput::kInt8;
  s8.multiplier = {e.multiplier.data()};
  s8.zero_point = -128;
  e.all = {int32, biased, to_float, u8, s8};
  return e;
}

// Runs the tile over K in one block, or two (the first leaving partial sums),
// and compares every stored output with ApplyEpilogue of the contract's sum;
// columns past `cols` must keep their sentinel.
::testing::AssertionResult CheckTile(const TileCase& c, const Packed& p, const Corrections& z,
                                     const Epilogue& e, int cols, bool two_blocks) {
  const MicroKernel& k = c.kernel;
  const int nr = k.nr;
  const int64_t groups = (c.K + k.k_group - 1) / k.k_group;
  const int64_t size = e.element_size();
  const int64_t row0 = 3, col0 = 5;  // where the tile sits in its product
  GuardedBuffer<uint8_t> out(static_cast<size_t>(c.rows * nr * size));
  std::memset(out.data(), 0xA5, out.size());
  std::vector<int32_t> partial(static_cast<size_t>(c.rows * nr), 0x5A5A5A5A);
  const int64_t split = two_blocks ? (groups + 1) / 2 : groups;
  const int value_bytes = gemm::ADomainBytes(k.a_domain);
  for (int block = 0; block < (two_blocks ? 2 : 1); ++block) {
    const int64_t g0 = block == 0 ? 0 : split, g1 = block == 0 ? split : groups;
    TileArgs t;
    if (k.a_row_major) {
      t.a = p.a.data() + g0 * k.k_group;
      t.a_ld = p.a_ld;
    } else {
      t.a = p.a.data() + g0 * c.rows * k.k_group * value_bytes;
    }
    t.b = p.b.data.data<int8_t>() + g0 * nr * k.k_group;
    t.k_groups = g1 - g0;
    t.accumulate = block == 1;
    t.last = !two_blocks || block == 1;
    t.partial = partial.data();
    t.partial_ld = nr;
    if (t.last) {
      t.row_neg_sum = z.row_neg_sum.data();
      if (z.rank_one) {
        t.col_offset = z.col_offset.data();
        t.row_offset = z.row_offset.data();
      } else {
        t.row_neg_za = z.row_neg_za.data();
        t.col_term = z.col_term.data();
        t.col_zb = z.col_zb.data();
      }
      t.epilogue = &e;
      t.row0 = row0;
      t.col0 = col0;
      t.out = out.data();
      t.ld_out = nr;
      t.cols = cols;
    }
    k.tile(c.rows, t);
  }
  for (int r = 0; r < c.rows; ++r) {
    for (int j = 0; j < nr; ++j) {
      uint8_t want[4];
      std::memset(want, 0xA5, sizeof(want));
      if (j < cols) {
        const int32_t sum = Wrap(c.Sum(r, j, 0, c.K) + Correction(z, r, j));
        ApplyEpilogue(e, sum, row0 + r, col0 + j, want);
      }
      if (std::memcmp(out.data() + (r * nr + j) * size, want, size) != 0) {
        int32_t got_bits = 0, want_bits = 0;
        std::memcpy(&got_bits, out.data() + (r * nr + j) * size, size);
        std::memcpy(&want_bits, want, size);
        return ::testing::AssertionFailure()
               << k.name << " rows=" << c.rows << " K=" << c.K << " cols=" << cols
               << (two_blocks ? " two k blocks" : "") << " output " << static_cast<int>(e.output)
               << (z.rank_one ? " rank-one correction" : "") << ": element (" << r << "," << j
               << ") bits " << got_bits << ", want " << want_bits;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(GemmMicroKernels, TheTableNamesEveryKernelOnce) {
  std::vector<std::string> names;
  for (const MicroKernel& k : gemm::MicroKernels()) {
    names.emplace_back(k.name);
    EXPECT_EQ(&gemm::MicroKernelNamed(k.name), &k);
    EXPECT_LE(k.mr, gemm::kMaxRows) << k.name;
    EXPECT_LE(k.nr, gemm::kMaxCols) << k.name;
    EXPECT_EQ(k.a_row_major, k.row_sums != nullptr) << k.name;
    EXPECT_NE(std::string(k.name).find(std::string("_") + IsaName(k.isa)), std::string::npos)
        << k.name << " does not end in its ISA";
  }
  for (size_t i = 0; i < names.size(); ++i)
    for (size_t j = i + 1; j < names.size(); ++j) EXPECT_NE(names[i], names[j]);
  EXPECT_THROW(gemm::MicroKernelNamed("gemm_nothing"), Error);
}

TEST(GemmMicroKernels, EveryKernelHonoursTheTileContract) {
  std::mt19937 rng(20261201);
  int checked = 0;
  for (const MicroKernel* kp : KernelsHere()) {
    const MicroKernel& k = *kp;
    SCOPED_TRACE(k.name);
    // K: one value (zero-padded group), odd, around the groups, a long one.
    std::vector<int64_t> ks = {1, 3, 7, 8, 33, 256};
    for (int64_t K : ks) {
      if (k.a_row_major && K % k.k_group != 0) continue;  // whole groups only
      for (int rows = 1; rows <= k.mr; ++rows) {
        const TileCase c = MakeCase(k, rows, K, rng);
        const Packed p = Pack(c);
        const Epilogues epilogues = MakeEpilogues(64, 64, rng);
        for (const bool rank_one : {false, true}) {
          Corrections z = MakeCorrections(k.mr, k.nr, rank_one, rng);
          SetRowSums(c, z);
          for (const Epilogue& e : epilogues.all) {
            for (int cols : {k.nr, k.nr - 1, 1, 9, 17}) {
              if (cols > k.nr) continue;
              for (bool two_blocks : {false, true}) {
                if (two_blocks && (K + k.k_group - 1) / k.k_group < 2) continue;
                ASSERT_TRUE(CheckTile(c, p, z, e, cols, two_blocks));
                ++checked;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace octet
