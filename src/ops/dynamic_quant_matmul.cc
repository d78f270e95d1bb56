// com.microsoft MatMulIntegerToFloat and DynamicQuantizeMatMul (opset 1): the
// int8 product with a float output, on the fast int8 GEMM (B packed once when
// constant) and the shared float epilogue (kernels/int8/epilogue.h), in
// ONNX Runtime 1.31.1's order (checked by tools/bench_vs_ort.py --check-only
// and tests/unit/integer_matmul_test.cc):
//
//   multiplier[n] = a_scale * b_scale[n]                 float32
//   y = float(acc) * multiplier[n] + bias[n]             float32 multiply, then float32 add
//
// DynamicQuantizeMatMul first quantizes the float A to uint8 with
// DynamicQuantizeLinear's own code (ops/quantize_linear.h), then runs the same product.
#include <memory>
#include <vector>

#include "kernels/int8/epilogue.h"
#include "ops/int_matmul_shape.h"
#include "ops/int_params.h"
#include "ops/quantize_linear.h"
#include "ops/registry.h"

namespace octet {

namespace {

// The product and float epilogue shared by both operators.
class IntegerToFloatMatMul {
 public:
  IntegerToFloatMatMul(const KernelInit& init, bool a_signed, size_t b_index, size_t b_zero_index)
      : b_(init, b_index, a_signed), b_zero_(init, b_zero_index, b_index, "b_zero_point") {}

  bool ReadsInRun(size_t input) const { return b_.ReadsInRun(input); }

  // a: uint8/int8 with per-tensor zero point a_zero (null = 0).
  void Run(KernelContext& ctx, const Tensor& a, const int32_t* a_zero, float a_scale,
           const Tensor& b, const Tensor& b_scale, const Tensor* bias) const {
    const Node& node = ctx.node();
    const MatMulShape shape = ComputeMatMulShape(node, a.shape(), b.shape());
    std::vector<int32_t> b_zero_storage;
    const MatMulZeroPoints b_zero = b_zero_.Get(ctx, b, false, b_zero_storage);
    const ParamLayout b_scale_layout = ColumnParamLayout(node, b_scale, b.shape(), "b_scale");
    std::vector<float> multipliers = ReadScales(node, b_scale, "b_scale");
    for (float& m : multipliers) m = a_scale * m;
    if (bias) {
      OCTET_CHECK(bias->dtype() == DType::kFloat32 && bias->shape() == Shape{shape.n},
                  node.Describe(), ": bias has dtype ", DTypeName(bias->dtype()), " and shape ",
                  ShapeToString(bias->shape()), "; expected float [N] = [", shape.n, "]");
    }
    PackedMatMulB b_storage;
    const PackedMatMulB& packed = b_.Get(node, b, b_storage);

    Tensor& y = ctx.AllocateUninitializedOutput(0, DType::kFloat32, shape.output);
    MatMulEpilogue e;
    e.epilogue.output = EpilogueOutput::kFloat;
    e.epilogue.multiplier = {multipliers.data(), false, b_scale_layout.per_vector()};
    if (bias) e.epilogue.float_bias = {bias->data<float>(), false, true};
    e.multiplier_matrix_stride = b_scale_layout.matrix_stride;
    MatMulZeroPoints a_zero_points;
    a_zero_points.values = a_zero;
    RunIntMatMul(shape, a, a_zero_points, packed, b_zero, e, y.raw(), ctx.pool());
  }

