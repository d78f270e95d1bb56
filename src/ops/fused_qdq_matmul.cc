// octet.QLinearMatMulFused: the node the QDQ pass (rewrite/qdq_matmul.h) puts
// in place of DequantizeLinear x2 -> MatMul | Gemm [-> QuantizeLinear].
//
// Everything that depends only on constants happens once, at kernel creation:
// W is transposed if needed and packed for the int8 GEMM (with its column sums,
// the zero-point correction), the float multipliers are formed in ONNX
// Runtime's order. Per run: the exact int32 product, finished in the GEMM's
// registers by the requantization epilogue (or the int32 -> float scale of
// MatMulIntegerToFloat). No float copy of x, W or the product ever exists.
#include <algorithm>
#include <memory>
#include <vector>

#include "graph/octet_ops.h"
#include "kernels/int8/epilogue.h"
#include "kernels/int8/gemm.h"
#include "ops/int_matmul_shape.h"
#include "ops/int_params.h"
#include "ops/registry.h"

namespace octet {

namespace {

const Tensor* ConstantInput(const KernelInit& init, size_t i, const char* name, bool required) {
  const Tensor* t = i < init.constant_inputs.size() ? init.constant_inputs[i] : nullptr;
  const bool present = i < init.node.inputs.size() && init.node.inputs[i] >= 0;
  OCTET_CHECK(t || !present, init.node.Describe(), ": ", name, " must be a constant");
  OCTET_CHECK(t || !required, init.node.Describe(), ": ", name, " is required");
  return t;
}

class FusedQdqMatMulKernel : public OpKernel {
 public:
  explicit FusedQdqMatMulKernel(const KernelInit& init) {
    const Node& node = init.node;
    x_type_ = init.input_types[kFusedX];
    x_axis_ = node.GetInt("x_axis", -1);
    x_rank_ = node.GetInt("x_rank", 0);

    // W as row-major [K, N].
    const Tensor& w = *ConstantInput(init, kFusedW, "w", true);
    OCTET_CHECK(w.rank() == 2, node.Describe(), ": w must be 2-D, got ", ShapeToString(w.shape()));
    const bool trans_b = node.GetInt("trans_b", 0) != 0;
    k_ = w.dim(trans_b ? 1 : 0);
    n_ = w.dim(trans_b ? 0 : 1);
    const bool w_signed = w.dtype() == DType::kInt8;
    const auto* w_bytes = static_cast<const uint8_t*>(w.raw());
    std::vector<uint8_t> w_kn;
    if (trans_b) {
      w_kn.resize(static_cast<size_t>(k_ * n_));
      for (int64_t n = 0; n < n_; ++n)
        for (int64_t k = 0; k < k_; ++k) w_kn[k * n_ + n] = w_bytes[n * k_ + k];
      w_bytes = w_kn.data();
    }
    plan_ = PlanGemm(ActiveIsa(), x_type_ == DType::kInt8);
    packed_ = PackB(plan_, w_bytes, w_signed, k_, n_, n_, init.weights);

    const std::vector<float> w_scale =
        ReadScales(node, *ConstantInput(init, kFusedWScale, "w_scale", true), "w_scale");
    OCTET_CHECK(w_scale.size() == 1 || static_cast<int64_t>(w_scale.size()) == n_, node.Describe(),
                ": w_scale has ", w_scale.size(), " values; expected 1 or N=", n_);
    if (const Tensor* wz = ConstantInput(init, kFusedWZero, "w_zero_point", false)) {
      w_zero_ = ReadZeroPoints(node, *wz, w.dtype(), "w_zero_point");
      OCTET_CHECK(w_zero_.size() == w_scale.size(), node.Describe(),
                  ": w_zero_point and w_scale differ in size");
    }

    const std::vector<float> x_scale =
        ReadScales(node, *ConstantInput(init, kFusedXScale, "x_scale", true), "x_scale");
    if (const Tensor* xz = ConstantInput(init, kFusedXZero, "x_zero_point", false)) {
      x_zero_ = ReadZeroPoints(node, *xz, x_type_, "x_zero_point");
      OCTET_CHECK(x_zero_.size() == x_scale.size(), node.Describe(),
                  ": x_zero_point and x_scale differ in size");
    }
    OCTET_CHECK(x_scale.size() == 1 || x_axis_ >= 0, node.Describe(),
                ": x_scale has several values but no axis");
    x_scale_count_ = static_cast<int64_t>(x_scale.size());

    if (const Tensor* bias = ConstantInput(init, kFusedBias, "bias", false)) {
      OCTET_CHECK(bias->dtype() == DType::kInt32 && (bias->numel() == 1 || bias->numel() == n_),
                  node.Describe(), ": bias must be int32 with 1 or N=", n_, " values");
      bias_.assign(bias->data<int32_t>(), bias->data<int32_t>() + bias->numel());
    }

    // One multiplier row per x scale: (x_scale * w_scale) / y_scale, or
    // x_scale * w_scale for float output, in ONNX Runtime's order.
    const Tensor* y_scale = ConstantInput(init, kFusedYScale, "y_scale", false);
    quantized_ = y_scale != nullptr;
    float y_scale_value = 1.f;
    if (quantized_) {
      CheckPerTensor(node, *y_scale, "y_scale");
      y_scale_value = ReadScales(node, *y_scale, "y_scale")[0];
      y_type_ = static_cast<DType>(node.GetInt("y_type", static_cast<int64_t>(DType::kUInt8)));
      if (const Tensor* yz = ConstantInput(init, kFusedYZero, "y_zero_point", false)) {
        CheckPerTensor(node, *yz, "y_zero_point");
        y_type_ = yz->dtype();
        y_zero_ = ReadZeroPoints(node, *yz, y_type_, "y_zero_point")[0];
      }
      // An absorbed Relu / Clip (rewrite/qdq_activation.h): an integer clamp.
      const int64_t type_min = y_type_ == DType::kInt8 ? -128 : 0;
      y_min_ = node.GetInt("y_min", type_min);
      y_max_ = node.GetInt("y_max", type_min + 255);
      OCTET_CHECK(type_min <= y_min_ && y_min_ <= y_max_ && y_max_ <= type_min + 255,
                  node.Describe(), ": y_min/y_max [", y_min_, ", ", y_max_, "] outside ",
                  DTypeName(y_type_));
    }
    mult_per_column_ = w_scale.size() > 1;
    const size_t row = w_scale.size();
    multipliers_.resize(x_scale.size() * row);
    for (size_t s = 0; s < x_scale.size(); ++s)
      for (size_t n = 0; n < row; ++n)
        multipliers_[s * row + n] =
            quantized_ ? RequantizeMultiplier(x_scale[s], w_scale[n], y_scale_value)
                       : x_scale[s] * w_scale[n];
  }

