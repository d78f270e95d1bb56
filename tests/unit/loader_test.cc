// ONNX loader tests. Models are built here with the generated protobuf classes,
// so every byte the loader sees is spelled out in the test; expected element
// values come from the ONNX spec (bit patterns, nibble order), not from octet.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "expect_error.h"
#include "model/onnx_loader.h"
#include "onnx.pb.h"

namespace octet {
namespace {

namespace fs = std::filesystem;
using onnx::TensorProto;

onnx::ModelProto BaseModel() {
  onnx::ModelProto m;
  m.set_ir_version(10);
  m.set_producer_name("loader_test");
  auto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(21);
  m.mutable_graph()->set_name("g");
  return m;
}

// A model whose graph is Identity(initializer) -> y.
onnx::ModelProto ModelWithInitializer(const TensorProto& init) {
  onnx::ModelProto m = BaseModel();
  auto* g = m.mutable_graph();
  *g->add_initializer() = init;
  auto* n = g->add_node();
  n->set_op_type("Identity");
  n->add_input(init.name());
  n->add_output("y");
  g->add_output()->set_name("y");
  return m;
}

TensorProto MakeTensor(int32_t data_type, const Shape& dims, const std::string& name = "w") {
  TensorProto t;
  t.set_name(name);
  t.set_data_type(data_type);
  for (int64_t d : dims) t.add_dims(d);
  return t;
}

template <typename T>
std::string BytesOf(const std::vector<T>& values) {
  std::string s(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(s.data(), values.data(), s.size());
  return s;
}

std::string BytesOf(const Tensor& t) {
  return std::string(static_cast<const char*>(t.raw()), t.nbytes());
}

Model Load(const onnx::ModelProto& m, const std::string& base_dir = "") {
  const std::string bytes = m.SerializeAsString();
  return LoadModelFromBytes(bytes.data(), bytes.size(), base_dir);
}

Tensor LoadInitializer(const TensorProto& init, const std::string& base_dir = "") {
  Model model = Load(ModelWithInitializer(init), base_dir);
  const int id = model.graph.FindValue(init.name());
  if (id < 0 || !model.graph.values[id].initializer) throw std::runtime_error("no initializer");
  return *model.graph.values[id].initializer;  // shares the buffer, outlives the model
}

std::string InitializerError(const TensorProto& init) {
  return ErrorOf([&] { LoadInitializer(init); });
}

// ---- every dtype through raw_data ----

struct RawCase {
  int32_t data_type;
  Shape dims;
  std::string raw;       // serialized little-endian bytes
  std::string expected;  // octet's in-memory bytes
};

TEST(LoaderTensorTest, RawDataRoundTripsEveryDType) {
  const std::string f8 = BytesOf(std::vector<uint8_t>{0x38, 0xC0, 0x7F, 0x00});
  std::vector<RawCase> cases = {
      {TensorProto::FLOAT, {3}, BytesOf(std::vector<float>{1.5f, -2.25f, 3e38f}), ""},
      {TensorProto::DOUBLE, {2}, BytesOf(std::vector<double>{1e300, -0.5}), ""},
      {TensorProto::INT8, {3}, BytesOf(std::vector<int8_t>{-128, 0, 127}), ""},
      {TensorProto::UINT8, {3}, BytesOf(std::vector<uint8_t>{0, 200, 255}), ""},
      {TensorProto::INT16, {3}, BytesOf(std::vector<int16_t>{-32768, 1234, 32767}), ""},
      {TensorProto::UINT16, {3}, BytesOf(std::vector<uint16_t>{0, 65535, 40000}), ""},
      {TensorProto::INT32, {3}, BytesOf(std::vector<int32_t>{INT32_MIN, -1, 7}), ""},
      {TensorProto::INT64, {2, 1}, BytesOf(std::vector<int64_t>{INT64_MIN, int64_t{1} << 40}), ""},
      {TensorProto::UINT32, {2}, BytesOf(std::vector<uint32_t>{4000000000u, 1}), ""},
      {TensorProto::UINT64, {2}, BytesOf(std::vector<uint64_t>{UINT64_MAX, 3}), ""},
      {TensorProto::BOOL, {3}, BytesOf(std::vector<uint8_t>{1, 0, 1}), ""},
      // float16 1.0, -2.0, +inf; bfloat16 1.0, -2.0 (bit patterns from IEEE / bfloat16 layout).
      {TensorProto::FLOAT16, {3}, BytesOf(std::vector<uint16_t>{0x3C00, 0xC000, 0x7C00}), ""},
      {TensorProto::BFLOAT16, {2}, BytesOf(std::vector<uint16_t>{0x3F80, 0xC000}), ""},
      {TensorProto::FLOAT8E4M3FN, {4}, f8, ""},
      {TensorProto::FLOAT8E4M3FNUZ, {4}, f8, ""},
      {TensorProto::FLOAT8E5M2, {4}, f8, ""},
      {TensorProto::FLOAT8E5M2FNUZ, {2, 2}, f8, ""},
      {TensorProto::FLOAT, {0}, "", ""},
      {TensorProto::FLOAT, {}, BytesOf(std::vector<float>{42.f}), ""},
      // 4-bit: low nibble first; int4 sign-extended to a byte each.
      {TensorProto::INT4,
       {3},
       BytesOf(std::vector<uint8_t>{0x78, 0x0F}),
       BytesOf(std::vector<int8_t>{-8, 7, -1})},
      {TensorProto::INT4,
       {2, 2},
       BytesOf(std::vector<uint8_t>{0xEF, 0x03}),
       BytesOf(std::vector<int8_t>{-1, -2, 3, 0})},
      {TensorProto::UINT4,
       {5},
       BytesOf(std::vector<uint8_t>{0xF1, 0x08, 0x05}),
       BytesOf(std::vector<uint8_t>{1, 15, 8, 0, 5})},
      {TensorProto::INT4,
       {1},
       BytesOf(std::vector<uint8_t>{0x09}),
       BytesOf(std::vector<int8_t>{-7})},
  };
  for (RawCase& c : cases) {
    SCOPED_TRACE("data_type " + std::to_string(c.data_type));
    if (c.expected.empty()) c.expected = c.raw;
    TensorProto init = MakeTensor(c.data_type, c.dims);
    init.set_raw_data(c.raw);
    const Tensor t = LoadInitializer(init);
    EXPECT_EQ(static_cast<int32_t>(t.dtype()), c.data_type);
    EXPECT_EQ(t.shape(), c.dims);
    EXPECT_EQ(BytesOf(t), c.expected);
  }
}

TEST(LoaderTensorTest, Int4ElementsReadBackAsSignedBytes) {
  TensorProto init = MakeTensor(TensorProto::INT4, {3});
  init.set_raw_data(std::string("\x78\x0F", 2));
  const Tensor t = LoadInitializer(init);
  EXPECT_EQ(t.data<int8_t>()[0], -8);
  EXPECT_EQ(t.data<int8_t>()[1], 7);
  EXPECT_EQ(t.data<int8_t>()[2], -1);
}

// ---- every dtype through its typed field ----

TEST(LoaderTensorTest, TypedFieldsRoundTripEveryDType) {
  {
    TensorProto p = MakeTensor(TensorProto::FLOAT, {2});
    p.add_float_data(1.5f);
    p.add_float_data(-2.25f);
    EXPECT_EQ(BytesOf(LoadInitializer(p)), BytesOf(std::vector<float>{1.5f, -2.25f}));
  }
  {
    TensorProto p = MakeTensor(TensorProto::DOUBLE, {2});
    p.add_double_data(1e300);
    p.add_double_data(-0.5);
    EXPECT_EQ(BytesOf(LoadInitializer(p)), BytesOf(std::vector<double>{1e300, -0.5}));
  }
  {
    TensorProto p = MakeTensor(TensorProto::INT64, {2});
    p.add_int64_data(INT64_MIN);
    p.add_int64_data(5);
    EXPECT_EQ(BytesOf(LoadInitializer(p)), BytesOf(std::vector<int64_t>{INT64_MIN, 5}));
  }
  {
    TensorProto p = MakeTensor(TensorProto::UINT64, {2});
    p.add_uint64_data(UINT64_MAX);
    p.add_uint64_data(3);
    EXPECT_EQ(BytesOf(LoadInitializer(p)), BytesOf(std::vector<uint64_t>{UINT64_MAX, 3}));
  }
  {
    TensorProto p = MakeTensor(TensorProto::UINT32, {2});
    p.add_uint64_data(4000000000u);
    p.add_uint64_data(1);
    const Tensor t = LoadInitializer(p);
    EXPECT_EQ(t.dtype(), DType::kUInt32);
    EXPECT_EQ(BytesOf(t), BytesOf(std::vector<uint32_t>{4000000000u, 1}));
  }
  // int32_data carries one element per entry for these types.
  struct Int32Case {
    int32_t data_type;
    std::vector<int32_t> int32_data;
    std::string expected;
  };
  const std::vector<Int32Case> cases = {
      {TensorProto::INT32, {INT32_MIN, -1, 7}, BytesOf(std::vector<int32_t>{INT32_MIN, -1, 7})},
      {TensorProto::INT8, {-5, 3, -128, 127}, BytesOf(std::vector<int8_t>{-5, 3, -128, 127})},
      {TensorProto::UINT8, {0, 255, 17}, BytesOf(std::vector<uint8_t>{0, 255, 17})},
      {TensorProto::INT16, {-32768, 32767}, BytesOf(std::vector<int16_t>{-32768, 32767})},
      {TensorProto::UINT16, {65535, 0}, BytesOf(std::vector<uint16_t>{65535, 0})},
      {TensorProto::BOOL, {1, 0, 1}, BytesOf(std::vector<uint8_t>{1, 0, 1})},
      // Bit patterns as onnx.helper.make_tensor writes them: float16 1.0 and -2.0.
      {TensorProto::FLOAT16, {15360, 49152}, BytesOf(std::vector<uint16_t>{0x3C00, 0xC000})},
      // The signed view of the same bits is accepted too.
      {TensorProto::FLOAT16, {-16384}, BytesOf(std::vector<uint16_t>{0xC000})},
      {TensorProto::BFLOAT16, {16256, 49152}, BytesOf(std::vector<uint16_t>{0x3F80, 0xC000})},
      {TensorProto::FLOAT8E4M3FN, {56, 192}, BytesOf(std::vector<uint8_t>{0x38, 0xC0})},
      {TensorProto::FLOAT8E4M3FNUZ, {64, 255}, BytesOf(std::vector<uint8_t>{0x40, 0xFF})},
      {TensorProto::FLOAT8E5M2, {60, 124}, BytesOf(std::vector<uint8_t>{0x3C, 0x7C})},
      {TensorProto::FLOAT8E5M2FNUZ, {128, 1}, BytesOf(std::vector<uint8_t>{0x80, 0x01})},
      // 4-bit: each entry is a packed byte, low nibble first (make_tensor writes [-8,7,-1]
      // as 120, 15).
      {TensorProto::INT4, {120, 15}, BytesOf(std::vector<int8_t>{-8, 7, -1})},
      {TensorProto::UINT4, {0xF1, 0x08, 0x05}, BytesOf(std::vector<uint8_t>{1, 15, 8, 0, 5})},
      {TensorProto::INT4, {0xEF, 0x03}, BytesOf(std::vector<int8_t>{-1, -2, 3, 0})},
  };
  for (const Int32Case& c : cases) {
    SCOPED_TRACE("data_type " + std::to_string(c.data_type));
    const bool four_bit = c.data_type == TensorProto::INT4 || c.data_type == TensorProto::UINT4;
    const int64_t numel = four_bit ? static_cast<int64_t>(c.expected.size())
                                   : static_cast<int64_t>(c.int32_data.size());
    TensorProto p = MakeTensor(c.data_type, {numel});
    for (int32_t v : c.int32_data) p.add_int32_data(v);
    const Tensor t = LoadInitializer(p);
    EXPECT_EQ(static_cast<int32_t>(t.dtype()), c.data_type);
    EXPECT_EQ(BytesOf(t), c.expected);
  }
}

TEST(LoaderTensorTest, NegativeInt8FromInt32DataReadsBack) {
  TensorProto p = MakeTensor(TensorProto::INT8, {2});
  p.add_int32_data(-5);
  p.add_int32_data(-128);
  const Tensor t = LoadInitializer(p);
  EXPECT_EQ(t.data<int8_t>()[0], -5);
  EXPECT_EQ(t.data<int8_t>()[1], -128);
}

// ---- bad tensor data ----

TEST(LoaderTensorTest, DataSizeMustMatchShape) {
  TensorProto p = MakeTensor(TensorProto::FLOAT, {2});
  p.set_raw_data(std::string(7, '\0'));
  ExpectContains(InitializerError(p), {"initializer 'w'", "7 bytes", "needs 8"});
  p.set_raw_data(std::string(12, '\0'));
  ExpectContains(InitializerError(p), {"initializer 'w'", "12 bytes"});

  TensorProto i4 = MakeTensor(TensorProto::INT4, {3});
  i4.set_raw_data(std::string(1, '\0'));
  ExpectContains(InitializerError(i4), {"initializer 'w'", "needs 2"});
  i4.set_raw_data(std::string(3, '\0'));
  ExpectContains(InitializerError(i4), {"initializer 'w'", "needs 2"});

  TensorProto typed = MakeTensor(TensorProto::FLOAT, {2});
  typed.add_float_data(1.f);
  typed.add_float_data(2.f);
  typed.add_float_data(3.f);
  ExpectContains(InitializerError(typed), {"initializer 'w'", "3 values in float_data"});

  TensorProto u4 = MakeTensor(TensorProto::UINT4, {5});
  u4.add_int32_data(0x11);
  u4.add_int32_data(0x11);
  ExpectContains(InitializerError(u4), {"2 values in int32_data", "needs 3"});

  TensorProto wrong_field = MakeTensor(TensorProto::FLOAT, {1});
  wrong_field.add_int32_data(1);
  ExpectContains(InitializerError(wrong_field), {"0 values in float_data"});

  TensorProto missing = MakeTensor(TensorProto::INT8, {4});
  ExpectContains(InitializerError(missing), {"initializer 'w'", "needs 4"});
}

TEST(LoaderTensorTest, OutOfRangeTypedValuesAreRefused) {
  TensorProto i8 = MakeTensor(TensorProto::INT8, {1});
  i8.add_int32_data(300);
  ExpectContains(InitializerError(i8), {"initializer 'w'", "300", "int8"});
  TensorProto u8 = MakeTensor(TensorProto::UINT8, {1});
  u8.add_int32_data(-1);
  ExpectContains(InitializerError(u8), {"-1", "uint8"});
  TensorProto b = MakeTensor(TensorProto::BOOL, {1});
  b.add_int32_data(2);
  ExpectContains(InitializerError(b), {"bool"});
  TensorProto u32 = MakeTensor(TensorProto::UINT32, {1});
  u32.add_uint64_data(uint64_t{1} << 32);
  ExpectContains(InitializerError(u32), {"uint32"});
  TensorProto raw_bool = MakeTensor(TensorProto::BOOL, {2});
  raw_bool.set_raw_data(std::string("\x01\x02", 2));
  ExpectContains(InitializerError(raw_bool), {"bool element 1", "byte value 2"});
}

TEST(LoaderTensorTest, BadShapesAreRefusedWithoutAllocating) {
  TensorProto negative = MakeTensor(TensorProto::FLOAT, {2, -1});
  ExpectContains(InitializerError(negative), {"initializer 'w'", "negative"});
  TensorProto overflow = MakeTensor(TensorProto::FLOAT, {int64_t{1} << 40, int64_t{1} << 40});
  ExpectContains(InitializerError(overflow), {"initializer 'w'"});
  TensorProto bytes_overflow =
      MakeTensor(TensorProto::DOUBLE, {int64_t{1} << 31, int64_t{1} << 31});
  ExpectContains(InitializerError(bytes_overflow), {"initializer 'w'", "too large"});
  TensorProto huge = MakeTensor(TensorProto::FLOAT, {int64_t{1} << 20, int64_t{1} << 20});
  huge.set_raw_data("abcd");
  ExpectContains(InitializerError(huge), {"initializer 'w'", "4 bytes"});
  TensorProto huge_typed = MakeTensor(TensorProto::FLOAT, {int64_t{1} << 20, int64_t{1} << 20});
  huge_typed.add_float_data(1.f);
  ExpectContains(InitializerError(huge_typed), {"initializer 'w'", "1 values in float_data"});
}

TEST(LoaderTensorTest, UnsupportedTypesAreRefusedByName) {
  TensorProto s = MakeTensor(TensorProto::STRING, {1}, "labels");
  s.add_string_data("cat");
  ExpectContains(InitializerError(s), {"initializer 'labels'", "string", "not supported"});
  TensorProto c = MakeTensor(TensorProto::COMPLEX64, {1}, "z");
  c.add_float_data(1.f);
  c.add_float_data(2.f);
  ExpectContains(InitializerError(c), {"initializer 'z'", "complex64"});
  TensorProto f4 = MakeTensor(TensorProto::FLOAT4E2M1, {2});
  f4.set_raw_data(std::string(1, '\0'));
  ExpectContains(InitializerError(f4), {"float4e2m1"});
  TensorProto e8m0 = MakeTensor(TensorProto::FLOAT8E8M0, {1});
  e8m0.set_raw_data(std::string(1, '\0'));
  ExpectContains(InitializerError(e8m0), {"float8e8m0"});
  TensorProto undefined = MakeTensor(TensorProto::UNDEFINED, {1});
  ExpectContains(InitializerError(undefined), {"undefined"});
  TensorProto bogus = MakeTensor(999, {1});
  ExpectContains(InitializerError(bogus), {"undefined(999)"});
}

TEST(LoaderTensorTest, SegmentsAndSparseInitializersAreRefused) {
  TensorProto seg = MakeTensor(TensorProto::FLOAT, {1});
  seg.set_raw_data(std::string(4, '\0'));
  seg.mutable_segment()->set_begin(0);
  seg.mutable_segment()->set_end(1);
  ExpectContains(InitializerError(seg), {"initializer 'w'", "segment"});

  onnx::ModelProto m = BaseModel();
  auto* sparse = m.mutable_graph()->add_sparse_initializer();
  *sparse->mutable_values() = MakeTensor(TensorProto::FLOAT, {0}, "sp");
  ExpectContains(ErrorOf([&] { Load(m); }), {"sparse initializer 'sp'"});
}

// ---- graph structure ----

onnx::ValueInfoProto* AddTensorInfo(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list,
                                    const std::string& name, int32_t elem_type,
                                    const std::vector<std::string>& dims) {
  auto* info = list->Add();
  info->set_name(name);
  auto* tensor_type = info->mutable_type()->mutable_tensor_type();
  tensor_type->set_elem_type(elem_type);
  auto* shape = tensor_type->mutable_shape();
  for (const std::string& d : dims) {
    auto* dim = shape->add_dim();
    if (d == "?") continue;
    if (std::isdigit(static_cast<unsigned char>(d[0])))
      dim->set_dim_value(std::stoll(d));
    else
      dim->set_dim_param(d);
  }
  return info;
}

onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op_type, const std::string& name,
                         const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs, const std::string& domain = "") {
  auto* n = g->add_node();
  n->set_op_type(op_type);
  n->set_name(name);
  n->set_domain(domain);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return n;
}

onnx::AttributeProto* AddAttribute(onnx::NodeProto* n, const std::string& name,
                                   onnx::AttributeProto::AttributeType type) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(type);
  return a;
}

TEST(LoaderGraphTest, ReadsValuesNodesAttributesAndOpsets) {
  onnx::ModelProto m = BaseModel();
  m.mutable_opset_import(0)->set_domain("ai.onnx");
  auto* ms = m.add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  auto* g = m.mutable_graph();
  AddTensorInfo(g->mutable_input(), "x", TensorProto::FLOAT, {"batch", "3", "?"});
  // An initializer listed as an input is a default value, not a required input.
  AddTensorInfo(g->mutable_input(), "scale", TensorProto::FLOAT, {});
  AddTensorInfo(g->mutable_output(), "y", TensorProto::INT8, {"batch", "3", "?"});
  AddTensorInfo(g->mutable_value_info(), "q", TensorProto::INT8, {"batch", "3", "7"});
  TensorProto scale = MakeTensor(TensorProto::FLOAT, {}, "scale");
  scale.add_float_data(0.5f);
  *g->add_initializer() = scale;

  // Listed consumer-first: the loader must sort.
  AddNode(g, "Add", "add", {"q", "c"}, {"y"});
  auto* quant = AddNode(g, "QuantizeLinear", "quant", {"x", "scale", ""}, {"q"}, "com.microsoft");
  AddAttribute(quant, "axis", onnx::AttributeProto::INT)->set_i(-1);
  auto* constant = AddNode(g, "Constant", "const", {}, {"c"}, "ai.onnx");
  auto* value = AddAttribute(constant, "value", onnx::AttributeProto::TENSOR)->mutable_t();
  value->set_data_type(TensorProto::INT8);
  value->add_dims(2);
  value->add_int32_data(-1);
  value->add_int32_data(2);
  AddAttribute(constant, "f", onnx::AttributeProto::FLOAT)->set_f(0.25f);
  AddAttribute(constant, "s", onnx::AttributeProto::STRING)->set_s("abc");
  auto* floats = AddAttribute(constant, "fs", onnx::AttributeProto::FLOATS);
  floats->add_floats(1.f);
  floats->add_floats(-2.f);
  auto* ints = AddAttribute(constant, "is", onnx::AttributeProto::INTS);
  ints->add_ints(3);
  ints->add_ints(-4);
  auto* strings = AddAttribute(constant, "ss", onnx::AttributeProto::STRINGS);
  strings->add_strings("a");
  strings->add_strings("b");
  AddAttribute(constant, "g", onnx::AttributeProto::GRAPH)->mutable_g()->set_name("body");
  AddAttribute(constant, "tp", onnx::AttributeProto::TYPE_PROTO);

  const Model model = Load(m);
  const Graph& graph = model.graph;
  EXPECT_EQ(model.ir_version, 10);
  EXPECT_EQ(model.producer_name, "loader_test");
  EXPECT_EQ(graph.opset_imports,
            (std::map<std::string, int>{{"ai.onnx", 21}, {"com.microsoft", 1}}));

  ASSERT_EQ(graph.inputs.size(), 1u);
  const Value& x = graph.values[graph.inputs[0]];
  EXPECT_EQ(x.name, "x");
  EXPECT_EQ(x.dtype, DType::kFloat32);
  ASSERT_TRUE(x.shape.has_value());
  ASSERT_EQ(x.shape->size(), 3u);
  EXPECT_FALSE((*x.shape)[0].is_static());
  EXPECT_EQ((*x.shape)[0].symbol, "batch");
  EXPECT_EQ((*x.shape)[1].value, 3);
  EXPECT_FALSE((*x.shape)[2].is_static());
  EXPECT_EQ((*x.shape)[2].symbol, "");

  ASSERT_EQ(graph.outputs.size(), 1u);
  EXPECT_EQ(graph.values[graph.outputs[0]].name, "y");
  EXPECT_EQ(graph.values[graph.outputs[0]].dtype, DType::kInt8);
  const Value& q = graph.values[graph.FindValue("q")];
  EXPECT_EQ(q.dtype, DType::kInt8);
  EXPECT_EQ((*q.shape)[2].value, 7);

  const Value& scale_value = graph.values[graph.FindValue("scale")];
  ASSERT_NE(scale_value.initializer, nullptr);
  EXPECT_EQ(scale_value.initializer->data<float>()[0], 0.5f);

  ASSERT_EQ(graph.nodes.size(), 3u);
  EXPECT_EQ(graph.nodes.back().name, "add");  // the only node with producers
  for (const Node& n : graph.nodes) {
    if (n.name == "quant") {
      EXPECT_EQ(n.domain, kMsDomain);
      EXPECT_EQ(n.opset, 1);
      ASSERT_EQ(n.inputs.size(), 3u);
      EXPECT_EQ(n.inputs[0], graph.FindValue("x"));
      EXPECT_EQ(n.inputs[2], -1);
      EXPECT_EQ(n.GetInt("axis", 0), -1);
    } else if (n.name == "const") {
      EXPECT_EQ(n.domain, kOnnxDomain);
      EXPECT_EQ(n.opset, 21);
      const Attribute* v = n.FindAttribute("value");
      ASSERT_NE(v, nullptr);
      EXPECT_EQ(v->kind, Attribute::Kind::kTensor);
      EXPECT_EQ(BytesOf(v->t), BytesOf(std::vector<int8_t>{-1, 2}));
      EXPECT_EQ(n.GetFloat("f", 0.f), 0.25f);
      EXPECT_EQ(n.GetString("s", ""), "abc");
      EXPECT_EQ(n.FindAttribute("fs")->floats, (std::vector<float>{1.f, -2.f}));
      EXPECT_EQ(n.GetInts("is"), (std::vector<int64_t>{3, -4}));
      EXPECT_EQ(n.FindAttribute("ss")->strings, (std::vector<std::string>{"a", "b"}));
      EXPECT_EQ(n.FindAttribute("g")->kind, Attribute::Kind::kGraph);
      EXPECT_EQ(n.FindAttribute("tp")->kind, Attribute::Kind::kOther);
    } else {
      EXPECT_EQ(n.name, "add");
      EXPECT_EQ(graph.values[n.outputs[0]].producer, static_cast<int>(graph.nodes.size()) - 1);
    }
  }
}

TEST(LoaderGraphTest, RefusesUnsupportedIrVersions) {
  for (int64_t version : {0, 2, 15, 100}) {
    onnx::ModelProto m = BaseModel();
    m.set_ir_version(version);
    ExpectContains(ErrorOf([&] { Load(m); }), {"IR version " + std::to_string(version), "3 to 14"});
  }
  for (int64_t version : {3, 14}) {
    onnx::ModelProto m = BaseModel();
    m.set_ir_version(version);
    EXPECT_NO_THROW(Load(m));
  }
}

TEST(LoaderGraphTest, RefusesModelWithoutGraph) {
  onnx::ModelProto m = BaseModel();
  m.clear_graph();
  ExpectContains(ErrorOf([&] { Load(m); }), {"no graph"});
}

TEST(LoaderGraphTest, NodeNeedsAnOpsetImportForItsDomain) {
  onnx::ModelProto m = BaseModel();
  auto* g = m.mutable_graph();
  AddTensorInfo(g->mutable_input(), "x", TensorProto::FLOAT, {"1"});
  AddNode(g, "DequantizeLinear", "dq1", {"x"}, {"y"}, "com.microsoft");
  ExpectContains(ErrorOf([&] { Load(m); }), {"dq1", "com.microsoft", "no opset import"});
}

TEST(LoaderGraphTest, ConflictingOpsetImportsAreRefused) {
  onnx::ModelProto m = BaseModel();
  auto* again = m.add_opset_import();
  again->set_domain("ai.onnx");
  again->set_version(19);
  ExpectContains(ErrorOf([&] { Load(m); }), {"ai.onnx", "21", "19"});
}

TEST(LoaderGraphTest, DanglingInputAndCycleAreRefused) {
  onnx::ModelProto dangling = BaseModel();
  AddNode(dangling.mutable_graph(), "Relu", "r", {"nowhere"}, {"y"});
  ExpectContains(ErrorOf([&] { Load(dangling); }), {"'nowhere'", "Relu"});

  onnx::ModelProto cycle = BaseModel();
  AddNode(cycle.mutable_graph(), "Relu", "a", {"b_out"}, {"a_out"});
  AddNode(cycle.mutable_graph(), "Relu", "b", {"a_out"}, {"b_out"});
  ExpectContains(ErrorOf([&] { Load(cycle); }), {"cycle"});
}

TEST(LoaderGraphTest, StructuralErrorsNameTheValue) {
  onnx::ModelProto twice = BaseModel();
  TensorProto w = MakeTensor(TensorProto::FLOAT, {0});
  *twice.mutable_graph()->add_initializer() = w;
  *twice.mutable_graph()->add_initializer() = w;
  ExpectContains(ErrorOf([&] { Load(twice); }), {"initializer 'w' appears twice"});

  onnx::ModelProto unproduced = BaseModel();
  unproduced.mutable_graph()->add_output()->set_name("ghost");
  ExpectContains(ErrorOf([&] { Load(unproduced); }), {"graph output 'ghost'"});

  onnx::ModelProto mismatch = ModelWithInitializer(MakeTensor(TensorProto::FLOAT, {0}));
  AddTensorInfo(mismatch.mutable_graph()->mutable_input(), "w", TensorProto::INT8, {"0"});
  ExpectContains(ErrorOf([&] { Load(mismatch); }), {"'w'", "int8", "float"});
}

TEST(LoaderGraphTest, ModelLocalFunctionsAreRefusedOnlyWhenUsed) {
  onnx::ModelProto m = BaseModel();
  auto* custom = m.add_opset_import();
  custom->set_domain("local");
  custom->set_version(1);
  auto* function = m.add_functions();
  function->set_name("MyGelu");
  function->set_domain("local");
  AddTensorInfo(m.mutable_graph()->mutable_input(), "x", TensorProto::FLOAT, {"1"});
  EXPECT_NO_THROW(Load(m));
  AddNode(m.mutable_graph(), "MyGelu", "gelu", {"x"}, {"y"}, "local");
  ExpectContains(ErrorOf([&] { Load(m); }), {"gelu", "local.MyGelu", "not supported"});
}

// ---- malformed bytes ----

onnx::ModelProto RichModel() {
  onnx::ModelProto m = BaseModel();
  auto* ms = m.add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  auto* g = m.mutable_graph();
  AddTensorInfo(g->mutable_input(), "x", TensorProto::FLOAT, {"batch", "4"});
  AddTensorInfo(g->mutable_output(), "y", TensorProto::FLOAT, {"batch", "4"});
  TensorProto scale = MakeTensor(TensorProto::FLOAT, {4}, "scale");
  scale.set_raw_data(BytesOf(std::vector<float>{0.5f, 0.25f, 1.f, 2.f}));
  *g->add_initializer() = scale;
  TensorProto zp = MakeTensor(TensorProto::INT4, {4}, "zp");
  for (int32_t v : {0x21, 0xF8}) zp.add_int32_data(v);
  *g->add_initializer() = zp;
  auto* q = AddNode(g, "QuantizeLinear", "q", {"x", "scale", "zp"}, {"xq"});
  AddAttribute(q, "axis", onnx::AttributeProto::INT)->set_i(1);
  AddNode(g, "DequantizeLinear", "dq", {"xq", "scale", "zp"}, {"y"}, "com.microsoft");
  return m;
}

TEST(LoaderBytesTest, EveryTruncationIsAnError) {
  const std::string bytes = RichModel().SerializeAsString();
  ASSERT_NO_THROW(LoadModelFromBytes(bytes.data(), bytes.size(), ""));
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    EXPECT_THROW(LoadModelFromBytes(bytes.data(), cut, ""), Error);
  }
  ExpectContains(ErrorOf([&] { LoadModelFromBytes(bytes.data(), bytes.size() / 2, ""); }),
                 {"failed to parse ONNX model", "not a valid ModelProto"});
}

