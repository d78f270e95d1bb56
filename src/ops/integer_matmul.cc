// MatMulInteger (ai.onnx 10) and QLinearMatMul (ai.onnx 10, 21): reference
// kernels in three steps: (1) shapes and quantization parameters, (2) the
// integer product with zero-point correction (MatMulProductS32, the one call
// the fast GEMM replaces), (3) for QLinearMatMul the requantization epilogue.
#include <memory>
#include <string>
#include <vector>

#include "kernels/int8/gemm_reference.h"
#include "kernels/int8/requantize.h"
#include "ops/int_matmul_shape.h"
#include "ops/int_params.h"
#include "ops/registry.h"

namespace octet {

namespace {

// One operand of the product with its zero points (empty = zero point 0).
struct MatMulOperand {
  const Tensor* tensor = nullptr;
  std::vector<int32_t> zero;
  ParamLayout zero_layout;
};

MatMulOperand ReadOperand(const Node& node, const Tensor& t, const Tensor* zero_point, bool is_a,
                          const char* zero_name) {
  MatMulOperand op{&t, {}, {}};
  OCTET_CHECK(IsInt8Type(t.dtype()), node.Describe(), ": input ", is_a ? "A" : "B", " has dtype ",
              DTypeName(t.dtype()), "; expected uint8 or int8");
  if (zero_point) {
    op.zero_layout = is_a ? RowParamLayout(node, *zero_point, t.shape(), zero_name)
                          : ColumnParamLayout(node, *zero_point, t.shape(), zero_name);
    op.zero = ReadZeroPoints(node, *zero_point, t.dtype(), zero_name);
  }
  return op;
}

// Step 2: acc[batch, m, n] = sum_k (A - zA) * (B - zB) for every batch entry.
void MatMulProductS32(const MatMulShape& s, const MatMulOperand& a, const MatMulOperand& b,
                      int32_t* acc) {
  const bool a_signed = a.tensor->dtype() == DType::kInt8;
  const bool b_signed = b.tensor->dtype() == DType::kInt8;
  const auto* a_data = static_cast<const uint8_t*>(a.tensor->raw());
  const auto* b_data = static_cast<const uint8_t*>(b.tensor->raw());
  for (int64_t i = 0; i < s.batch_count(); ++i) {
    const Int8Operand a_matrix{a_data + s.a_matrix[i] * s.m * s.k, a_signed, s.k};
    const Int8Operand b_matrix{b_data + s.b_matrix[i] * s.k * s.n, b_signed, s.n};
    const int32_t* a_zero =
        a.zero.empty() ? nullptr : a.zero.data() + a.zero_layout.MatrixOffset(s.a_matrix[i]);
    const int32_t* b_zero =
        b.zero.empty() ? nullptr : b.zero.data() + b.zero_layout.MatrixOffset(s.b_matrix[i]);
    GemmReferenceS32(s.m, s.n, s.k, a_matrix, a_zero, a.zero_layout.per_vector(), b_matrix, b_zero,
                     b.zero_layout.per_vector(), acc + i * s.m * s.n, s.n);
  }
}

const Tensor* OptionalInput(const KernelContext& ctx, size_t i) {
  return ctx.has_input(i) ? &ctx.input(i) : nullptr;
}

class MatMulIntegerKernel : public OpKernel {
 public:
  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    const MatMulShape shape = ComputeMatMulShape(node, a.shape(), b.shape());
    const MatMulOperand a_op = ReadOperand(node, a, OptionalInput(ctx, 2), true, "a_zero_point");
    const MatMulOperand b_op = ReadOperand(node, b, OptionalInput(ctx, 3), false, "b_zero_point");
    Tensor& y = ctx.AllocateOutput(0, DType::kInt32, shape.output);
    MatMulProductS32(shape, a_op, b_op, y.data<int32_t>());
  }
};

// Inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point.
class QLinearMatMulKernel : public OpKernel {
 public:
  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(3);
    const Tensor& a_scale = ctx.input(1);
    const Tensor& b_scale = ctx.input(4);
    const Tensor& y_scale = ctx.input(6);
    const Tensor& y_zero_point = ctx.input(7);
    const MatMulShape shape = ComputeMatMulShape(node, a.shape(), b.shape());

