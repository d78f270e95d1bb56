// com.microsoft QGemm (opset 1): the quantized Gemm that ONNX Runtime's
// quantizer emits for Gemm nodes in QOperator form. Inputs: A, a_scale,
// a_zero_point, B, b_scale, b_zero_point, C?, y_scale?, y_zero_point?;
// attributes alpha, transA, transB. It runs on the fast int8 GEMM (B packed once
// when it is a constant initializer) and the shared epilogues
// (kernels/int8/epilogue.h), in ONNX Runtime 1.31.1's float order
// (tests/python/test_qgemm.py checks it bit for bit; docs/int8.md):
//
//   acc[m, n] = sum_k (A'[m, k] - a_zp) * (B'[k, n] - b_zp[n]) + C[m, n]
//                                     int32; C added with wrap-around
//   scale[n]  = (alpha * a_scale) * b_scale[n]                      float32, in this order
//   no y_scale:        y = float(acc) * scale[n]                    float output
//   y_scale, y_zp:     y = requantize(acc, scale[n] / y_scale, y_zp)
//   y_scale, no y_zp:  y = float(acc) * (scale[n] / y_scale)        float output (ORT's)
//
// A' and B' are A and B, transposed when transA / transB is set. C
// broadcasts to [M, N] from [], [1], [N], [1, N], [M, 1] or [M, N]; a_scale,
// a_zero_point, y_scale and y_zero_point hold one value; b_scale and
// b_zero_point hold one value or N (per column). A y_zero_point without
// y_scale is refused at load (ONNX Runtime then writes its int32 product into
// the 8-bit output buffer). For K = 0 ONNX Runtime returns uninitialized
// memory; octet applies the formula above with acc = C.
#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "kernels/int8/epilogue.h"
#include "kernels/strided_copy.h"
#include "ops/int_matmul_shape.h"
#include "ops/int_params.h"
#include "ops/registry.h"

namespace octet {

namespace {

enum QGemmInput : size_t {
  kA = 0,
  kAScale = 1,
  kAZeroPoint = 2,
  kB = 3,
  kBScale = 4,
  kBZeroPoint = 5,
  kC = 6,
  kYScale = 7,
  kYZeroPoint = 8,
};

// The [cols, rows] transpose of a 2-D 8-bit tensor [rows, cols].
Tensor Transposed(const Tensor& t, ThreadPool* pool) {
  Tensor out = Tensor::Uninitialized(t.dtype(), {t.dim(1), t.dim(0)});
  StridedCopy(t.raw(), out.raw(), 1, out.shape(), {1, t.dim(1)}, pool);
  return out;
}

// How the int32 C lines up with the [M, N] output: row r uses
// values + r * row_stride, per column or one value.
struct BiasLayout {
  const int32_t* values = nullptr;  // null: no C
  bool per_column = false;
  int64_t row_stride = 0;
};

BiasLayout LayoutOfC(const Node& node, const Tensor& c, int64_t m, int64_t n) {
  const Shape& s = c.shape();
  const int32_t* values = c.data<int32_t>();
  if (c.numel() == 1 && s.size() <= 2) return {values, false, 0};
  if ((s.size() == 1 && s[0] == n) || (s.size() == 2 && s[0] == 1 && s[1] == n))
    return {values, true, 0};
  if (s.size() == 2 && s[0] == m && s[1] == 1) return {values, false, 1};
  if (s.size() == 2 && s[0] == m && s[1] == n) return {values, true, n};
  Fail(node.Describe(), ": C has shape ", ShapeToString(s), "; it must broadcast to [M, N] = [", m,
       ", ", n, "]: [], [1], [N], [1, N], [M, 1] or [M, N]");
}

// b_scale and b_zero_point: one value or N values (per column of B').
bool PerColumn(const Node& node, const Tensor& param, int64_t n, const char* name) {
  if (param.numel() == 1 && param.rank() <= 1) return false;
  OCTET_CHECK(param.shape() == Shape{n}, node.Describe(), ": ", name, " has shape ",
              ShapeToString(param.shape()), "; it must hold one value or [N] = [", n,
              "] (per column)");
  return true;
}

class QGemmKernel : public OpKernel {
 public:
  explicit QGemmKernel(const KernelInit& init)
      : alpha_(init.node.GetFloat("alpha", 1.f)),
        trans_a_(init.node.GetInt("transA", 0) != 0),
        trans_b_(init.node.GetInt("transB", 0) != 0),
        plan_(PlanGemm(ActiveIsa(), init.input_types[kA] == DType::kInt8)) {
    const Tensor* b = kB < init.constant_inputs.size() ? init.constant_inputs[kB] : nullptr;
    if (b) constant_b_ = PackGemmB(init.node, *b, init.pool, init.weights);
  }

