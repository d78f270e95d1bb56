#include "rewrite/nbits_siblings.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "graph/octet_ops.h"
#include "graph_builder.h"
#include "ops/evaluate.h"
#include "rewrite/rewrite.h"

namespace octet {
namespace {

using test::GraphBuilder;
using test::NodeNames;

constexpr int64_t kK = 80, kBlock = 32, kBlocks = 3;

// A MatMulNBits of `x` with N columns: random codes, scales and (unless `zero` is false)
// uint8 zero points; a non-empty `bias` names its bias input.
Node& AddProduct(GraphBuilder& b, const std::string& name, const std::string& x, int64_t N,
                 int64_t level, bool zero, const std::string& bias = "") {
  std::mt19937 rng(static_cast<uint32_t>(N * 131 + level));
  auto random_bytes = [&](const std::string& value, Shape shape) {
    Tensor t(DType::kUInt8, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(rng());
    b.g.SetInitializer(b.V(value), std::move(t));
  };
  random_bytes(name + "_b", {N, kBlocks, kBlock / 2});
  Tensor scales(DType::kFloat32, {N * kBlocks});
  for (int64_t i = 0; i < scales.numel(); ++i)
    scales.data<float>()[i] = 0.01f + 0.001f * static_cast<float>(rng() % 17);
  b.g.SetInitializer(b.V(name + "_s"), std::move(scales));
  std::vector<std::string> in = {x, name + "_b", name + "_s"};
  if (zero) random_bytes(name + "_z", {N * ((kBlocks + 1) / 2)});
  in.push_back(zero ? name + "_z" : "");
  if (!bias.empty()) in.insert(in.end(), {"", bias});
  Node& n = b.Add("MatMulNBits", in, name + "_y", name);
  n.domain = kMsDomain;
  n.opset = 1;
  n.attributes["K"] = Attribute::Int(kK);
  n.attributes["N"] = Attribute::Int(N);
  n.attributes["bits"] = Attribute::Int(4);
  n.attributes["block_size"] = Attribute::Int(kBlock);
  n.attributes["accuracy_level"] = Attribute::Int(level);
  return n;
}

// q, k and v of x (level 4; v without zero points) merge; a level-1 product of x, a
// product of another input and one with a bias stay as they are.
GraphBuilder Projections() {
  GraphBuilder b;
  b.g.inputs = {b.V("x"), b.V("other")};
  AddProduct(b, "q", "x", 48, 4, true);
  AddProduct(b, "level1", "x", 16, 1, true);
  AddProduct(b, "k", "x", 16, 4, true);
  AddProduct(b, "of_other", "other", 16, 4, true);
  b.Init<float>("bias", {16}, 0.5f);
  AddProduct(b, "with_bias", "x", 16, 4, true, "bias");
  AddProduct(b, "v", "x", 5, 4, false);
  for (const char* out : {"q_y", "level1_y", "k_y", "of_other_y", "with_bias_y", "v_y"})
    b.g.outputs.push_back(b.V(out));
  return b;
}

TEST(NBitsSiblings, ProductsOfOneInputAndArithmeticMerge) {
  GraphBuilder b = Projections();
  ApplyRewrites(b.g, EvaluateNode, RewriteOptions{true, false, false, true});
  ASSERT_EQ(NodeNames(b.g), (std::vector<std::string>{"q+k+v", "level1", "of_other", "with_bias"}));
  const Node& merged = b.g.nodes[0];
  EXPECT_EQ(merged.domain, kOctetDomain);
  EXPECT_EQ(merged.op_type, kNBitsSiblingsOp);
  EXPECT_EQ(merged.GetString("of", ""), "com.microsoft.MatMulNBits");
  EXPECT_EQ(merged.GetInts("n"), (std::vector<int64_t>{48, 16, 5}));
  EXPECT_EQ(merged.GetInt("accuracy_level", 0), 4);
  EXPECT_EQ(merged.outputs, (std::vector<int>{b.V("q_y"), b.V("k_y"), b.V("v_y")}));
  EXPECT_EQ(merged.inputs,
            (std::vector<int>{b.V("x"), b.V("q_b"), b.V("q_s"), b.V("q_z"), b.V("k_b"), b.V("k_s"),
                              b.V("k_z"), b.V("v_b"), b.V("v_s"), -1}));
  EXPECT_EQ(b.g.values[b.V("v_y")].producer, 0);
}

TEST(NBitsSiblings, OffUnlessTheSessionAsks) {
  for (const RewriteOptions& options :
       {RewriteOptions{true, false, false, false}, RewriteOptions{false, false, false, true}}) {
    GraphBuilder b = Projections();
    const size_t nodes = b.g.nodes.size();
    ApplyRewrites(b.g, EvaluateNode, options);
    EXPECT_EQ(b.g.nodes.size(), nodes);
  }
}

// The merged node's outputs are the products' own bits, in both arithmetics, at one row
// and in the float arithmetic's GEMM form (9 rows).
TEST(NBitsSiblings, OutputsKeepEveryProductsBits) {
  for (int64_t level : {1, 4}) {
    GraphBuilder b;
    b.g.inputs = {b.V("x")};
    std::vector<Node> products = {AddProduct(b, "q", "x", 48, level, true),
                                  AddProduct(b, "k", "x", 16, level, true),
                                  AddProduct(b, "v", "x", 5, level, false)};
    QdqReport report;
    MergeNBitsSiblings(b.g, report);
    ASSERT_EQ(b.g.nodes.size(), 1u);
    auto inputs_of = [&](const Node& n, const Tensor& x) {
      std::vector<const Tensor*> in;
      for (int v : n.inputs) in.push_back(v < 0 ? nullptr : b.g.values[v].initializer);
      in[0] = &x;
      return in;
    };
    for (int64_t M : {1, 9}) {
      std::mt19937 rng(static_cast<uint32_t>(M));
      std::uniform_real_distribution<float> unit(-2.f, 2.f);
      Tensor x(DType::kFloat32, {M, kK});
      for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = unit(rng);
      const std::vector<Tensor> merged = EvaluateNode(b.g.nodes[0], inputs_of(b.g.nodes[0], x));
      ASSERT_EQ(merged.size(), products.size());
      for (size_t i = 0; i < products.size(); ++i) {
        const std::vector<Tensor> alone = EvaluateNode(products[i], inputs_of(products[i], x));
        ASSERT_EQ(merged[i].shape(), alone[0].shape()) << i;
        EXPECT_EQ(std::memcmp(merged[i].raw(), alone[0].raw(), alone[0].numel() * sizeof(float)), 0)
            << "level " << level << " M " << M << " product " << i;
      }
    }
  }
}

}  // namespace
}  // namespace octet
