// ConvInteger and QLinearConv through the kernel registry (which run
// Int8Conv, kernels/int8/conv.h), checked against a convolution written
// here over an explicitly padded image, the documented requantization
// formula, and the ONNX backend tests' expected outputs.
#include <gtest/gtest.h>

#include <algorithm>

#include "int_op_test_util.h"
#include "kernels/int8/conv_reference.h"

namespace octet {
namespace {

using int_test::ExpectedRequant;
using int_test::ExpectError;
using int_test::Int8At;
using int_test::MakeTensor;
using int_test::RandomInt8;
using int_test::RunNode;
using int_test::Scalar;
using int_test::TypeMax;
using int_test::TypeMin;
using int_test::ZeroPoints;

struct ConvCase {
  Shape x, w;  // [N, C, (H,) W], [M, C/group, (kH,) kW]
  int64_t group = 1;
  std::vector<int64_t> strides, dilations, pads;  // empty: attribute omitted
  std::string auto_pad;                           // empty: attribute omitted
  std::string Describe() const {
    return "x" + ShapeToString(x) + " w" + ShapeToString(w) + " group " + std::to_string(group) +
           " strides" + ShapeToString(strides) + " dilations" + ShapeToString(dilations) + " pads" +
           ShapeToString(pads) + " " + auto_pad;
  }
  std::map<std::string, Attribute> Attributes() const {
    std::map<std::string, Attribute> a;
    if (group != 1) a["group"] = Attribute::Int(group);
    if (!strides.empty()) a["strides"] = Attribute::Ints(strides);
    if (!dilations.empty()) a["dilations"] = Attribute::Ints(dilations);
    if (!pads.empty()) a["pads"] = Attribute::Ints(pads);
    if (!auto_pad.empty()) a["auto_pad"] = Attribute::String(auto_pad);
    return a;
  }
};

struct ExpectedConv {
  Shape shape;
  std::vector<int64_t> acc;  // [N, M, pixels]
  int64_t pixels = 0;
};

// The ONNX Conv definition on (x - x_zero) and (w - w_zero[m]): pad x with its
// zero point, then slide the dilated kernel with the stride.
ExpectedConv NaiveConv(const Tensor& x, int x_zero, const Tensor& w, const Tensor* w_zero,
                       const ConvCase& c) {
  const bool one_d = x.rank() == 3;
  const int64_t n_batch = x.dim(0), channels = x.dim(1), out_channels = w.dim(0);
  const int64_t h = one_d ? 1 : x.dim(2), wd = x.shape().back();
  const int64_t kh = one_d ? 1 : w.dim(2), kw = w.shape().back();
  const size_t axes = one_d ? 1 : 2;
  auto attr = [&](const std::vector<int64_t>& v, size_t i) { return v.empty() ? 1 : v[i]; };
  // Per axis (height first): in, kernel, stride, dilation -> out, pad_begin, pad_end.
  int64_t out[2] = {1, 1}, pb[2] = {0, 0}, pe[2] = {0, 0};
  const int64_t in[2] = {h, wd}, kernel[2] = {kh, kw};
  for (size_t i = 0; i < axes; ++i) {
    const size_t axis = one_d ? 1 : i;
    const int64_t s = attr(c.strides, i), d = attr(c.dilations, i);
    const int64_t ek = (kernel[axis] - 1) * d + 1;
    if (c.auto_pad == "SAME_UPPER" || c.auto_pad == "SAME_LOWER") {
      out[axis] = (in[axis] + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (out[axis] - 1) * s + ek - in[axis]);
      pb[axis] = c.auto_pad == "SAME_UPPER" ? total / 2 : (total + 1) / 2;
      pe[axis] = total - pb[axis];
    } else if (c.auto_pad == "VALID") {
      out[axis] = (in[axis] - ek) / s + 1;
    } else {
      pb[axis] = c.pads.empty() ? 0 : c.pads[i];
      pe[axis] = c.pads.empty() ? 0 : c.pads[axes + i];
      out[axis] = (in[axis] + pb[axis] + pe[axis] - ek) / s + 1;
    }
  }
  const int64_t sh = one_d ? 1 : attr(c.strides, 0), sw = attr(c.strides, axes - 1);
  const int64_t dh = one_d ? 1 : attr(c.dilations, 0), dw = attr(c.dilations, axes - 1);
  const int64_t ph = h + pb[0] + pe[0], pw = wd + pb[1] + pe[1];
  ExpectedConv r;
  r.shape =
      one_d ? Shape{n_batch, out_channels, out[1]} : Shape{n_batch, out_channels, out[0], out[1]};
  r.pixels = out[0] * out[1];
  const int64_t cpg = channels / c.group, mpg = out_channels / c.group;
  for (int64_t n = 0; n < n_batch; ++n) {
    for (int64_t m = 0; m < out_channels; ++m) {
      const int64_t wz = !w_zero ? 0 : Int8At(*w_zero, w_zero->numel() == 1 ? 0 : m);
      for (int64_t oy = 0; oy < out[0]; ++oy) {
        for (int64_t ox = 0; ox < out[1]; ++ox) {
          int64_t sum = 0;
          for (int64_t ci = 0; ci < cpg; ++ci) {
            const int64_t channel = (m / mpg) * cpg + ci;
            // The padded image of this channel, filled with the zero point.
            std::vector<int64_t> padded(ph * pw, x_zero);
            for (int64_t y = 0; y < h; ++y)
              for (int64_t xx = 0; xx < wd; ++xx)
                padded[(y + pb[0]) * pw + xx + pb[1]] =
                    Int8At(x, ((n * channels + channel) * h + y) * wd + xx);
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx)
                sum += (padded[(oy * sh + ky * dh) * pw + ox * sw + kx * dw] - x_zero) *
                       (Int8At(w, ((m * cpg + ci) * kh + ky) * kw + kx) - wz);
          }
          r.acc.push_back(sum);
        }
      }
    }
  }
  return r;
}

std::vector<int64_t> Values(const Tensor& t) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < t.numel(); ++i)
    v.push_back(t.dtype() == DType::kInt32 ? t.data<int32_t>()[i] : Int8At(t, i));
  return v;
}

