// The QDQ Conv fold (rewrite/qdq_conv.h): which groups become one
// octet.QLinearConvFused node, with what inputs; the refusals and their
// reasons; the Relu absorbed into the fused node's clamp; and Int8Conv's
// output clamp against the requantized reference clamped by hand.
#include "rewrite/qdq_conv.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "graph/octet_ops.h"
#include "graph_builder.h"
#include "kernels/int8/conv.h"
#include "kernels/int8/conv_reference.h"
#include "kernels/int8/epilogue.h"
#include "ops/evaluate.h"
#include "rewrite/qdq_matmul.h"
#include "rewrite/rewrite.h"

namespace octet {
namespace {

using Builder = test::GraphBuilder;

constexpr int64_t kOut = 6;

// x(u8 [1,4,5,5]) -> DQ ; W(s8 [6,4,3,3], per-channel scale, axis 0) -> DQ ;
// bias(int32 [6], scale sx*sw) -> DQ ; Conv -> Q -> y
Builder ConvGroup(bool per_channel = true, bool bias = true) {
  Builder b;
  const int x = b.V("x");
  b.g.values[x].dtype = DType::kUInt8;
  b.g.values[x].shape = std::vector<Dim>{Dim{1, ""}, Dim{4, ""}, Dim{5, ""}, Dim{5, ""}};
  b.g.inputs.push_back(x);
  b.Init<float>("sx", {}, 0.5f);
  b.Init<uint8_t>("zx", {}, 10);
  b.Init<int8_t>("w", {kOut, 4, 3, 3}, -3);
  if (per_channel) {
    b.Init<float>("sw", {kOut}, 0.25f);  // 0.25, 1.25, ...: sx * sw is exact
    Tensor sb(DType::kFloat32, {kOut});
    for (int64_t o = 0; o < kOut; ++o) sb.data<float>()[o] = 0.5f * (0.25f + static_cast<float>(o));
    b.g.SetInitializer(b.V("sb"), std::move(sb));
  } else {
    b.Init<float>("sw", {}, 0.25f);
    b.Init<float>("sb", {}, 0.125f);
  }
  b.Init<int32_t>("bias", {kOut}, -100);
  b.Init<float>("sy", {}, 0.75f);
  b.Init<uint8_t>("zy", {}, 3);
  b.Add("DequantizeLinear", {"x", "sx", "zx"}, "xd");
  b.Add("DequantizeLinear", {"w", "sw"}, "wd").attributes["axis"] = Attribute::Int(0);
  std::vector<std::string> conv_in = {"xd", "wd"};
  if (bias) {
    b.Add("DequantizeLinear", {"bias", "sb"}, "bd").attributes["axis"] = Attribute::Int(0);
    conv_in.push_back("bd");
  }
  Node& conv = b.Add("Conv", conv_in, "c", "conv");
  conv.attributes["pads"] = Attribute::Ints({1, 1, 1, 1});
  b.Add("QuantizeLinear", {"c", "sy", "zy"}, "y", "q");
  b.g.outputs.push_back(b.V("y"));
  return b;
}

TEST(QdqConvTest, GroupBecomesOneFusedNode) {
  Builder b = ConvGroup();
  const std::string listing = DescribeRewrites(b.g, EvaluateNode);
  ApplyRewrites(b.g, EvaluateNode);
  ASSERT_EQ(b.g.nodes.size(), 1u);
  const Node& f = b.g.nodes[0];
  EXPECT_EQ(f.domain, kOctetDomain);
  EXPECT_EQ(f.op_type, kFusedConvOp);
  EXPECT_EQ(f.inputs[kFusedConvX], b.V("x"));
  EXPECT_EQ(f.inputs[kFusedConvXScale], b.V("sx"));
  EXPECT_EQ(f.inputs[kFusedConvXZero], b.V("zx"));
  EXPECT_EQ(f.inputs[kFusedConvW], b.V("w"));
  EXPECT_EQ(f.inputs[kFusedConvWScale], b.V("sw"));
  EXPECT_EQ(f.inputs[kFusedConvWZero], -1);
  EXPECT_EQ(f.inputs[kFusedConvYScale], b.V("sy"));
  EXPECT_EQ(f.inputs[kFusedConvYZero], b.V("zy"));
  EXPECT_EQ(f.inputs[kFusedConvBias], b.V("bias"));
  EXPECT_EQ(f.outputs[0], b.V("y"));
  EXPECT_EQ(f.GetInts("pads"), (std::vector<int64_t>{1, 1, 1, 1}));  // the Conv's attributes
  EXPECT_EQ(f.GetInt("y_type", 0), static_cast<int64_t>(DType::kUInt8));
  EXPECT_NE(listing.find("fused   Conv 'conv' -> octet.QLinearConvFused (int8 output)"),
            std::string::npos)
      << listing;
  EXPECT_NE(listing.find("qdq_groups=1 claimed=1"), std::string::npos) << listing;
}

TEST(QdqConvTest, ReluAfterTheGroupBecomesTheClamp) {
  Builder b = ConvGroup(false, false);
  b.Add("DequantizeLinear", {"y", "sy", "zy"}, "yd");
  b.Add("Relu", {"yd"}, "yr", "relu");
  b.Add("QuantizeLinear", {"yr", "sy", "zy"}, "out");
  b.g.outputs = {b.V("out")};
  const std::string listing = DescribeRewrites(b.g, EvaluateNode);
  ApplyRewrites(b.g, EvaluateNode);
  ASSERT_EQ(b.g.nodes.size(), 1u) << listing;
  EXPECT_EQ(b.g.nodes[0].op_type, kFusedConvOp);
  EXPECT_EQ(b.g.nodes[0].outputs[0], b.V("out"));
  EXPECT_EQ(b.g.nodes[0].GetInt("y_min", -1), 3);  // Relu: clamp at the zero point
  EXPECT_EQ(b.g.nodes[0].GetInt("y_max", -1), 255);
  EXPECT_NE(listing.find("fused   Relu 'relu' -> clamp [3, 255] of conv/qdq"), std::string::npos)
      << listing;
}

TEST(QdqConvTest, ReluOrtRemovesBeforeTheQIsDropped) {
  // Conv -> Relu -> Q with Q's zero point at qmin: ORT's ReluQuantFusion deletes the Relu.
  Builder b = ConvGroup();
  b.Init<uint8_t>("z0", {}, 0);
  b.g.nodes.back().inputs = {b.V("cr"), b.V("sy"), b.V("z0")};
  b.g.nodes.insert(b.g.nodes.end() - 1, Node{});
  Node& relu = b.g.nodes[b.g.nodes.size() - 2];
  relu.name = "relu";
  relu.op_type = "Relu";
  relu.domain = kOnnxDomain;
  relu.opset = 21;
  relu.inputs = {b.V("c")};
  relu.outputs = {b.V("cr")};
  for (size_t n = 0; n < b.g.nodes.size(); ++n)
    b.g.values[b.g.nodes[n].outputs[0]].producer = static_cast<int>(n);
  const std::string listing = DescribeRewrites(b.g, EvaluateNode);
  EXPECT_NE(listing.find("fused   Conv 'conv' -> octet.QLinearConvFused (int8 output, Relu "
                         "dropped as ONNX Runtime does)"),
            std::string::npos)
      << listing;
  ApplyRewrites(b.g, EvaluateNode);
  ASSERT_EQ(b.g.nodes.size(), 1u);
}

struct RefusalCase {
  const char* name;
  void (*mutate)(Builder&);
  const char* why;
};

TEST(QdqConvTest, RefusalsKeepTheGraphAndSayWhy) {
  const RefusalCase cases[] = {
      {"weight scale along axis 1",
       [](Builder& b) {
         b.Init<float>("sw", {4}, 0.25f);
         b.g.nodes[1].attributes["axis"].i = 1;
       },
       "scale_not_per_output_channel"},
      {"non-constant weight",
       [](Builder& b) {
         b.g.values[b.V("w")].initializer = nullptr;
         b.g.inputs.push_back(b.V("w"));
       },
       "weight_not_constant"},
      {"bias scale mismatch", [](Builder& b) { b.Init<float>("sb", {kOut}, 0.5f); }, "bias_scale"},
      {"float output",
       [](Builder& b) {
         b.g.nodes.pop_back();
         b.g.outputs = {b.V("c")};
       },
       "float_output"},
      {"3-D convolution",
       [](Builder& b) {
         b.Init<int8_t>("w", {kOut, 4, 3, 3, 3}, -3);
         b.g.values[b.V("x")].shape->push_back(Dim{5, ""});
         b.g.nodes[3].attributes.erase("pads");
       },
       "conv_3d"},
      {"per-tensor x scale along an axis",
       [](Builder& b) {
         b.Init<float>("sx", {4}, 0.5f);
         b.Init<uint8_t>("zx", {4}, 10);
       },
       "activation_scale_per_axis"},
  };
  for (const RefusalCase& c : cases) {
    Builder b = ConvGroup();
    c.mutate(b);
    const size_t nodes = b.g.nodes.size();
    const std::string listing = DescribeRewrites(b.g, EvaluateNode);
    EXPECT_NE(listing.find(std::string("refused Conv 'conv' why=") + c.why), std::string::npos)
        << c.name << ":\n"
        << listing;
    EXPECT_NE(listing.find("qdq_groups=1 claimed=0"), std::string::npos) << c.name << listing;
    ApplyRewrites(b.g, EvaluateNode);
    EXPECT_EQ(b.g.nodes.size(), nodes) << c.name;
  }
}

TEST(QdqConvTest, Int8ConvClampEqualsTheClampedEpilogue) {
  std::mt19937 rng(7);
  ConvGeometry g;
  g.batch = 2;
  g.in_channels = 6;
  g.out_channels = 8;
  g.group = 2;
  g.in_h = g.in_w = 7;
  g.kernel_h = g.kernel_w = 3;
  g.out_h = g.out_w = 5;
  ConvGeometry dw = g;  // depthwise: the direct kernel's path
  dw.group = dw.in_channels = 4;
  for (const ConvGeometry& geo : {g, dw}) {
    for (DType out_type : {DType::kUInt8, DType::kInt8}) {
      const int64_t k = geo.in_channels / geo.group * 9;
      std::vector<int8_t> w(geo.out_channels * k);
      std::vector<uint8_t> x(geo.batch * geo.in_channels * geo.in_h * geo.in_w);
      for (auto& v : w) v = static_cast<int8_t>(rng() % 256);
      for (auto& v : x) v = static_cast<uint8_t>(rng() % 256);
      const int32_t zx = 131;
      const Int8ConvOperand xo{x.data(), false, &zx, false};
      const Int8ConvOperand wo{w.data(), true, nullptr, false};
      const int64_t n = geo.batch * geo.out_channels * geo.out_h * geo.out_w;
      std::vector<int32_t> acc(n);
      ConvReferenceS32(geo, xo, wo, acc.data());

      const float multiplier = 1.f / 900.f;
      Epilogue rq;
      rq.output = EightBitOutput(out_type);
      rq.multiplier = {&multiplier};
      rq.zero_point = out_type == DType::kInt8 ? -5 : 120;
      rq.y_min = rq.zero_point;  // a Relu
      rq.y_max = rq.zero_point + 60;
      const Int8Conv conv(geo, wo, ActiveIsa());
      std::vector<uint8_t> y(n);
      conv.Run(geo, xo, rq, y.data(), nullptr);
      const int32_t qmin = out_type == DType::kInt8 ? -128 : 0;
      const float lo = static_cast<float>(qmin - rq.zero_point);
      const float hi = static_cast<float>(qmin + 255 - rq.zero_point);
      int clamped = 0;
      for (int64_t i = 0; i < n; ++i) {
        // The type's clamp alone (docs/epilogue.md), then the Relu's.
        const float v = std::min(std::max(static_cast<float>(acc[i]) * multiplier, lo), hi);
        const int32_t full = static_cast<int32_t>(std::nearbyint(v)) + rq.zero_point;
        const int32_t want = std::clamp(full, rq.y_min, rq.y_max);
        clamped += want != full;
        const int32_t got = out_type == DType::kInt8 ? static_cast<int8_t>(y[i]) : y[i];
        ASSERT_EQ(got, want) << "element " << i << (geo.group == geo.in_channels ? " dw" : "");
      }
      EXPECT_GT(clamped, n / 10);  // the clamp is exercised on both ends
    }
  }
}

}  // namespace
}  // namespace octet