 private:
  MatMulBInput b_;
  ZeroPointInput b_zero_;
};

// Inputs: A, B, a_scale, b_scale, a_zero_point?, b_zero_point?, bias?
class MatMulIntegerToFloatKernel : public OpKernel {
 public:
  explicit MatMulIntegerToFloatKernel(const KernelInit& init)
      : product_(init, init.input_types[0] == DType::kInt8, 1, 5) {}
  bool ReadsConstantInRun(size_t input) const override { return product_.ReadsInRun(input); }

  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& a = ctx.input(0);
    CheckInt8Operand(node, a, "A");
    // ONNX Runtime scales the output afterwards for a per-row a_scale (a
    // different float order); octet takes per-tensor A parameters only.
    CheckPerTensor(node, ctx.input(2), "a_scale");
    const float a_scale = ReadScales(node, ctx.input(2), "a_scale")[0];
    std::vector<int32_t> a_zero;
    if (ctx.has_input(4)) {
      CheckPerTensor(node, ctx.input(4), "a_zero_point");
      a_zero = ReadZeroPoints(node, ctx.input(4), a.dtype(), "a_zero_point");
    }
    product_.Run(ctx, a, a_zero.empty() ? nullptr : a_zero.data(), a_scale, ctx.input(1),
                 ctx.input(3), ctx.has_input(6) ? &ctx.input(6) : nullptr);
  }

 private:
  IntegerToFloatMatMul product_;
};

// Inputs: A (float), B, b_scale, b_zero_point?, bias?
class DynamicQuantizeMatMulKernel : public OpKernel {
 public:
  // A is quantized to uint8 (DynamicQuantizeLinear) before the product.
  explicit DynamicQuantizeMatMulKernel(const KernelInit& init) : product_(init, false, 1, 3) {}
  bool ReadsConstantInRun(size_t input) const override { return product_.ReadsInRun(input); }

  void Run(KernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    Tensor a_quantized(DType::kUInt8, a.shape());
    const DynamicQuantization q =
        DynamicQuantizeToUint8(a.data<float>(), a.numel(), a_quantized.data<uint8_t>(), ctx.pool());
    product_.Run(ctx, a_quantized, &q.zero_point, q.scale, ctx.input(1), ctx.input(2),
                 ctx.has_input(4) ? &ctx.input(4) : nullptr);
  }

 private:
  IntegerToFloatMatMul product_;
};

DType InputOr(const std::vector<DType>& t, size_t i) {
  return i < t.size() ? t[i] : DType::kUndefined;
}

bool Omitted(DType t) { return t == DType::kUndefined; }

bool AcceptsMatMulIntegerToFloat(const Node&, const std::vector<DType>& t) {
  return t.size() >= 4 && t.size() <= 7 && Is8Bit(t[0]) && Is8Bit(t[1]) &&
         t[2] == DType::kFloat32 && t[3] == DType::kFloat32 &&
         (Omitted(InputOr(t, 4)) || InputOr(t, 4) == t[0]) &&
         (Omitted(InputOr(t, 5)) || InputOr(t, 5) == t[1]) &&
         (Omitted(InputOr(t, 6)) || InputOr(t, 6) == DType::kFloat32);
}

bool AcceptsDynamicQuantizeMatMul(const Node&, const std::vector<DType>& t) {
  return t.size() >= 3 && t.size() <= 5 && t[0] == DType::kFloat32 && Is8Bit(t[1]) &&
         t[2] == DType::kFloat32 && (Omitted(InputOr(t, 3)) || InputOr(t, 3) == t[1]) &&
         (Omitted(InputOr(t, 4)) || InputOr(t, 4) == DType::kFloat32);
}

}  // namespace

void RegisterMsQuantMatMulOps(KernelRegistry& r) {
  r.Register(
      {kMsDomain, "MatMulIntegerToFloat", 1, 1 << 30, AcceptsMatMulIntegerToFloat, FloatOutput,
       [](const KernelInit& init) { return std::make_unique<MatMulIntegerToFloatKernel>(init); }});
  r.Register(
      {kMsDomain, "DynamicQuantizeMatMul", 1, 1 << 30, AcceptsDynamicQuantizeMatMul, FloatOutput,
       [](const KernelInit& init) { return std::make_unique<DynamicQuantizeMatMulKernel>(init); }});
}

}  // namespace octet
