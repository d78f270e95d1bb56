// ConvInteger and QLinearConv (ai.onnx 10): reference kernels in three steps:
// (1) attributes, shapes and quantization parameters, (2) the integer
// convolution with zero-point correction (ConvReferenceS32, the call a fast
// convolution replaces), (3) for QLinearConv bias and requantization.
#include <memory>
#include <vector>

#include "kernels/int8/conv_reference.h"
#include "kernels/int8/requantize.h"
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
  OCTET_CHECK(IsInt8Type(t.dtype()), node.Describe(), ": ", name, " has dtype ",
              DTypeName(t.dtype()), "; expected uint8 or int8");
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

class ConvIntegerKernel : public OpKernel {
 public:
  explicit ConvIntegerKernel(const Node& node) : attrs_(ReadConvAttributes(node)) {}

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
    const bool w_zero_per_channel =
        w_zero && PerOutputChannel(node, *w_zero, g.out_channels, "w_zero_point");
    const ConvOperand x_op = ReadConvOperand(node, x, x_zero, false, "x_zero_point");
    const ConvOperand w_op = ReadConvOperand(node, w, w_zero, w_zero_per_channel, "w_zero_point");
    Tensor& y = ctx.AllocateOutput(0, DType::kInt32, ConvOutputShape(g, x.rank()));
    ConvReferenceS32(g, x_op.view, w_op.view, y.data<int32_t>());
  }

 private:
  ConvAttributes attrs_;
};

class QLinearConvKernel : public OpKernel {
 public:
  explicit QLinearConvKernel(const Node& node) : attrs_(ReadConvAttributes(node)) {}

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
    const bool w_zero_per_channel =
        PerOutputChannel(node, ctx.input(5), g.out_channels, "w_zero_point");
    const bool w_scale_per_channel = PerOutputChannel(node, w_scale, g.out_channels, "w_scale");
    const ConvOperand x_op = ReadConvOperand(node, x, &ctx.input(2), false, "x_zero_point");
    const ConvOperand w_op =
        ReadConvOperand(node, w, &ctx.input(5), w_zero_per_channel, "w_zero_point");
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

    // Step 2.
    const int64_t pixels = g.out_h * g.out_w;
    std::vector<int32_t> acc(static_cast<size_t>(g.batch * g.out_channels * pixels));
    ConvReferenceS32(g, x_op.view, w_op.view, acc.data());

    // Step 3: one output channel (a row of pixels) at a time, so its bias and
    // multiplier are per tensor within the row.
    const DType y_type = y_zero_point.dtype();
    Tensor& y = ctx.AllocateOutput(0, y_type, ConvOutputShape(g, x.rank()));
    auto* y_data = static_cast<uint8_t*>(y.raw());
    RequantizeParams params;
    params.zero_point = ReadZeroPoints(node, y_zero_point, y_type, "y_zero_point")[0];
    params.output_type = y_type;
    for (int64_t n = 0; n < g.batch; ++n) {
      for (int64_t o = 0; o < g.out_channels; ++o) {
        params.multiplier = &multipliers[w_scale_per_channel ? o : 0];
        params.bias = bias ? bias->data<int32_t>() + o : nullptr;
        const int64_t offset = (n * g.out_channels + o) * pixels;
        RequantizeS32(acc.data() + offset, pixels, 1, pixels, params, y_data + offset, pixels);
      }
    }
  }

 private:
  ConvAttributes attrs_;
};

bool AcceptsConvInteger(const Node&, const std::vector<DType>& t) {
  auto zero_ok = [&](size_t i, DType operand) {
    return i >= t.size() || t[i] == DType::kUndefined || t[i] == operand;
  };
  return t.size() >= 2 && t.size() <= 4 && IsInt8Type(t[0]) && IsInt8Type(t[1]) &&
         zero_ok(2, t[0]) && zero_ok(3, t[1]);
}

bool AcceptsQLinearConv(const Node&, const std::vector<DType>& t) {
  if (t.size() < 8 || t.size() > 9) return false;
  const bool bias_ok = t.size() == 8 || t[8] == DType::kUndefined || t[8] == DType::kInt32;
  return IsInt8Type(t[0]) && t[2] == t[0] && IsInt8Type(t[3]) && t[5] == t[3] && IsInt8Type(t[7]) &&
         t[1] == DType::kFloat32 && t[4] == DType::kFloat32 && t[6] == DType::kFloat32 && bias_ok;
}

}  // namespace

void RegisterIntegerConvOps(KernelRegistry& r) {
  r.Register(
      {kOnnxDomain, "ConvInteger", 10, 1 << 30, AcceptsConvInteger,
       [](const Node& node, const std::vector<DType>&) {
         ReadConvAttributes(node);
         return std::vector<DType>{DType::kInt32};
       },
       [](const KernelInit& init) { return std::make_unique<ConvIntegerKernel>(init.node); }});
  r.Register(
      {kOnnxDomain, "QLinearConv", 10, 1 << 30, AcceptsQLinearConv,
       [](const Node& node, const std::vector<DType>& t) {
         ReadConvAttributes(node);
         return std::vector<DType>{t[7]};
       },
       [](const KernelInit& init) { return std::make_unique<QLinearConvKernel>(init.node); }});
}

}  // namespace octet
