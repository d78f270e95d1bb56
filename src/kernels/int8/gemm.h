// The exact int8 GEMM:
//   C[m,n] = sum_k (A[m,k] - zA) * (B[k,n] - zB)        (int32 result)
// computed on the raw 8-bit integers with int32 accumulation and corrected
// afterwards with row sums of A and column sums of B (Jacob et al. 2018,
// section 2.3). Every path (AVX-512 VNNI, AVX-VNNI, AVX2, Arm SDOT, scalar)
// gives the same bytes, for every thread count: integer sums are exact and
// the work is cut into fixed blocks. docs/gemm.md describes the design.
//
// Exactness limit: the result is exact whenever it fits in int32, which is
// guaranteed for 8-bit zero points while K <= kGemmMaxK (K * 255 * 255 <
// 2^31); a larger K is refused with an octet::Error.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/quant.h"  // kGemmMaxK
#include "core/tensor.h"
#include "kernels/int8/gemm_reference.h"  // Int8Operand
#include "kernels/int8/requantize.h"
#include "kernels/isa.h"

namespace octet {

class ThreadPool;

// Products with fewer multiply-adds (M x K x N) run on the calling thread:
// waking another costs more than it saves. A 1 x 1024 x 1024 GEMV (1M
// multiply-adds, ~13 us on one core, bound by reading B) still gains from a
// second core's cache bandwidth: 18 -> 15 us per session run on this machine.
// The bytes are the same either way.
constexpr int64_t kGemmMinParallelMacs = int64_t{1} << 20;

// B (K x N, int8 or uint8) rearranged for one instruction set's micro-kernel,
// with its column sums. Made once per constant weight; immutable afterwards
// and safe to share between threads.
struct PackedB {
  Isa isa = Isa::kScalar;
  int64_t K = 0, N = 0;
  bool b_signed = false;
  int nr = 1;            // columns per panel
  int64_t k_groups = 0;  // K rounded up to groups of 4
  Tensor data;           // panels x k_groups x nr x 4 bytes, int8 (uint8 B stored as B - 128)
  std::vector<int32_t> col_sums;  // per padded column: sum over k of the stored int8 values
};

// Packs row-major B (leading dimension ldb >= N) for `isa`, which must be
// supported (IsaSupported); the product then runs on that path.
PackedB PackB(const void* b, bool b_signed, int64_t K, int64_t N, int64_t ldb,
              Isa isa = ActiveIsa());
// PackB into `packed`, reusing its storage when the packed size is unchanged
// (a B that changes every run, packed per product without allocating).
void PackBInto(PackedB& packed, const void* b, bool b_signed, int64_t K, int64_t N, int64_t ldb,
               Isa isa = ActiveIsa());

// C (M x b.N, leading dimension ldc) = (A - a_zero) * (B - b_zero) in int32.
// A: M x b.K, row-major int8 or uint8 (A.ld >= K). a_zero: M entries when
// a_zero_per_row, else one; b_zero: N entries when b_zero_per_col, else one;
// a null zero pointer means zero. pool may be null (runs on the caller); it
// is not used below kGemmMinParallelMacs.
// Throws octet::Error on a negative M, a too-small ld, or K > kGemmMaxK.
void GemmS32(int64_t M, const Int8Operand& A, const int32_t* a_zero, bool a_zero_per_row,
             const PackedB& b, const int32_t* b_zero, bool b_zero_per_col, int32_t* C, int64_t ldc,
             ThreadPool* pool);

// Receives one finished block of the product: rows [row0, row0 + rows) x
// columns [col0, col0 + cols) of C, int32 at acc with leading dimension ld_acc
// (valid only during the call).
using GemmBlockFn = std::function<void(int64_t row0, int64_t rows, int64_t col0, int64_t cols,
                                       const int32_t* acc, int64_t ld_acc)>;

// GemmS32 without an int32 C: each work item's block (at most 128 rows x 256
// columns, in a per-thread buffer that stays in L2) goes to `epilogue` on the
// thread that computed it, right after its last k block, so an epilogue
// (requantization, float scaling) reads it from cache and runs in parallel.
// Every element of C is handed over exactly once; the blocks do not depend on
// the thread count.
void GemmS32Blocks(int64_t M, const Int8Operand& A, const int32_t* a_zero, bool a_zero_per_row,
                   const PackedB& b, const int32_t* b_zero, bool b_zero_per_col, ThreadPool* pool,
                   const GemmBlockFn& epilogue);

// The product requantized (requantize.h; per-column parameters along B's
// columns) into 8-bit `out` (M x N, leading dimension ld_out): the bytes of
// RequantizeS32 over GemmS32's C. On AVX-512 VNNI a product with K <= 4096
// (one k block) requantizes in the tile's registers; others take GemmS32Blocks.
// Throws octet::Error as GemmS32 and RequantizeS32 do.
void GemmS32Requantized(int64_t M, const Int8Operand& A, const int32_t* a_zero, bool a_zero_per_row,
                        const PackedB& b, const int32_t* b_zero, bool b_zero_per_col,
                        const RequantizeParams& params, void* out, int64_t ld_out,
                        ThreadPool* pool);

// The product scaled to float into `out` (M x N, leading dimension ld_out): the
// bits of ScaleS32ToFloat over GemmS32's C, in the tile's registers when
// GemmS32Requantized would requantize there.
void GemmS32ToFloat(int64_t M, const Int8Operand& A, const int32_t* a_zero, bool a_zero_per_row,
                    const PackedB& b, const int32_t* b_zero, bool b_zero_per_col,
                    const FloatOutputParams& params, float* out, int64_t ld_out, ThreadPool* pool);

}  // namespace octet