TEST(LoaderBytesTest, CorruptedBytesNeverCrash) {
  const std::string good = RichModel().SerializeAsString();
  std::mt19937 rng(12345);
  int errors = 0;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    std::string bytes = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    if (iteration % 10 == 0) bytes.resize(rng() % bytes.size());
    try {
      LoadModelFromBytes(bytes.data(), bytes.size(), "");
    } catch (const Error&) {
      ++errors;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "iteration " << iteration << ": not an octet::Error: " << e.what();
    }
  }
  EXPECT_GT(errors, 1000);  // most corruptions must be detected, not silently accepted
  for (int iteration = 0; iteration < 300; ++iteration) {
    std::string noise(rng() % 512, '\0');
    for (char& c : noise) c = static_cast<char>(rng());
    try {
      LoadModelFromBytes(noise.data(), noise.size(), "");
    } catch (const Error&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << "noise " << iteration << ": not an octet::Error: " << e.what();
    }
  }
}

// ---- files and external data ----

class LoaderFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("octet_loader_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    dir_ = root_ / "model";
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(root_); }

  static void WriteFile(const fs::path& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

  // Writes `m` as dir_/model.onnx and loads it from the file.
  Model SaveAndLoad(const onnx::ModelProto& m) {
    const fs::path path = dir_ / "model.onnx";
    WriteFile(path, m.SerializeAsString());
    return LoadModelFromFile(path.string());
  }

  static TensorProto External(int32_t data_type, const Shape& dims, const std::string& location,
                              const std::string& offset = "", const std::string& length = "") {
    TensorProto t = MakeTensor(data_type, dims);
    t.set_data_location(TensorProto::EXTERNAL);
    auto add = [&](const char* key, const std::string& value) {
      if (value.empty()) return;
      auto* e = t.add_external_data();
      e->set_key(key);
      e->set_value(value);
    };
    add("location", location);
    add("offset", offset);
    add("length", length);
    add("checksum", "ignored");
    return t;
  }

  std::string ExternalError(const TensorProto& init) {
    return ErrorOf([&] { SaveAndLoad(ModelWithInitializer(init)); });
  }

  fs::path root_;
  fs::path dir_;
};

