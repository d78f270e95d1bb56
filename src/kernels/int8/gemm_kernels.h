// The int8 GEMM's micro-kernels: their packed layouts, the one tile contract
// every kernel implements, and the table of kernels built into this binary
// (gemm_kernels.cc). gemm.cc drives them through a GemmPlan; the tile test
// (tests/unit/gemm_kernels_test.cc) and gemm_bench run every table entry.
//
// k is cut into groups of G (the kernel's k_group): one 32-bit lane of
// vpdpbusd / sdot sums 4 products (G = 4), one of vpmaddwd 2 (G = 2). K is
// zero-padded to whole groups.
//
// Packed B (PackedB::data): panels of nr columns (the last zero-padded); panel
// j starts at j * k_groups * nr * G bytes; inside it group g holds, for each of
// the nr columns, its G bytes k = G g .. G g + G - 1. The bytes are in the
// kernel's B domain: int8 (B itself, or B - 128 for uint8 B, so one signed
// operand covers both) or uint8 (B + 128 for int8 B, or B itself); a kernel with
// b_flip multiplies its int8 bytes + 128 (read unsigned).
//
// Paired B (b_paired, G = 2): each 16-bit word of a group holds one k of two
// columns, column q (< nr / 2) in the low byte, stored + 128 (read unsigned),
// and column q + nr / 2 in the high byte, so bytes 4q .. 4q + 3 are
// (q, k0), (q + nr/2, k0), (q, k1), (q + nr/2, k1). vpmaddwd of the raw words
// then sums (low + 256 high) and, after vpsraw by 8, the high column alone: no
// widening of B. The kernel removes the low columns' 128 per k itself (with
// row_neg_sum), so its sums are those of the plain layout.
//
// Packed A: panels of mr rows (the last may have fewer, r rows); panel p starts
// at p * mr * k_groups * G values; inside it group g holds, for each of its r
// rows, its G values k = G g ... Values are in the kernel's A domain (ADomain).
// Kernels with a_row_major instead read A in place, row-major (whole k groups).
//
// Names say what a kernel is, XNNPACK-style: gemm_<A><B>_<mr>x<nr>c<G>[_rowa]_<isa>,
// A and B the operand types the tile multiplies (u8, s8, i16), rowa for
// row-major A.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/for_count.h"
#include "kernels/int8/epilogue.h"
#include "kernels/isa.h"

