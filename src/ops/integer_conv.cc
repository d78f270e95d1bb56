// ConvInteger and QLinearConv (ai.onnx 10) in two steps: (1) attributes,
// shapes and quantization parameters, (2) Int8Conv (kernels/int8/conv.h): the
// integer convolution with zero-point correction and, for QLinearConv, bias
// and requantization. Constant weights (with their zero points) are packed
// once when the kernel is created; otherwise on every run.
#include <memory>
#include <vector>

#include "kernels/int8/conv.h"
#include "kernels/int8/epilogue.h"
#include "ops/int_conv_params.h"
#include "ops/int_params.h"
#include "ops/registry.h"

namespace octet {

namespace {

// A weight parameter is per tensor (one value) or per output channel ([M]).
bool PerOutputChannel(const Node& node, const Tensor& param, int64_t out_channels,
                      const char* name) {
  if (param.numel() == 1) return false;
  OCTET_CHECK(param.shape() == Shape{out_channels}, node.Describe(), ": ", name, " has shape ",
              ShapeToString(param.shape()), "; expected one value or [", out_channels,
              "] (one per output channel)");
  return true;
}

void CheckInt8Input(const Node& node, const Tensor& t, const char* name) {
  OCTET_CHECK(Is8Bit(t.dtype()), node.Describe(), ": ", name, " has dtype ", DTypeName(t.dtype()),
              "; expected uint8 or int8");
}

// Owns the zero points an Int8ConvOperand points to.
struct ConvOperand {
  std::vector<int32_t> zero;
  Int8ConvOperand view;
};

ConvOperand ReadConvOperand(const Node& node, const Tensor& t, const Tensor* zero_point,
                            bool zero_per_channel, const char* zero_name) {
  ConvOperand op;
  if (zero_point) op.zero = ReadZeroPoints(node, *zero_point, t.dtype(), zero_name);
  op.view = {t.raw(), t.dtype() == DType::kInt8, op.zero.empty() ? nullptr : op.zero.data(),
             zero_per_channel};
  return op;
}

// The weights' Int8Conv: the one packed at creation, or one packed now.
struct WeightSource {
  std::shared_ptr<const Int8Conv> prepacked;
  size_t w_input = 0, w_zero_input = 0;

  // Packs at creation when w and its zero point (if given) are constant and
  // their shapes can be checked without x; otherwise Run packs.
  void Prepare(const KernelInit& init, const ConvAttributes& attrs, bool zero_required) {
    auto constant = [&](size_t i) {
      return i < init.constant_inputs.size() ? init.constant_inputs[i] : nullptr;
    };
    const Tensor* w = constant(w_input);
    const bool zero_given = w_zero_input < init.input_types.size() &&
                            init.input_types[w_zero_input] != DType::kUndefined;
    const Tensor* w_zero = constant(w_zero_input);
    if (w == nullptr || (zero_given && w_zero == nullptr) || (zero_required && !zero_given)) return;
    if (!Is8Bit(w->dtype()) || (w->rank() != 3 && w->rank() != 4)) return;
    if (w->dim(0) % attrs.group != 0) return;
    ConvGeometry shape;
    shape.out_channels = w->dim(0);
    shape.in_channels = w->dim(1) * attrs.group;
    shape.group = attrs.group;
    shape.kernel_h = w->rank() == 4 ? w->dim(2) : 1;
    shape.kernel_w = w->shape().back();
    prepacked = Make(init.node, shape, *w, w_zero);
  }

  // Once packed, Run reads only w's dtype and shape (the session may free its data).
  bool ReadsInRun(size_t input) const { return input != w_input || !prepacked; }

  std::shared_ptr<const Int8Conv> Get(const KernelContext& ctx, const ConvGeometry& g) const {
    if (prepacked) return prepacked;
    return Make(ctx.node(), g, ctx.input(w_input),
                ctx.has_input(w_zero_input) ? &ctx.input(w_zero_input) : nullptr);
  }

  static std::shared_ptr<const Int8Conv> Make(const Node& node, const ConvGeometry& shape,
                                              const Tensor& w, const Tensor* w_zero) {
    const bool per_channel =
        w_zero && PerOutputChannel(node, *w_zero, shape.out_channels, "w_zero_point");
    const ConvOperand w_op = ReadConvOperand(node, w, w_zero, per_channel, "w_zero_point");
    try {
      return std::make_shared<const Int8Conv>(shape, w_op.view, ActiveIsa());
    } catch (const Error& e) {
      Fail(node.Describe(), ": ", e.what());
    }
  }
};

class ConvIntegerKernel : public OpKernel {
 public:
  explicit ConvIntegerKernel(const KernelInit& init) : attrs_(ReadConvAttributes(init.node)) {
    weights_.w_input = 1;
    weights_.w_zero_input = 3;
    weights_.Prepare(init, attrs_, false);
  }

  // x goes only to Int8Conv, whose every path runs on guarded x in conv_fast_test.
  bool ReadsOnlyInputBytes(size_t input) const override { return input == 0; }

  bool ReadsConstantInRun(size_t input) const override { return weights_.ReadsInRun(input); }

  // Inputs: x, w, x_zero_point (optional), w_zero_point (optional).
  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    CheckInt8Input(node, x, "x");
    CheckInt8Input(node, w, "w");
    const ConvGeometry g = ResolveConvGeometry(node, attrs_, x.shape(), w.shape());
    const Tensor* x_zero = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    const Tensor* w_zero = ctx.has_input(3) ? &ctx.input(3) : nullptr;
    if (x_zero) CheckPerTensor(node, *x_zero, "x_zero_point");
    if (w_zero) PerOutputChannel(node, *w_zero, g.out_channels, "w_zero_point");
    const ConvOperand x_op = ReadConvOperand(node, x, x_zero, false, "x_zero_point");
    const std::shared_ptr<const Int8Conv> conv = weights_.Get(ctx, g);
    Tensor& y = ctx.AllocateUninitializedOutput(0, DType::kInt32, ConvOutputShape(g, x.rank()));
    conv->Run(g, x_op.view, Epilogue{}, y.raw(), ctx.pool());
  }

