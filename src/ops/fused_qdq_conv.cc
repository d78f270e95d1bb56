// octet.QLinearConvFused: the node the QDQ Conv pass (rewrite/qdq_conv.h) puts
// in place of DequantizeLinear x2 [+ int32 bias DQ] -> Conv [-> Relu | Clip]
// -> QuantizeLinear. It is QLinearConv (ops/integer_conv.cc) with every
// parameter constant: the weights are packed and the multipliers formed (ONNX
// Runtime's order) once, at kernel creation; each run is one Int8Conv with the
// requantization epilogue and the absorbed Relu / Clip's integer clamp.
#include <memory>
#include <vector>

#include "graph/octet_ops.h"
#include "kernels/int8/conv.h"
#include "kernels/int8/epilogue.h"
#include "ops/int_conv_params.h"
#include "ops/int_params.h"
#include "ops/registry.h"

namespace octet {

namespace {

class FusedQdqConvKernel : public OpKernel {
 public:
  explicit FusedQdqConvKernel(const KernelInit& init) : attrs_(ReadConvAttributes(init.node)) {
    const Node& node = init.node;
    auto constant = [&](size_t i, const char* name, bool required) -> const Tensor* {
      const Tensor* t = i < init.constant_inputs.size() ? init.constant_inputs[i] : nullptr;
      const bool present = i < node.inputs.size() && node.inputs[i] >= 0;
      OCTET_CHECK(t || !present, node.Describe(), ": ", name, " must be a constant");
      OCTET_CHECK(t || !required, node.Describe(), ": ", name, " is required");
      return t;
    };

    const Tensor& w = *constant(kFusedConvW, "w", true);
    OCTET_CHECK((w.rank() == 3 || w.rank() == 4) && w.dim(0) % attrs_.group == 0, node.Describe(),
                ": w has shape ", ShapeToString(w.shape()),
                "; expected [M, C/group, (kH,) kW] with M divisible by group ", attrs_.group);
    w_shape_ = w.shape();
    const int64_t out_channels = w.dim(0);
    // A weight parameter is one value or one per output channel ([M]).
    auto per_channel = [&](const Tensor& param, const char* name) {
      if (param.numel() == 1) return false;
      OCTET_CHECK(param.shape() == Shape{out_channels}, node.Describe(), ": ", name, " has shape ",
                  ShapeToString(param.shape()), "; expected one value or [", out_channels, "]");
      return true;
    };
    ConvGeometry shape;
    shape.out_channels = out_channels;
    shape.in_channels = w.dim(1) * attrs_.group;
    shape.group = attrs_.group;
    shape.kernel_h = w.rank() == 4 ? w.dim(2) : 1;
    shape.kernel_w = w.shape().back();
    std::vector<int32_t> w_zero;
    bool w_zero_per_channel = false;
    if (const Tensor* wz = constant(kFusedConvWZero, "w_zero_point", false)) {
      w_zero_per_channel = per_channel(*wz, "w_zero_point");
      w_zero = ReadZeroPoints(node, *wz, w.dtype(), "w_zero_point");
    }
    try {
      conv_ = std::make_unique<const Int8Conv>(
          shape,
          Int8ConvOperand{w.raw(), w.dtype() == DType::kInt8,
                          w_zero.empty() ? nullptr : w_zero.data(), w_zero_per_channel},
          ActiveIsa());
    } catch (const Error& e) {
      Fail(node.Describe(), ": ", e.what());
    }

    const Tensor& x_scale = *constant(kFusedConvXScale, "x_scale", true);
    CheckPerTensor(node, x_scale, "x_scale");
    x_type_ = init.input_types[kFusedConvX];
    if (const Tensor* xz = constant(kFusedConvXZero, "x_zero_point", false)) {
      CheckPerTensor(node, *xz, "x_zero_point");
      x_zero_ = ReadZeroPoints(node, *xz, x_type_, "x_zero_point")[0];
    }
    const Tensor& y_scale = *constant(kFusedConvYScale, "y_scale", true);
    CheckPerTensor(node, y_scale, "y_scale");
    y_type_ = static_cast<DType>(node.GetInt("y_type", static_cast<int64_t>(DType::kUInt8)));
    if (const Tensor* yz = constant(kFusedConvYZero, "y_zero_point", false)) {
      CheckPerTensor(node, *yz, "y_zero_point");
      y_type_ = yz->dtype();
      y_zero_ = ReadZeroPoints(node, *yz, y_type_, "y_zero_point")[0];
    }
    OCTET_CHECK(Is8Bit(y_type_), node.Describe(), ": output type ", DTypeName(y_type_),
                " is not uint8 or int8");
    // An absorbed Relu / Clip (rewrite/qdq_activation.h): an integer clamp.
    const int64_t type_min = y_type_ == DType::kInt8 ? -128 : 0;
    y_min_ = node.GetInt("y_min", type_min);
    y_max_ = node.GetInt("y_max", type_min + 255);
    OCTET_CHECK(type_min <= y_min_ && y_min_ <= y_max_ && y_max_ <= type_min + 255, node.Describe(),
                ": y_min/y_max [", y_min_, ", ", y_max_, "] outside ", DTypeName(y_type_));

    const Tensor& w_scale = *constant(kFusedConvWScale, "w_scale", true);
    w_scale_per_channel_ = per_channel(w_scale, "w_scale");
    const float x_scale_value = ReadScales(node, x_scale, "x_scale")[0];
    const float y_scale_value = ReadScales(node, y_scale, "y_scale")[0];
    multipliers_ = ReadScales(node, w_scale, "w_scale");
    for (float& m : multipliers_) m = RequantizeMultiplier(x_scale_value, m, y_scale_value);

    if (const Tensor* bias = constant(kFusedConvBias, "bias", false)) {
      OCTET_CHECK(bias->dtype() == DType::kInt32 && bias->shape() == Shape{out_channels},
                  node.Describe(), ": bias has dtype ", DTypeName(bias->dtype()), " and shape ",
                  ShapeToString(bias->shape()), "; expected int32 [", out_channels, "]");
      bias_.assign(bias->data<int32_t>(), bias->data<int32_t>() + out_channels);
    }
  }

