#include "kernels/int8/gemm_kernels.h"

#include <cstring>

#include "core/error.h"

namespace octet::gemm {

namespace {

// k blocks: 4096 k, so products with K up to 4096 finish each tile in one
// pass (docs/gemm.md).
constexpr int64_t kBlockK = 4096;

constexpr MicroKernel kKernels[] = {
    {"gemm_i16s8_4x16c2_scalar", Isa::kScalar, 4, 16, 2, ADomain::kInt16, false, false,
     BDomain::kSigned8, false, false, TileScalar, nullptr, kBlockK / 2},
#if defined(__x86_64__) || defined(_M_X64)
    // A paired-B kernel first for its ISA: the plans' kernel (PlanGemm) and the
    // convolution's (its im2col packers write the paired layout too).
    {"gemm_i16s8_6x16c2_pairb_avx2", Isa::kAvx2, 6, 16, 2, ADomain::kInt16, false, false,
     BDomain::kSigned8, false, true, TileAvx2PairedB, nullptr, kBlockK / 2},
    {"gemm_i16s8_6x16c2_avx2", Isa::kAvx2, 6, 16, 2, ADomain::kInt16, false, false,
     BDomain::kSigned8, false, false, TileAvx2, nullptr, kBlockK / 2},
    {"gemm_u8s8_6x16c4_avxvnni", Isa::kAvxVnni, 6, 16, 4, ADomain::kUnsigned8, false, false,
     BDomain::kSigned8, false, false, TileAvxVnni, nullptr, kBlockK / 4},
    {"gemm_s8u8_6x16c4_avxvnni", Isa::kAvxVnni, 6, 16, 4, ADomain::kSigned8, false, false,
     BDomain::kUnsigned8, false, false, TileAvxVnniUnsignedB, nullptr, kBlockK / 4},
    {"gemm_i16s8_12x32c2_pairb_avx512", Isa::kAvx512, 12, 32, 2, ADomain::kInt16, false, false,
     BDomain::kSigned8, false, true, TileAvx512PairedB, nullptr, kBlockK / 2},
    {"gemm_i16s8_12x32c2_avx512", Isa::kAvx512, 12, 32, 2, ADomain::kInt16, false, false,
     BDomain::kSigned8, false, false, TileAvx512, nullptr, kBlockK / 2},
    {"gemm_u8s8_8x32c4_avx512vnni", Isa::kAvx512Vnni, 8, 32, 4, ADomain::kUnsigned8, false, false,
     BDomain::kSigned8, false, false, TileAvx512Vnni, nullptr, kBlockK / 4},
    {"gemm_u8s8_8x32c4_rowa_avx512vnni", Isa::kAvx512Vnni, 8, 32, 4, ADomain::kUnsigned8, true,
     false, BDomain::kSigned8, false, false, TileAvx512VnniRowMajorA, RowSumsAvx512Vnni,
     kBlockK / 4},
    {"gemm_s8u8_8x32c4_rowa_avx512vnni", Isa::kAvx512Vnni, 8, 32, 4, ADomain::kSigned8, true, true,
     BDomain::kSigned8, true, false, TileAvx512VnniRowMajorSignedA, RowSumsAvx512Vnni, kBlockK / 4},
    {"gemm_s8u8_8x32c4_avx512vnni", Isa::kAvx512Vnni, 8, 32, 4, ADomain::kSigned8, false, false,
     BDomain::kUnsigned8, false, false, TileAvx512VnniUnsignedB, nullptr, kBlockK / 4},
#endif
#if defined(__aarch64__)
    {"gemm_s8s8_4x16c4_neondot", Isa::kNeonDot, 4, 16, 4, ADomain::kSigned8, false, false,
     BDomain::kSigned8, false, false, TileNeonDot, nullptr, kBlockK / 4},
#endif
};

}  // namespace

std::span<const MicroKernel> MicroKernels() { return kKernels; }

const MicroKernel& MicroKernelNamed(const char* name) {
  for (const MicroKernel& k : kKernels)
    if (std::strcmp(k.name, name) == 0) return k;
  Fail("int8 GEMM: no micro-kernel named '", name, "' in this binary");
}

}  // namespace octet::gemm