const DType kU8 = DType::kUInt8, kS8 = DType::kInt8;

// Checks ConvInteger and QLinearConv (per-channel scales, bias) on one case.
void CheckConvCase(const ConvCase& c, DType tx, DType tw, DType ty, std::mt19937& rng) {
  SCOPED_TRACE(c.Describe() + " " + DTypeName(tx) + "/" + DTypeName(tw) + "->" + DTypeName(ty));
  const Tensor x = RandomInt8(tx, c.x, rng);
  const Tensor w = RandomInt8(tw, c.w, rng);
  const int64_t out_channels = c.w[0];
  const int x_zero = std::uniform_int_distribution<int>(TypeMin(tx), TypeMax(tx))(rng);
  const Tensor xz = ZeroPoints(tx, {}, {x_zero});
  const Tensor wz = RandomInt8(tw, {out_channels}, rng);
  const Tensor wz_scalar = ZeroPoints(tw, {1}, {TypeMax(tw)});
  const auto attrs = c.Attributes();

  for (const Tensor* w_zero : {&wz, &wz_scalar}) {
    const Tensor y = RunNode("ConvInteger", 10, {x, w, xz, *w_zero}, attrs);
    const ExpectedConv want = NaiveConv(x, x_zero, w, w_zero, c);
    ASSERT_EQ(y.shape(), want.shape);
    EXPECT_EQ(Values(y), want.acc);
  }
  const Tensor y_plain = RunNode("ConvInteger", 10, {x, w}, attrs);
  EXPECT_EQ(Values(y_plain), NaiveConv(x, 0, w, nullptr, c).acc);

  // QLinearConv: per-channel w_scale and w_zero_point, bias, output scale chosen
  // so outputs spread over the range and some saturate.
  const int64_t depth = c.w[1] * c.w[2] * (c.w.size() == 4 ? c.w[3] : 1);
  std::uniform_real_distribution<float> scale(0.002f, 0.02f);
  Tensor w_scale(DType::kFloat32, {out_channels});
  for (int64_t i = 0; i < out_channels; ++i) w_scale.data<float>()[i] = scale(rng);
  Tensor bias(DType::kInt32, {out_channels});
  for (int64_t i = 0; i < out_channels; ++i)
    bias.data<int32_t>()[i] = std::uniform_int_distribution<int32_t>(-20000, 20000)(rng);
  const float x_scale = 0.03f;
  const float y_scale = x_scale * 0.01f * 40.f * std::sqrt(static_cast<float>(depth));
  const int y_zero = TypeMin(ty) + 100;
  const Tensor y = RunNode(
      "QLinearConv", 10,
      {x, Scalar(x_scale), xz, w, w_scale, wz, Scalar(y_scale), ZeroPoints(ty, {}, {y_zero}), bias},
      attrs);
  const ExpectedConv want = NaiveConv(x, x_zero, w, &wz, c);
  ASSERT_EQ(y.shape(), want.shape);
  ASSERT_EQ(y.dtype(), ty);
  std::vector<int64_t> expected;
  for (size_t i = 0; i < want.acc.size(); ++i) {
    const int64_t m = (static_cast<int64_t>(i) / want.pixels) % out_channels;
    expected.push_back(ExpectedRequant(want.acc[i] + bias.data<int32_t>()[m], x_scale,
                                       w_scale.data<float>()[m], y_scale, y_zero, ty));
  }
  EXPECT_EQ(Values(y), expected);
}

