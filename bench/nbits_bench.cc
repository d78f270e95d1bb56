// Google Benchmark for the 4-bit weight product (kernels/nbits/nbits.h) at
// decode shapes, M = 1..4 rows, and a prefill's M = 32 and 256, against packed weights of block
// size 32 with uint8 zero points (ONNX Runtime's quantizer's form), both arithmetics. Counters:
// weight_GBps, the packed bytes (codes, scales, zero points) read per second, and GFLOPS (2 M K N
// per second). `cold` cycles through copies of the weights larger than the last-level cache,
// packed into an arena on 2 MiB pages as a session's are, so the bytes come from memory as a
// decoder's do; otherwise they stay in cache and the kernel's arithmetic is what is timed.
// OCTET_ISA selects the path. Run: build/<dir>/nbits_bench [--benchmark_filter=...]
// [--benchmark_repetitions=5]
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "bench_pool.h"
#include "core/thread_pool.h"
#include "core/weight_arena.h"
#include "kernels/float/sgemm.h"
#include "kernels/nbits/nbits.h"

namespace octet {
namespace {

using bench::PoolFor;

int64_t PackedBytes(const PackedNBits& w) {
  return static_cast<int64_t>(w.data.size() + w.zero_codes.size() +
                              (w.scales.size() + w.zero_points.size()) * sizeof(float));
}

// More than the last-level cache of the machines benchmarked.
constexpr int64_t kColdBytes = int64_t{256} << 20;

void BM_NBitsGemv(benchmark::State& state) {
  const int64_t M = state.range(0), K = state.range(1), N = state.range(2), block = 32;
  const int threads = static_cast<int>(state.range(3));
  const auto arithmetic = state.range(4) ? NBitsArithmetic::kInt8 : NBitsArithmetic::kFloat;
  const bool cold = state.range(5) != 0;
  const int64_t k_blocks = (K + block - 1) / block;
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> nibble(0, 15);
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  std::vector<uint8_t> q(N * K);
  for (auto& v : q) v = static_cast<uint8_t>(nibble(rng));
  std::vector<float> scales(N * k_blocks), zero(N * k_blocks), a(M * K), y(M * N);
  for (auto& s : scales) s = 0.01f + 0.01f * unit(rng);
  for (auto& z : zero) z = static_cast<float>(nibble(rng));
  for (auto& v : a) v = unit(rng);
  WeightArena arena;  // on 2 MiB pages, as a session's weights
  std::vector<PackedNBits> copies;
  auto pack = [&] {
    return PackNBits(q.data(), scales.data(), zero.data(), K, N, block, arithmetic, &arena);
  };
  copies.push_back(pack());
  const int64_t bytes = PackedBytes(copies[0]);
  while (cold && static_cast<int64_t>(copies.size()) * bytes < kColdBytes) copies.push_back(pack());
  ThreadPool* pool = PoolFor(threads);
  size_t next = 0;
  for (auto _ : state) {
    NBitsMatMul(copies[next], M, a.data(), K, nullptr, y.data(), N, pool);
    next = next + 1 == copies.size() ? 0 : next + 1;
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["weight_GBps"] =
      benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOPS"] =
      benchmark::Counter(2e-9 * M * K * N, benchmark::Counter::kIsIterationInvariantRate);
}

// The float GEMM on the same shapes, B dequantized beforehand: what the kFloat
// arithmetic's rows would cost with float weights.
void BM_SgemmSameShape(benchmark::State& state) {
  const int64_t M = state.range(0), K = state.range(1), N = state.range(2);
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  std::vector<float> a(M * K), b(K * N), y(M * N);
  for (auto& v : a) v = unit(rng);
  for (auto& v : b) v = unit(rng);
  ThreadPool* pool = PoolFor(static_cast<int>(state.range(3)));
  for (auto _ : state) {
    Sgemm(M, N, K, SgemmOperand::RowMajor(a.data(), K), SgemmOperand::RowMajor(b.data(), N),
          y.data(), N, pool);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPS"] =
      benchmark::Counter(2e-9 * M * K * N, benchmark::Counter::kIsIterationInvariantRate);
}

// K x N: SmolLM2-135M's projections (q / o, gate / up, down, the LM head) and
// Qwen3-0.6B's (gate or up, down, o, and the merged products of one input: q, k
// and v; gate and up).
constexpr int64_t kShapes[][2] = {{576, 576},   {576, 1536},  {1536, 576},
                                  {576, 49152}, {1024, 3072}, {3072, 1024},
                                  {2048, 1024}, {1024, 4096}, {1024, 6144}};

void Shapes(benchmark::internal::Benchmark* b) {
  for (int64_t cold : {0, 1})
    for (int64_t arithmetic : {0, 1})
      for (int64_t threads : {1, 2})
        for (int64_t m : {1, 4, 32, 256})
          for (const auto& kn : kShapes) b->Args({m, kn[0], kn[1], threads, arithmetic, cold});
  b->ArgNames({"M", "K", "N", "threads", "int8", "cold"})->UseRealTime()->MinTime(0.2);
}
BENCHMARK(BM_NBitsGemv)->Apply(Shapes);
BENCHMARK(BM_SgemmSameShape)->Apply([](benchmark::internal::Benchmark* b) {
  for (int64_t threads : {1, 2})
    for (int64_t m : {32, 256})
      for (const auto& kn : kShapes) b->Args({m, kn[0], kn[1], threads});
  b->ArgNames({"M", "K", "N", "threads"})->UseRealTime()->MinTime(0.2);
});

}  // namespace
}  // namespace octet

BENCHMARK_MAIN();
