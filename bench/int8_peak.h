// Measured per-core int8 multiply-accumulate peak: independent chains of one
// instruction with operands in registers, timed on the wall clock. Shared by
// int8_peak_bench (the numbers) and gemm_bench (fraction of peak).
//
// The loops are inline assembly using zmm/ymm 0..15 only (declared clobbered
// as xmm0..15), so this file needs no ISA compiler flags; callers run a loop
// only when IsaSupported() says the CPU has it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/isa.h"

namespace octet::bench {

struct PeakLoop {
  std::string name;
  Isa needs;
  int64_t macs_per_iteration;  // int8 multiply-accumulates per loop iteration
  void (*run)(int64_t iterations);
};

#if defined(__x86_64__)
#define OCTET_CLOBBER_XMM                                                                  \
  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", \
      "xmm11", "xmm12", "xmm13", "xmm14", "xmm15"
#define OCTET_REPEAT_12(op) \
  op(0) op(1) op(2) op(3) op(4) op(5) op(6) op(7) op(8) op(9) op(10) op(11)

// 12 independent accumulators zmm0..11 (or ymm), sources zmm14, zmm15.
#define OCTET_DPBUSD_Z(i) "vpdpbusd %%zmm15, %%zmm14, %%zmm" #i "\n\t"
#define OCTET_DPBUSD_Y(i) "vpdpbusd %%ymm15, %%ymm14, %%ymm" #i "\n\t"
#define OCTET_VEX_DPBUSD_Y(i) "%{vex%} vpdpbusd %%ymm15, %%ymm14, %%ymm" #i "\n\t"
// Exact int16 path: vpmaddwd into a temporary, then vpaddd into the accumulator.
#define OCTET_MADDWD_Z(i) \
  "vpmaddwd %%zmm15, %%zmm14, %%zmm12\n\tvpaddd %%zmm12, %%zmm" #i ", %%zmm" #i "\n\t"
#define OCTET_MADDWD_Y(i) \
  "vpmaddwd %%ymm15, %%ymm14, %%ymm12\n\tvpaddd %%ymm12, %%ymm" #i ", %%ymm" #i "\n\t"

#define OCTET_PEAK_LOOP(fn_name, body, zero)                                      \
  inline void fn_name(int64_t iterations) {                                       \
    __asm__ volatile(zero "1:\n\t" OCTET_REPEAT_12(body) "dec %0\n\tjnz 1b\n\t" \
                     "vzeroupper\n\t"                                         \
                     : "+r"(iterations)                                       \
                     :                                                        \
                     : "cc", OCTET_CLOBBER_XMM); \
  }
#define OCTET_ZERO_Z "vpxord %%zmm14, %%zmm14, %%zmm14\n\tvpxord %%zmm15, %%zmm15, %%zmm15\n\t"
#define OCTET_ZERO_Y "vpxor %%ymm14, %%ymm14, %%ymm14\n\tvpxor %%ymm15, %%ymm15, %%ymm15\n\t"

OCTET_PEAK_LOOP(DpbusdZmm, OCTET_DPBUSD_Z, OCTET_ZERO_Z)
OCTET_PEAK_LOOP(DpbusdYmmEvex, OCTET_DPBUSD_Y, OCTET_ZERO_Y)
OCTET_PEAK_LOOP(DpbusdYmmVex, OCTET_VEX_DPBUSD_Y, OCTET_ZERO_Y)
OCTET_PEAK_LOOP(MaddwdZmm, OCTET_MADDWD_Z, OCTET_ZERO_Z)
OCTET_PEAK_LOOP(MaddwdYmm, OCTET_MADDWD_Y, OCTET_ZERO_Y)

// Whether vpdpbusd shares its execution ports with the float FMA: 6 vpdpbusd
// chains (zmm0..5) interleaved with 6 vfmadd231ps chains (zmm6..11). Only the
// vpdpbusd MACs are counted, so this line equals the vpdpbusd zmm peak when the
// FMAs run on other ports and falls to about half when they compete.
#define OCTET_DPBUSD_FMA_Z(i, j) \
  "vpdpbusd %%zmm15, %%zmm14, %%zmm" #i "\n\tvfmadd231ps %%zmm15, %%zmm14, %%zmm" #j "\n\t"
inline void DpbusdWithFmaZmm(int64_t iterations) {
  __asm__ volatile(OCTET_ZERO_Z "1:\n\t" OCTET_DPBUSD_FMA_Z(0, 6) OCTET_DPBUSD_FMA_Z(1, 7)
                       OCTET_DPBUSD_FMA_Z(2, 8) OCTET_DPBUSD_FMA_Z(3, 9) OCTET_DPBUSD_FMA_Z(4, 10)
                           OCTET_DPBUSD_FMA_Z(5, 11) "dec %0\n\tjnz 1b\n\tvzeroupper\n\t"
                   : "+r"(iterations)
                   :
                   : "cc", OCTET_CLOBBER_XMM);
}

// The AVX2 GEMM tile's step (gemm_i16s8_6x16c2_avx2): one k pair of a 6 x 16
// tile, 6 broadcast A pairs against 16 columns of B, operands from L1. B is
// either int8 widened in registers (vpmovsxbw, what the kernel does: weights
// stay int8 in memory) or stored as int16 (twice the bytes, no widening): the
// two ways issue 14 asks to compare.
#define OCTET_TILE_ROW_Y(r, c0, c1)                                                       \
  "vpbroadcastd " #r "*4(%1), %%ymm14\n\t"                                                \
  "vpmaddwd %%ymm12, %%ymm14, %%ymm15\n\tvpaddd %%ymm15, %%ymm" #c0 ", %%ymm" #c0 "\n\t" \
  "vpmaddwd %%ymm13, %%ymm14, %%ymm15\n\tvpaddd %%ymm15, %%ymm" #c1 ", %%ymm" #c1 "\n\t"
#define OCTET_TILE_ROWS_Y                                                               \
  OCTET_TILE_ROW_Y(0, 0, 1) OCTET_TILE_ROW_Y(1, 2, 3) OCTET_TILE_ROW_Y(2, 4, 5)         \
      OCTET_TILE_ROW_Y(3, 6, 7) OCTET_TILE_ROW_Y(4, 8, 9) OCTET_TILE_ROW_Y(5, 10, 11)
alignas(64) inline int16_t tile_operands[64] = {};  // A pairs at 0, B at 32 (bytes 64..127)
#define OCTET_TILE_LOOP(fn_name, load_b)                                                   \
  inline void fn_name(int64_t iterations) {                                                \
    __asm__ volatile("1:\n\t" load_b OCTET_TILE_ROWS_Y "dec %0\n\tjnz 1b\n\tvzeroupper\n\t" \
                     : "+r"(iterations)                                                    \
                     : "r"(tile_operands), "r"(tile_operands + 32)                         \
                     : "cc", "memory", OCTET_CLOBBER_XMM);                                 \
  }
OCTET_TILE_LOOP(TileStepWidenedB, "vpmovsxbw (%2), %%ymm12\n\tvpmovsxbw 16(%2), %%ymm13\n\t")
OCTET_TILE_LOOP(TileStepInt16B, "vmovdqu (%2), %%ymm12\n\tvmovdqu 32(%2), %%ymm13\n\t")

// One vpdpbusd: 4 MACs per 32-bit lane; one vpmaddwd: 2 per lane (int8
// widened to int16, so one int8 MAC per int16 product).
inline std::vector<PeakLoop> PeakLoops() {
  return {
      {"vpdpbusd zmm (AVX-512 VNNI)", Isa::kAvx512Vnni, 12 * 64, DpbusdZmm},
      {"vpdpbusd ymm (AVX-512 VNNI, EVEX)", Isa::kAvx512Vnni, 12 * 32, DpbusdYmmEvex},
      {"vpdpbusd ymm (AVX-VNNI, VEX)", Isa::kAvxVnni, 12 * 32, DpbusdYmmVex},
      {"vpmaddwd+vpaddd zmm (int16, exact)", Isa::kAvx512, 12 * 32, MaddwdZmm},
      {"vpmaddwd+vpaddd ymm (AVX2, exact)", Isa::kAvx2, 12 * 16, MaddwdYmm},
      {"vpdpbusd zmm + vfmadd231ps (dp MACs)", Isa::kAvx512Vnni, 6 * 64, DpbusdWithFmaZmm},
      {"AVX2 6x16 tile step, int8 B widened", Isa::kAvx2, 12 * 16, TileStepWidenedB},
      {"AVX2 6x16 tile step, int16 B", Isa::kAvx2, 12 * 16, TileStepInt16B},
  };
}
#else
inline std::vector<PeakLoop> PeakLoops() { return {}; }
#endif

// Operations per second (2 per multiply-accumulate) of one loop on the
// calling thread, best of `repeats` runs of about `seconds` each.
inline double MeasurePeakOps(const PeakLoop& loop, double seconds = 0.1, int repeats = 5) {
  using Clock = std::chrono::steady_clock;
  loop.run(100000);  // warm up (clock ramp, AVX-512 license)
  int64_t iterations = 1 << 16;
  for (;;) {  // calibrate to roughly `seconds`
    const auto t0 = Clock::now();
    loop.run(iterations);
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    if (dt > seconds / 4) {
      iterations = static_cast<int64_t>(iterations * seconds / dt);
      break;
    }
    iterations *= 4;
  }
  double best = 0;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    loop.run(iterations);
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, 2.0 * loop.macs_per_iteration * iterations / dt);
  }
  return best;
}

// The single-core peak of the instruction the active GEMM path (ActiveIsa(),
// so OCTET_ISA applies) multiplies with: what gemm_bench divides by; 0 when
// no loop here matches that path (scalar, Arm).
inline double MeasureGemmPeakOps() {
  for (const PeakLoop& loop : PeakLoops()) {
    if (loop.needs == ActiveIsa()) return MeasurePeakOps(loop);
  }
  return 0;
}

}  // namespace octet::bench