TEST(IntegerConv, KernelStrideDilationPadAndGroupGrid) {
  std::mt19937 rng(17);
  const std::vector<std::pair<int64_t, int64_t>> kernels = {{1, 1}, {3, 3}, {5, 5}, {7, 1}};
  // (channels, out_channels, group): dense, grouped, depthwise, depthwise x2.
  const std::vector<std::array<int64_t, 3>> groupings = {
      {4, 6, 1}, {4, 6, 2}, {4, 4, 4}, {3, 6, 3}};
  const std::vector<std::vector<int64_t>> pad_sets = {{}, {1, 1, 1, 1}, {2, 0, 1, 3}};
  const DType types[][3] = {
      {kU8, kS8, kU8}, {kU8, kU8, kU8}, {kS8, kS8, kS8}, {kS8, kU8, kU8}, {kU8, kS8, kS8}};
  int cases = 0;
  for (auto [kh, kw] : kernels)
    for (int64_t stride : {1, 2})
      for (int64_t dilation : {1, 2})
        for (const auto& pads : pad_sets)
          for (const auto& [channels, out_channels, group] : groupings) {
            ConvCase c;
            c.x = {2, channels, 9, 8};
            c.w = {out_channels, channels / group, kh, kw};
            c.group = group;
            c.strides = {stride, stride};
            c.dilations = {dilation, dilation};
            c.pads = pads;
            const int64_t pad_h = pads.empty() ? 0 : pads[0] + pads[2];
            const int64_t pad_w = pads.empty() ? 0 : pads[1] + pads[3];
            if ((kh - 1) * dilation + 1 > 9 + pad_h || (kw - 1) * dilation + 1 > 8 + pad_w)
              continue;
            const auto& t = types[cases % 5];
            CheckConvCase(c, t[0], t[1], t[2], rng);
            ++cases;
          }
  EXPECT_GT(cases, 150);
}

TEST(IntegerConv, AutoPadModes) {
  std::mt19937 rng(23);
  for (const char* mode : {"SAME_UPPER", "SAME_LOWER", "VALID", "NOTSET"}) {
    for (int64_t stride : {1, 2, 3}) {
      ConvCase c;
      c.x = {1, 3, 8, 7};
      c.w = {5, 3, 4, 3};
      c.strides = {stride, stride};
      c.auto_pad = mode;
      CheckConvCase(c, kU8, kS8, kU8, rng);
      c.dilations = {2, 1};
      CheckConvCase(c, kS8, kS8, kS8, rng);
    }
  }
}

TEST(IntegerConv, OneDimensional) {
  std::mt19937 rng(29);
  for (int64_t k : {1, 3, 5})
    for (int64_t stride : {1, 2})
      for (int64_t dilation : {1, 2})
        for (int64_t group : {1, 2}) {
          ConvCase c;
          c.x = {2, 4, 11};
          c.w = {6, 4 / group, k};
          c.group = group;
          c.strides = {stride};
          c.dilations = {dilation};
          c.pads = {2, 1};
          CheckConvCase(c, group == 1 ? kU8 : kS8, kS8, group == 1 ? kU8 : kS8, rng);
        }
  ConvCase same;
  same.x = {1, 2, 10};
  same.w = {3, 2, 4};
  same.strides = {3};
  same.auto_pad = "SAME_LOWER";
  CheckConvCase(same, kU8, kU8, kS8, rng);
}

