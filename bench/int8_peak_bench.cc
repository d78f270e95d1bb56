// Measures the per-core int8 multiply-accumulate peak of each instruction the
// GEMM paths use (operands in registers, 12 independent chains), on one
// thread and on every core at once. Run: build/<dir>/int8_peak_bench
#include <algorithm>
#include <cstdio>
#include <thread>
#include <vector>

#include "int8_peak.h"

int main() {
  using namespace octet;
  using namespace octet::bench;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::printf("%-40s %14s %16s\n", "instruction", "GOPS 1 core", "GOPS all cores");
  for (const PeakLoop& loop : PeakLoops()) {
    if (!IsaSupported(loop.needs)) {
      std::printf("%-40s %s\n", loop.name.c_str(), IsaUnsupportedReason(loop.needs));
      continue;
    }
    const double one = MeasurePeakOps(loop);
    std::vector<double> each(cores);
    std::vector<std::thread> threads;
    for (int c = 0; c < cores; ++c)
      threads.emplace_back([&, c] { each[c] = MeasurePeakOps(loop); });
    for (auto& t : threads) t.join();
    double all = 0;
    for (double v : each) all += v;
    std::printf("%-40s %14.1f %16.1f  (%d cores; ops = 2 x MAC)\n", loop.name.c_str(), one * 1e-9,
                all * 1e-9, cores);
  }
  return 0;
}
