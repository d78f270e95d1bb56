// com.microsoft QLinearAdd / QLinearMul against the exact real result (double,
// round half to even), and the DequantizeLinear x2 -> Add | Mul ->
// QuantizeLinear fold's graph edit. Bit equality with ONNX Runtime is checked in
// tests/python/test_qlinear_ops.py.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "graph/octet_ops.h"
#include "graph_builder.h"
#include "int_op_test_util.h"
#include "ops/evaluate.h"
#include "rewrite/qdq_binary.h"
#include "rewrite/rewrite.h"

namespace octet {
namespace {

using int_test::Int8At;
using int_test::RoundHalfEven;
using int_test::TypeMax;
using int_test::TypeMin;
using int_test::ZeroPoints;

Tensor RunMsNode(const std::string& op, const std::vector<std::optional<Tensor>>& inputs) {
  return int_test::RunNode(op, 1, inputs, {.domain = kMsDomain});
}

struct Case {
  const char* op;
  DType type;
  float sa, sb, sc;
  int za, zb, zc;
};

// Every (a, b) pair, as A [256, 1] against B [1, 256] (A is the single value of
// each broadcast span) and as B [256, 1] against A [1, 256].
void CheckGrid(const Case& c, bool a_is_column) {
  Tensor a(c.type, a_is_column ? Shape{256, 1} : Shape{1, 256});
  Tensor b(c.type, a_is_column ? Shape{1, 256} : Shape{256, 1});
  for (int i = 0; i < 256; ++i) {
    static_cast<uint8_t*>(a.raw())[i] = static_cast<uint8_t>(i);
    static_cast<uint8_t*>(b.raw())[i] = static_cast<uint8_t>(i);
  }
  const Tensor y = RunMsNode(c.op, {a, int_test::Scalar(c.sa), ZeroPoints(c.type, {}, {c.za}), b,
                                    int_test::Scalar(c.sb), ZeroPoints(c.type, {}, {c.zb}),
                                    int_test::Scalar(c.sc), ZeroPoints(c.type, {}, {c.zc})});
  ASSERT_EQ(y.shape(), (Shape{256, 256}));
  const bool add = std::string(c.op) == "QLinearAdd";
  int near_ties = 0;
  for (int64_t i = 0; i < 256; ++i) {
    for (int64_t j = 0; j < 256; ++j) {
      const int64_t out = i * 256 + j;
      const double va = (Int8At(a, a_is_column ? i : j) - c.za) * double{c.sa};
      const double vb = (Int8At(b, a_is_column ? j : i) - c.zb) * double{c.sb};
      const double real = (add ? va + vb : va * vb) / c.sc + c.zc;
      const double expected =
          std::clamp<double>(RoundHalfEven(real), TypeMin(c.type), TypeMax(c.type));
      const double frac = std::abs(real - std::floor(real) - 0.5);
      if (frac < 1e-3) {  // float32 arithmetic may land on either side of a tie
        ++near_ties;
        EXPECT_LE(std::abs(Int8At(y, out) - expected), 1) << c.op << " at " << i << "," << j;
      } else {
        ASSERT_EQ(Int8At(y, out), expected) << c.op << " at " << i << "," << j << " real " << real;
      }
    }
  }
  EXPECT_LT(near_ties, 256 * 256);
}

TEST(QLinearBinaryTest, FullGridsMatchTheExactResultOffTies) {
  const Case cases[] = {
      {"QLinearAdd", DType::kUInt8, 0.031f, 0.017f, 0.045f, 128, 3, 100},
      {"QLinearAdd", DType::kInt8, 0.002f, 0.19f, 0.11f, -40, 25, -7},
      {"QLinearMul", DType::kUInt8, 0.031f, 0.017f, 1.3f, 128, 3, 100},
      {"QLinearMul", DType::kInt8, 0.02f, 0.05f, 0.9f, -40, 25, -7},
  };
  for (const Case& c : cases) {
    CheckGrid(c, true);
    CheckGrid(c, false);
  }
}

TEST(QLinearBinaryTest, ShapesThatDoNotBroadcastFail) {
  Tensor a(DType::kUInt8, {2, 3});
  Tensor b(DType::kUInt8, {4});
  const float s = 0.5f;
  EXPECT_THROW(RunMsNode("QLinearAdd", {a, int_test::Scalar(s), std::nullopt, b,
                                        int_test::Scalar(s), std::nullopt, int_test::Scalar(s)}),
               Error);
}

// A (u8) -> DQ -+
//               +-> Add -> Q -> y ; with b_type int8 the types differ and it is refused.
Graph AddGroup(DType b_type) {
  test::GraphBuilder b;
  Graph& g = b.g;
  for (const char* name : {"a", "b"}) {
    g.inputs.push_back(b.V(name));
    g.values[b.V(name)].dtype = name[0] == 'a' ? DType::kUInt8 : b_type;
  }
  g.SetInitializer(b.V("s"), int_test::Scalar(0.05f));
  g.SetInitializer(b.V("za"), ZeroPoints(DType::kUInt8, {}, {7}));
  g.SetInitializer(b.V("zb"), ZeroPoints(b_type, {}, {3}));
  b.Add("DequantizeLinear", {"a", "s", "za"}, "ad");
  b.Add("DequantizeLinear", {"b", "s", "zb"}, "bd");
  b.Add("Add", {"ad", "bd"}, "f");
  b.Add("QuantizeLinear", {"f", "s", "za"}, "y");
  g.outputs.push_back(b.V("y"));
  return std::move(b.g);
}

TEST(QLinearBinaryTest, RewriteMakesOneQLinearAdd) {
  Graph g = AddGroup(DType::kUInt8);
  const std::string listing = DescribeRewrites(g, EvaluateNode);
  EXPECT_NE(listing.find("fused   Add 'Add2' -> com.microsoft.QLinearAdd"), std::string::npos)
      << listing;
  ApplyRewrites(g, EvaluateNode);
  ASSERT_EQ(g.nodes.size(), 1u);
  const Node& n = g.nodes[0];
  EXPECT_EQ(n.op_type, "QLinearAdd");
  EXPECT_EQ(n.domain, kMsDomain);
  EXPECT_EQ(n.inputs, (std::vector<int>{g.FindValue("a"), g.FindValue("s"), g.FindValue("za"),
                                        g.FindValue("b"), g.FindValue("s"), g.FindValue("zb"),
                                        g.FindValue("s"), g.FindValue("za")}));
  EXPECT_EQ(n.outputs, std::vector<int>{g.FindValue("y")});
}

// ORT's binary selector wants one type: with u8 A and s8 B it keeps DQ -> Add -> Q in float,
// and octet computes those float steps on the 8-bit tensors.
TEST(QLinearBinaryTest, RewriteKeepsFloatStepsForMixedTypes) {
  Graph g = AddGroup(DType::kInt8);
  QdqReport report;
  FuseQdqBinary(g, report, FindOrtUint8Values(g));
  EXPECT_EQ(report.groups, 1);
  EXPECT_EQ(report.claimed, 1);
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].domain, kOctetDomain);
  EXPECT_EQ(g.nodes[0].op_type, kQdqAddOp);
  EXPECT_EQ(g.nodes[0].GetString("arithmetic", ""), "float");
}