  // x goes only to the int8 GEMM, whose every path runs on guarded A in gemm_test.
  bool ReadsOnlyInputBytes(size_t input) const override { return input == kFusedX; }
  // The weight and the quantization parameters live on in the plan and the packed B.
  bool ReadsConstantInRun(size_t input) const override { return input == kFusedX; }

  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.input(kFusedX);
    OCTET_CHECK(x.rank() >= 1 && x.shape().back() == k_, node.Describe(), ": input '",
                "x' has shape ", ShapeToString(x.shape()), " but the weight needs [..., ", k_, "]");
    Shape out_shape = x.shape();
    out_shape.back() = n_;
    const int64_t M = x.numel() / std::max<int64_t>(k_, 1);

    // Which x scale each flattened row uses (per-axis scales run along a
    // non-K axis of x: rows are the row-major flattening of x's leading dims).
    int64_t axis_inner = 1;
    if (x_axis_ >= 0) {
      OCTET_CHECK(static_cast<int64_t>(x.rank()) == x_rank_ && x.dim(x_axis_) == x_scale_count_,
                  node.Describe(), ": x has shape ", ShapeToString(x.shape()),
                  " but its scale has ", x_scale_count_, " values along axis ", x_axis_,
                  " of a rank-", x_rank_, " input");
      for (int64_t d = x_axis_ + 1; d + 1 < x_rank_; ++d) axis_inner *= x.dim(d);
    }
    auto scale_index = [&](int64_t row) {
      return x_axis_ < 0 ? 0 : (row / axis_inner) % x_scale_count_;
    };

    const DType out_type = quantized_ ? y_type_ : DType::kFloat32;
    Tensor& y = ctx.AllocateUninitializedOutput(0, out_type, out_shape);
    if (M == 0 || n_ == 0) return;
    const auto* x_bytes = static_cast<const uint8_t*>(x.raw());
    const size_t mult_row = mult_per_column_ ? static_cast<size_t>(n_) : 1;
    const int64_t block_rows = ProductBlockRows(M, k_);
    // Per-axis x scales: each row of a block takes its multiplier row (and zero point).
    const bool per_row = x_axis_ >= 0;
    std::vector<int32_t> row_scale(per_row ? block_rows : 0);
    std::vector<int32_t> row_zero(per_row && !x_zero_.empty() ? block_rows : 0);

