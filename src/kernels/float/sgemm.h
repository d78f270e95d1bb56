// Float32 GEMM: C (M x N) = A (M x K) * B (K x N), row-major.
//
// Every C element is one chain of fused multiply-adds in increasing k,
// starting from +0: c = fma(a[i,0], b[0,j], 0); c = fma(a[i,1], b[1,j], c); ...
// The packed micro-kernels (AVX-512, AVX2, scalar) only change which elements
// are computed side by side, never that chain, so every path and every thread
// count gives the same bits as the naive loop. docs/design.md ("Float GEMM")
// records why this is our own kernel rather than a BLAS library.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/isa.h"

namespace octet {

class ThreadPool;

// The float path for an integer-kernel Isa: kAvx512 / kAvx512Vnni -> AVX-512,
// kAvx2/kAvxVnni -> AVX2, anything else -> scalar.
enum class SgemmPath { kScalar, kAvx2, kAvx512 };
SgemmPath SgemmPathFor(Isa isa);
const char* SgemmPathName(SgemmPath path);

// One operand rearranged for a path's micro-kernel: panels of `panel` rows
// of A (or columns of B), each K x panel contiguous, the last panel padded
// with zeros. Immutable after packing; safe to share between threads.
struct SgemmPacked {
  SgemmPath path = SgemmPath::kScalar;
  int64_t rows = 0;  // M for A, N for B
  int64_t K = 0;
  int panel = 1;
  std::shared_ptr<float> data;  // 64-byte aligned, panels x K x panel
  // B only: floats from one panel's start to the next; 0: K x panel. A larger stride
  // leaves each panel room for more k (rows of B) that its owner appends.
  int64_t panel_stride = 0;
};

// Packs row-major A (M x K, leading dimension lda >= K).
SgemmPacked SgemmPackA(const float* a, int64_t M, int64_t K, int64_t lda,
                       SgemmPath path = SgemmPathFor(ActiveIsa()));
// Packs row-major B (K x N, leading dimension ldb >= N).
SgemmPacked SgemmPackB(const float* b, int64_t K, int64_t N, int64_t ldb,
                       SgemmPath path = SgemmPathFor(ActiveIsa()));

// Packs B (K x N) given as its transpose: N rows of K, b_t[j * ld + p] = B[p][j].
SgemmPacked SgemmPackBTransposed(const float* b_t, int64_t K, int64_t N, int64_t ld,
                                 SgemmPath path = SgemmPathFor(ActiveIsa()));

// Room for a packed B of K x N that its producer writes itself: panel q holds
// columns q * panel .. as K rows of `panel` floats (what SgemmPackB writes).
// Zero-filled; the producer may refill it for another B of the same size.
SgemmPacked SgemmAllocatePackedB(int64_t K, int64_t N, SgemmPath path);

// The columns in one panel of a packed B on `path` (SgemmPacked::panel).
int SgemmPackedBPanel(SgemmPath path);

// A packed B of K x N read from panels its owner keeps, laid out as SgemmAllocatePackedB's
// (panel q holds columns q * panel .. as K rows of `panel` floats) from `panels` (64-byte
// aligned reads fastest), which must outlive the view's use. The owner may keep room for more
// columns (the first N columns' panels do not depend on N) and, with panel_stride (floats from one
// panel to the next, at least K x panel), for more rows.
SgemmPacked SgemmPackedBView(const float* panels, int64_t K, int64_t N, SgemmPath path,
                             int64_t panel_stride = 0);

// An operand as the GEMM reads it: either row-major memory or packed.
struct SgemmOperand {
  const float* data = nullptr;  // row-major, when packed is null
  int64_t ld = 0;
  const SgemmPacked* packed = nullptr;
  static SgemmOperand RowMajor(const float* data, int64_t ld) { return {data, ld, nullptr}; }
  static SgemmOperand Packed(const SgemmPacked& p) { return {nullptr, 0, &p}; }
};

// C (leading dimension ldc >= N) = A * B. Packed operands must match M/K/N
// and have the same path, which then runs; with both operands row-major,
// `row_major_path` runs. pool may be null (runs on the caller). Throws
// octet::Error on negative sizes, too-small leading dimensions or mismatched
// packing.
void Sgemm(int64_t M, int64_t N, int64_t K, const SgemmOperand& a, const SgemmOperand& b, float* c,
           int64_t ldc, ThreadPool* pool, SgemmPath row_major_path = SgemmPathFor(ActiveIsa()));

}  // namespace octet