  // A constant B is packed at creation; Run reads its dtype and shape only.
  bool ReadsConstantInRun(size_t input) const override { return input != kB || !constant_b_; }

  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& a = ctx.input(kA);
    const Tensor& b = ctx.input(kB);
    CheckInt8Operand(node, a, "A");
    OCTET_CHECK(a.rank() == 2 && b.rank() == 2, node.Describe(), ": A and B must be 2-D, got A ",
                ShapeToString(a.shape()), " and B ", ShapeToString(b.shape()));
    MatMulShape shape;
    shape.m = trans_a_ ? a.dim(1) : a.dim(0);
    shape.k = trans_a_ ? a.dim(0) : a.dim(1);
    shape.n = trans_b_ ? b.dim(0) : b.dim(1);
    OCTET_CHECK((trans_b_ ? b.dim(1) : b.dim(0)) == shape.k, node.Describe(),
                ": inner dimensions differ, A has shape ", ShapeToString(a.shape()),
                " (transA=", trans_a_, ") and B has shape ", ShapeToString(b.shape()),
                " (transB=", trans_b_, ")");
    shape.output = {shape.m, shape.n};
    shape.a_matrix = {0};
    shape.b_matrix = {0};
    const int64_t n = shape.n;

    // Quantization parameters.
    CheckPerTensor(node, ctx.input(kAScale), "a_scale");
    CheckPerTensor(node, ctx.input(kAZeroPoint), "a_zero_point");
    const float a_scale = ReadScales(node, ctx.input(kAScale), "a_scale")[0];
    const std::vector<int32_t> a_zero =
        ReadZeroPoints(node, ctx.input(kAZeroPoint), a.dtype(), "a_zero_point");
    const Tensor& b_scale = ctx.input(kBScale);
    const Tensor& b_zero_point = ctx.input(kBZeroPoint);
    const bool scale_per_column = PerColumn(node, b_scale, n, "b_scale");
    const std::vector<int32_t> b_zero =
        ReadZeroPoints(node, b_zero_point, b.dtype(), "b_zero_point");
    MatMulZeroPoints a_zero_points{a_zero.data(), {}};
    MatMulZeroPoints b_zero_points{b_zero.data(), {}};
    if (PerColumn(node, b_zero_point, n, "b_zero_point")) b_zero_points.layout = {0, 1};

    std::optional<float> y_scale;
    if (ctx.has_input(kYScale)) {
      CheckPerTensor(node, ctx.input(kYScale), "y_scale");
      y_scale = ReadScales(node, ctx.input(kYScale), "y_scale")[0];
    }
    const float alpha_a = alpha_ * a_scale;
    std::vector<float> scales = ReadScales(node, b_scale, "b_scale");
    for (float& s : scales) s = y_scale ? RequantizeMultiplier(alpha_a, s, *y_scale) : alpha_a * s;

    const BiasLayout bias =
        ctx.has_input(kC) ? LayoutOfC(node, ctx.input(kC), shape.m, n) : BiasLayout{};

