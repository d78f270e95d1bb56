// The QDQ MatMul/Gemm fold: which hand-built groups are claimed or refused and
// why, the shape of the rewritten graph, and the fused kernel's numbers against
// a naive int64 reference with ONNX Runtime's requantization formula.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "graph/octet_ops.h"
#include "ops/registry.h"
#include "rewrite/qdq_matmul.h"

namespace octet {
namespace {

template <typename T>
Tensor MakeTensor(Shape shape, const std::vector<T>& values) {
  Tensor t(DTypeOf<T>::value, std::move(shape));
  EXPECT_EQ(static_cast<size_t>(t.numel()), values.size());
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}

template <typename T>
std::vector<T> RandomValues(std::mt19937& rng, int64_t count) {
  std::uniform_int_distribution<int> dist(std::numeric_limits<T>::min(),
                                          std::numeric_limits<T>::max());
  std::vector<T> v(static_cast<size_t>(count));
  for (T& e : v) e = static_cast<T>(dist(rng));
  return v;
}

// Builds graphs by value name through Graph's public members only.
class GraphBuilder {
 public:
  int Value(const std::string& name, DType dtype = DType::kUndefined,
            std::optional<std::vector<int64_t>> shape = std::nullopt) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    octet::Value v;
    v.name = name;
    v.dtype = dtype;
    if (shape) {
      std::vector<Dim> dims;
      for (int64_t d : *shape) dims.push_back(Dim{d, ""});
      v.shape = dims;
    }
    g.values.push_back(v);
    return ids_[name] = static_cast<int>(g.values.size()) - 1;
  }
  void Input(const std::string& name, DType dtype, std::vector<int64_t> shape) {
    g.inputs.push_back(Value(name, dtype, shape));
  }
  void Output(const std::string& name) { g.outputs.push_back(Value(name)); }
  void Init(const std::string& name, Tensor t) {
    const int id = Value(name, t.dtype());
    g.initializers[id] = std::move(t);
    g.values[id].initializer = &g.initializers[id];
  }
  Node& Add(const std::string& op, std::vector<std::string> inputs,
            std::vector<std::string> outputs, std::string domain = kOnnxDomain) {
    Node n;
    n.name = op + std::to_string(g.nodes.size());
    n.op_type = op;
    n.domain = domain;
    n.opset = 21;
    for (const auto& i : inputs) n.inputs.push_back(i.empty() ? -1 : Value(i));
    for (const auto& o : outputs) {
      n.outputs.push_back(Value(o));
      g.values[Value(o)].producer = static_cast<int>(g.nodes.size());
    }
    g.nodes.push_back(n);
    return g.nodes.back();
  }
  Graph g;