TEST_F(LoaderFileTest, LoadsModelFromFile) {
  const Model model = SaveAndLoad(RichModel());
  EXPECT_EQ(model.graph.nodes.size(), 2u);
  EXPECT_EQ(BytesOf(*model.graph.values[model.graph.FindValue("zp")].initializer),
            BytesOf(std::vector<int8_t>{1, 2, -8, -1}));
}

TEST_F(LoaderFileTest, FileErrorsAreClear) {
  const std::string missing = (dir_ / "missing.onnx").string();
  ExpectContains(ErrorOf([&] { LoadModelFromFile(missing); }), {missing, "does not exist"});
  ExpectContains(ErrorOf([&] { LoadModelFromFile(dir_.string()); }), {"is a directory"});
  WriteFile(dir_ / "empty.onnx", "");
  ExpectContains(ErrorOf([&] { LoadModelFromFile((dir_ / "empty.onnx").string()); }), {"empty"});
  const std::string bytes = RichModel().SerializeAsString();
  const fs::path truncated = dir_ / "truncated.onnx";
  WriteFile(truncated, bytes.substr(0, bytes.size() / 2));
  ExpectContains(ErrorOf([&] { LoadModelFromFile(truncated.string()); }),
                 {"failed to parse ONNX model '" + truncated.string() + "'",
                  "not a valid ModelProto (truncated or corrupted file?)"});
}