  // x goes only to Int8Conv, whose every path runs on guarded x in conv_fast_test.
  bool ReadsOnlyInputBytes(size_t input) const override { return input == kFusedConvX; }
  // The weight and the quantization parameters live on packed and in the epilogue.
  bool ReadsConstantInRun(size_t input) const override { return input == kFusedConvX; }

  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.input(kFusedConvX);
    OCTET_CHECK(x.dtype() == x_type_, node.Describe(), ": x has dtype ", DTypeName(x.dtype()),
                "; expected ", DTypeName(x_type_));
    const ConvGeometry g = ResolveConvGeometry(node, attrs_, x.shape(), w_shape_);
    // Per output channel (the epilogue's rows).
    Epilogue e;
    e.output = EightBitOutput(y_type_);
    e.multiplier = {multipliers_.data(), w_scale_per_channel_};
    if (!bias_.empty()) e.bias = {bias_.data(), true};
    e.zero_point = y_zero_;
    e.y_min = static_cast<int32_t>(y_min_);
    e.y_max = static_cast<int32_t>(y_max_);
    Tensor& y = ctx.AllocateUninitializedOutput(0, y_type_, ConvOutputShape(g, x.rank()));
    const Int8ConvOperand x_op{x.raw(), x_type_ == DType::kInt8, &x_zero_, false};
    conv_->Run(g, x_op, e, y.raw(), ctx.pool());
  }

 private:
  ConvAttributes attrs_;
  Shape w_shape_;
  std::unique_ptr<const Int8Conv> conv_;
  DType x_type_ = DType::kUndefined;
  int32_t x_zero_ = 0;
  bool w_scale_per_channel_ = false;
  std::vector<float> multipliers_;  // one, or one per output channel
  std::vector<int32_t> bias_;
  DType y_type_ = DType::kUInt8;
  int32_t y_zero_ = 0;
  int64_t y_min_ = 0, y_max_ = 0;
};

bool ZeroMatches(DType zero, DType data) { return zero == DType::kUndefined || zero == data; }

bool AcceptsFusedConv(const Node&, const std::vector<DType>& t) {
  if (t.size() != kFusedConvInputCount) return false;
  return Is8Bit(t[kFusedConvX]) && t[kFusedConvXScale] == DType::kFloat32 &&
         ZeroMatches(t[kFusedConvXZero], t[kFusedConvX]) && Is8Bit(t[kFusedConvW]) &&
         t[kFusedConvWScale] == DType::kFloat32 &&
         ZeroMatches(t[kFusedConvWZero], t[kFusedConvW]) &&
         t[kFusedConvYScale] == DType::kFloat32 &&
         (t[kFusedConvYZero] == DType::kUndefined || Is8Bit(t[kFusedConvYZero])) &&
         ZeroMatches(t[kFusedConvBias], DType::kInt32);
}

std::vector<DType> FusedConvOutputType(const Node& node, const std::vector<DType>& t) {
  ReadConvAttributes(node);
  if (t[kFusedConvYZero] != DType::kUndefined) return {t[kFusedConvYZero]};
  return {static_cast<DType>(node.GetInt("y_type", static_cast<int64_t>(DType::kUInt8)))};
}

}  // namespace

void RegisterFusedConvOps(KernelRegistry& r) {
  r.Register({kOctetDomain, kFusedConvOp, 1, 1, AcceptsFusedConv, FusedConvOutputType,
              [](const KernelInit& init) { return std::make_unique<FusedQdqConvKernel>(init); }});
}

}  // namespace octet
