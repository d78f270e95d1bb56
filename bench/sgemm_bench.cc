// Google Benchmark for the float GEMM (kernels/float/sgemm.h) on the shapes
// the float ops run: square-ish MatMul, transformer projections (weights = B,
// packed once) and convolution as im2col (weights = A, packed once; N = output
// pixels). Counter: GFLOPS = 2 x MACs per second (wall time). Also the softmax
// row of attention (vmath::SoftmaxRow, 128 keys, without and with padding, one
// row per call and all rows in one vmath::SoftmaxRows) and the element-wise
// functions of kernels/float/vmath.h. OCTET_ISA selects the path. Run: build/<dir>/sgemm_bench
// [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "bench_pool.h"
#include "core/thread_pool.h"
#include "kernels/float/sgemm.h"
#include "kernels/float/vmath.h"

namespace octet {
namespace {

using bench::PoolFor;

struct GemmShape {
  const char* name;
  int64_t M, K, N;
  bool weights_are_a;  // conv: A = weights (Cout x Cin*kh*kw), B = im2col columns
};

const GemmShape kShapes[] = {
    {"matmul_128x1024x1024", 128, 1024, 1024, false},
    {"matmul_512x1024x1024", 512, 1024, 1024, false},
    {"bert_qkv_128x384x384", 128, 384, 384, false},
    {"bert_ffn1_128x384x1536", 128, 384, 1536, false},
    {"bert_ffn2_128x1536x384", 128, 1536, 384, false},
    {"conv3x3_64to64_56", 64, 576, 3136, true},
    {"conv3x3_128to128_28", 128, 1152, 784, true},
    {"conv3x3_256to256_14", 256, 2304, 196, true},
    {"conv1x1_64to256_56", 256, 64, 3136, true},
    {"stem3x3s2_3to32_224", 32, 27, 12544, true},
};

void BM_Sgemm(benchmark::State& state) {
  const GemmShape& s = kShapes[state.range(0)];
  ThreadPool* pool = PoolFor(static_cast<int>(state.range(1)));
  state.SetLabel(s.name);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> a(s.M * s.K), b(s.K * s.N), c(s.M * s.N);
  for (float& v : a) v = dist(rng);
  for (float& v : b) v = dist(rng);
  SgemmPacked packed =
      s.weights_are_a ? SgemmPackA(a.data(), s.M, s.K, s.K) : SgemmPackB(b.data(), s.K, s.N, s.N);
  const SgemmOperand op_a =
      s.weights_are_a ? SgemmOperand::Packed(packed) : SgemmOperand::RowMajor(a.data(), s.K);
  const SgemmOperand op_b =
      s.weights_are_a ? SgemmOperand::RowMajor(b.data(), s.N) : SgemmOperand::Packed(packed);
  for (auto _ : state) {
    Sgemm(s.M, s.N, s.K, op_a, op_b, c.data(), s.N, pool);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * s.M * s.N * s.K * state.iterations(), benchmark::Counter::kIsRate);
}

void Args(benchmark::internal::Benchmark* b) {
  for (int64_t shape = 0; shape < static_cast<int64_t>(std::size(kShapes)); ++shape)
    for (int64_t threads : {1, 2}) b->Args({shape, threads});
}

BENCHMARK(BM_Sgemm)->Apply(Args)->UseRealTime()->MinTime(0.2);

// 4096 rows of 128 attention scores; state.range(0) of them kept, the rest
// padded as BERT masks them (-10000 added), whose exps underflow to 0.
constexpr int64_t kRows = 4096, kKeys = 128;

void FillScores(int64_t kept, std::vector<float>& x) {
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t j = 0; j < kKeys; ++j)
      x[r * kKeys + j] =
          (j < kept ? 0.f : -10000.f) + 0.01f * static_cast<float>((r * 7 + j * 13) % 97);
}

void BM_SoftmaxRow(benchmark::State& state) {
  const int64_t kept = state.range(0);
  std::vector<float> x(kRows * kKeys), y(kKeys);
  FillScores(kept, x);
  for (auto _ : state) {
    for (int64_t r = 0; r < kRows; ++r) vmath::SoftmaxRow(x.data() + r * kKeys, y.data(), kKeys);
    benchmark::DoNotOptimize(y.data());
  }
}

BENCHMARK(BM_SoftmaxRow)->Arg(128)->Arg(20)->ArgName("kept")->UseRealTime();

// The same rows through one SoftmaxRows call, as the attention kernels run them.
void BM_SoftmaxRows(benchmark::State& state) {
  const int64_t kept = state.range(0);
  std::vector<float> x(kRows * kKeys), y(kRows * kKeys);
  FillScores(kept, x);
  for (auto _ : state) {
    vmath::SoftmaxRows(x.data(), y.data(), kKeys, kRows, kKeys);
    benchmark::DoNotOptimize(y.data());
  }
}

BENCHMARK(BM_SoftmaxRows)->Arg(128)->Arg(20)->ArgName("kept")->UseRealTime();

// An element-wise function over 16384 values spread over [-4, 4] (in L1).
// Counter: ns_per_value.
void BM_VmathUnary(benchmark::State& state) {
  static constexpr struct {
    const char* name;
    void (*fn)(const float*, float*, int64_t, Isa);
  } kFunctions[] = {{"exp", vmath::Exp},          {"erf", vmath::Erf},
                    {"gelu_erf", vmath::GeluErf}, {"gelu_tanh", vmath::GeluTanh},
                    {"tanh", vmath::Tanh},        {"logistic", vmath::Logistic}};
  const auto& f = kFunctions[state.range(0)];
  state.SetLabel(f.name);
  constexpr int64_t kValues = 16384;
  std::vector<float> x(kValues), y(kValues);
  for (int64_t i = 0; i < kValues; ++i) x[i] = -4.f + 8.f * static_cast<float>(i % 997) / 997.f;
  const Isa isa = ActiveIsa();
  for (auto _ : state) {
    f.fn(x.data(), y.data(), kValues, isa);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["ns_per_value"] = benchmark::Counter(
      kValues * 1e-9, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

BENCHMARK(BM_VmathUnary)->DenseRange(0, 5)->ArgName("function")->UseRealTime();

}  // namespace
}  // namespace octet

BENCHMARK_MAIN();
