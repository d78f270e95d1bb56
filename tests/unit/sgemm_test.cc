// Float GEMM (kernels/float/sgemm.h) against two independent references:
// a naive double-precision product, within |error| <= K * 2^-23 * sum|a*b|
// (fp32 rounding of K fused steps, each at most half an ulp of a partial sum
// bounded by sum|a*b|), and the naive left-to-right fma chain the header
// promises, bit for bit. Every supported path, every thread count.
#include "kernels/float/sgemm.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"

namespace octet {
namespace {

struct Problem {
  int64_t M, N, K;
  std::vector<float> a, b;  // row-major, lda = K + a_pad, ldb = N + b_pad
  int64_t lda, ldb;
};

Problem MakeProblem(int64_t M, int64_t N, int64_t K, uint32_t seed, int64_t a_pad = 0,
                    int64_t b_pad = 0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.f, 2.f);
  Problem p{M, N, K, {}, {}, K + a_pad, N + b_pad};
  p.a.resize(M * p.lda);
  p.b.resize(K * p.ldb);
  for (float& v : p.a) v = dist(rng);
  for (float& v : p.b) v = dist(rng);
  return p;
}

// The chain the header specifies: c = fma(a[i,p], b[p,j], c), p increasing, from +0.
std::vector<float> FmaChain(const Problem& p) {
  std::vector<float> c(p.M * p.N);
  for (int64_t i = 0; i < p.M; ++i)
    for (int64_t j = 0; j < p.N; ++j) {
      float acc = 0.f;
      for (int64_t q = 0; q < p.K; ++q) acc = std::fma(p.a[i * p.lda + q], p.b[q * p.ldb + j], acc);
      c[i * p.N + j] = acc;
    }
  return c;
}

void ExpectNearDouble(const Problem& p, const std::vector<float>& c) {
  for (int64_t i = 0; i < p.M; ++i)
    for (int64_t j = 0; j < p.N; ++j) {
      double exact = 0, magnitude = 0;
      for (int64_t q = 0; q < p.K; ++q) {
        const double term = double(p.a[i * p.lda + q]) * p.b[q * p.ldb + j];
        exact += term;
        magnitude += std::fabs(term);
      }
      const double tolerance = p.K * std::ldexp(1.0, -23) * magnitude;
      ASSERT_LE(std::fabs(c[i * p.N + j] - exact), tolerance)
          << "at (" << i << ", " << j << ") of " << p.M << "x" << p.N << "x" << p.K;
    }
}

std::vector<SgemmPath> SupportedPaths() {
  std::vector<SgemmPath> paths;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Vnni})
    if (IsaSupported(isa)) paths.push_back(SgemmPathFor(isa));
  return paths;
}

enum class Packing { kNone, kA, kB };

std::vector<float> RunSgemm(const Problem& p, SgemmPath path, Packing packing, ThreadPool* pool,
                            int64_t ldc_pad = 0) {
  const int64_t ldc = p.N + ldc_pad;
  std::vector<float> c(p.M * ldc, -7.f);  // garbage the product must overwrite
  SgemmPacked packed_a = SgemmPackA(p.a.data(), p.M, p.K, p.lda, path);
  SgemmPacked packed_b = SgemmPackB(p.b.data(), p.K, p.N, p.ldb, path);
  // With a packed operand its path runs, otherwise the one asked for.
  const SgemmOperand a = packing == Packing::kB ? SgemmOperand::RowMajor(p.a.data(), p.lda)
                                                : SgemmOperand::Packed(packed_a);
  const SgemmOperand b = packing == Packing::kA ? SgemmOperand::RowMajor(p.b.data(), p.ldb)
                                                : SgemmOperand::Packed(packed_b);
  Sgemm(p.M, p.N, p.K, a, b, c.data(), ldc, pool, path);
  std::vector<float> dense(p.M * p.N);
  for (int64_t i = 0; i < p.M; ++i) {
    std::memcpy(&dense[i * p.N], &c[i * ldc], p.N * sizeof(float));
    for (int64_t j = p.N; j < ldc; ++j) EXPECT_EQ(c[i * ldc + j], -7.f) << "wrote past N";
  }
  return dense;
}

bool SameBits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