TEST_F(LoaderFileTest, ReadsExternalDataBesideTheModel) {
  const std::vector<float> floats = {1.f, -2.f, 3.5f};
  const std::vector<int8_t> int8s = {-1, 2, -3, 4};
  WriteFile(dir_ / "weights.bin", std::string(16, 'x') + BytesOf(floats) + BytesOf(int8s));
  fs::create_directories(dir_ / "sub");
  WriteFile(dir_ / "sub" / "packed.bin", std::string("\x78\x0F", 2));

  onnx::ModelProto m =
      ModelWithInitializer(External(TensorProto::FLOAT, {3}, "weights.bin", "16", "12"));
  auto* g = m.mutable_graph();
  TensorProto rest = External(TensorProto::INT8, {2, 2}, "weights.bin", "28");
  rest.set_name("rest");
  *g->add_initializer() = rest;
  TensorProto packed = External(TensorProto::INT4, {3}, "./sub/packed.bin");
  packed.set_name("packed");
  *g->add_initializer() = packed;

  auto check = [&](const Model& model) {
    const Graph& graph = model.graph;
    EXPECT_EQ(BytesOf(*graph.values[graph.FindValue("w")].initializer), BytesOf(floats));
    EXPECT_EQ(BytesOf(*graph.values[graph.FindValue("rest")].initializer), BytesOf(int8s));
    EXPECT_EQ(BytesOf(*graph.values[graph.FindValue("packed")].initializer),
              BytesOf(std::vector<int8_t>{-8, 7, -1}));
  };
  check(SaveAndLoad(m));
  check(Load(m, dir_.string()));
  check(Load(m, dir_.string() + "/"));
  ExpectContains(ErrorOf([&] { Load(m); }), {"initializer 'w'", "external data"});
}

