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

// Where one product's weight and its parameters are among a node's inputs.
struct WeightPart {
  size_t w, w_scale, w_zero, bias;
  bool trans_b;
};

// octet.QLinearMatMulFused, and octet.QLinearMatMulSiblings: products of one x
// (float output) whose weights are packed side by side, their columns computed by
// one GEMM, each product's written to its output. Each column's int32 sum is exact and its
// float step (float(s) * x_scale * w_scale[n]) its own, so every output has the
// bits of its product alone; a part's per-tensor w_scale, w_zero_point or bias
// becomes one value per column there, with the same values.
class FusedQdqMatMulKernel : public OpKernel {
 public:
  FusedQdqMatMulKernel(const KernelInit& init, const std::vector<WeightPart>& parts) {
    const Node& node = init.node;
    x_type_ = init.input_types[kFusedX];
    x_axis_ = node.GetInt("x_axis", -1);
    x_rank_ = node.GetInt("x_rank", 0);

    // W as row-major [K, N], the parts' columns side by side.
    const bool several = parts.size() > 1;
    std::vector<const Tensor*> weights;
    bool w_signed = false;
    for (size_t i = 0; i < parts.size(); ++i) {
      const Tensor& w = *ConstantInput(init, parts[i].w, "w", true);
      OCTET_CHECK(w.rank() == 2, node.Describe(), ": w must be 2-D, got ",
                  ShapeToString(w.shape()));
      const int64_t k = w.dim(parts[i].trans_b ? 1 : 0);
      OCTET_CHECK(i == 0 || (k == k_ && (w.dtype() == DType::kInt8) == w_signed), node.Describe(),
                  ": weight ", i + 1, " differs from the first in K or type");
      k_ = k;
      w_signed = w.dtype() == DType::kInt8;
      widths_.push_back(w.dim(parts[i].trans_b ? 0 : 1));
      n_ += widths_.back();
      weights.push_back(&w);
    }
    const auto* w_bytes = static_cast<const uint8_t*>(weights[0]->raw());
    std::vector<uint8_t> w_kn;
    if (several || parts[0].trans_b) {
      w_kn.resize(static_cast<size_t>(k_ * n_));
      for (size_t i = 0, col = 0; i < parts.size(); col += widths_[i], ++i) {
        const auto* bytes = static_cast<const uint8_t*>(weights[i]->raw());
        const int64_t n = widths_[i];
        for (int64_t r = 0; r < k_; ++r)
          for (int64_t c = 0; c < n; ++c)
            w_kn[r * n_ + col + c] = parts[i].trans_b ? bytes[c * k_ + r] : bytes[r * n + c];
      }
      w_bytes = w_kn.data();
    }
    plan_ = PlanGemm(ActiveIsa(), x_type_ == DType::kInt8);
    packed_ = PackB(plan_, w_bytes, w_signed, k_, n_, n_, init.weights);

    // The parts' scales, zero points and biases; per column when the parts are several
    // (a part's one value repeated).
    std::vector<float> w_scale;
    for (size_t i = 0; i < parts.size(); ++i) {
      const int64_t n = widths_[i];
      auto columns = [&](auto values, auto absent) {
        OCTET_CHECK(values.size() <= 1 || static_cast<int64_t>(values.size()) == n, node.Describe(),
                    ": a parameter of weight ", i + 1, " has ", values.size(),
                    " values; expected 1 or N=", n);
        if (!several) return values;
        if (values.empty()) values.assign(1, absent);
        if (values.size() == 1) values.assign(static_cast<size_t>(n), values[0]);
        return values;
      };
      const std::vector<float> scale = columns(
          ReadScales(node, *ConstantInput(init, parts[i].w_scale, "w_scale", true), "w_scale"),
          0.f);
      std::vector<int32_t> zero;
      if (const Tensor* wz = ConstantInput(init, parts[i].w_zero, "w_zero_point", false)) {
        zero = ReadZeroPoints(node, *wz, weights[i]->dtype(), "w_zero_point");
        OCTET_CHECK(several || zero.size() == scale.size(), node.Describe(),
                    ": w_zero_point and w_scale differ in size");
      }
      zero = columns(zero, 0);
      std::vector<int32_t> bias;
      if (const Tensor* b = ConstantInput(init, parts[i].bias, "bias", false)) {
        OCTET_CHECK(b->dtype() == DType::kInt32, node.Describe(), ": bias must be int32");
        bias.assign(b->data<int32_t>(), b->data<int32_t>() + b->numel());
      }
      bias = columns(bias, 0);
      w_scale.insert(w_scale.end(), scale.begin(), scale.end());
      w_zero_.insert(w_zero_.end(), zero.begin(), zero.end());
      bias_.insert(bias_.end(), bias.begin(), bias.end());
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

    // One multiplier row per x scale: (x_scale * w_scale) / y_scale, or
    // x_scale * w_scale for float output, in ONNX Runtime's order.
    const Tensor* y_scale = several ? nullptr : ConstantInput(init, kFusedYScale, "y_scale", false);
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
    // Each product's columns to its own output.
    std::vector<ColumnRange> y = ctx.AllocateColumnOutputs(out_type, out_shape, widths_);
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
    for (int64_t b0 = 0; n_ > 0 && b0 < M; b0 += block_rows) {
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
      Gemm(plan_, rows, a, zero, packed_, e,
           OutputColumns{y.data(), static_cast<int64_t>(y.size())}, ctx.pool());
      for (ColumnRange& r : y)  // the next block of rows
        r.data = static_cast<uint8_t*>(r.data) + rows * r.ld * e.element_size();
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
  std::vector<int64_t> widths_;     // each product's columns
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

// octet.QLinearMatMulSiblings(x, x_scale, x_zero_point?, then per product w, w_scale,
// w_zero_point?, bias?) (graph/octet_ops.h).
bool AcceptsSiblings(const Node&, const std::vector<DType>& t) {
  if (t.size() < 3 + 4 || (t.size() - 3) % 4 != 0 || !Is8Bit(t[kFusedX]) ||
      t[kFusedXScale] != DType::kFloat32 || !ZeroMatches(t[kFusedXZero], t[kFusedX]))
    return false;
  for (size_t i = 3; i < t.size(); i += 4)
    if (!Is8Bit(t[i]) || t[i + 1] != DType::kFloat32 || !ZeroMatches(t[i + 2], t[i]) ||
        !ZeroMatches(t[i + 3], DType::kInt32))
      return false;
  return true;
}

}  // namespace

void RegisterFusedOps(KernelRegistry& r) {
  r.Register({kOctetDomain, kFusedMatMulOp, 1, 1, AcceptsFused, FusedOutputType,
              [](const KernelInit& init) {
                const WeightPart part{kFusedW, kFusedWScale, kFusedWZero, kFusedBias,
                                      init.node.GetInt("trans_b", 0) != 0};
                return std::make_unique<FusedQdqMatMulKernel>(init, std::vector{part});
              }});
  r.Register({kOctetDomain, kFusedMatMulSiblingsOp, 1, 1, AcceptsSiblings, FloatOutputs,
              [](const KernelInit& init) {
                const std::vector<int64_t> trans_b = init.node.GetInts("trans_b");
                const size_t count = (init.node.inputs.size() - 3) / 4;
                OCTET_CHECK(trans_b.size() == count && init.node.outputs.size() == count,
                            init.node.Describe(), ": expects ", count,
                            " outputs and trans_b values, one per weight");
                std::vector<WeightPart> parts;
                for (size_t i = 0; i < count; ++i)
                  parts.push_back({3 + 4 * i, 4 + 4 * i, 5 + 4 * i, 6 + 4 * i, trans_b[i] != 0});
                return std::make_unique<FusedQdqMatMulKernel>(init, parts);
              }});
}

}  // namespace octet