TEST(Sgemm, MatchesDoubleAndFmaChainOnEveryPathAndThreadCount) {
  ThreadPool pool2(2), pool3(3);
  const int64_t shapes[][3] = {{1, 1, 1},    {1, 37, 5},     {13, 1, 9},     {5, 7, 1},
                               {12, 32, 16}, {25, 65, 300},  {37, 95, 513},  {130, 70, 260},
                               {6, 200, 3},  {64, 49, 576},  {128, 128, 32}, {128, 32, 128},
                               {29, 45, 7},  {100, 33, 256}, {7, 70, 40},    {3, 17, 257}};
  uint32_t seed = 1;
  for (const auto& s : shapes) {
    const Problem p = MakeProblem(s[0], s[1], s[2], seed++, /*a_pad=*/3, /*b_pad=*/5);
    const std::vector<float> chain = FmaChain(p);
    ExpectNearDouble(p, chain);
    for (SgemmPath path : SupportedPaths())
      for (Packing packing : {Packing::kNone, Packing::kA, Packing::kB})
        for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
          const std::vector<float> c = RunSgemm(p, path, packing, pool, /*ldc_pad=*/2);
          EXPECT_TRUE(SameBits(c, chain))
              << SgemmPathName(path) << " " << s[0] << "x" << s[1] << "x" << s[2] << " packing "
              << int(packing) << " threads " << (pool ? pool->num_threads() : 1);
        }
  }
}

TEST(Sgemm, PacksBFromItsTranspose) {
  // Full panels go through the paths' register transposes: K in whole blocks and not.
  for (const auto& s : std::vector<std::array<int64_t, 3>>{
           {7, 32, 5}, {12, 100, 33}, {3, 16, 1}, {1, 256, 64}, {3, 70, 37}, {13, 64, 130}}) {
    const int64_t M = s[0], N = s[1], K = s[2];
    Problem p = MakeProblem(M, N, K, 40 + static_cast<uint32_t>(N), 2, 0);
    // The transpose of B, N rows of K with leading dimension K + 3.
    std::vector<float> b_t(N * (K + 3), 9.f);
    for (int64_t q = 0; q < K; ++q)
      for (int64_t j = 0; j < N; ++j) b_t[j * (K + 3) + q] = p.b[q * p.ldb + j];
    const std::vector<float> chain = FmaChain(p);
    for (SgemmPath path : SupportedPaths()) {
      const SgemmPacked packed = SgemmPackBTransposed(b_t.data(), K, N, K + 3, path);
      std::vector<float> c(M * N, -7.f);
      Sgemm(M, N, K, SgemmOperand::RowMajor(p.a.data(), p.lda), SgemmOperand::Packed(packed),
            c.data(), N, nullptr);
      EXPECT_TRUE(SameBits(c, chain)) << SgemmPathName(path) << " " << M << "x" << N << "x" << K;
    }
  }
}

TEST(Sgemm, LargeEnoughToSplitAcrossThreads) {
  const Problem p = MakeProblem(200, 300, 700, 99);
  const std::vector<float> chain = FmaChain(p);
  ExpectNearDouble(p, chain);
  ThreadPool pool2(2), pool3(3);
  for (SgemmPath path : SupportedPaths())
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3})
      EXPECT_TRUE(SameBits(RunSgemm(p, path, Packing::kB, pool), chain)) << SgemmPathName(path);
}

TEST(Sgemm, EmptyShapes) {
  std::vector<float> c(6, -7.f);
  const float one = 1.f;
  Sgemm(0, 3, 4, SgemmOperand::RowMajor(&one, 4), SgemmOperand::RowMajor(&one, 3), c.data(), 3,
        nullptr);
  EXPECT_EQ(c[0], -7.f);
  Sgemm(2, 3, 0, SgemmOperand::RowMajor(&one, 0), SgemmOperand::RowMajor(&one, 3), c.data(), 3,
        nullptr);
  for (float v : c) EXPECT_EQ(v, 0.f);  // K = 0: an empty sum
}

TEST(Sgemm, RejectsBadArguments) {
  std::vector<float> a(12), b(12), c(16);
  EXPECT_THROW(Sgemm(-1, 2, 2, SgemmOperand::RowMajor(a.data(), 2),
                     SgemmOperand::RowMajor(b.data(), 2), c.data(), 2, nullptr),
               Error);
  EXPECT_THROW(Sgemm(2, 4, 3, SgemmOperand::RowMajor(a.data(), 2),
                     SgemmOperand::RowMajor(b.data(), 4), c.data(), 4, nullptr),
               Error);
  const SgemmPacked packed = SgemmPackB(b.data(), 3, 4, 4);
  EXPECT_THROW(Sgemm(2, 4, 2, SgemmOperand::RowMajor(a.data(), 3), SgemmOperand::Packed(packed),
                     c.data(), 4, nullptr),
               Error);
}

}  // namespace
}  // namespace octet