 private:
  ConvAttributes attrs_;
  WeightSource weights_;
};

class QLinearConvKernel : public OpKernel {
 public:
  explicit QLinearConvKernel(const KernelInit& init) : attrs_(ReadConvAttributes(init.node)) {
    weights_.w_input = 3;
    weights_.w_zero_input = 5;
    weights_.Prepare(init, attrs_, true);
  }

  // x goes only to Int8Conv, whose every path runs on guarded x in conv_fast_test.
  bool ReadsOnlyInputBytes(size_t input) const override { return input == 0; }

  bool ReadsConstantInRun(size_t input) const override { return weights_.ReadsInRun(input); }

  // Inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
  // y_zero_point, B (optional int32 bias, one per output channel).
  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(3);
    const Tensor& x_scale = ctx.input(1);
    const Tensor& w_scale = ctx.input(4);
    const Tensor& y_scale = ctx.input(6);
    const Tensor& y_zero_point = ctx.input(7);

    // Step 1: x and y per tensor, w per tensor or per output channel.
    CheckInt8Input(node, x, "x");
    CheckInt8Input(node, w, "w");
    CheckInt8Input(node, y_zero_point, "y_zero_point");
    const ConvGeometry g = ResolveConvGeometry(node, attrs_, x.shape(), w.shape());
    CheckPerTensor(node, x_scale, "x_scale");
    CheckPerTensor(node, ctx.input(2), "x_zero_point");
    CheckPerTensor(node, y_scale, "y_scale");
    CheckPerTensor(node, y_zero_point, "y_zero_point");
    PerOutputChannel(node, ctx.input(5), g.out_channels, "w_zero_point");
    const bool w_scale_per_channel = PerOutputChannel(node, w_scale, g.out_channels, "w_scale");
    const ConvOperand x_op = ReadConvOperand(node, x, &ctx.input(2), false, "x_zero_point");
    const Tensor* bias = ctx.has_input(8) ? &ctx.input(8) : nullptr;
    if (bias) {
      OCTET_CHECK(bias->dtype() == DType::kInt32 && bias->shape() == Shape{g.out_channels},
                  node.Describe(), ": B has dtype ", DTypeName(bias->dtype()), " and shape ",
                  ShapeToString(bias->shape()), "; expected int32 [", g.out_channels, "]");
    }
    const float x_scale_value = ReadScales(node, x_scale, "x_scale")[0];
    const float y_scale_value = ReadScales(node, y_scale, "y_scale")[0];
    std::vector<float> multipliers = ReadScales(node, w_scale, "w_scale");
    for (float& m : multipliers) m = RequantizeMultiplier(x_scale_value, m, y_scale_value);

    // Step 2: per output channel (the epilogue's rows).
    const DType y_type = y_zero_point.dtype();
    Epilogue e;
    e.output = EightBitOutput(y_type);
    e.multiplier = {multipliers.data(), w_scale_per_channel};
    if (bias) e.bias = {bias->data<int32_t>(), true};
    e.zero_point = ReadZeroPoints(node, y_zero_point, y_type, "y_zero_point")[0];
    const std::shared_ptr<const Int8Conv> conv = weights_.Get(ctx, g);
    Tensor& y = ctx.AllocateUninitializedOutput(0, y_type, ConvOutputShape(g, x.rank()));
    conv->Run(g, x_op.view, e, y.raw(), ctx.pool());
  }

 private:
  ConvAttributes attrs_;
  WeightSource weights_;
};

bool AcceptsConvInteger(const Node&, const std::vector<DType>& t) {
  auto zero_ok = [&](size_t i, DType operand) {
    return i >= t.size() || t[i] == DType::kUndefined || t[i] == operand;
  };
  return t.size() >= 2 && t.size() <= 4 && Is8Bit(t[0]) && Is8Bit(t[1]) && zero_ok(2, t[0]) &&
         zero_ok(3, t[1]);
}

bool AcceptsQLinearConv(const Node&, const std::vector<DType>& t) {
  if (t.size() < 8 || t.size() > 9) return false;
  const bool bias_ok = t.size() == 8 || t[8] == DType::kUndefined || t[8] == DType::kInt32;
  return Is8Bit(t[0]) && t[2] == t[0] && Is8Bit(t[3]) && t[5] == t[3] && Is8Bit(t[7]) &&
         t[1] == DType::kFloat32 && t[4] == DType::kFloat32 && t[6] == DType::kFloat32 && bias_ok;
}

}  // namespace

void RegisterIntegerConvOps(KernelRegistry& r) {
  r.Register({kOnnxDomain, "ConvInteger", 10, 1 << 30, AcceptsConvInteger,
              [](const Node& node, const std::vector<DType>&) {
                ReadConvAttributes(node);
                return std::vector<DType>{DType::kInt32};
              },
              [](const KernelInit& init) { return std::make_unique<ConvIntegerKernel>(init); }});
  r.Register({kOnnxDomain, "QLinearConv", 10, 1 << 30, AcceptsQLinearConv,
              [](const Node& node, const std::vector<DType>& t) {
                ReadConvAttributes(node);
                return std::vector<DType>{t[7]};
              },
              [](const KernelInit& init) { return std::make_unique<QLinearConvKernel>(init); }});
}

}  // namespace octet
