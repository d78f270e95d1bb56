// The QDQ passes after the MatMul fold: Relu absorbed into the fused node's
// clamp, the int8 tensor flowing straight from one fused node into the next,
// DQ -> Reshape -> Q running on int8 data, and DescribeRewrites' listing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "graph/octet_ops.h"
#include "graph_builder.h"
#include "ops/evaluate.h"
#include "rewrite/qdq_matmul.h"
#include "rewrite/rewrite.h"

namespace octet {
namespace {

using Builder = test::GraphBuilder;

// x(u8) -> DQ -> MatMul(W1) -> Q -> DQ -> Relu -> Q -> DQ -> MatMul(W2) -> Q -> y
Builder Mlp() {
  Builder b;
  const int x = b.V("x");
  b.g.values[x].dtype = DType::kUInt8;
  b.g.values[x].shape = std::vector<Dim>{Dim{4, ""}, Dim{8, ""}};
  b.g.inputs.push_back(x);
  b.Init<float>("s", {}, 0.05f);
  b.Init<uint8_t>("z", {}, 10);
  b.Init<float>("sw", {}, 0.01f);
  b.Init<int8_t>("w1", {8, 6}, -3);
  b.Init<int8_t>("w2", {6, 5}, -2);
  b.Add("DequantizeLinear", {"x", "s", "z"}, "xd");
  b.Add("DequantizeLinear", {"w1", "sw"}, "w1d");
  b.Add("MatMul", {"xd", "w1d"}, "h", "mm1");
  b.Add("QuantizeLinear", {"h", "s", "z"}, "hq");
  b.Add("DequantizeLinear", {"hq", "s", "z"}, "hd");
  b.Add("Relu", {"hd"}, "hr", "relu");
  b.Add("QuantizeLinear", {"hr", "s", "z"}, "hrq");
  b.Add("DequantizeLinear", {"hrq", "s", "z"}, "hrd");
  b.Add("DequantizeLinear", {"w2", "sw"}, "w2d");
  b.Add("MatMul", {"hrd", "w2d"}, "o", "mm2");
  b.Add("QuantizeLinear", {"o", "s", "z"}, "y");
  b.g.outputs.push_back(b.V("y"));
  return b;
}

TEST(QdqRewritesTest, MlpKeepsInt8BetweenFusedNodesAndAbsorbsRelu) {
  Builder b = Mlp();
  const std::string listing = DescribeRewrites(b.g, EvaluateNode);
  ApplyRewrites(b.g, EvaluateNode);
  ASSERT_EQ(b.g.nodes.size(), 2u);
  const Node& first = b.g.nodes[0];
  const Node& second = b.g.nodes[1];
  EXPECT_EQ(first.op_type, kFusedMatMulOp);
  EXPECT_EQ(second.op_type, kFusedMatMulOp);
  // The first node's int8 output (the Relu chain's Q output) is the second's x.
  EXPECT_EQ(first.outputs[0], b.V("hrq"));
  EXPECT_EQ(second.inputs[kFusedX], b.V("hrq"));
  EXPECT_EQ(first.GetInt("y_min", -1), 10);  // Relu: clamp at the zero point
  EXPECT_EQ(first.GetInt("y_max", -1), 255);
  EXPECT_NE(listing.find("fused   MatMul 'mm1'"), std::string::npos) << listing;
  EXPECT_NE(listing.find("fused   Relu 'relu' -> clamp [10, 255]"), std::string::npos) << listing;
  EXPECT_NE(listing.find("qdq_groups=2 claimed=2"), std::string::npos) << listing;
}

TEST(QdqRewritesTest, RequantizingReluIsRefusedWithReason) {
  Builder b = Mlp();
  b.Init<float>("s_other", {}, 0.07f);
  b.g.nodes[6].inputs[1] = b.V("s_other");  // the Relu's Q gets a different scale
  const std::string listing = DescribeRewrites(b.g, EvaluateNode);
  EXPECT_NE(listing.find("refused Relu 'relu' why=activation_requantizes"), std::string::npos)
      << listing;
}

TEST(QdqRewritesTest, ReshapeBetweenEqualQdqRunsOnInt8) {
  Builder b;
  b.g.inputs.push_back(b.V("x"));
  b.Init<float>("s", {}, 0.05f);
  b.Init<int8_t>("z", {}, -4);
  b.Init<int64_t>("shape", {2}, 0);
  b.Add("DequantizeLinear", {"x", "s", "z"}, "xd");
  b.Add("Reshape", {"xd", "shape"}, "r", "reshape");
  b.Add("QuantizeLinear", {"r", "s", "z"}, "y");
  b.g.outputs.push_back(b.V("y"));
  ApplyRewrites(b.g, EvaluateNode);
  ASSERT_EQ(b.g.nodes.size(), 1u);
  EXPECT_EQ(b.g.nodes[0].op_type, "Reshape");
  EXPECT_EQ(b.g.nodes[0].inputs[0], b.V("x"));
  EXPECT_EQ(b.g.nodes[0].outputs[0], b.V("y"));
}

}  // namespace
}  // namespace octet
