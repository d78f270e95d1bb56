// Google Benchmark for the exact int8 convolution (kernels/int8/conv.h), as
// QLinearConv runs it: u8 x, s8 weights packed once outside the timed loop,
// per-channel multipliers and int32 bias, requantized u8 output. Shapes are
// typical CNN layers (ResNet 3x3 and 1x1, MobileNet depthwise, a stem conv)
// and the real detector's layers (det416_*), batch 1. Counter: GOPS = 2 x MACs
// per second (CPU time of the calling thread). OCTET_ISA selects the path.
// Run: build/<dir>/conv_bench [--benchmark_filter=...] [--benchmark_repetitions=3]
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "bench_pool.h"
#include "core/thread_pool.h"
#include "kernels/int8/conv.h"
#include "kernels/int8/conv_indirect.h"

namespace octet {
namespace {

using bench::PoolFor;

struct ConvShape {
  const char* name;
  int64_t in_channels, out_channels, group, size, kernel, stride, pad;
};

// Kept in step with tools/bench_conv_vs_ort.py (SHAPES, and --shapes-from for the detector's).
const ConvShape kShapes[] = {
    {"stem3x3s2_3to32_224", 3, 32, 1, 224, 3, 2, 1},
    {"conv3x3_64to64_56", 64, 64, 1, 56, 3, 1, 1},
    {"conv3x3_128to128_28", 128, 128, 1, 28, 3, 1, 1},
    {"conv3x3_256to256_14", 256, 256, 1, 14, 3, 1, 1},
    {"conv3x3s2_128to256_28", 128, 256, 1, 28, 3, 2, 1},
    {"conv1x1_64to256_56", 64, 256, 1, 56, 1, 1, 0},
    {"conv1x1_256to64_56", 256, 64, 1, 56, 1, 1, 0},
    {"conv1x1_1024to256_14", 1024, 256, 1, 14, 1, 1, 0},
    {"dw3x3_32_112", 32, 32, 32, 112, 3, 1, 1},
    {"dw3x3s2_144_56", 144, 144, 144, 56, 3, 2, 1},
    {"dw3x3_576_14", 576, 576, 576, 14, 3, 1, 1},
    // The detector's (build/models/det-416.fp32.onnx) distinct convolutions,
    // _x<count>: how often each occurs; as printed by tools/bench_conv_vs_ort.py
    // --shapes-from build/models/det-416.fp32.onnx.
    {"det416_conv3x3_12to24_208_x1", 12, 24, 1, 208, 3, 1, 1},
    {"det416_conv3x3s2_24to48_208_x1", 24, 48, 1, 208, 3, 2, 1},
    {"det416_conv1x1_48to24_104_x2", 48, 24, 1, 104, 1, 1, 0},
    {"det416_conv1x1_24to24_104_x1", 24, 24, 1, 104, 1, 1, 0},
    {"det416_conv3x3_24to24_104_x1", 24, 24, 1, 104, 3, 1, 1},
    {"det416_conv1x1_48to48_104_x1", 48, 48, 1, 104, 1, 1, 0},
    {"det416_conv3x3s2_48to96_104_x1", 48, 96, 1, 104, 3, 2, 1},
    {"det416_conv1x1_96to48_52_x2", 96, 48, 1, 52, 1, 1, 0},
    {"det416_conv1x1_48to48_52_x4", 48, 48, 1, 52, 1, 1, 0},
    {"det416_conv3x3_48to48_52_x4", 48, 48, 1, 52, 3, 1, 1},
    {"det416_conv1x1_96to96_52_x3", 96, 96, 1, 52, 1, 1, 0},
    {"det416_conv3x3s2_96to192_52_x1", 96, 192, 1, 52, 3, 2, 1},
    {"det416_conv1x1_192to96_26_x6", 192, 96, 1, 26, 1, 1, 0},
    {"det416_conv1x1_96to96_26_x5", 96, 96, 1, 26, 1, 1, 0},
    {"det416_conv3x3_96to96_26_x9", 96, 96, 1, 26, 3, 1, 1},
    {"det416_conv1x1_192to192_26_x3", 192, 192, 1, 26, 1, 1, 0},
    {"det416_conv3x3s2_192to384_26_x1", 192, 384, 1, 26, 3, 2, 1},
    {"det416_conv1x1_384to192_13_x6", 384, 192, 1, 13, 1, 1, 0},
    {"det416_conv1x1_768to384_13_x1", 768, 384, 1, 13, 1, 1, 0},
    {"det416_conv1x1_192to192_13_x2", 192, 192, 1, 13, 1, 1, 0},
    {"det416_conv3x3_192to192_13_x2", 192, 192, 1, 13, 3, 1, 1},
    {"det416_conv1x1_384to384_13_x2", 384, 384, 1, 13, 1, 1, 0},
    {"det416_conv1x1_384to96_26_x2", 384, 96, 1, 26, 1, 1, 0},
    {"det416_conv1x1_192to48_52_x2", 192, 48, 1, 52, 1, 1, 0},
    {"det416_conv3x3s2_96to96_52_x1", 96, 96, 1, 52, 3, 2, 1},
    {"det416_conv3x3s2_192to192_26_x1", 192, 192, 1, 26, 3, 2, 1},
    {"det416_conv3x3_96to96_52_x4", 96, 96, 1, 52, 3, 1, 1},
    {"det416_conv1x1_96to1_52_x2", 96, 1, 1, 52, 1, 1, 0},
    {"det416_conv1x1_96to4_52_x1", 96, 4, 1, 52, 1, 1, 0},
    {"det416_conv1x1_96to1_26_x2", 96, 1, 1, 26, 1, 1, 0},
    {"det416_conv1x1_96to4_26_x1", 96, 4, 1, 26, 1, 1, 0},
    {"det416_conv1x1_384to96_13_x1", 384, 96, 1, 13, 1, 1, 0},
    {"det416_conv3x3_96to96_13_x4", 96, 96, 1, 13, 3, 1, 1},
    {"det416_conv1x1_96to1_13_x2", 96, 1, 1, 13, 1, 1, 0},
    {"det416_conv1x1_96to4_13_x1", 96, 4, 1, 13, 1, 1, 0},
};

void BM_QLinearConv(benchmark::State& state) {
  const ConvShape& s = kShapes[state.range(0)];
  const int threads = static_cast<int>(state.range(1));
  state.SetLabel(s.name);
  ConvGeometry g;
  g.batch = 1;
  g.in_channels = s.in_channels;
  g.out_channels = s.out_channels;
  g.group = s.group;
  g.in_h = g.in_w = s.size;
  g.kernel_h = g.kernel_w = s.kernel;
  g.stride_h = g.stride_w = s.stride;
  g.pad_top = g.pad_left = s.pad;
  g.out_h = g.out_w = (s.size + 2 * s.pad - s.kernel) / s.stride + 1;
  const int64_t k = s.in_channels / s.group * s.kernel * s.kernel;

  std::mt19937 rng(42);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> x(g.in_channels * g.in_h * g.in_w), w(g.out_channels * k);
  for (auto& v : x) v = static_cast<uint8_t>(byte(rng));
  for (auto& v : w) v = static_cast<uint8_t>(byte(rng));
  const int32_t x_zero = 119, w_zero = 0;
  const Int8Conv conv(g, {w.data(), true, &w_zero, false}, ActiveIsa());
  std::vector<float> multipliers(g.out_channels, 1.0f / 4096);
  std::vector<int32_t> bias(g.out_channels, 1000);
  Epilogue rq;
  rq.output = EpilogueOutput::kUInt8;
  rq.multiplier = {multipliers.data(), true};
  rq.bias = {bias.data(), true};
  rq.zero_point = 128;
  std::vector<uint8_t> y(g.out_channels * g.out_h * g.out_w);
  ThreadPool* pool = PoolFor(threads);
  for (auto _ : state) {
    conv.Run(g, {x.data(), false, &x_zero, false}, rq, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double ops = 2.0 * g.out_channels * g.out_h * g.out_w * k;
  state.counters["GOPS"] =
      benchmark::Counter(ops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void Shapes(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2})
    for (int64_t i = 0; i < static_cast<int64_t>(std::size(kShapes)); ++i) b->Args({i, threads});
}
BENCHMARK(BM_QLinearConv)->Apply(Shapes)->ArgNames({"shape", "threads"});

#if defined(__x86_64__) || defined(_M_X64)
// The indirect path's NCHW -> NHWC transpose of x (conv_indirect.h) alone, one
// call per row as the band builder makes it, into rows with one pixel of padding
// on each side; x and the image stay in cache. Counter: GB/s of x transposed.
void BM_NhwcTranspose(benchmark::State& state) {
  if (!IsaSupported(Isa::kAvx512Vnni)) {
    state.SkipWithError("needs AVX-512 VNNI");
    return;
  }
  const int64_t channels = state.range(0), width = state.range(1), rows = state.range(2);
  const int64_t cp = (channels + 3) / 4 * 4, row_bytes = (width + 2) * cp;
  std::vector<uint8_t> x(channels * width * rows, 7), image(rows * row_bytes);
  for (auto _ : state) {
    for (int64_t r = 0; r < rows; ++r) {
      conv::ToNhwcAvx512Vnni(x.data() + r * width, channels, width * rows, width, 0, cp,
                             image.data() + r * row_bytes + cp);
    }
    benchmark::DoNotOptimize(image.data());
    benchmark::ClobberMemory();
  }
  state.counters["GBps"] = benchmark::Counter(static_cast<double>(x.size()) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}
// The detector's stride-2 inputs (24 x 208 x 208, 48 x 104 x 104, 96 x 52 x 52)
// and a band of 20 rows of the second.
BENCHMARK(BM_NhwcTranspose)
    ->Args({24, 208, 208})
    ->Args({48, 104, 104})
    ->Args({96, 52, 52})
    ->Args({48, 104, 20})
    ->ArgNames({"C", "W", "H"});
#endif

}  // namespace
}  // namespace octet

BENCHMARK_MAIN();