TEST(IntegerConv, EmptyTensors) {
  std::mt19937 rng(31);
  ConvCase c;
  c.x = {0, 2, 5, 5};
  c.w = {3, 2, 3, 3};
  CheckConvCase(c, kU8, kS8, kU8, rng);  // batch 0
  c.x = {1, 2, 5, 5};
  c.w = {0, 2, 3, 3};
  CheckConvCase(c, kU8, kS8, kU8, rng);  // no output channels
  c.x = {1, 0, 5, 5};
  c.w = {3, 0, 3, 3};
  CheckConvCase(c, kU8, kS8, kU8, rng);  // no input channels: accumulators are 0 (+ bias)
  c.x = {1, 2, 0, 4};
  c.w = {3, 2, 1, 1};
  c.pads = {1, 0, 0, 0};
  CheckConvCase(c, kU8, kS8, kU8, rng);  // empty height, one padded row
  // Without padding there is no window at all; ONNX Runtime also refuses it.
  ExpectError(
      [&] {
        RunNode("ConvInteger", 10,
                {RandomInt8(kU8, {1, 2, 0, 4}, rng), RandomInt8(kS8, {3, 2, 1, 1}, rng)});
      },
      {"node_under_test", "spatial axis 0 has size 0"});
}

TEST(IntegerConv, FullRangeValues) {
  // (0 - 255) * (-128 - 127) = 65025 per tap, 64 channels x 7x7 taps.
  const Tensor x = MakeTensor<uint8_t>({1, 64, 7, 7}, std::vector<uint8_t>(64 * 49, 0));
  const Tensor w = MakeTensor<int8_t>({2, 64, 7, 7}, std::vector<int8_t>(2 * 64 * 49, -128));
  const Tensor y = RunNode("ConvInteger", 10, {x, w, Scalar<uint8_t>(255), Scalar<int8_t>(127)});
  EXPECT_EQ(Values(y), std::vector<int64_t>(2, 65025LL * 64 * 49));
}

TEST(IntegerConv, ReferenceOnItsOwn) {
  // 1x1 depthwise-free geometry worked by hand: x = [1 2; 3 4] - 1, w = 2 - 0, stride 1.
  const uint8_t x[] = {1, 2, 3, 4};
  const uint8_t w[] = {2};
  const int32_t x_zero = 1;
  ConvGeometry g;
  g.batch = 1;
  g.in_channels = g.out_channels = 1;
  g.in_h = g.in_w = g.out_h = g.out_w = 2;
  int32_t y[4];
  ConvReferenceS32(g, {x, false, &x_zero, false}, {w, false, nullptr, false}, y);
  EXPECT_EQ(std::vector<int32_t>(y, y + 4), (std::vector<int32_t>{0, 2, 4, 6}));
}

TEST(ConvInteger, OnnxBackendTestCases) {
  // onnx/backend/test/case/node/convinteger.py
  const Tensor x = MakeTensor<uint8_t>({1, 1, 3, 3}, {2, 3, 4, 5, 6, 7, 8, 9, 10});
  const Tensor w = MakeTensor<uint8_t>({1, 1, 2, 2}, {1, 1, 1, 1});
  EXPECT_EQ(Values(RunNode("ConvInteger", 10, {x, w, Scalar<uint8_t>(1)})),
            (std::vector<int64_t>{12, 16, 24, 28}));
  const Tensor w2 = MakeTensor<uint8_t>({2, 1, 2, 2}, std::vector<uint8_t>(8, 1));
  const Tensor y =
      RunNode("ConvInteger", 10, {x, w2, Scalar<uint8_t>(1), MakeTensor<uint8_t>({2}, {0, 1})},
              {{"pads", Attribute::Ints({1, 1, 1, 1})}});
  EXPECT_EQ(y.shape(), (Shape{1, 2, 4, 4}));
  std::vector<int64_t> want = {1, 3, 5, 3, 5, 12, 16, 9, 11, 24, 28, 15, 7, 15, 17, 9};
  want.resize(32, 0);
  EXPECT_EQ(Values(y), want);
}

TEST(QLinearConv, OnnxBackendTestCase) {
  // onnx/backend/test/case/node/qlinearconv.py
  const Tensor x = MakeTensor<uint8_t>(
      {1, 1, 7, 7},
      {255, 174, 162, 25,  203, 168, 58,  15,  59,  237, 95,  129, 0,  64,  56, 242, 153,
       221, 168, 12,  166, 232, 178, 186, 195, 237, 162, 237, 188, 39, 124, 77, 80,  102,
       43,  127, 230, 21,  83,  41,  40,  134, 255, 154, 92,  141, 42, 148, 247});
  const Tensor y =
      RunNode("QLinearConv", 10,
              {x, Scalar(0.00369204697f), Scalar<uint8_t>(132),
               MakeTensor<uint8_t>({1, 1, 1, 1}, {0}), MakeTensor<float>({1}, {0.00172794575f}),
               MakeTensor<uint8_t>({1}, {255}), Scalar(0.00162681262f), Scalar<uint8_t>(123)});
  const std::vector<int64_t> want = {
      0,   81,  93,  230, 52,  87,  197, 240, 196, 18,  160, 126, 255, 191, 199, 13,  102,
      34,  87,  243, 89,  23,  77,  69,  60,  18,  93,  18,  67,  216, 131, 178, 175, 153,
      212, 128, 25,  234, 172, 214, 215, 121, 0,   101, 163, 114, 213, 107, 8};
  EXPECT_EQ(Values(y), want);
}

