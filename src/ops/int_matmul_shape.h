// Numpy-matmul shapes for the integer matmul operators, and how per-row (A) or
// per-column (B) quantization parameters line up with the operand matrices.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "graph/graph.h"

namespace octet {

// A [..., M, K] x B [..., K, N]: a 1-D A is promoted to [1, K] and a 1-D B to
// [K, 1] (the added dim is dropped from the output); batch dims broadcast.
struct MatMulShape {
  int64_t m = 0, k = 0, n = 0;
  Shape output;
  // For each output batch entry (in row-major order): which A and B matrix it uses.
  std::vector<int64_t> a_matrix, b_matrix;
  int64_t batch_count() const { return static_cast<int64_t>(a_matrix.size()); }
};

MatMulShape ComputeMatMulShape(const Node& node, const Shape& a, const Shape& b);

// Where the parameter value of (operand matrix, row or column i) sits:
// matrix * matrix_stride + i * vector_stride. Both strides are 0 per tensor.
struct ParamLayout {
  int64_t matrix_stride = 0;
  int64_t vector_stride = 0;
  bool per_vector() const { return vector_stride != 0; }
  int64_t MatrixOffset(int64_t matrix) const { return matrix * matrix_stride; }
};

// A parameter of A, per tensor or per row: one value, [M] for a 2-D A, or A's
// shape with the last dim 1 ([..., M, 1]).
ParamLayout RowParamLayout(const Node& node, const Tensor& param, const Shape& a, const char* name);

// A parameter of B, per tensor or per column: one value, [N] for a 2-D B, or
// B's shape with the second-to-last dim 1 ([..., 1, N]).
ParamLayout ColumnParamLayout(const Node& node, const Tensor& param, const Shape& b,
                              const char* name);

}  // namespace octet
