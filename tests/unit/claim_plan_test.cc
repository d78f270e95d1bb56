// runtime/introspect.h PlanClaims (what the ORT plugin EP claims) and the forward route's
// octet.Int8DynamicMatMul against its definition (graph/octet_ops.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "graph_builder.h"
#include "runtime/introspect.h"
#include "runtime/session.h"

namespace octet {
namespace {

using test::GraphBuilder;

void Typed(GraphBuilder& b, const std::string& name, DType t, Shape shape) {
  Value& v = b.g.values[b.V(name)];
  v.dtype = t;
  v.shape = std::vector<Dim>();
  for (int64_t d : shape) v.shape->push_back(Dim{d, ""});
}

// DequantizeLinear(x), DequantizeLinear(W) -> MatMul -> QuantizeLinear: one int8 group.
GraphBuilder QdqGroup() {
  GraphBuilder b;
  Typed(b, "x", DType::kInt8, {4, 8});
  b.g.inputs = {b.V("x")};
  b.Init<float>("sx", {}, 0.5f);
  b.Init<int8_t>("zx", {}, 0);
  b.Init<int8_t>("w", {8, 6}, -3);
  b.Init<float>("sw", {}, 0.25f);
  b.Init<float>("sy", {}, 2.f);
  b.Init<int8_t>("zy", {}, 0);
  b.Add("DequantizeLinear", {"x", "sx", "zx"}, "xd");
  b.Add("DequantizeLinear", {"w", "sw"}, "wd");
  b.Add("MatMul", {"xd", "wd"}, "p");
  b.Add("QuantizeLinear", {"p", "sy", "zy"}, "y");
  b.g.outputs = {b.V("y")};
  return b;
}

TEST(PlanClaims, AQdqGroupIsOnePieceOfFourNodes) {
  GraphBuilder b = QdqGroup();
  const ClaimPlan plan = PlanClaims(b.g, {});
  ASSERT_EQ(plan.pieces.size(), 1u);
  EXPECT_EQ(plan.pieces[0], (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(plan.claimed_nodes, 4);
  EXPECT_EQ(plan.int8_nodes, 1);
  EXPECT_NE(plan.report.find("qdq_groups=1 claimed=1"), std::string::npos) << plan.report;
}

TEST(PlanClaims, WithoutRewritesTheGroupIsFloatAndNotClaimed) {
  GraphBuilder b = QdqGroup();
  ClaimOptions options;
  options.session.rewrites = false;
  const ClaimPlan plan = PlanClaims(b.g, options);
  EXPECT_TRUE(plan.pieces.empty());
  EXPECT_EQ(plan.unclaimed_why[2], "float_only");
}

TEST(PlanClaims, ExcludedNodesAreNeverClaimed) {
  GraphBuilder b = QdqGroup();
  ClaimOptions options;
  options.excluded = {false, false, false, true};  // the QuantizeLinear
  const ClaimPlan plan = PlanClaims(b.g, options);
  EXPECT_EQ(plan.unclaimed_why[3], "excluded");
  for (const auto& piece : plan.pieces)
    for (int n : piece) EXPECT_NE(n, 3);
}

// c = MatMulInteger(a, W1); d = Foo(c) (octet has no kernel); e = MatMulInteger(d, W2);
// f = Add(c, e). The int8 nodes and the Add are connected, but the path through Foo leaves
// them: a fused node holding all of them would need Foo inside. Two pieces.
TEST(PlanClaims, PiecesAreCutWhereAPathLeavesThem) {
  GraphBuilder b;
  Typed(b, "a", DType::kUInt8, {4, 8});
  b.g.inputs = {b.V("a")};
  b.Init<uint8_t>("w1", {8, 8}, 3);
  b.Init<uint8_t>("w2", {8, 8}, 5);
  Typed(b, "c", DType::kInt32, {4, 8});
  Typed(b, "d", DType::kUInt8, {4, 8});
  Typed(b, "e", DType::kInt32, {4, 8});
  Typed(b, "f", DType::kInt32, {4, 8});
  // Node 0 reads only a constant (like a weight's DequantizeLinear): it joins the piece of
  // its consumer, node 3, instead of staying a piece of its own.
  b.Add("Identity", {"w2"}, "w2i");
  b.Add("MatMulInteger", {"a", "w1"}, "c");
  Node& foo = b.Add("Foo", {"c"}, "d");
  foo.domain = "example.custom";
  b.Add("MatMulInteger", {"d", "w2i"}, "e");
  b.Add("Add", {"c", "e"}, "f");
  b.g.outputs = {b.V("f")};
  const ClaimPlan plan = PlanClaims(b.g, {});
  ASSERT_EQ(plan.pieces.size(), 2u);
  EXPECT_EQ(plan.pieces[0], (std::vector<int>{0, 3, 4}));
  EXPECT_EQ(plan.pieces[1], (std::vector<int>{1}));
  EXPECT_EQ(plan.unclaimed_why[2].rfind("no_kernel", 0), 0u) << plan.unclaimed_why[2];
  EXPECT_EQ(plan.int8_nodes, 2);
}

TEST(PlanClaims, RegionsOffLeavesFloatNodes) {
  GraphBuilder b = QdqGroup();
  b.Init<float>("sy2", {}, 2.f);
  b.Add("DequantizeLinear", {"y", "sy2", "zy"}, "yd");
  b.Add("Softmax", {"yd"}, "r");  // not pointwise: no lookup table takes it
  b.g.values[b.V("r")].dtype = DType::kFloat32;
  b.g.outputs = {b.V("y"), b.V("r")};
  ClaimOptions options;
  EXPECT_EQ(PlanClaims(b.g, options).claimed_nodes, 6);
  options.regions = false;
  const ClaimPlan plan = PlanClaims(b.g, options);
  EXPECT_EQ(plan.claimed_nodes, 5);
  EXPECT_EQ(plan.unclaimed_why[5], "not_int8");
}

// A session of g on the forward route; report receives its rewrite report.
std::unique_ptr<InferenceSession> ForwardRouteSession(const Graph& g, std::string& report) {
  SessionOptions options;
  options.float_matmul = FloatMatMul::kInt8;
  options.rewrite_report = [&report](const std::string& r) { report = r; };
  return InferenceSession::FromGraph(g, options);
}

// The forward route: y = (float(sum x_q * w_q) * s_row) * s_col with symmetric amax/127
// scales, computed here in double-free float steps from the definition.
TEST(ForwardRoute, Int8DynamicMatMulFollowsItsDefinition) {
  const int64_t M = 5, K = 37, N = 11;
  GraphBuilder b;
  Typed(b, "x", DType::kFloat32, {M, K});
  b.g.inputs = {b.V("x")};
  Tensor w(DType::kFloat32, {K, N});
  for (int64_t i = 0; i < K * N; ++i) w.data<float>()[i] = std::sin(0.37f * i) * (1 + i % 5);
  b.g.SetInitializer(b.V("w"), w);
  b.Add("MatMul", {"x", "w"}, "y");
  b.g.values[b.V("y")].dtype = DType::kFloat32;
  b.g.outputs = {b.V("y")};
  std::string report;
  auto session = ForwardRouteSession(b.g, report);
  Tensor x(DType::kFloat32, {M, K});
  for (int64_t i = 0; i < M * K; ++i) x.data<float>()[i] = std::cos(0.11f * i) * (i % 3 - 1.f);
  x.data<float>()[K] = 0;                                          // row 1 keeps some entries
  for (int64_t k = 0; k < K; ++k) x.data<float>()[2 * K + k] = 0;  // row 2 all zero: scale 0
  const Tensor y = session->Run({{"x", x}})[0];

  std::vector<float> s_col(N);
  std::vector<int> w_q(K * N);
  for (int64_t n = 0; n < N; ++n) {
    float amax = 0;
    for (int64_t k = 0; k < K; ++k) amax = std::fmax(amax, std::fabs(w.data<float>()[k * N + n]));
    s_col[n] = amax / 127.f;
    for (int64_t k = 0; k < K; ++k)
      w_q[k * N + n] = static_cast<int>(std::nearbyint(w.data<float>()[k * N + n] / s_col[n]));
  }
  for (int64_t m = 0; m < M; ++m) {
    float amax = 0;
    for (int64_t k = 0; k < K; ++k) amax = std::fmax(amax, std::fabs(x.data<float>()[m * K + k]));
    const float s = amax / 127.f;
    for (int64_t n = 0; n < N; ++n) {
      int64_t acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        const int q = s == 0 ? 0 : static_cast<int>(std::nearbyint(x.data<float>()[m * K + k] / s));
        acc += static_cast<int64_t>(q) * w_q[k * N + n];
      }
      const float expected = (static_cast<float>(acc) * s) * s_col[n];
      ASSERT_EQ(y.data<float>()[m * N + n], expected) << "m=" << m << " n=" << n;
    }
  }
  EXPECT_NE(report.find("qdq_groups=0"), std::string::npos) << report;
}

// An activation whose type the model does not record (no value_info, as most exporters
// write intermediates) is float32 by MatMul's type constraint when the weight is: the
// route takes it, with the bits of the same graph with the type recorded.
TEST(ForwardRoute, TakesActivationsOfUnrecordedType) {
  const int64_t M = 3, K = 24, N = 7;
  Tensor w(DType::kFloat32, {K, N});
  for (int64_t i = 0; i < K * N; ++i) w.data<float>()[i] = std::sin(0.29f * i);
  Tensor x(DType::kFloat32, {M, K});
  for (int64_t i = 0; i < M * K; ++i) x.data<float>()[i] = std::cos(0.13f * i);
  std::vector<Tensor> outputs;
  for (bool recorded : {true, false}) {
    GraphBuilder b;
    Typed(b, "x", DType::kFloat32, {M, K});
    b.g.inputs = {b.V("x")};
    b.Add("Relu", {"x"}, "h");
    if (recorded) b.g.values[b.V("h")].dtype = DType::kFloat32;
    b.g.SetInitializer(b.V("w"), w);
    b.Add("MatMul", {"h", "w"}, "y");
    b.g.values[b.V("y")].dtype = DType::kFloat32;
    b.g.outputs = {b.V("y")};
    std::string report;
    auto session = ForwardRouteSession(b.g, report);
    EXPECT_EQ(report.find("refused"), std::string::npos) << report;
    outputs.push_back(session->Run({{"x", x}})[0]);
    // The float product of the same graph, to show the route ran instead.
    if (!recorded) outputs.push_back(InferenceSession::FromGraph(b.g, {})->Run({{"x", x}})[0]);
  }
  ASSERT_EQ(outputs[0].nbytes(), outputs[1].nbytes());
  EXPECT_EQ(std::memcmp(outputs[0].raw(), outputs[1].raw(), outputs[0].nbytes()), 0);
  EXPECT_NE(std::memcmp(outputs[1].raw(), outputs[2].raw(), outputs[1].nbytes()), 0);
}

}  // namespace
}  // namespace octet
