// Google Benchmark for the exact int8 GEMM (kernels/int8/gemm.h): u8 A x s8 B
// with per-tensor zero points, B prepacked (as a constant weight is), A packed
// inside the timed call. Counters: GOPS (2 x M x N x K per second), peak (the
// fraction of `threads` x the single-core int8 peak measured at start-up by
// bench/int8_peak.h) and, for GEMV, GB/s of weight bytes read. OCTET_ISA
// selects the path (and the peak it is compared with).
// Run: build/<dir>/gemm_bench [--benchmark_filter=...] [--benchmark_repetitions=5]
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <random>
#include <string>
#include <vector>

#include "bench_pool.h"
#include "core/thread_pool.h"
#include "core/weight_arena.h"
#include "int8_peak.h"
#include "kernels/int8/gemm.h"

namespace octet {
namespace {

using bench::PoolFor;

// More than the last-level cache of the machines benchmarked.
constexpr int64_t kColdBytes = int64_t{256} << 20;

double PeakOpsPerCore() {
  static const double peak = bench::MeasureGemmPeakOps();
  return peak;
}

// GOPS and the fraction of `threads` x the single-core peak, for `ops` per iteration.
void SetOpsCounters(benchmark::State& state, double ops, int threads) {
  state.counters["GOPS"] =
      benchmark::Counter(ops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  if (PeakOpsPerCore() > 0) {
    state.counters["peak"] = benchmark::Counter(ops / (PeakOpsPerCore() * threads),
                                                benchmark::Counter::kIsIterationInvariantRate);
  }
}

void BM_GemmS32(benchmark::State& state) {
  const int64_t M = state.range(0), K = state.range(1), N = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> a(M * K), b(K * N);
  for (auto& v : a) v = static_cast<uint8_t>(byte(rng));
  for (auto& v : b) v = static_cast<uint8_t>(byte(rng));
  const GemmPlan plan = PlanGemm(ActiveIsa(), false);
  const PackedB packed = PackB(plan, b.data(), /*b_signed=*/true, K, N, N);
  std::vector<int32_t> c(M * N);
  const int32_t a_zero = 131, b_zero = -3;
  ThreadPool* pool = PoolFor(threads);
  for (auto _ : state) {
    Gemm(plan, M, Int8Operand{a.data(), false, K}, GemmZeroPoints{&a_zero, false, &b_zero, false},
         packed, Epilogue{}, c.data(), N, pool);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  SetOpsCounters(state, 2.0 * M * N * K, threads);
  if (M == 1) {
    state.counters["weight_GBps"] =
        benchmark::Counter(K * N * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  }
  state.SetLabel(plan.KernelFor(K).name);
}

void Shapes(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    for (int64_t m : {1, 2, 3, 4, 16, 128, 512}) b->Args({m, 1024, 1024, threads});
    b->Args({128, 1024, 4096, threads});
    b->Args({128, 4096, 1024, threads});
    b->Args({1, 4096, 4096, threads});
  }
  b->ArgNames({"M", "K", "N", "threads"})->UseRealTime()->MinTime(0.3);
}
BENCHMARK(BM_GemmS32)->Apply(Shapes);

// A decoder's int8 GEMV (one row of an A8W8 model's step): int8 A read in place,
// symmetric int8 weights with per-column zero points and multipliers, float output.
// `cold` cycles through copies of the weights larger than the last-level cache, so
// they come from memory as a decoder's do; weight_GBps compares with BM_ReadBandwidth
// at 256 MiB. K x N: SmolLM2-135M's projections and its LM head.
void BM_GemmDecode(benchmark::State& state) {
  const int64_t K = state.range(0), N = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  const bool cold = state.range(3) != 0;
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> a(K), b(K * N);
  for (auto& v : a) v = static_cast<uint8_t>(byte(rng));
  for (auto& v : b) v = static_cast<uint8_t>(byte(rng));
  const GemmPlan plan = PlanGemm(ActiveIsa(), /*a_signed=*/true);
  WeightArena arena;  // on 2 MiB pages, as a session's weights
  std::vector<PackedB> copies;
  do {
    copies.push_back(PackB(plan, b.data(), /*b_signed=*/true, K, N, N, &arena));
  } while (cold && static_cast<int64_t>(copies.size()) * K * N < kColdBytes);
  const int32_t a_zero = -5;
  const std::vector<int32_t> b_zero(N, 0);
  const std::vector<float> multiplier(N, 1.0f / 4096);
  Epilogue e;
  e.output = EpilogueOutput::kFloat;
  e.multiplier = {multiplier.data(), false, true};
  std::vector<float> y(N);
  ThreadPool* pool = PoolFor(threads);
  size_t next = 0;
  for (auto _ : state) {
    Gemm(plan, 1, Int8Operand{a.data(), true, K},
         GemmZeroPoints{&a_zero, false, b_zero.data(), true}, copies[next], e, y.data(), N, pool);
    next = next + 1 == copies.size() ? 0 : next + 1;
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["weight_GBps"] =
      benchmark::Counter(K * N * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(plan.KernelFor(K).name);
}
BENCHMARK(BM_GemmDecode)
    ->ArgsProduct({{576}, {576, 1536}, {1, 2}, {0, 1}})
    ->Args({1536, 576, 1, 1})
    ->Args({576, 49152, 1, 1})
    ->Args({1536, 576, 2, 1})
    ->Args({576, 49152, 2, 1})
    ->ArgNames({"K", "N", "threads", "cold"})
    ->UseRealTime()
    ->MinTime(0.3);

// The fused QDQ matmul's product (src/ops/fused_qdq_matmul.cc): A of 8 bits with
// zero point -5 (int8) or 131 (uint8), symmetric int8 weights, requantized to A's
// type in the tile (per-tensor multiplier, y zero point 3); issue 4's qdq_s8 /
// qdq_u8 shapes without the session around them.
void BM_GemmS32Requantized(benchmark::State& state) {
  const int64_t M = state.range(0), K = state.range(1), N = state.range(2);
  const bool a_signed = state.range(3) != 0;
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> a(M * K + 64), b(K * N);
  for (auto& v : a) v = static_cast<uint8_t>(byte(rng));
  for (auto& v : b) v = static_cast<uint8_t>(byte(rng));
  const GemmPlan plan = PlanGemm(ActiveIsa(), a_signed);
  const PackedB packed = PackB(plan, b.data(), /*b_signed=*/true, K, N, N);
  std::vector<uint8_t> y(M * N);
  const int32_t a_zero = a_signed ? -5 : 131, b_zero = 0;
  const float multiplier = 1.0f / (40.0f * 32.0f * 32.0f);
  Epilogue e;
  e.output = a_signed ? EpilogueOutput::kInt8 : EpilogueOutput::kUInt8;
  e.multiplier = {&multiplier};
  e.zero_point = 3;
  for (auto _ : state) {
    Gemm(plan, M, Int8Operand{a.data(), a_signed, K},
         GemmZeroPoints{&a_zero, false, &b_zero, false}, packed, e, y.data(), N, nullptr);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  SetOpsCounters(state, 2.0 * M * N * K, 1);
  state.SetLabel(plan.KernelFor(K).name);
}
BENCHMARK(BM_GemmS32Requantized)
    ->ArgsProduct({{16, 128, 512}, {1024}, {1024}, {0, 1}})
    ->ArgNames({"M", "K", "N", "a_signed"})
    ->UseRealTime()
    ->MinTime(0.3);

// One attention layer's products at batch 32 (384 heads): int8 A x int8 B
// that changes every product (packed per product into one reused PackedB, as
// RunIntMatMul does for a run-time B), requantized to int8 (in the tile on
// AVX-512 VNNI). One thread; counters as BM_GemmS32, per layer.
void BM_AttentionProducts(benchmark::State& state) {
  const int64_t M = state.range(0), K = state.range(1), N = state.range(2), batch = 384;
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> byte(-128, 127);
  std::vector<int8_t> a(batch * M * K), b(batch * K * N), y(batch * M * N);
  for (auto& v : a) v = static_cast<int8_t>(byte(rng));
  for (auto& v : b) v = static_cast<int8_t>(byte(rng));
  const int32_t a_zero = -1, b_zero = 2;
  const float multiplier = 0.05f * 0.04f / 0.3f;
  Epilogue ep;
  ep.output = EpilogueOutput::kInt8;
  ep.multiplier = {&multiplier};
  ep.zero_point = 3;
  const GemmPlan plan = PlanGemm(ActiveIsa(), true);
  PackedB packed;
  for (auto _ : state) {
    for (int64_t e = 0; e < batch; ++e) {
      PackBInto(plan, packed, b.data() + e * K * N, /*b_signed=*/true, K, N, N);
      Gemm(plan, M, Int8Operand{a.data() + e * M * K, true, K},
           GemmZeroPoints{&a_zero, false, &b_zero, false}, packed, ep, y.data() + e * M * N, N,
           nullptr);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  SetOpsCounters(state, 2.0 * batch * M * N * K, 1);
  state.SetLabel(plan.KernelFor(K).name);
}
BENCHMARK(BM_AttentionProducts)
    ->Args({128, 32, 128})
    ->Args({128, 128, 32})
    ->ArgNames({"M", "K", "N"})
    ->MinTime(0.3);

// Every micro-kernel of the table (gemm_kernels.h) this CPU runs, alone: one
// full tile (mr rows x nr columns) over K in groups of panels in L1, finished
// to int32 (K 256: the accumulation loop) or to uint8 through a per-row
// multiplier and bias, a convolution's finish (K 32: the finish weighs as much
// as the loop), repeated. What the driver's blocking adds on top is BM_GemmS32's.
void BM_MicroKernel(benchmark::State& state, const gemm::MicroKernel* kernel) {
  const int64_t K = state.range(0), groups = K / kernel->k_group;
  const bool requantized = state.range(1) != 0;
  const int value_bytes = gemm::ADomainBytes(kernel->a_domain);
  std::vector<uint8_t> a(
      static_cast<size_t>(kernel->mr) * (kernel->a_row_major ? K : K * value_bytes), 3);
  std::vector<int8_t> b(static_cast<size_t>(kernel->nr) * K, 5);
  std::vector<int32_t> out(static_cast<size_t>(kernel->mr) * kernel->nr);
  const std::vector<int32_t> row_neg_sum(kernel->mr, 0), bias(kernel->mr, 7);
  const std::vector<float> multipliers(kernel->mr, 0.01f);
  Epilogue e;
  if (requantized) {
    e.output = EpilogueOutput::kUInt8;
    e.bias = {bias.data(), true, false};
    e.multiplier = {multipliers.data(), true, false};
    e.zero_point = 3;
  }
  gemm::TileArgs t;
  t.a = a.data();
  t.a_ld = kernel->a_row_major ? K : 0;
  t.b = b.data();
  t.k_groups = groups;
  t.row_neg_sum = row_neg_sum.data();
  t.epilogue = &e;
  t.out = out.data();
  t.ld_out = kernel->nr;
  t.cols = kernel->nr;
  for (auto _ : state) {
    kernel->tile(kernel->mr, t);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  SetOpsCounters(state, 2.0 * kernel->mr * kernel->nr * K, 1);
}

const bool kMicroKernelsRegistered = [] {
  for (const gemm::MicroKernel& k : gemm::MicroKernels()) {
    if (!IsaSupported(k.isa)) continue;
    benchmark::RegisterBenchmark((std::string("BM_MicroKernel/") + k.name).c_str(), BM_MicroKernel,
                                 &k)
        ->Args({256, 0})
        ->Args({32, 1})
        ->ArgNames({"K", "uint8"})
        ->MinTime(0.2);
  }
  return true;
}();

// Bytes per second of a plain streaming read (the GEMV's bound): 256-bit
// loads into four independent sums. Sizes straddle L2, L3 and DRAM.
__attribute__((target("avx2"))) uint64_t SumAvx2(const uint64_t* p, size_t n) {
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
  for (size_t i = 0; i + 16 <= n; i += 16) {
    s0 = _mm256_add_epi64(s0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
    s1 = _mm256_add_epi64(s1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
    s2 = _mm256_add_epi64(s2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
    s3 = _mm256_add_epi64(s3, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 12)));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3));
  return _mm256_extract_epi64(s, 0) + _mm256_extract_epi64(s, 1) + _mm256_extract_epi64(s, 2) +
         _mm256_extract_epi64(s, 3);
}

void BM_ReadBandwidth(benchmark::State& state) {
  if (!IsaSupported(Isa::kAvx2)) {
    state.SkipWithError("needs AVX2");
    return;
  }
  const size_t bytes = static_cast<size_t>(state.range(0));
  std::vector<uint64_t> buffer(bytes / 8, 1);
  for (auto _ : state) benchmark::DoNotOptimize(SumAvx2(buffer.data(), buffer.size()));
  state.counters["GBps"] =
      benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_ReadBandwidth)
    ->Arg(256 << 10)
    ->Arg(1 << 20)
    ->Arg(4 << 20)
    ->Arg(16 << 20)
    ->Arg(256 << 20)
    ->UseRealTime();

}  // namespace
}  // namespace octet

BENCHMARK_MAIN();
