#include "rewrite/sibling_products.h"

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

// q, k and v of x (level 4; v without zero points, its 5 columns not a multiple of
// kSiblingColumnsAlign, so it goes last) merge; a level-1 product of x, a product of another
// input, one with a bias and a second product of x whose columns are unaligned stay.
GraphBuilder Projections() {
  GraphBuilder b;
  b.g.inputs = {b.V("x"), b.V("other")};
  AddProduct(b, "q", "x", 128, 4, true);
  AddProduct(b, "v", "x", 5, 4, false);
  AddProduct(b, "level1", "x", 64, 1, true);
  AddProduct(b, "k", "x", 64, 4, true);
  AddProduct(b, "of_other", "other", 64, 4, true);
  b.Init<float>("bias", {64}, 0.5f);
  AddProduct(b, "with_bias", "x", 64, 4, true, "bias");
  AddProduct(b, "unaligned", "x", 24, 4, true);
  for (const char* out :
       {"q_y", "v_y", "level1_y", "k_y", "of_other_y", "with_bias_y", "unaligned_y"})
    b.g.outputs.push_back(b.V(out));
  return b;
}

TEST(NBitsSiblings, ProductsOfOneInputAndArithmeticMerge) {
  GraphBuilder b = Projections();
  ApplyRewrites(b.g, EvaluateNode, RewriteOptions{true, false, false, true});
  ASSERT_EQ(NodeNames(b.g),
            (std::vector<std::string>{"q+k+v", "level1", "of_other", "with_bias", "unaligned"}));
  const Node& merged = b.g.nodes[0];
  EXPECT_EQ(merged.domain, kOctetDomain);
  EXPECT_EQ(merged.op_type, kNBitsSiblingsOp);
  EXPECT_EQ(merged.GetString("of", ""), "com.microsoft.MatMulNBits");
  EXPECT_EQ(merged.GetInts("n"), (std::vector<int64_t>{128, 64, 5}));
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

// The merged node (the graph's only one) on x against each product alone.
void ExpectEveryProductsBits(const Graph& g, const std::vector<Node>& products, const Tensor& x,
                             const std::string& what) {
  ASSERT_EQ(g.nodes.size(), 1u) << what;
  auto inputs_of = [&](const Node& n) {
    std::vector<const Tensor*> in;
    for (int v : n.inputs) in.push_back(v < 0 ? nullptr : g.values[v].initializer);
    in[0] = &x;
    return in;
  };
  const std::vector<Tensor> merged = EvaluateNode(g.nodes[0], inputs_of(g.nodes[0]));
  ASSERT_EQ(merged.size(), products.size()) << what;
  for (size_t i = 0; i < products.size(); ++i) {
    const std::vector<Tensor> alone = EvaluateNode(products[i], inputs_of(products[i]));
    ASSERT_EQ(merged[i].shape(), alone[0].shape()) << what << ", product " << i;
    EXPECT_EQ(std::memcmp(merged[i].raw(), alone[0].raw(), alone[0].nbytes()), 0)
        << what << ", product " << i;
  }
}

// Both arithmetics, at one row and in the float arithmetic's GEMM form (9 rows).
TEST(NBitsSiblings, OutputsKeepEveryProductsBits) {
  for (int64_t level : {1, 4}) {
    GraphBuilder b;
    b.g.inputs = {b.V("x")};
    std::vector<Node> products = {AddProduct(b, "q", "x", 128, level, true),
                                  AddProduct(b, "k", "x", 64, level, true),
                                  AddProduct(b, "v", "x", 5, level, false)};
    QdqReport report;
    MergeSiblingProducts(b.g, report);
    for (int64_t M : {1, 9}) {
      std::mt19937 rng(static_cast<uint32_t>(M));
      std::uniform_real_distribution<float> unit(-2.f, 2.f);
      Tensor x(DType::kFloat32, {M, kK});
      for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = unit(rng);
      ExpectEveryProductsBits(b.g, products, x,
                              "level " + std::to_string(level) + " M " + std::to_string(M));
    }
  }
}

// A QLinearMatMulFused of int8 `x` (scale "xs", zero point "xz") with an int8 weight of
// N columns ([N, K] when trans_b): per-column or per-tensor w_scale, an optional
// per-tensor zero point and int32 bias (`options` holds 'c', 't', 'z', 'b'); "ys"
// names a y_scale (a quantized output).
Node& AddFused(GraphBuilder& b, const std::string& name, int64_t N, const std::string& options,
               const std::string& y_scale = "", const std::string& x_scale = "xs") {
  const bool per_column = options.find('c') != std::string::npos;
  const bool trans_b = options.find('t') != std::string::npos;
  std::mt19937 rng(static_cast<uint32_t>(N * 7 + options.size()));
  Tensor w(DType::kInt8, trans_b ? Shape{N, kK} : Shape{kK, N});
  for (int64_t i = 0; i < w.numel(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>(rng());
  b.g.SetInitializer(b.V(name + "_w"), std::move(w));
  Tensor scale(DType::kFloat32, per_column ? Shape{N} : Shape{});
  for (int64_t i = 0; i < scale.numel(); ++i)
    scale.data<float>()[i] = 0.002f + 0.0001f * static_cast<float>(rng() % 29);
  b.g.SetInitializer(b.V(name + "_ws"), std::move(scale));
  std::vector<std::string> in(kFusedInputCount);
  in[kFusedX] = "x";
  in[kFusedXScale] = x_scale;
  in[kFusedXZero] = "xz";
  in[kFusedW] = name + "_w";
  in[kFusedWScale] = name + "_ws";
  if (options.find('z') != std::string::npos) {
    b.Init<int8_t>(name + "_wz", {}, 3);
    in[kFusedWZero] = name + "_wz";
  }
  if (options.find('b') != std::string::npos) {
    b.Init<int32_t>(name + "_bias", {}, -1000);
    in[kFusedBias] = name + "_bias";
  }
  in[kFusedYScale] = y_scale;
  Node& n = b.Add(kFusedMatMulOp, in, name + "_y", name);
  n.domain = kOctetDomain;
  n.opset = 1;
  n.attributes["trans_b"] = Attribute::Int(trans_b);
  return n;
}

// q (per column, with a bias), k (transposed, a weight zero point), a product whose x
// scale is a copy of the same value, and v merge; a product with a quantized output and
// one whose x scale is another value stay.
TEST(FusedMatMulSiblings, FloatProductsOfOneQuantizedInputMerge) {
  GraphBuilder b;
  b.g.inputs = {b.V("x")};
  b.Init<float>("xs", {}, 0.05f);
  b.Init<float>("copy_xs", {}, 0.05f);
  b.Init<float>("other_xs", {}, 0.06f);
  b.Init<int8_t>("xz", {}, -7);
  b.Init<float>("ys", {}, 0.1f);
  std::vector<Node> products = {AddFused(b, "q", 128, "cb"), AddFused(b, "k", 64, "tz")};
  AddFused(b, "quantized", 64, "c", "ys");
  AddFused(b, "other_scale", 64, "c", "", "other_xs");
  products.push_back(AddFused(b, "copy_scale", 64, "c", "", "copy_xs"));
  products.push_back(AddFused(b, "v", 5, ""));
  for (const char* out : {"q_y", "k_y", "quantized_y", "other_scale_y", "copy_scale_y", "v_y"})
    b.g.outputs.push_back(b.V(out));
  ApplyRewrites(b.g, EvaluateNode, RewriteOptions{true, false, false, true});
  ASSERT_EQ(NodeNames(b.g),
            (std::vector<std::string>{"q+k+copy_scale+v", "quantized", "other_scale"}));
  const Node& merged = b.g.nodes[0];
  EXPECT_EQ(merged.op_type, kFusedMatMulSiblingsOp);
  EXPECT_EQ(merged.GetInts("trans_b"), (std::vector<int64_t>{0, 1, 0, 0}));
  EXPECT_EQ(
      merged.inputs,
      (std::vector<int>{b.V("x"), b.V("xs"), b.V("xz"), b.V("q_w"), b.V("q_ws"), -1, b.V("q_bias"),
                        b.V("k_w"), b.V("k_ws"), b.V("k_wz"), -1, b.V("copy_scale_w"),
                        b.V("copy_scale_ws"), -1, -1, b.V("v_w"), b.V("v_ws"), -1, -1}));
  EXPECT_EQ(merged.outputs,
            (std::vector<int>{b.V("q_y"), b.V("k_y"), b.V("copy_scale_y"), b.V("v_y")}));

  // Bits: the merged node alone in a graph, one row and a GEMM's 9.
  Graph one = b.g;
  one.nodes.resize(1);
  for (int64_t M : {1, 9}) {
    std::mt19937 rng(static_cast<uint32_t>(M));
    Tensor x(DType::kInt8, {M, kK});
    for (int64_t i = 0; i < x.numel(); ++i) x.data<int8_t>()[i] = static_cast<int8_t>(rng());
    ExpectEveryProductsBits(one, products, x, "M " + std::to_string(M));
  }
}

}  // namespace
}  // namespace octet