    Epilogue e;
    e.output = quantized_ ? EightBitOutput(y_type_) : EpilogueOutput::kFloat;
    e.multiplier = {multipliers_.data(), per_row, mult_per_column_, static_cast<int64_t>(mult_row),
                    per_row ? row_scale.data() : nullptr};
    if (!bias_.empty()) e.bias = {bias_.data(), false, bias_.size() > 1};
    if (quantized_) {
      e.zero_point = y_zero_;
      e.y_min = static_cast<int32_t>(y_min_);  // an absorbed Relu / Clip
      e.y_max = static_cast<int32_t>(y_max_);
    }
    uint8_t* const y_bytes = static_cast<uint8_t*>(y.raw());
    for (int64_t b0 = 0; b0 < M; b0 += block_rows) {
      const int64_t rows = std::min(block_rows, M - b0);
      GemmZeroPoints zero;
      zero.a = x_zero_.empty() ? nullptr : x_zero_.data();
      zero.b = w_zero_.empty() ? nullptr : w_zero_.data();
      zero.b_per_column = w_zero_.size() > 1;
      for (int64_t r = 0; per_row && r < rows; ++r) {
        row_scale[r] = static_cast<int32_t>(scale_index(b0 + r));
        if (!row_zero.empty()) row_zero[r] = x_zero_[scale_index(b0 + r)];
      }
      if (!row_zero.empty()) {
        zero.a = row_zero.data();
        zero.a_per_row = true;
      }
      const Int8Operand a{x_bytes + b0 * k_, x_type_ == DType::kInt8, k_};
      Gemm(plan_, rows, a, zero, packed_, e, y_bytes + b0 * n_ * e.element_size(), n_, ctx.pool());
    }
  }

 private:
  DType x_type_ = DType::kUndefined;
  int64_t x_axis_ = -1, x_rank_ = 0, x_scale_count_ = 1;
  int64_t k_ = 0, n_ = 0;
  GemmPlan plan_;
  PackedB packed_;
  std::vector<int32_t> x_zero_, w_zero_, bias_;
  bool quantized_ = false;
  DType y_type_ = DType::kUInt8;
  int32_t y_zero_ = 0;
  int64_t y_min_ = 0, y_max_ = 0;
  bool mult_per_column_ = false;
  std::vector<float> multipliers_;  // x scales x (1 or N)
};

bool ZeroMatches(DType zero, DType data) { return zero == DType::kUndefined || zero == data; }

bool AcceptsFused(const Node& node, const std::vector<DType>& t) {
  if (t.size() != kFusedInputCount) return false;
  const bool quantized = t[kFusedYScale] != DType::kUndefined;
  const DType y_type = t[kFusedYZero] != DType::kUndefined
                           ? t[kFusedYZero]
                           : static_cast<DType>(node.GetInt("y_type", 2));
  return Is8Bit(t[kFusedX]) && t[kFusedXScale] == DType::kFloat32 &&
         ZeroMatches(t[kFusedXZero], t[kFusedX]) && Is8Bit(t[kFusedW]) &&
         t[kFusedWScale] == DType::kFloat32 && ZeroMatches(t[kFusedWZero], t[kFusedW]) &&
         (!quantized || (t[kFusedYScale] == DType::kFloat32 && Is8Bit(y_type))) &&
         (quantized || t[kFusedYZero] == DType::kUndefined) &&
         ZeroMatches(t[kFusedBias], DType::kInt32);
}

std::vector<DType> FusedOutputType(const Node& node, const std::vector<DType>& t) {
  if (t[kFusedYScale] == DType::kUndefined) return {DType::kFloat32};
  if (t[kFusedYZero] != DType::kUndefined) return {t[kFusedYZero]};
  return {static_cast<DType>(node.GetInt("y_type", static_cast<int64_t>(DType::kUInt8)))};
}

}  // namespace

void RegisterFusedOps(KernelRegistry& r) {
  r.Register({kOctetDomain, kFusedMatMulOp, 1, 1, AcceptsFused, FusedOutputType,
              [](const KernelInit& init) { return std::make_unique<FusedQdqMatMulKernel>(init); }});
}

}  // namespace octet
