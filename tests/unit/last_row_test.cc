#include "rewrite/last_row.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "expect_error.h"
#include "graph_builder.h"

namespace octet {
namespace {

using test::GraphBuilder;

std::vector<Dim> Dims(std::vector<Dim> dims) { return dims; }

// y = (DQ(Q(x)) @ w + b) [then `tail`], x [batch, seq, 8] with one scale and zero point.
GraphBuilder Product(const std::string& tail = "") {
  GraphBuilder b;
  b.g.inputs = {b.V("x")};
  b.g.values[b.V("x")].shape = Dims({Dim{{}, "batch"}, Dim{{}, "seq"}, Dim{8, ""}});
  b.g.values[b.V("x")].dtype = DType::kFloat32;
  b.g.opset_imports[kOnnxDomain] = 21;
  b.Init<float>("s", {}, 0.5f);
  b.Init<int8_t>("z", {}, 1);
  b.Init<float>("w", {8, 6}, 0.25f);
  b.Init<float>("b", {6}, 1.f);
  b.Add("QuantizeLinear", {"x", "s", "z"}, "xq");
  b.Add("DequantizeLinear", {"xq", "s", "z"}, "xd");
  b.Add("MatMul", {"xd", "w"}, "p");
  b.Add("Add", {"p", "b"}, "y");
  std::string out = "y";
  if (!tail.empty()) {
    b.Add(tail, {"y"}, "t");
    out = "t";
  }
  b.g.outputs = {b.V(out)};
  b.g.values[b.V(out)].shape = Dims({Dim{{}, "batch"}, Dim{{}, "seq"}, Dim{6, ""}});
  return b;
}

TEST(LastRow, SlicesTheProductsInputBeforeItsQuantization) {
  GraphBuilder b = Product();
  EXPECT_EQ(KeepLastRows(b.g, {"y"}), std::vector<std::string>{"last_row output=y"});
  const Node& quantize = b.g.nodes[b.g.values[b.V("xq")].producer];
  const Node& slice = b.g.nodes[b.g.values[quantize.inputs[0]].producer];
  EXPECT_EQ(slice.op_type, "Slice");
  EXPECT_EQ(slice.inputs[0], b.V("x"));
  EXPECT_EQ(b.g.values[slice.inputs[1]].initializer->data<int64_t>()[0], -1);
  EXPECT_EQ(b.g.values[slice.inputs[3]].initializer->data<int64_t>()[0], -2);
  // The nodes stay in an order the session can run: the slice before the quantization.
  EXPECT_LT(b.g.values[quantize.inputs[0]].producer, b.g.values[b.V("xq")].producer);
  const std::vector<Dim>& y = *b.g.values[b.V("y")].shape;
  EXPECT_EQ(y[1].value, 1);
  EXPECT_EQ(y[0].symbol, "batch");
  EXPECT_EQ(y[2].value, 6);
}

TEST(LastRow, OtherFormsStayWhole) {
  GraphBuilder softmax = Product("Softmax");
  EXPECT_EQ(KeepLastRows(softmax.g, {"t"}),
            std::vector<std::string>{"last_row_refused output=t why=not_a_product op=Softmax"});
  EXPECT_EQ(softmax.g.nodes.size(), 5u);

  GraphBuilder shared = Product();
  shared.Add("Relu", {"xd"}, "other");
  shared.g.outputs.push_back(shared.V("other"));
  EXPECT_EQ(
      KeepLastRows(shared.g, {"y"}),
      std::vector<std::string>{"last_row_refused output=y why=quantized_input_read_elsewhere"});

  // A weight made by a node the graph gives no shape for: its rank is unknown.
  GraphBuilder transposed = Product();
  transposed.g.initializers.erase(transposed.V("w"));
  transposed.g.values[transposed.V("w")] = Value{"w", DType::kUndefined, std::nullopt, nullptr, -1};
  transposed.Init<float>("w_t", {6, 8}, 0.25f);
  transposed.Add("Transpose", {"w_t"}, "w");
  transposed.g.TopologicalSort();
  EXPECT_EQ(KeepLastRows(transposed.g, {"y"}),
            std::vector<std::string>{"last_row_refused output=y why=weights_rank_unknown"});

  GraphBuilder per_axis = Product();
  per_axis.Init<float>("s", {8}, 0.5f);
  EXPECT_EQ(
      KeepLastRows(per_axis.g, {"y"}),
      std::vector<std::string>{"last_row_refused output=y why=input_quantized_param_not_scalar"});
}

TEST(LastRow, ANameThatIsNotAnOutputIsAnError) {
  GraphBuilder b = Product();
  ExpectContains(ErrorOf([&] { KeepLastRows(b.g, {"logits"}); }),
                 {"last_row_outputs: 'logits' is not an output of the graph (its outputs: 'y')"});
  ExpectContains(ErrorOf([&] { KeepLastRows(b.g, {"p"}); }), {"'p' is not an output"});
}

}  // namespace
}  // namespace octet