// x (s8) -> Q -> q -> DQ -> Add: ORT moves q to uint8 only while the DQ is q's one
// consumer and that DQ has one consumer (EnsureUniqueDQForNodeUnit copies it otherwise).
TEST(QLinearBinaryTest, OrtUint8ValuesNeedASingleEdge) {
  for (const int dq_consumers : {1, 2}) {
    test::GraphBuilder b;
    Graph& g = b.g;
    g.inputs.push_back(b.V("x"));
    g.values[b.V("x")].dtype = DType::kFloat32;
    g.SetInitializer(b.V("s"), int_test::Scalar(0.05f));
    g.SetInitializer(b.V("z"), ZeroPoints(DType::kInt8, {}, {-3}));
    b.Add("QuantizeLinear", {"x", "s", "z"}, "q");
    b.Add("DequantizeLinear", {"q", "s", "z"}, "d");
    b.Add("Relu", {"d"}, "r0");
    g.outputs.push_back(b.V("r0"));
    if (dq_consumers == 2) {
      b.Add("Relu", {"d"}, "r1");
      g.outputs.push_back(b.V("r1"));
    }
    const std::vector<bool> moved = FindOrtUint8Values(g);
    EXPECT_EQ(moved[b.V("q")], dq_consumers == 1) << dq_consumers;
    EXPECT_FALSE(moved[b.V("d")]);
  }
}

}  // namespace
}  // namespace octet
