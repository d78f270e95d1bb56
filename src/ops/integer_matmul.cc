// MatMulInteger (ai.onnx 10) and QLinearMatMul (ai.onnx 10, 21) on the fast
// int8 GEMM: shapes and quantization parameters, then the exact int32 product
// with zero-point correction (RunIntMatMul: B packed once at kernel creation
// when it is a constant initializer, else per run), finished in the GEMM's
// registers (int32, or QLinearMatMul's requantization).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph/octet_ops.h"
#include "kernels/int8/epilogue.h"
#include "ops/int_matmul_shape.h"
#include "ops/int_params.h"
#include "ops/registry.h"

namespace octet {

namespace {

const Tensor* ConstantInput(const KernelInit& init, size_t i) {
  return i < init.constant_inputs.size() ? init.constant_inputs[i] : nullptr;
}

class MatMulIntegerKernel : public OpKernel {
 public:
  explicit MatMulIntegerKernel(const KernelInit& init)
      : b_(init, 1, init.input_types[0] == DType::kInt8),
        a_zero_(init, 2, 0, "a_zero_point"),
        b_zero_(init, 3, 1, "b_zero_point") {}

  // A goes only to the int8 GEMM, whose every path runs on guarded A in gemm_test.
  bool ReadsOnlyInputBytes(size_t input) const override { return input == 0; }
  bool ReadsConstantInRun(size_t input) const override { return b_.ReadsInRun(input); }

  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    CheckInt8Operand(node, a, "A");
    const MatMulShape shape = ComputeMatMulShape(node, a.shape(), b.shape());
    std::vector<int32_t> a_zero_storage, b_zero_storage;
    const MatMulZeroPoints a_zero = a_zero_.Get(ctx, a, true, a_zero_storage);
    const MatMulZeroPoints b_zero = b_zero_.Get(ctx, b, false, b_zero_storage);
    PackedMatMulB b_storage;
    const PackedMatMulB& packed = b_.Get(node, b, b_storage);
    Tensor& y = ctx.AllocateUninitializedOutput(0, DType::kInt32, shape.output);
    RunIntMatMul(shape, a, a_zero, packed, b_zero, MatMulEpilogue{}, y.raw(), ctx.pool());
  }

 private:
  MatMulBInput b_;
  ZeroPointInput a_zero_, b_zero_;
};

// Inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point.
// Attributes octet_a_perm / octet_b_perm / octet_y_perm (rewrite/int8_attention.h):
// A or B is read as Transpose(input, perm), the output written as
// Transpose(Y, perm), through strides.
class QLinearMatMulKernel : public OpKernel {
 public:
  explicit QLinearMatMulKernel(const KernelInit& init)
      : b_(init, 3, init.input_types[0] == DType::kInt8),
        a_zero_(init, 2, 0, "a_zero_point"),
        b_zero_(init, 5, 3, "b_zero_point"),
        a_perm_(init.node.GetInts(kAPermAttr)),
        b_perm_(init.node.GetInts(kBPermAttr)),
        y_perm_(init.node.GetInts(kYPermAttr)) {
    const Tensor* a_scale = ConstantInput(init, 1);
    const Tensor* b_scale = ConstantInput(init, 4);
    const Tensor* y_scale = ConstantInput(init, 6);
    if (a_scale && b_scale && y_scale)
      multipliers_ = Multipliers(init.node, *a_scale, *b_scale, *y_scale);
  }

  // A goes only to the int8 GEMM, whose every path runs on guarded A in
  // gemm_test; A read through a head layout is not.
  bool ReadsOnlyInputBytes(size_t input) const override { return input == 0 && a_perm_.empty(); }
  bool ReadsConstantInRun(size_t input) const override { return b_.ReadsInRun(input); }

  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(3);
    const Tensor& b_scale = ctx.input(4);
    const Tensor& y_zero_point = ctx.input(7);
    CheckInt8Operand(node, a, "A");
    MatMulHeadLayouts heads;
    MatMulHeadLayout b_layout;
    Shape a_shape = a.shape(), b_shape = b.shape();
    if (!a_perm_.empty())
      heads.a = HeadLayoutFromPerm(node, a_perm_, a.shape(), false, "a", a_shape);
    if (!b_perm_.empty())
      b_layout = HeadLayoutFromPerm(node, b_perm_, b.shape(), true, "b", b_shape);
    const MatMulShape shape = ComputeMatMulShape(node, a_shape, b_shape);
    Shape y_shape = shape.output;
    if (!y_perm_.empty()) {
      // The product [B, H, S, D] is stored as [B, S, H, D]; the perm is its own inverse.
      HeadLayoutFromPerm(node, y_perm_, shape.output, false, "y", y_shape);
      Shape product_shape;
      heads.y = HeadLayoutFromPerm(node, y_perm_, y_shape, false, "y", product_shape);
    }

