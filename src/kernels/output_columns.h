// Where a product writes its columns: one row-major matrix, or consecutive ranges of
// columns each into a matrix of its own (products of one input run as one,
// rewrite/sibling_products.h), so that no copy follows the product.
#pragma once

#include <cstdint>

namespace octet {

// Every range but the last starts and ends on a multiple of this many columns, which
// every kernel's block of columns divides (the int8 GEMM's 16- and 32-column panels, the
// 4-bit product's 64-column groups): no block is written to two matrices.
inline constexpr int64_t kOutputColumnsAlign = 64;

// Columns from `first` up to the next range's first (the last: to N) go to `data`, a
// row-major matrix whose element (r, c - first) is at r * ld + (c - first).
struct ColumnRange {
  int64_t first = 0;
  void* data = nullptr;
  int64_t ld = 0;  // in elements
};

// The ranges, ascending; the first starts at column 0. Holds a view of the caller's array.
struct OutputColumns {
  const ColumnRange* ranges = nullptr;
  int64_t count = 0;

  // The range that holds column `col`.
  const ColumnRange& Holding(int64_t col) const {
    int64_t i = count - 1;
    while (i > 0 && ranges[i].first > col) --i;
    return ranges[i];
  }
  // Element (row, col) of an output of `size`-byte elements.
  void* At(int64_t row, int64_t col, int64_t size) const {
    const ColumnRange& r = Holding(col);
    return static_cast<uint8_t*>(r.data) + (row * r.ld + col - r.first) * size;
  }
};

// Throws octet::Error unless y's ranges cover N columns in order from column 0, each
// range but the first starts on a multiple of kOutputColumnsAlign and each ld holds its
// range's columns; `who` names the product.
void CheckOutputColumns(const OutputColumns& y, int64_t N, const char* who);

}  // namespace octet
