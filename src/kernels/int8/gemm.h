// The exact int8 GEMM:
//   C[m,n] = sum_k (A[m,k] - zA) * (B[k,n] - zB)        (int32, then the epilogue)
// computed on the raw 8-bit integers with int32 accumulation and corrected
// afterwards with row sums of A and column sums of B (Jacob et al. 2018,
// section 2.3), then finished by one Epilogue (epilogue.h) in the micro-tile's
// registers. Every path gives the same bytes, for every thread count: integer
// sums are exact and the work is cut into fixed blocks. docs/gemm.md describes
// the design.
//
// The path is decided once, into a GemmPlan (ruy's idea): which micro-kernel
// (gemm_kernels.h's table), whether A is packed or read in place, the k block.
// The driver reads only the plan; the zero-point algebra is done once, there.
//
// Exactness limit: the result is exact whenever it fits in int32, which is
// guaranteed for 8-bit zero points while K <= kGemmMaxK (K * 255 * 255 <
// 2^31); a larger K is refused with an octet::Error.
#pragma once

#include <cstdint>
#include <vector>

#include "core/quant.h"  // kGemmMaxK
#include "core/tensor.h"
#include "kernels/int8/epilogue.h"
#include "kernels/int8/gemm_kernels.h"
#include "kernels/int8/gemm_reference.h"  // Int8Operand
#include "kernels/isa.h"
#include "kernels/output_columns.h"

namespace octet {

class ThreadPool;
class WeightArena;

// Products with fewer multiply-adds (M x K x N) run on the calling thread:
// waking another costs more than it saves. A decoder's GEMV, whose weights come
// from memory, gains from a second thread from about this size on. The bytes
// are the same either way.
constexpr int64_t kGemmMinParallelMacs = int64_t{1} << 18;

// What runs a product of A of one signedness with a packed B: made once per
// packed weight (ops keep it beside PackedB) and read by every run.
struct GemmPlan {
  const gemm::MicroKernel* packed = nullptr;    // the kernel for packed A panels
  const gemm::MicroKernel* in_place = nullptr;  // reads A in place when K is whole groups; or null
  bool a_signed = false;

  // The kernel a product with this K runs, and whether it reads A in place.
  const gemm::MicroKernel& KernelFor(int64_t K) const;
};

// The plan for products of `a_signed` A on `isa`, which must be
// supported here.
GemmPlan PlanGemm(Isa isa, bool a_signed);

// B (K x N, int8 or uint8) rearranged for a plan's micro-kernels, with its
// column sums. Made once per constant weight; immutable afterwards and safe to
// share between threads.
struct PackedB {
  const gemm::MicroKernel* kernel = nullptr;  // the layout (nr, k group, B domain)
  int64_t K = 0, N = 0;
  bool b_signed = false;
  int64_t k_groups = 0;
  Tensor data;                    // panels x k_groups x nr x k_group bytes
  std::vector<int32_t> col_sums;  // per padded column: sum over k of the stored bytes
};

// Packs row-major B (leading dimension ldb >= N) for `plan`, into `arena` (a
// constant weight's, core/weight_arena.h) or, when null, a tensor of its own.
PackedB PackB(const GemmPlan& plan, const void* b, bool b_signed, int64_t K, int64_t N, int64_t ldb,
              WeightArena* arena = nullptr);
// PackB into `packed`, reusing its storage when the packed size is unchanged
// (a B that changes every run, packed per product without allocating).
void PackBInto(const GemmPlan& plan, PackedB& packed, const void* b, bool b_signed, int64_t K,
               int64_t N, int64_t ldb, WeightArena* arena = nullptr);

// The zero points of a product: a null pointer means zero; a has M values when
// a_per_row, else one; b has N values when b_per_column, else one.
struct GemmZeroPoints {
  const int32_t* a = nullptr;
  bool a_per_row = false;
  const int32_t* b = nullptr;
  bool b_per_column = false;
};

// out (M x b.N, written to out's matrices, kernels/output_columns.h) = epilogue of
// (A - zA)(B - zB). A: M x b.K, row-major, of the plan's signedness (A.ld >= K).
// The epilogue's operands are indexed by the product's rows and columns. pool
// may be null (runs on the caller); it is not used below kGemmMinParallelMacs.
// Throws octet::Error on a negative M, bad output ranges, K > kGemmMaxK, an
// incomplete epilogue, or a B packed for another plan.
void Gemm(const GemmPlan& plan, int64_t M, const Int8Operand& A, const GemmZeroPoints& zero,
          const PackedB& b, const Epilogue& epilogue, const OutputColumns& out, ThreadPool* pool);
// The same into one matrix of leading dimension ld_out (in output elements).
inline void Gemm(const GemmPlan& plan, int64_t M, const Int8Operand& A, const GemmZeroPoints& zero,
                 const PackedB& b, const Epilogue& epilogue, void* out, int64_t ld_out,
                 ThreadPool* pool) {
  const ColumnRange all{0, out, ld_out};
  Gemm(plan, M, A, zero, b, epilogue, OutputColumns{&all, 1}, pool);
}

}  // namespace octet
