// Internal to the int8 GEMM: the packed layouts and the micro-kernel contract
// that gemm.cc drives and gemm_<isa>.cc implement.
//
// k is cut into groups of 4 (kGemmGroup): one 32-bit lane of vpdpbusd / sdot
// sums four products. K is zero-padded to whole groups.
//
// Packed B (PackedB::data): panels of nr columns (the last zero-padded); panel
// j starts at j * k_groups * nr * 4; inside it group g holds, for each of the
// nr columns, its 4 bytes k = 4g..4g+3. Values are int8: B itself, or B - 128
// for uint8 B (so a signed kernel operand covers both).
//
// Packed A: panels of mr rows (the last may have fewer, r rows); panel p
// starts at p * mr * k_groups * 4; inside it group g holds, for each of its r
// rows, 4 bytes k = 4g..4g+3. Values are in the kernel's A domain: unsigned
// (x86: int8 A stored as A + 128) or signed (Arm: uint8 A stored as A - 128).
#pragma once

#include <cstdint>

#include "kernels/int8/gemm_reference.h"
#include "kernels/isa.h"

namespace octet::gemm {

constexpr int kGroup = 4;
constexpr int kMaxRows = 8;   // largest mr of any path
constexpr int kMaxCols = 32;  // largest nr of any path

struct TileShape {
  int mr;           // rows per A panel (and per full micro-tile)
  int nr;           // columns per B panel
  bool a_unsigned;  // packed A domain: uint8 (x86) or int8 (Arm)
};
TileShape TileShapeFor(Isa isa);

// Packs A rows [row_begin, row_end) (row_begin a multiple of mr) into the
// panel layout above at dst (the start of the whole packed A) and stores each
// row's sum of packed values (over the K real columns) in row_sums[m].
void PackA(const Int8Operand& A, int64_t row_begin, int64_t row_end, int64_t K, const TileShape& s,
           uint8_t* dst, int32_t* row_sums);

// One micro-tile: rows x nr outputs over k_groups groups.
//   S[r][j] = sum_g sum_i a[g][r][i] * b[g][j][i]
//   C[r][j] = (accumulate ? C[r][j] : 0) + S[r][j]
//             (+ row_neg_za[r] * col_term[j] + row_neg_sum[r] * col_zb[j] when row_neg_za)
//             (+ col_offset[j] + row_offset[r] when col_offset)
// All arithmetic wraps modulo 2^32. All nr columns of C are written.
struct TileArgs {
  const uint8_t* a;  // packed A panel at the first group of this k block
  const int8_t* b;   // packed B panel at the first group of this k block
  int64_t k_groups;
  int32_t* c;
  int64_t ldc;
  bool accumulate;
  const int32_t* row_neg_za;   // final k block only, else null: -zA per row (A domain)
  const int32_t* row_neg_sum;  // -(row sum of packed A) per row
  const int32_t* col_term;     // per column: colsum(B') - K * zB'
  const int32_t* col_zb;       // per column: zB' (B domain)
  // The same correction when both zero points are per tensor, as two vectors
  // (one add instead of two multiplies per output vector); final k block only,
  // with row_neg_za null. Else null.
  const int32_t* col_offset = nullptr;  // per column: -zA * (colsum(B') - K * zB')
  const int32_t* row_offset = nullptr;  // per row: -zB' * (row sum of packed A)
};
using TileFn = void (*)(int rows, const TileArgs& t);
// The micro-kernel of `isa`; throws octet::Error when this binary was built
// without it (e.g. the Arm kernel on x86).
TileFn TileFnFor(Isa isa);

void TileScalar(int rows, const TileArgs& t);
#if defined(__x86_64__) || defined(_M_X64)
void TileAvx2(int rows, const TileArgs& t);
void TileAvxVnni(int rows, const TileArgs& t);
void TileAvx512Vnni(int rows, const TileArgs& t);
// TileAvx512Vnni with the operands' roles swapped: the packed B bytes are
// unsigned (uint8) and the packed A bytes signed (int8), same layouts and
// contract otherwise. The convolution uses it for int8 weights with zero
// point 0, which then need no column sums (conv.cc).
void TileAvx512VnniUnsignedB(int rows, const TileArgs& t);
#endif
#if defined(__aarch64__)
void TileNeonDot(int rows, const TileArgs& t);
#endif

}  // namespace octet::gemm