// Large external tensors at a cache-line offset are mapped from the file, others
// read: both ways give the file's bytes, and a mapped tensor keeps them after the
// model that loaded it is gone.
TEST_F(LoaderFileTest, LargeExternalDataIsMappedWithTheSameBytes) {
  std::vector<float> floats(300 * 1024);  // 1.2 MB: past the mapping threshold
  for (size_t i = 0; i < floats.size(); ++i) floats[i] = static_cast<float>(i % 977) - 488.5f;
  const std::string data = BytesOf(floats);
  // At 4160, inside a page (mapped), 4 bytes after it (not a whole number of cache
  // lines: read), and small (read).
  WriteFile(dir_ / "big.bin", std::string(4160, 'x') + data + std::string(4, 'y') + data);
  onnx::ModelProto m = ModelWithInitializer(
      External(TensorProto::FLOAT, {300, 1024}, "big.bin", "4160", std::to_string(data.size())));
  auto* g = m.mutable_graph();
  TensorProto unaligned =
      External(TensorProto::FLOAT, {300, 1024}, "big.bin", std::to_string(4160 + data.size() + 4));
  unaligned.set_name("unaligned");
  *g->add_initializer() = unaligned;
  TensorProto small = External(TensorProto::FLOAT, {4}, "big.bin", "4160");
  small.set_name("small");
  *g->add_initializer() = small;
  Tensor kept;
  {
    const Model model = SaveAndLoad(m);
    const Graph& graph = model.graph;
    EXPECT_EQ(BytesOf(*graph.values[graph.FindValue("w")].initializer), data);
    EXPECT_EQ(BytesOf(*graph.values[graph.FindValue("unaligned")].initializer), data);
    EXPECT_EQ(BytesOf(*graph.values[graph.FindValue("small")].initializer), data.substr(0, 16));
    kept = *graph.values[graph.FindValue("w")].initializer;
  }
  EXPECT_EQ(BytesOf(kept), data);
}

