#include "rewrite/constant_fold.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "graph_builder.h"
#include "ops/evaluate.h"
#include "rewrite/rewrite.h"

namespace octet {
namespace {

using test::GraphBuilder;
using test::NodeNames;

// x + (DequantizeLinear(gamma) * 2), a LayerNormalization's weight as a QDQ model
// stores it, beside four constant nodes that must stay: one whose input is too large,
// one that writes a graph output, one the kernel refuses (an int8 value with a uint8
// zero point) and one whose output would be too large.
GraphBuilder ConstantsBesideInputs() {
  GraphBuilder b;
  b.g.inputs.push_back(b.V("x"));
  b.Init<int8_t>("gamma", {4}, -3);  // -3, -2, -1, 0
  b.Init<float>("s", {}, 0.5f);
  b.Init<int8_t>("z", {}, 1);
  b.Init<uint8_t>("z_u8", {}, 1);
  b.Init<float>("two", {}, 2.f);
  b.Init<int8_t>("large", {static_cast<int64_t>(kFoldedBytes) + 1}, 0);
  b.Add("DequantizeLinear", {"gamma", "s", "z"}, "gamma_f", "dq_gamma");
  b.Add("Mul", {"gamma_f", "two"}, "gamma_2", "mul_two");
  b.Add("Add", {"x", "gamma_2"}, "y", "add_x");
  b.Add("DequantizeLinear", {"large", "s", "z"}, "large_f", "dq_large");
  b.Add("ReduceMax", {"large_f"}, "large_max", "reduce_large");
  b.Add("DequantizeLinear", {"gamma", "s", "z"}, "gamma_out", "dq_output");
  b.Add("DequantizeLinear", {"gamma", "s", "z_u8"}, "refused", "dq_refused");
  b.Add("Add", {"x", "refused"}, "y2", "add_refused");
  // Made from a small input, but 400 KB: stays.
  b.Init<int64_t>("large_shape", {1}, 100000);
  b.Add("ConstantOfShape", {"large_shape"}, "zeros", "large_zeros");
  b.Add("ReduceMax", {"zeros"}, "zeros_max", "reduce_zeros");
  for (const char* out : {"y", "large_max", "gamma_out", "y2", "zeros_max"})
    b.g.outputs.push_back(b.V(out));
  return b;
}

TEST(ConstantFold, SmallConstantChainsBecomeInitializers) {
  GraphBuilder b = ConstantsBesideInputs();
  ApplyRewrites(b.g, EvaluateNode, RewriteOptions{true, false, true});
  EXPECT_EQ(NodeNames(b.g),
            (std::vector<std::string>{"add_x", "dq_large", "reduce_large", "dq_output",
                                      "dq_refused", "add_refused", "large_zeros", "reduce_zeros"}));
  const Tensor* folded = b.g.values[b.V("gamma_2")].initializer;
  ASSERT_NE(folded, nullptr);
  ASSERT_EQ(folded->dtype(), DType::kFloat32);
  ASSERT_EQ(folded->shape(), Shape{4});
  // (q - 1) * 0.5 * 2 for q = -3..0.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(folded->data<float>()[i], static_cast<float>(i - 4)) << i;
  EXPECT_EQ(b.g.values[b.V("y")].producer, 0);
}

TEST(ConstantFold, OffUnlessTheSessionAsks) {
  GraphBuilder b = ConstantsBesideInputs();
  const size_t nodes = b.g.nodes.size();
  ApplyRewrites(b.g, EvaluateNode, RewriteOptions{true, false, false});
  EXPECT_EQ(b.g.nodes.size(), nodes);
  GraphBuilder off = ConstantsBesideInputs();
  ApplyRewrites(off.g, EvaluateNode, RewriteOptions{false, false, true});
  EXPECT_EQ(off.g.nodes.size(), nodes);
}

}  // namespace
}  // namespace octet
