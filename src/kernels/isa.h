// Instruction-set selection for the kernels. The best path the CPU and OS
// support is chosen once, at first use, from cpuid (x86) or the hardware
// capability bits (aarch64). OCTET_ISA=scalar|avx2|avxvnni|avx512|avx512vnni|
// neondot forces a path; an unknown name or a path this machine cannot run is
// an octet::Error, never a silent fallback.
#pragma once

#include <string_view>
#include <vector>

#include "core/error.h"

namespace octet {

enum class Isa { kScalar, kAvx2, kAvxVnni, kAvx512, kAvx512Vnni, kNeonDot };

// Every path, in that order (scalar first).
inline constexpr Isa kAllIsas[] = {Isa::kScalar, Isa::kAvx2,       Isa::kAvxVnni,
                                   Isa::kAvx512, Isa::kAvx512Vnni, Isa::kNeonDot};

// The OCTET_ISA spelling: "scalar", "avx2", "avxvnni", "avx512", "avx512vnni", "neondot".
const char* IsaName(Isa isa);

// Parses an OCTET_ISA spelling; throws octet::Error on an unknown name.
Isa ParseIsa(std::string_view name);

// True when this build contains the path and this CPU and OS can run it.
bool IsaSupported(Isa isa);

// Why `isa` cannot run here (empty when IsaSupported(isa)).
const char* IsaUnsupportedReason(Isa isa);

// Every path this build and CPU can run, scalar first (tests run each one).
std::vector<Isa> SupportedIsas();

// The variant of a kernel family with scalar, AVX2 and AVX-512 implementations that runs
// for `isa`: kAvx512 and kAvx512Vnni take avx512, kAvx2 and kAvxVnni take avx2, the rest
// scalar.
// Throws when `isa` cannot run here. (On other architectures pass scalar three times.)
template <typename Fn>
Fn PickKernel(Isa isa, const char* family, Fn scalar, [[maybe_unused]] Fn avx2,
              [[maybe_unused]] Fn avx512) {
  OCTET_CHECK(IsaSupported(isa), family, ": instruction set ", IsaName(isa),
              " cannot run here: ", IsaUnsupportedReason(isa));
  if (isa == Isa::kAvx512 || isa == Isa::kAvx512Vnni) return avx512;
  if (isa == Isa::kAvx2 || isa == Isa::kAvxVnni) return avx2;
  return scalar;
}

// AVX512_VBMI (64-byte permutes) on this CPU, on top of everything kAvx512Vnni needs.
// Kernels that use it run only when ActiveIsa() is kAvx512Vnni.
bool HasAvx512Vbmi();

// The fastest supported path.
Isa BestIsa();

// The path the kernels use by default: OCTET_ISA when set (checked), else
// BestIsa(). Decided once per process; throws octet::Error (on every call)
// when OCTET_ISA is unknown or unsupported.
Isa ActiveIsa();

}  // namespace octet
