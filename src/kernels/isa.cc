#include "kernels/isa.h"

#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#define OCTET_X86_64 1
#elif defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace octet {

namespace {

struct CpuFeatures {
  bool avx2 = false;         // AVX2 + FMA + F16C with OS-saved ymm state
  bool avx_vnni = false;     // AVX-VNNI (VEX vpdpbusd) on top of avx2
  bool avx512 = false;       // AVX-512 F/BW/DQ/VL with OS-saved zmm state
  bool avx512_vnni = false;  // and AVX512_VNNI
  bool avx512_vbmi = false;  // AVX512_VBMI (byte permutes) on top of avx512_vnni
  bool neon_dot = false;     // Armv8.2 SDOT/UDOT
};

#ifdef OCTET_X86_64
uint64_t ReadXcr0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}
#endif

CpuFeatures DetectFeatures() {
  CpuFeatures f;
#ifdef OCTET_X86_64
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool osxsave = ecx & (1u << 27), avx = ecx & (1u << 28), fma = ecx & (1u << 12),
             f16c = ecx & (1u << 29);
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = ReadXcr0();
  const bool os_ymm = (xcr0 & 0x6) == 0x6;    // SSE + AVX state
  const bool os_zmm = (xcr0 & 0xE6) == 0xE6;  // + opmask, ZMM_Hi256, Hi16_ZMM
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  const bool avx2 = ebx & (1u << 5), avx512f = ebx & (1u << 16), avx512dq = ebx & (1u << 17),
             avx512bw = ebx & (1u << 30), avx512vl = ebx & (1u << 31),
             avx512vnni = ecx & (1u << 11), avx512vbmi = ecx & (1u << 1);
  const unsigned max_subleaf = eax;
  bool avxvnni = false;
  if (max_subleaf >= 1) {
    __cpuid_count(7, 1, eax, ebx, ecx, edx);
    avxvnni = eax & (1u << 4);
  }
  f.avx2 = os_ymm && avx2 && fma && f16c;
  f.avx_vnni = f.avx2 && avxvnni;
  f.avx512 = f.avx2 && os_zmm && avx512f && avx512dq && avx512bw && avx512vl;
  f.avx512_vnni = f.avx512 && avx512vnni;
  f.avx512_vbmi = f.avx512_vnni && avx512vbmi;
#elif defined(__aarch64__) && defined(__linux__)
  f.neon_dot = getauxval(AT_HWCAP) & HWCAP_ASIMDDP;
#elif defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
  f.neon_dot = true;
#endif
  return f;
}

const CpuFeatures& Features() {
  static const CpuFeatures features = DetectFeatures();
  return features;
}

}  // namespace

std::vector<Isa> SupportedIsas() {
  std::vector<Isa> isas;
  for (Isa isa : kAllIsas)
    if (IsaSupported(isa)) isas.push_back(isa);
  return isas;
}

bool HasAvx512Vbmi() { return Features().avx512_vbmi; }

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvxVnni:
      return "avxvnni";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx512Vnni:
      return "avx512vnni";
    case Isa::kNeonDot:
      return "neondot";
  }
  return "unknown";
}

Isa ParseIsa(std::string_view name) {
  for (Isa isa : kAllIsas) {
    if (name == IsaName(isa)) return isa;
  }
  Fail("OCTET_ISA='", name, "' is not one of scalar, avx2, avxvnni, avx512, avx512vnni, neondot");
}

const char* IsaUnsupportedReason(Isa isa) {
  const CpuFeatures& f = Features();
  switch (isa) {
    case Isa::kScalar:
      return "";
#ifdef OCTET_X86_64
    case Isa::kAvx2:
      return f.avx2 ? "" : "this CPU/OS lacks AVX2+FMA+F16C with saved ymm state";
    case Isa::kAvxVnni:
      return f.avx_vnni ? "" : "this CPU/OS lacks AVX-VNNI (cpuid 7.1 eax bit 4) with AVX2";
    case Isa::kAvx512:
      return f.avx512 ? "" : "this CPU/OS lacks AVX-512 F/BW/DQ/VL with saved zmm state";
    case Isa::kAvx512Vnni:
      return f.avx512_vnni ? "" : "this CPU/OS lacks AVX-512 F/BW/DQ/VL/VNNI with saved zmm state";
    case Isa::kNeonDot:
      return "the Arm dot-product path is only built on aarch64";
#else
    case Isa::kAvx2:
    case Isa::kAvxVnni:
    case Isa::kAvx512:
    case Isa::kAvx512Vnni:
      return "x86 paths are only built on x86-64";
    case Isa::kNeonDot:
      return f.neon_dot ? "" : "this CPU lacks the Armv8.2 dot-product instructions";
#endif
  }
  return "unknown instruction set";
}

bool IsaSupported(Isa isa) { return IsaUnsupportedReason(isa)[0] == '\0'; }

Isa BestIsa() {
  for (Isa isa : {Isa::kAvx512Vnni, Isa::kAvx512, Isa::kAvxVnni, Isa::kAvx2, Isa::kNeonDot}) {
    if (IsaSupported(isa)) return isa;
  }
  return Isa::kScalar;
}

Isa ActiveIsa() {
  static const Isa active = [] {
    const char* forced = std::getenv("OCTET_ISA");
    if (forced == nullptr || forced[0] == '\0') return BestIsa();
    const Isa isa = ParseIsa(forced);
    OCTET_CHECK(IsaSupported(isa), "OCTET_ISA=", forced, ": ", IsaUnsupportedReason(isa));
    return isa;
  }();
  return active;
}

}  // namespace octet