    // Step 1: A and Y are per tensor (as in ONNX Runtime's CPU kernel), B per
    // tensor or per column.
    std::vector<float> per_run;
    if (!multipliers_) per_run = Multipliers(node, ctx.input(1), b_scale, ctx.input(6));
    const std::vector<float>& multipliers = multipliers_ ? *multipliers_ : per_run;
    CheckPerTensor(node, ctx.input(2), "a_zero_point");
    CheckPerTensor(node, y_zero_point, "y_zero_point");
    if (!b_perm_.empty()) {
      // Per-column parameters would be laid out along the stored B's columns.
      CheckPerTensor(node, b_scale, "b_scale");
      if (ctx.has_input(5)) CheckPerTensor(node, ctx.input(5), "b_zero_point");
    }
    std::vector<int32_t> a_zero_storage, b_zero_storage;
    const MatMulZeroPoints a_zero = a_zero_.Get(ctx, a, true, a_zero_storage);
    const MatMulZeroPoints b_zero = b_zero_.Get(ctx, b, false, b_zero_storage);
    const ParamLayout b_scale_layout = ColumnParamLayout(node, b_scale, b_shape, "b_scale");
    const DType y_type = y_zero_point.dtype();
    OCTET_CHECK(Is8Bit(y_type), node.Describe(), ": y_zero_point has dtype ", DTypeName(y_type),
                "; expected uint8 or int8");
    PackedMatMulB b_storage;
    const PackedMatMulB& packed = b_perm_.empty() ? b_.Get(node, b, b_storage)
                                                  : b_.Get(node, b, b_shape, b_layout, b_storage);

    // Steps 2 and 3.
    Tensor& y = ctx.AllocateUninitializedOutput(0, y_type, y_shape);
    MatMulEpilogue e;
    e.epilogue.output = EightBitOutput(y_type);
    e.epilogue.multiplier = {multipliers.data(), false, b_scale_layout.per_vector()};
    e.epilogue.zero_point = ReadZeroPoints(node, y_zero_point, y_type, "y_zero_point")[0];
    e.multiplier_matrix_stride = b_scale_layout.matrix_stride;
    RunIntMatMul(shape, a, a_zero, packed, b_zero, e, y.raw(), ctx.pool(), heads);
  }

 private:
  // (a_scale * b_scale) / y_scale per b_scale value, in ONNX Runtime's order.
  static std::vector<float> Multipliers(const Node& node, const Tensor& a_scale,
                                        const Tensor& b_scale, const Tensor& y_scale) {
    CheckPerTensor(node, a_scale, "a_scale");
    CheckPerTensor(node, y_scale, "y_scale");
    const float a = ReadScales(node, a_scale, "a_scale")[0];
    const float y = ReadScales(node, y_scale, "y_scale")[0];
    std::vector<float> multipliers = ReadScales(node, b_scale, "b_scale");
    for (float& m : multipliers) m = RequantizeMultiplier(a, m, y);
    return multipliers;
  }

  MatMulBInput b_;
  ZeroPointInput a_zero_, b_zero_;
  std::vector<int64_t> a_perm_, b_perm_, y_perm_;  // empty: no folded Transpose
  std::optional<std::vector<float>> multipliers_;
};

// Optional zero points must have their operand's dtype.
bool MatchesOrOmitted(DType zero_point, DType operand) {
  return zero_point == DType::kUndefined || zero_point == operand;
}

bool AcceptsMatMulInteger(const Node&, const std::vector<DType>& t) {
  return t.size() >= 2 && t.size() <= 4 && Is8Bit(t[0]) && Is8Bit(t[1]) &&
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
  return scales_ok && t[4] == t[1] && t[6] == t[1] && Is8Bit(t[0]) && t[2] == t[0] &&
         Is8Bit(t[3]) && t[5] == t[3] && Is8Bit(t[7]);
}

}  // namespace

void RegisterIntegerMatMulOps(KernelRegistry& r) {
  r.Register(
      {kOnnxDomain, "MatMulInteger", 10, 1 << 30, AcceptsMatMulInteger,
       [](const Node&, const std::vector<DType>&) { return std::vector<DType>{DType::kInt32}; },
       [](const KernelInit& init) { return std::make_unique<MatMulIntegerKernel>(init); }});
  r.Register({kOnnxDomain, "QLinearMatMul", 10, 1 << 30, AcceptsQLinearMatMul,
              [](const Node&, const std::vector<DType>& t) { return std::vector<DType>{t[7]}; },
              [](const KernelInit& init) { return std::make_unique<QLinearMatMulKernel>(init); }});
}

}  // namespace octet