TEST_F(LoaderFileTest, ExternalDataInConstantAttribute) {
  WriteFile(dir_ / "c.bin", BytesOf(std::vector<int64_t>{7, -9}));
  onnx::ModelProto m = BaseModel();
  auto* n = AddNode(m.mutable_graph(), "Constant", "c", {}, {"y"});
  *AddAttribute(n, "value", onnx::AttributeProto::TENSOR)->mutable_t() =
      External(TensorProto::INT64, {2}, "c.bin");
  m.mutable_graph()->add_output()->set_name("y");
  const Model model = SaveAndLoad(m);
  EXPECT_EQ(BytesOf(model.graph.nodes[0].FindAttribute("value")->t),
            BytesOf(std::vector<int64_t>{7, -9}));
}

TEST_F(LoaderFileTest, MissingOrShortExternalDataIsAnError) {
  WriteFile(dir_ / "w.bin", std::string(8, '\0'));
  ExpectContains(ExternalError(External(TensorProto::FLOAT, {2}, "nothere.bin")),
                 {"initializer 'w'", "'nothere.bin'", "does not exist"});
  ExpectContains(ExternalError(External(TensorProto::FLOAT, {2}, "w.bin", "9")),
                 {"initializer 'w'", "offset 9", "beyond the end"});
  ExpectContains(ExternalError(External(TensorProto::FLOAT, {2}, "w.bin", "4", "8")),
                 {"initializer 'w'", "offset 4 + length 8", "beyond the end"});
  // Without a length the tensor's own size is read from the offset.
  ExpectContains(ExternalError(External(TensorProto::FLOAT, {3}, "w.bin")),
                 {"initializer 'w'", "length 12", "beyond the end", "(8 bytes)"});
  ExpectContains(ExternalError(External(TensorProto::FLOAT, {1}, "w.bin", "0", "8")),
                 {"initializer 'w'", "length is 8 bytes", "needs 4"});
  ExpectContains(ExternalError(External(TensorProto::FLOAT, {1}, "w.bin", "-4", "4")),
                 {"'offset' is '-4'"});
  ExpectContains(ExternalError(External(TensorProto::FLOAT, {1}, "w.bin", "0", "4k")),
                 {"'length' is '4k'"});
  ExpectContains(ExternalError(External(TensorProto::FLOAT, {1}, "")), {"no 'location'"});
  fs::create_directories(dir_ / "folder.bin");
  ExpectContains(ExternalError(External(TensorProto::FLOAT, {1}, "folder.bin")),
                 {"does not exist"});
}