    // The product.
    const Tensor a_rows = trans_a_ ? Transposed(a, ctx.pool()) : a;
    PackedMatMulB b_storage;
    if (!constant_b_) b_storage = PackGemmB(node, b, ctx.pool(), nullptr);
    const PackedMatMulB& packed = constant_b_ ? *constant_b_ : b_storage;

    MatMulEpilogue e;
    e.epilogue.multiplier = {scales.data(), false, scale_per_column};
    if (bias.values) {
      e.epilogue.bias = {bias.values, bias.row_stride != 0, bias.per_column,
                         std::max<int64_t>(bias.row_stride, 1)};
    }
    DType y_type = DType::kFloat32;
    if (ctx.has_input(kYZeroPoint)) {
      const Tensor& y_zero_point = ctx.input(kYZeroPoint);
      CheckPerTensor(node, y_zero_point, "y_zero_point");
      y_type = y_zero_point.dtype();
      e.epilogue.output = EightBitOutput(y_type);
      e.epilogue.zero_point = ReadZeroPoints(node, y_zero_point, y_type, "y_zero_point")[0];
    } else {
      e.epilogue.output = EpilogueOutput::kFloat;
    }
    Tensor& y = ctx.AllocateUninitializedOutput(0, y_type, shape.output);
    RunIntMatMul(shape, a_rows, a_zero_points, packed, b_zero_points, e, y.raw(), ctx.pool());
  }

 private:
  // B' ([K, N]) packed for the GEMM, into `arena` when B is constant.
  PackedMatMulB PackGemmB(const Node& node, const Tensor& b, ThreadPool* pool,
                          WeightArena* arena) const {
    CheckInt8Operand(node, b, "B");
    OCTET_CHECK(b.rank() == 2, node.Describe(), ": B must be 2-D, got ", ShapeToString(b.shape()));
    return PackMatMulB(trans_b_ ? Transposed(b, pool) : b, plan_, arena);
  }

  float alpha_;
  bool trans_a_, trans_b_;
  GemmPlan plan_;
  std::optional<PackedMatMulB> constant_b_;
};

DType InputOr(const std::vector<DType>& t, size_t i) {
  return i < t.size() ? t[i] : DType::kUndefined;
}

// ONNX Runtime's CPU kernels take u8 A with u8/s8 B and u8 or float Y, and
// s8 A with s8 B and s8 or float Y; octet computes every 8-bit combination exactly.
bool AcceptsQGemm(const Node&, const std::vector<DType>& t) {
  const DType c = InputOr(t, kC), y_scale = InputOr(t, kYScale), y_zero = InputOr(t, kYZeroPoint);
  return t.size() >= 6 && t.size() <= 9 && Is8Bit(t[kA]) && t[kAScale] == DType::kFloat32 &&
         t[kAZeroPoint] == t[kA] && Is8Bit(t[kB]) && t[kBScale] == DType::kFloat32 &&
         t[kBZeroPoint] == t[kB] && (c == DType::kUndefined || c == DType::kInt32) &&
         (y_scale == DType::kUndefined || y_scale == DType::kFloat32) &&
         (y_zero == DType::kUndefined || Is8Bit(y_zero));
}

std::vector<DType> QGemmOutputType(const Node& node, const std::vector<DType>& t) {
  const DType y_zero = InputOr(t, kYZeroPoint);
  if (y_zero == DType::kUndefined) return {DType::kFloat32};
  OCTET_CHECK(InputOr(t, kYScale) != DType::kUndefined, node.Describe(),
              ": y_zero_point is given without y_scale; a quantized output needs both "
              "(omit both for a float output)");
  return {y_zero};
}

}  // namespace

void RegisterQGemmOps(KernelRegistry& r) {
  r.Register({kMsDomain, "QGemm", 1, 1 << 30, AcceptsQGemm, QGemmOutputType,
              [](const KernelInit& init) { return std::make_unique<QGemmKernel>(init); }});
}

}  // namespace octet