    // Step 1: A and Y are per tensor (as in ONNX Runtime's CPU kernel), B per
    // tensor or per column.
    CheckPerTensor(node, a_scale, "a_scale");
    CheckPerTensor(node, ctx.input(2), "a_zero_point");
    CheckPerTensor(node, y_scale, "y_scale");
    CheckPerTensor(node, y_zero_point, "y_zero_point");
    const MatMulOperand a_op = ReadOperand(node, a, &ctx.input(2), true, "a_zero_point");
    const MatMulOperand b_op = ReadOperand(node, b, &ctx.input(5), false, "b_zero_point");
    const ParamLayout b_scale_layout = ColumnParamLayout(node, b_scale, b.shape(), "b_scale");
    const DType y_type = y_zero_point.dtype();
    OCTET_CHECK(IsInt8Type(y_type), node.Describe(), ": y_zero_point has dtype ", DTypeName(y_type),
                "; expected uint8 or int8");
    const float a_scale_value = ReadScales(node, a_scale, "a_scale")[0];
    const float y_scale_value = ReadScales(node, y_scale, "y_scale")[0];
    std::vector<float> multipliers = ReadScales(node, b_scale, "b_scale");
    for (float& m : multipliers) m = RequantizeMultiplier(a_scale_value, m, y_scale_value);

    // Step 2.
    std::vector<int32_t> acc(static_cast<size_t>(shape.batch_count() * shape.m * shape.n));
    MatMulProductS32(shape, a_op, b_op, acc.data());

    // Step 3.
    Tensor& y = ctx.AllocateOutput(0, y_type, shape.output);
    auto* y_data = static_cast<uint8_t*>(y.raw());
    RequantizeParams params;
    params.multiplier_per_column = b_scale_layout.per_vector();
    params.zero_point = ReadZeroPoints(node, y_zero_point, y_type, "y_zero_point")[0];
    params.output_type = y_type;
    for (int64_t i = 0; i < shape.batch_count(); ++i) {
      params.multiplier = multipliers.data() + b_scale_layout.MatrixOffset(shape.b_matrix[i]);
      const int64_t offset = i * shape.m * shape.n;
      RequantizeS32(acc.data() + offset, shape.n, shape.m, shape.n, params, y_data + offset,
                    shape.n);
    }
  }
};

// Optional zero points must have their operand's dtype.
bool MatchesOrOmitted(DType zero_point, DType operand) {
  return zero_point == DType::kUndefined || zero_point == operand;
}

bool AcceptsMatMulInteger(const Node&, const std::vector<DType>& t) {
  return t.size() >= 2 && t.size() <= 4 && IsInt8Type(t[0]) && IsInt8Type(t[1]) &&
         MatchesOrOmitted(t.size() > 2 ? t[2] : DType::kUndefined, t[0]) &&
         MatchesOrOmitted(t.size() > 3 ? t[3] : DType::kUndefined, t[1]);
}

// ai.onnx allows float8 a/b/y from opset 21; neither ONNX Runtime's CPU kernel
// nor octet has them, so they are refused here (the registry names the dtypes).
bool AcceptsQLinearMatMul(const Node& node, const std::vector<DType>& t) {
  if (t.size() != 8) return false;
  const bool scales_ok = node.opset >= 21
                             ? OneOf(t[1], {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
                             : t[1] == DType::kFloat32;
  return scales_ok && t[4] == t[1] && t[6] == t[1] && IsInt8Type(t[0]) && t[2] == t[0] &&
         IsInt8Type(t[3]) && t[5] == t[3] && IsInt8Type(t[7]);
}

}  // namespace

void RegisterIntegerMatMulOps(KernelRegistry& r) {
  r.Register(
      {kOnnxDomain, "MatMulInteger", 10, 1 << 30, AcceptsMatMulInteger,
       [](const Node&, const std::vector<DType>&) { return std::vector<DType>{DType::kInt32}; },
       [](const KernelInit&) { return std::make_unique<MatMulIntegerKernel>(); }});
  r.Register({kOnnxDomain, "QLinearMatMul", 10, 1 << 30, AcceptsQLinearMatMul,
              [](const Node&, const std::vector<DType>& t) { return std::vector<DType>{t[7]}; },
              [](const KernelInit&) { return std::make_unique<QLinearMatMulKernel>(); }});
}

}  // namespace octet