namespace octet::gemm {

// How packed B's bytes hold B's values.
enum class BDomain : uint8_t {
  kSigned8,    // int8: uint8 B stored as B - 128
  kUnsigned8,  // uint8: int8 B stored as B + 128
};

// How a kernel's A operand holds A's values.
enum class ADomain : uint8_t {
  kUnsigned8,  // uint8: int8 A stored as A + 128 (vpdpbusd's unsigned operand)
  kSigned8,    // int8: uint8 A stored as A - 128 (sdot)
  kInt16,      // int16: A's own values, zero- or sign-extended (vpmaddwd)
};

constexpr int kMaxRows = 12;  // largest mr of any kernel
constexpr int kMaxCols = 32;  // largest nr of any kernel

// One micro-tile: rows (<= mr) x nr sums over this k block's k_groups groups,
//   S[r][j] = sum over the block's k of a[r][k] * b[k][j]       (the stored domains)
// plus, when accumulate, the sums the previous k blocks left in `partial`
// (a b_paired kernel's keep its low columns' + 128 per k until the last block).
// Not the last k block: S goes to partial (all nr columns). The last one
// corrects S for the zero points and finishes it through the epilogue into
// `out` (columns [0, cols) only; nothing past them is read from the epilogue's
// operands or written):
//   S[r][j] += row_neg_za[r] * col_term[j] + row_neg_sum[r] * col_zb[j]  (row_neg_za set)
//   S[r][j] += col_offset[j] + row_offset[r]                             (col_offset set)
//   out[r * ld_out + j] = epilogue(S[r][j]) at product element (row0 + r, col0 + j)
// All integer arithmetic wraps modulo 2^32. The column arrays hold nr values.
struct TileArgs {
  const uint8_t* a = nullptr;  // packed A panel at this block's first group, or row-major A
  int64_t a_ld = 0;            // row-major A (a_row_major kernels): bytes between rows
  const int8_t* b = nullptr;   // packed B panel at this block's first group
  int64_t k_groups = 0;
  bool accumulate = false;
  bool last = true;
  int32_t* partial = nullptr;  // rows x nr int32, partial_ld apart
  int64_t partial_ld = 0;
  const int32_t* row_neg_za = nullptr;   // -zA per row (A domain)
  // -(row sum of stored A) per row, on every last block (0 for an A read in place
  // that no correction needs); paired-B kernels use it themselves.
  const int32_t* row_neg_sum = nullptr;
  const int32_t* col_term = nullptr;     // per column: colsum(stored B) - K * zB (B domain)
  const int32_t* col_zb = nullptr;       // per column: zB (B domain)
  const int32_t* col_offset = nullptr;   // per column: -zA * col_term (per-tensor zero points)
  const int32_t* row_offset = nullptr;   // per row: -zB * (row sum of stored A)
  const Epilogue* epilogue = nullptr;
  int64_t row0 = 0, col0 = 0;
  void* out = nullptr;  // output element (row0, col0)
  int64_t ld_out = 0;   // in output elements
  int cols = 0;
};
using TileFn = void (*)(int rows, const TileArgs& t);

// Row sums of an A read in place: row_sums[m] = sum over k < K of A's raw
// values (int8 or uint8), rows [row_begin, row_end).
using RowSumsFn = void (*)(const void* a, bool a_signed, int64_t ld, int64_t row_begin,
                           int64_t row_end, int64_t K, int32_t* row_sums);

struct MicroKernel {
  const char* name;
  Isa isa;
  int mr, nr, k_group;
  ADomain a_domain;
  bool a_row_major;  // reads A in place (whole k groups only); a_signed: which A
  bool a_signed;
  BDomain b_domain;
  bool b_flip;    // multiplies the packed (int8) B bytes + 128
  bool b_paired;  // paired B words (above)
  TileFn tile;
  RowSumsFn row_sums;  // a_row_major kernels: A's row sums; else null
  // The k block: groups of k a tile covers per pass. Products with K up to
  // kc_groups * k_group finish each tile in one pass.
  int64_t kc_groups;
};

// Every kernel this binary has (whether or not this CPU runs it).
std::span<const MicroKernel> MicroKernels();
// The kernel named `name`; throws octet::Error when there is none.
const MicroKernel& MicroKernelNamed(const char* name);

// What a kernel adds to a value of A (and of B) to get the operand it
// multiplies: A' = A + AShift, B' = B + BShift. The driver's zero-point algebra
// works in these domains (gemm.cc).
inline int32_t AShift(const MicroKernel& k, bool a_signed) {
  if (k.a_row_major || k.a_domain == ADomain::kInt16) return 0;
  if (k.a_domain == ADomain::kUnsigned8) return a_signed ? 128 : 0;
  return a_signed ? 0 : -128;
}
inline int32_t BShift(const MicroKernel& k, bool b_signed) {
  const int32_t stored =
      k.b_domain == BDomain::kSigned8 ? (b_signed ? 0 : -128) : (b_signed ? 128 : 0);
  return stored + (k.b_flip ? 128 : 0);
}

// Bytes of one packed A value in `domain`.
inline int ADomainBytes(ADomain domain) { return domain == ADomain::kInt16 ? 2 : 1; }

// Packs A rows [row_begin, row_end) (row_begin a multiple of the kernel's mr)
// into its panel layout at dst (the start of the whole packed A) and stores
// each row's sum of stored values (over the K real columns) in row_sums[m].
// A: `a_signed` 8-bit values, rows `ld` bytes apart.
void PackA(const MicroKernel& kernel, const void* a, bool a_signed, int64_t ld, int64_t row_begin,
           int64_t row_end, int64_t K, void* dst, int32_t* row_sums);

// The tiles, one function per kernel (gemm_<isa>.cc).
void TileScalar(int rows, const TileArgs& t);
#if defined(__x86_64__) || defined(_M_X64)
void TileAvx2(int rows, const TileArgs& t);
void TileAvx2PairedB(int rows, const TileArgs& t);
void TileAvxVnni(int rows, const TileArgs& t);
void TileAvxVnniUnsignedB(int rows, const TileArgs& t);
void TileAvx512(int rows, const TileArgs& t);
void TileAvx512PairedB(int rows, const TileArgs& t);
void TileAvx512Vnni(int rows, const TileArgs& t);
void TileAvx512VnniUnsignedB(int rows, const TileArgs& t);
void TileAvx512VnniRowMajorA(int rows, const TileArgs& t);
void TileAvx512VnniRowMajorSignedA(int rows, const TileArgs& t);
void RowSumsAvx512Vnni(const void* a, bool a_signed, int64_t ld, int64_t row_begin, int64_t row_end,
                       int64_t K, int32_t* row_sums);
// col_sums[j] = sum over the k groups of packed B's (int8) bytes of column j,
// for every column of `panels` 32-column c4 panels (PackB's column sums).
void ColumnSumsAvx512Vnni(const int8_t* packed, int64_t panels, int64_t k_groups,
                          int32_t* col_sums);
#endif
#if defined(__aarch64__)
void TileNeonDot(int rows, const TileArgs& t);
#endif

}  // namespace octet::gemm