TEST_F(LoaderFileTest, ExternalDataMustStayInsideTheModelFolder) {
  const std::string four_bytes(4, '\0');
  WriteFile(root_ / "outside.bin", four_bytes);
  WriteFile(dir_ / "inside.bin", four_bytes);
  ExpectContains(ExternalError(External(TensorProto::FLOAT, {1}, "../outside.bin")),
                 {"initializer 'w'", "'../outside.bin'", ".."});
  ExpectContains(ExternalError(External(TensorProto::FLOAT, {1}, "sub/../../outside.bin")), {".."});
  ExpectContains(ExternalError(External(TensorProto::FLOAT, {1}, (dir_ / "inside.bin").string())),
                 {"absolute path"});

  fs::create_symlink(root_ / "outside.bin", dir_ / "link.bin");
  ExpectContains(ExternalError(External(TensorProto::FLOAT, {1}, "link.bin")),
                 {"initializer 'w'", "'link.bin'", "outside the model's folder"});
  fs::create_directories(root_ / "elsewhere");
  WriteFile(root_ / "elsewhere" / "w.bin", four_bytes);
  fs::create_directory_symlink(root_ / "elsewhere", dir_ / "linked_dir");
  ExpectContains(ExternalError(External(TensorProto::FLOAT, {1}, "linked_dir/w.bin")),
                 {"outside the model's folder"});
  // The model folder itself: a location must name a file inside it.
  ExpectContains(ExternalError(External(TensorProto::FLOAT, {1}, ".")),
                 {"outside the model's folder"});

  // A symlink that stays inside the folder is fine.
  fs::create_symlink(dir_ / "inside.bin", dir_ / "inner_link.bin");
  EXPECT_NO_THROW(
      SaveAndLoad(ModelWithInitializer(External(TensorProto::FLOAT, {1}, "inner_link.bin"))));
}

TEST_F(LoaderFileTest, ModelReachedThroughASymlinkedFolderReadsItsOwnData) {
  // The folder check compares canonical paths, so a model opened through a
  // symlinked folder still finds the data in the real folder.
  WriteFile(dir_ / "w.bin", BytesOf(std::vector<float>{4.f}));
  WriteFile(dir_ / "model.onnx",
            ModelWithInitializer(External(TensorProto::FLOAT, {1}, "w.bin")).SerializeAsString());
  fs::create_directory_symlink(dir_, root_ / "alias");
  const Model model = LoadModelFromFile((root_ / "alias" / "model.onnx").string());
  EXPECT_EQ(model.graph.values[model.graph.FindValue("w")].initializer->data<float>()[0], 4.f);
}

}  // namespace
}  // namespace octet