 private:
  std::map<std::string, int> ids_;
};

void SetInt(Node& n, const std::string& name, int64_t value) {
  Attribute a;
  a.kind = Attribute::Kind::kInt;
  a.i = value;
  n.attributes[name] = a;
}
void SetFloat(Node& n, const std::string& name, float value) {
  Attribute a;
  a.kind = Attribute::Kind::kFloat;
  a.f = value;
  n.attributes[name] = a;
}

struct GroupSpec {
  int64_t m = 4, k = 8, n = 6;
  std::vector<float> x_scale{0.02f}, w_scale{0.01f};
  int64_t x_axis = 1, w_axis = 1;  // DequantizeLinear's axis attributes
  bool quantize = true;
  bool gemm = false;
  std::string domain = kOnnxDomain;
};

// x:uint8 [m,k] -> DQ -> MatMul(., DQ(W int8 [k,n])) -> Q -> yq
GraphBuilder BuildGroup(const GroupSpec& s) {
  GraphBuilder b;
  b.Input("x", DType::kUInt8, {s.m, s.k});
  const int64_t xs = static_cast<int64_t>(s.x_scale.size()),
                ws = static_cast<int64_t>(s.w_scale.size());
  b.Init("sx", MakeTensor<float>(xs == 1 ? Shape{} : Shape{xs}, s.x_scale));
  b.Init("zx", MakeTensor<uint8_t>(xs == 1 ? Shape{} : Shape{xs}, std::vector<uint8_t>(xs, 128)));
  b.Init("w", MakeTensor<int8_t>(s.gemm ? Shape{s.n, s.k} : Shape{s.k, s.n},
                                 std::vector<int8_t>(s.k * s.n, 3)));
  b.Init("sw", MakeTensor<float>(ws == 1 ? Shape{} : Shape{ws}, s.w_scale));
  SetInt(b.Add("DequantizeLinear", {"x", "sx", "zx"}, {"xd"}, s.domain), "axis", s.x_axis);
  SetInt(b.Add("DequantizeLinear", {"w", "sw"}, {"wd"}, s.domain), "axis", s.w_axis);
  if (s.gemm) {
    SetInt(b.Add("Gemm", {"xd", "wd"}, {"y"}), "transB", 1);
  } else {
    b.Add("MatMul", {"xd", "wd"}, {"y"});
  }
  if (s.quantize) {
    b.Init("sy", MakeTensor<float>({}, {0.1f}));
    b.Init("zy", MakeTensor<uint8_t>({}, {128}));
    b.Add("QuantizeLinear", {"y", "sy", "zy"}, {"yq"}, s.domain);
    b.Output("yq");
  } else {
    b.Output("y");
  }
  return b;
}

std::vector<std::string> Ops(const Graph& g) {
  std::vector<std::string> ops;
  for (const Node& n : g.nodes) ops.push_back(n.op_type);
  return ops;
}

using Ops_ = std::vector<std::string>;

TEST(QdqFusionTest, ClaimsPerTensorGroupAsOneNode) {
  GraphBuilder b = BuildGroup({});
  const QdqReport r = FuseQdqMatMul(b.g);
  EXPECT_EQ(r.groups, 1);
  EXPECT_EQ(r.claimed, 1);
  EXPECT_TRUE(r.refused.empty());
  ASSERT_EQ(Ops(b.g), Ops_{kFusedMatMulOp});
  const Node& f = b.g.nodes[0];
  EXPECT_EQ(f.domain, kOctetDomain);
  EXPECT_EQ(f.outputs, std::vector<int>{b.Value("yq")});
  EXPECT_EQ(f.inputs[kFusedX], b.Value("x"));
  EXPECT_EQ(f.inputs[kFusedW], b.Value("w"));
  EXPECT_EQ(f.inputs[kFusedWZero], -1);
  EXPECT_EQ(f.inputs[kFusedYScale], b.Value("sy"));
  EXPECT_EQ(b.g.values[b.Value("yq")].producer, 0);
  EXPECT_EQ(FormatQdqReport(r), "qdq_groups=1 claimed=1\n");
}

TEST(QdqFusionTest, ClaimsMicrosoftDomainAndPerAxisRowsAndColumns) {
  GroupSpec s;
  s.domain = kMsDomain;
  s.x_scale = {0.01f, 0.02f, 0.03f, 0.04f};  // along M (axis 0 of [4, 8])
  s.x_axis = 0;
  s.w_scale = std::vector<float>(6, 0.01f);  // along N (axis 1 of [8, 6])
  GraphBuilder b = BuildGroup(s);
  const QdqReport r = FuseQdqMatMul(b.g);
  EXPECT_EQ(r.claimed, 1);
  ASSERT_EQ(Ops(b.g), Ops_{kFusedMatMulOp});
  EXPECT_EQ(b.g.nodes[0].GetInt("x_axis", -1), 0);
}

TEST(QdqFusionTest, RefusesScaleAlongK) {
  for (bool on_weight : {true, false}) {
    GroupSpec s;
    if (on_weight) {
      s.w_scale = std::vector<float>(8, 0.01f);
      s.w_axis = 0;  // K of a [K, N] weight
    } else {
      s.x_scale = std::vector<float>(8, 0.01f);
      s.x_axis = -1;  // K of a [M, K] activation
    }
    GraphBuilder b = BuildGroup(s);
    const QdqReport r = FuseQdqMatMul(b.g);
    EXPECT_EQ(r.groups, 1);
    EXPECT_EQ(r.claimed, 0);
    EXPECT_EQ(Ops(b.g), (Ops_{"DequantizeLinear", "DequantizeLinear", "MatMul", "QuantizeLinear"}));
    EXPECT_EQ(FormatQdqReport(r),
              "qdq_refused why=scale_along_k op=MatMul count=1\nqdq_groups=1 claimed=0\n");
  }
}

// x -> DQ -> Gemm(transB=1, DQ(W), DQ(int32 bias, bias_scale)) -> Q
GraphBuilder BuildGemmWithBias(float bias_scale, float alpha) {
  GroupSpec s;
  s.gemm = true;
  GraphBuilder b = BuildGroup(s);
  b.Init("b", MakeTensor<int32_t>({6}, {1, 2, 3, 4, 5, 6}));
  b.Init("sb", MakeTensor<float>({}, {bias_scale}));
  // Insert the bias DQ before the Gemm so the node list stays topologically ordered.
  Node dq;
  dq.op_type = "DequantizeLinear";
  dq.domain = kOnnxDomain;
  dq.opset = 21;
  dq.inputs = {b.Value("b"), b.Value("sb")};
  dq.outputs = {b.Value("bd")};
  b.g.nodes.insert(b.g.nodes.begin() + 2, dq);
  b.g.nodes[3].inputs.push_back(b.Value("bd"));
  SetFloat(b.g.nodes[3], "alpha", alpha);
  for (size_t i = 0; i < b.g.nodes.size(); ++i)
    b.g.values[b.g.nodes[i].outputs[0]].producer = static_cast<int>(i);
  return b;
}

TEST(QdqFusionTest, GemmTransBWithInt32Bias) {
  const float bias_scale = 0.02f * 0.01f;  // x_scale * w_scale, as quantizers write it
  GraphBuilder b = BuildGemmWithBias(bias_scale, 1.f);
  ASSERT_EQ(Ops(b.g), (Ops_{"DequantizeLinear", "DequantizeLinear", "DequantizeLinear", "Gemm",
                            "QuantizeLinear"}));
  const QdqReport r = FuseQdqMatMul(b.g);
  EXPECT_EQ(r.claimed, 1);
  ASSERT_EQ(Ops(b.g), Ops_{kFusedMatMulOp});
  EXPECT_EQ(b.g.nodes[0].inputs[kFusedBias], b.Value("b"));
  EXPECT_EQ(b.g.nodes[0].GetInt("trans_b", 0), 1);

  GraphBuilder wrong_scale = BuildGemmWithBias(std::nextafter(bias_scale, 1.f), 1.f);
  EXPECT_EQ(FuseQdqMatMul(wrong_scale.g).refused.count({"bias_scale", "Gemm"}), 1u);
  EXPECT_EQ(wrong_scale.g.nodes.size(), 5u);
  GraphBuilder alpha = BuildGemmWithBias(bias_scale, 2.f);
  EXPECT_EQ(FuseQdqMatMul(alpha.g).refused.count({"gemm_alpha", "Gemm"}), 1u);
}

TEST(QdqFusionTest, FloatOutputWhenNoQuantizeFollows) {
  GroupSpec s;
  s.quantize = false;
  GraphBuilder b = BuildGroup(s);
  EXPECT_EQ(FuseQdqMatMul(b.g).claimed, 1);
  ASSERT_EQ(Ops(b.g), Ops_{kFusedMatMulOp});
  EXPECT_EQ(b.g.nodes[0].outputs, std::vector<int>{b.Value("y")});
  EXPECT_EQ(b.g.nodes[0].inputs[kFusedYScale], -1);
}

TEST(QdqFusionTest, ProductStillNeededKeepsQuantizeLinear) {
  // The float product is also a graph output: fold into the float form, keep Q.
  GraphBuilder b = BuildGroup({});
  b.Output("y");
  EXPECT_EQ(FuseQdqMatMul(b.g).claimed, 1);
  EXPECT_EQ(Ops(b.g), (Ops_{kFusedMatMulOp, "QuantizeLinear"}));
  EXPECT_EQ(b.g.nodes[0].outputs, std::vector<int>{b.Value("y")});
}

TEST(QdqFusionTest, PerAxisOutputScaleLeavesQuantizeUnfused) {
  GraphBuilder b = BuildGroup({});
  b.g.initializers[b.Value("sy")] = MakeTensor<float>({6}, std::vector<float>(6, 0.1f));
  b.g.values[b.Value("sy")].initializer = &b.g.initializers[b.Value("sy")];
  b.g.initializers[b.Value("zy")] = MakeTensor<uint8_t>({6}, std::vector<uint8_t>(6, 1));
  b.g.values[b.Value("zy")].initializer = &b.g.initializers[b.Value("zy")];
  const QdqReport r = FuseQdqMatMul(b.g);
  EXPECT_EQ(r.claimed, 1);
  EXPECT_EQ(r.refused.count({"q_per_axis", "QuantizeLinear"}), 1u);
  EXPECT_EQ(Ops(b.g), (Ops_{kFusedMatMulOp, "QuantizeLinear"}));
}

TEST(QdqFusionTest, DqWithAnotherConsumerStays) {
  GraphBuilder b = BuildGroup({});
  b.Add("Relu", {"xd"}, {"xr"});
  b.Output("xr");
  EXPECT_EQ(FuseQdqMatMul(b.g).claimed, 1);
  // The activation DQ keeps running for the Relu; the weight DQ is gone.
  EXPECT_EQ(Ops(b.g), (Ops_{"DequantizeLinear", kFusedMatMulOp, "Relu"}));
  EXPECT_EQ(b.g.nodes[0].inputs[0], b.Value("x"));
  EXPECT_EQ(b.g.values[b.Value("xd")].producer, 0);
}

// W as a graph input (computed at run time) instead of an initializer.
void MakeWeightAnInput(GraphBuilder& b) {
  const int w = b.Value("w");
  b.g.initializers.erase(w);
  b.g.values[w].initializer = nullptr;
  b.g.values[w].dtype = DType::kInt8;
  b.g.inputs.push_back(w);
}

TEST(QdqFusionTest, RuntimeWeightBecomesQLinearMatMulAndNonQdqGroupsAreNotCounted) {
  GraphBuilder b = BuildGroup({});
  MakeWeightAnInput(b);
  // QLinearMatMul needs W's zero point as an input.
  b.Init("zw", MakeTensor<int8_t>({}, {0}));
  b.g.nodes[1].inputs.push_back(b.Value("zw"));
  b.Add("MatMul", {"x2", "w2"}, {"y2"});  // plain float MatMul: not a group
  const QdqReport r = FuseQdqMatMul(b.g);
  EXPECT_EQ(r.groups, 1);
  EXPECT_EQ(r.claimed, 1);
  EXPECT_EQ(Ops(b.g), (Ops_{"QLinearMatMul", "MatMul"}));
  EXPECT_EQ(b.g.nodes[0].inputs[3], b.Value("w"));
}

TEST(QdqFusionTest, RuntimeWeightWithoutZeroPointOrQuantizedOutputIsRefused) {
  GraphBuilder omitted = BuildGroup({});
  MakeWeightAnInput(omitted);
  QdqReport r = FuseQdqMatMul(omitted.g);
  EXPECT_EQ(r.claimed, 0);
  EXPECT_EQ(r.refused.count({"runtime_weight_zero_point_omitted", "MatMul"}), 1u);

  GraphBuilder float_out = BuildGroup({.quantize = false});
  MakeWeightAnInput(float_out);
  float_out.Init("zw", MakeTensor<int8_t>({}, {0}));
  float_out.g.nodes[1].inputs.push_back(float_out.Value("zw"));
  r = FuseQdqMatMul(float_out.g);
  EXPECT_EQ(r.claimed, 0);
  EXPECT_EQ(r.refused.count({"runtime_weight_float_output", "MatMul"}), 1u);
}

// ---- The fused kernel's numbers against a naive int64 reference ----

struct KernelCase {
  bool x_signed, w_signed;
  int64_t batch, m, k, n;
  bool per_column, per_row, quantized, bias;
  int32_t zx, zw, zy;
};

template <typename X, typename W, typename Y>
void CheckKernel(const KernelCase& c, std::mt19937& rng) {
  const int64_t rows = c.batch * c.m;
  const std::vector<X> x = RandomValues<X>(rng, rows * c.k);
  const std::vector<W> w = RandomValues<W>(rng, c.k * c.n);
  std::uniform_real_distribution<float> scale(0.005f, 0.02f);
  std::vector<float> sx(c.per_row ? c.m : 1), sw(c.per_column ? c.n : 1);
  for (float& s : sx) s = scale(rng);
  for (float& s : sw) s = scale(rng);
  std::vector<X> zx(sx.size());
  for (size_t i = 0; i < zx.size(); ++i) zx[i] = static_cast<X>(c.zx + static_cast<int>(i));
  std::vector<W> zw(sw.size());
  for (size_t i = 0; i < zw.size(); ++i) zw[i] = static_cast<W>(c.zw - static_cast<int>(i));
  const float sy = 0.02f * 0.02f * 40.f * std::sqrt(static_cast<float>(c.k));
  std::vector<int32_t> bias(c.n);
  for (int64_t i = 0; i < c.n; ++i) bias[i] = static_cast<int32_t>(i * 977 % 4000) - 2000;

  std::vector<Tensor> tensors(kFusedInputCount);
  tensors[kFusedX] = MakeTensor<X>({c.batch, c.m, c.k}, x);
  tensors[kFusedXScale] = MakeTensor<float>({static_cast<int64_t>(sx.size())}, sx);
  tensors[kFusedXZero] = MakeTensor<X>({static_cast<int64_t>(zx.size())}, zx);
  tensors[kFusedW] = MakeTensor<W>({c.k, c.n}, w);
  tensors[kFusedWScale] = MakeTensor<float>({static_cast<int64_t>(sw.size())}, sw);
  tensors[kFusedWZero] = MakeTensor<W>({static_cast<int64_t>(zw.size())}, zw);
  if (c.quantized) {
    tensors[kFusedYScale] = MakeTensor<float>({}, {sy});
    tensors[kFusedYZero] = MakeTensor<Y>({}, {static_cast<Y>(c.zy)});
  }
  if (c.bias) tensors[kFusedBias] = MakeTensor<int32_t>({c.n}, bias);

  Node node;
  node.op_type = kFusedMatMulOp;
  node.domain = kOctetDomain;
  node.opset = 1;
  node.outputs = {0};
  SetInt(node, "x_axis", c.per_row ? 1 : -1);
  SetInt(node, "x_rank", 3);
  std::vector<DType> types;
  std::vector<const Tensor*> inputs;
  for (int i = 0; i < kFusedInputCount; ++i) {
    node.inputs.push_back(tensors[i].defined() ? i : -1);
    types.push_back(tensors[i].dtype());
    inputs.push_back(tensors[i].defined() ? &tensors[i] : nullptr);
  }
  const KernelDef& def = KernelRegistry::Global().Find(node, types);
  auto kernel = def.create(KernelInit{node, types, inputs, nullptr});
  KernelContext ctx(node, inputs, nullptr);
  kernel->Run(ctx);
  const Tensor& y = ctx.outputs()[0];
  ASSERT_EQ(y.shape(), (Shape{c.batch, c.m, c.n}));

  int mismatches = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t xi = c.per_row ? r % c.m : 0;
    for (int64_t col = 0; col < c.n; ++col) {
      const int64_t wi = c.per_column ? col : 0;
      int64_t acc = 0;
      for (int64_t k = 0; k < c.k; ++k)
        acc += (int64_t{x[r * c.k + k]} - zx[xi]) * (int64_t{w[k * c.n + col]} - zw[wi]);
      if (c.bias) acc += bias[col];
      if (c.quantized) {
        // ONNX Runtime: multiplier = (sx * sw) / sy in float32, float(acc) * multiplier,
        // clamp to the output range less zy, round half to even, add zy.
        const float mult = (sx[xi] * sw[wi]) / sy;
        const float lo = static_cast<float>(std::numeric_limits<Y>::min() - c.zy);
        const float hi = static_cast<float>(std::numeric_limits<Y>::max() - c.zy);
        const float v = std::min(std::max(static_cast<float>(acc) * mult, lo), hi);
        const int32_t expected = static_cast<int32_t>(std::nearbyint(v)) + c.zy;
        mismatches += y.data<Y>()[r * c.n + col] != expected;
      } else {
        const float expected = static_cast<float>(acc) * (sx[xi] * sw[wi]);
        mismatches += y.data<float>()[r * c.n + col] != expected;
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(QdqFusedKernelTest, MatchesNaiveReference) {
  std::mt19937 rng(7);
  // 300 rows cross the 128-row block boundary; odd n exercises the GEMM's edge panels.
  const KernelCase per_tensor{false, true, 2, 150, 77, 33, false, false, true, false, 128, 0, 128};
  CheckKernel<uint8_t, int8_t, uint8_t>(per_tensor, rng);
  const KernelCase asym{true, true, 1, 9, 64, 17, false, false, true, false, -40, -25, -7};
  CheckKernel<int8_t, int8_t, int8_t>(asym, rng);
  const KernelCase per_axis{true, false, 3, 50, 40, 19, true, true, true, true, -3, 130, 5};
  CheckKernel<int8_t, uint8_t, int8_t>(per_axis, rng);
  const KernelCase float_out{false, false, 2, 70, 31, 12, true, true, false, true, 100, 120, 0};
  CheckKernel<uint8_t, uint8_t, uint8_t>(float_out, rng);
}

}  // namespace
}  // namespace octet
