// Numpy-matmul shapes for the integer matmul operators, how per-row (A) or
// per-column (B) quantization parameters line up with the operand matrices,
// and the batched integer product on the fast int8 GEMM (kernels/int8/gemm.h)
// that MatMulInteger, QLinearMatMul, MatMulIntegerToFloat and
// DynamicQuantizeMatMul share.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/tensor.h"
#include "graph/graph.h"
#include "kernels/int8/epilogue.h"
#include "kernels/int8/gemm.h"
#include "ops/registry.h"

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

// Where the matrices of an operand or of the output lie when a head Transpose
// was folded into the node (rewrite/int8_attention.h): the tensor as stored
// is [B, X, H, Y]; logical matrix i = b * H + h starts at byte
// b * X * H * Y + h * Y. With perm [0, 2, 1, 3] it is X x Y, rows H * Y apart;
// with perm [0, 2, 3, 1] (B only) it is Y x X, stored column by column.
// heads == 0: the dense row-major [..., rows, cols] layout.
struct MatMulHeadLayout {
  int64_t heads = 0, x = 0, y = 0;
  bool columns = false;  // perm [0, 2, 3, 1]
  int64_t MatrixOffset(int64_t matrix) const {
    return matrix / heads * x * heads * y + matrix % heads * y;
  }
  int64_t ld() const { return heads * y; }
};
// A's and the requantized output's layouts (B's travels in PackedMatMulB).
struct MatMulHeadLayouts {
  MatMulHeadLayout a, y;
};

// Every K x N matrix of a B operand ([..., K, N], or [K] as K x 1) packed for
// the int8 GEMM once, for products with A of one signedness (`plan`): K is cut
// into chunks of at most kGemmMaxK rows (the GEMM's exactness limit), whose
// int32 results are added with wrap-around, as ONNX Runtime's int32
// accumulation wraps.
struct PackedMatMulB {
  GemmPlan plan;
  int64_t k = 0, n = 0;
  bool is_signed = false;
  std::vector<std::vector<PackedB>> matrices;  // [matrix][k chunk]
  // A B that changes every run (K within one chunk) is instead left here,
  // matrices empty: RunIntMatMul packs each matrix on the thread that uses it,
  // into a buffer reused between products (attention's run-time operands).
  const Tensor* unpacked = nullptr;
  MatMulHeadLayout unpacked_layout;  // how `unpacked` holds its matrices
};
// A constant B packs into `arena` (KernelInit::weights); one packed per run passes null.
PackedMatMulB PackMatMulB(const Tensor& b, const GemmPlan& plan, WeightArena* arena = nullptr);

// Zero points of one operand as int32 values with their layout (null = 0).
struct MatMulZeroPoints {
  const int32_t* values = nullptr;
  ParamLayout layout;
};

// Rows per GEMM call for an M x K A: all of them, or a multiple of 128 with
// about 4 MiB of packed A (fewer, larger products mean fewer thread
// synchronizations; the packed A is a per-thread scratch).
int64_t ProductBlockRows(int64_t m, int64_t k);

// How RunIntMatMul finishes every batch entry: `epilogue`, its multiplier
// advanced by multiplier_matrix_stride * (the entry's B matrix) (a per-column
// b_scale per matrix).
struct MatMulEpilogue {
  Epilogue epilogue;
  int64_t multiplier_matrix_stride = 0;
};

// The layout for a stored tensor read as Transpose(stored, perm), and the
// transposed shape; fails unless stored is 4-D and perm is [0, 2, 1, 3] or
// (allow_columns) [0, 2, 3, 1].
MatMulHeadLayout HeadLayoutFromPerm(const Node& node, const std::vector<int64_t>& perm,
                                    const Shape& stored, bool allow_columns, const char* name,
                                    Shape& transposed);

// y[entry, m, n] = epilogue(sum_k (A - zA)(B - zB)) for every batch entry of `s`
// ([batch, m, n] of the epilogue's output type, or through heads.y), finished in
// the GEMM's registers. The bytes never depend on the pool's thread count.
void RunIntMatMul(const MatMulShape& s, const Tensor& a, const MatMulZeroPoints& a_zero,
                  const PackedMatMulB& b, const MatMulZeroPoints& b_zero, const MatMulEpilogue& e,
                  void* y, ThreadPool* pool, const MatMulHeadLayouts& heads = {});

// Fails unless t is uint8 or int8 ("input <name> has dtype ...").
void CheckInt8Operand(const Node& node, const Tensor& t, const char* name);

// A B input of an integer matmul kernel whose A is `a_signed`: the plan made
// and B packed at kernel creation when it is a constant initializer, else per run.
class MatMulBInput {
 public:
  MatMulBInput(const KernelInit& init, size_t index, bool a_signed);
  // The packed B of this run; `storage` holds it when B is not a constant.
  const PackedMatMulB& Get(const Node& node, const Tensor& b, PackedMatMulB& storage) const;
  // The same for a run-time B stored under a head layout (logical shape `shape`).
  const PackedMatMulB& Get(const Node& node, const Tensor& b, const Shape& shape,
                           const MatMulHeadLayout& layout, PackedMatMulB& storage) const;
  // OpKernel::ReadsConstantInRun for the kernel's input `input`: once packed,
  // Run reads only B's dtype and shape (the session may free its data).
  bool ReadsInRun(size_t input) const { return input != index_ || !constant_; }

 private:
  size_t index_;
  GemmPlan plan_;
  std::optional<PackedMatMulB> constant_;
};

// A zero point input (per tensor, per row of A or per column of B), read once
// when it is a constant initializer.
class ZeroPointInput {
 public:
  // index: the zero point's input; operand_index: the input whose dtype it has.
  ZeroPointInput(const KernelInit& init, size_t index, size_t operand_index, const char* name);
  // Values and layout for this run (null values when the input is omitted);
  // `storage` holds the values when the zero point is not a constant.
  MatMulZeroPoints Get(const KernelContext& ctx, const Tensor& operand, bool is_a,
                       std::vector<int32_t>& storage) const;

 private:
  size_t index_;
  const char* name_;
  std::optional<std::vector<int32_t>> constant_;
};

}  // namespace octet