TEST(IntegerConv, ErrorsNameTheNode) {
  const Tensor x = MakeTensor<uint8_t>({1, 4, 5, 5}, std::vector<uint8_t>(100, 1));
  const Tensor w = MakeTensor<int8_t>({2, 4, 3, 3}, std::vector<int8_t>(72, 1));
  auto conv = [&](const Tensor& xx, const Tensor& ww, std::map<std::string, Attribute> attrs) {
    RunNode("ConvInteger", 10, {xx, ww}, attrs);
  };
  const std::string node = "ConvInteger(ai.onnx, opset 10) node 'node_under_test'";
  ExpectError(
      [&] {
        conv(MakeTensor<uint8_t>({1, 1, 2, 2, 2}, std::vector<uint8_t>(8, 0)),
             MakeTensor<int8_t>({1, 1, 1, 1, 1}, {0}), {});
      },
      {node, "3-D convolution is not supported"});
  ExpectError([&] { conv(x, w, {{"group", Attribute::Int(2)}}); }, {node, "group 2"});
  ExpectError([&] { conv(x, w, {{"group", Attribute::Int(0)}}); }, {node, "group must be >= 1"});
  ExpectError([&] { conv(x, w, {{"kernel_shape", Attribute::Ints({2, 2})}}); }, {node, "kernel_shape"});
  ExpectError([&] { conv(x, w, {{"auto_pad", Attribute::String("SAME")}}); }, {node, "auto_pad 'SAME'"});
  ExpectError([&] { conv(x, w, {{"strides", Attribute::Ints({1})}}); }, {node, "strides"});
  ExpectError([&] { conv(x, w, {{"strides", Attribute::Ints({0, 1})}}); }, {node, "strides must be"});
  ExpectError([&] { conv(x, w, {{"pads", Attribute::Ints({1, 1, -1, 0})}}); }, {node, "pads"});
  ExpectError(
      [&] {
        conv(x, w, {{"dilations", Attribute::Ints({3, 3})}});
      },
      {node, "smaller than the dilated kernel size 7"});
  ExpectError(
      [&] {
        conv(x, MakeTensor<int8_t>({2, 4, 3}, std::vector<int8_t>(24, 1)), {});
      },
      {node, "expected rank 4"});
  ExpectError(
      [&] {
        RunNode("ConvInteger", 10, {x, w, std::nullopt, MakeTensor<int8_t>({3}, {0, 0, 0})});
      },
      {node, "w_zero_point", "[3]"});
  ExpectError(
      [&] {
        RunNode("ConvInteger", 10, {x, w, MakeTensor<uint8_t>({2}, {0, 0})});
      },
      {node, "x_zero_point", "per-tensor"});

  auto qconv = [&](const Tensor& w_scale, const Tensor& bias) {
    RunNode("QLinearConv", 10,
            {x, Scalar(1.f), Scalar<uint8_t>(0), w, w_scale, Scalar<int8_t>(0), Scalar(1.f),
             Scalar<uint8_t>(0), bias});
  };
  const std::string qnode = "QLinearConv(ai.onnx, opset 10) node 'node_under_test'";
  ExpectError(
      [&] {
        qconv(MakeTensor<float>({3}, {1, 1, 1}), MakeTensor<int32_t>({2}, {0, 0}));
      },
      {qnode, "w_scale", "[3]"});
  ExpectError(
      [&] {
        qconv(Scalar(1.f), MakeTensor<int32_t>({3}, {0, 0, 0}));
      },
      {qnode, "B has", "[3]"});
  ExpectError(
      [&] {
        qconv(Scalar(1.f), MakeTensor<float>({2}, {0, 0}));
      },
      {qnode, "unsupported input types"});
}

}  // namespace
}  // namespace octet
