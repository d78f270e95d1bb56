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

// A tile that finishes the product in registers (AVX-512 VNNI, one k block)
// instead of storing the int32 C: the corrected sums plus an optional int32
// bias, then requantize.h's RequantizeS32 (8-bit output) or ScaleS32ToFloat
// (float output), op for op, stored masked to `cols` columns. The per-column
// pointers start at the tile's column 0.
struct TileFinish {
  void* out;                // the tile's row 0, column 0: uint8/int8, or float when to_float
  int64_t ld_out;           // in elements
  int cols;                 // columns stored, <= nr
  const int32_t* acc_bias;  // null, or one value / per column: added (wrapping) first
  bool acc_bias_per_column;
  const float* multiplier;  // the requantization multiplier, or the float scale
  bool multiplier_per_column;
  bool to_float;
  float lo, hi;  // 8-bit: the clamp, float(qmin - zero_point) and float(qmax - zero_point)
  int32_t zero_point;
  const float* bias;  // float: null, or one value / per column, added after the multiply
  bool bias_per_column;
};

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
  // Leading dimension of a row-major A read in place (the RowMajorA tiles
  // only; `a` then points at row 0 of the tile, k group 0 of the block).
  int64_t a_ld = 0;
  const TileFinish* finish = nullptr;  // AVX-512 VNNI tiles, one k block: no C
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
// TileAvx512Vnni reading A in place (row-major, TileArgs::a_ld; whole k groups
// only): uint8 A as the unsigned operand, as stored. gemm.cc uses it for every
// K that is a multiple of 4, so A is never packed there.
void TileAvx512VnniRowMajorA(int rows, const TileArgs& t);
// The same for int8 A, which stays the signed operand: the packed B is loaded
// flipped into the unsigned domain (B'' = B' + 128), the zero-point terms use
// that domain.
void TileAvx512VnniRowMajorSignedA(int rows, const TileArgs& t);
// col_sums[j] = sum over the k groups of packed B's (int8) bytes of column j,
// for every column of `panels` AVX-512 VNNI panels (PackB's column sums).
void ColumnSumsAvx512Vnni(const int8_t* packed, int64_t panels, int64_t k_groups,
                          int32_t* col_sums);
// row_sums[m] = sum over k < K of A's raw values (int8 or uint8) for rows
// [row_begin, row_end): the row sums of an A the tiles above read in place.
void RowSumsAvx512Vnni(const Int8Operand& A, int64_t row_begin, int64_t row_end, int64_t K,
                       int32_t* row_sums);
#endif
#if defined(__aarch64__)
void TileNeonDot(int rows, const TileArgs& t);
#endif

}  // namespace octet::gemm
