// What octet promises about hostile input (docs/reliability.md): text in a model is UTF-8
// or refused naming its field; every tensor is checked against a size limit before it is
// allocated, at load and at run; shapes that overflow are errors; deep and cyclic graphs
// are handled without recursion. Models are built with the generated protobuf classes,
// so every byte the loader sees is spelled out here.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "core/memory_limit.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "core/utf8.h"
#include "expect_error.h"
#include "model/onnx_loader.h"
#include "onnx.pb.h"
#include "runtime/session.h"

namespace octet {
namespace {

namespace fs = std::filesystem;
using onnx::TensorProto;

// ---- models -----------------------------------------------------------------------------

onnx::ModelProto BaseModel(int opset = 21) {
  onnx::ModelProto m;
  m.set_ir_version(10);
  m.set_producer_name("reliability_test");
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

void AddInput(onnx::ModelProto& m, const std::string& name, int32_t type,
              const std::vector<std::string>& dims) {
  auto* in = m.mutable_graph()->add_input();
  in->set_name(name);
  auto* t = in->mutable_type()->mutable_tensor_type();
  t->set_elem_type(type);
  auto* shape = t->mutable_shape();
  for (const std::string& d : dims) {
    auto* dim = shape->add_dim();
    if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0])))
      dim->set_dim_value(std::stoll(d));
    else
      dim->set_dim_param(d);
  }
}

onnx::NodeProto* AddNode(onnx::ModelProto& m, const std::string& op,
                         const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs) {
  auto* n = m.mutable_graph()->add_node();
  n->set_op_type(op);
  n->set_name(op + std::to_string(m.graph().node_size()));
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return n;
}

void AddOutput(onnx::ModelProto& m, const std::string& name) {
  m.mutable_graph()->add_output()->set_name(name);
}

TensorProto* AddInitializer(onnx::ModelProto& m, const std::string& name, int32_t type,
                            const Shape& dims) {
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : dims) t->add_dims(d);
  return t;
}

Model Load(const onnx::ModelProto& m) {
  const std::string bytes = m.SerializeAsString();
  return LoadModelFromBytes(bytes.data(), bytes.size(), "");
}

std::unique_ptr<InferenceSession> Session(const onnx::ModelProto& m,
                                          const SessionOptions& options = {}) {
  const std::string bytes = m.SerializeAsString();
  return InferenceSession::FromBytes(bytes.data(), bytes.size(), options);
}

Tensor Int64s(const std::vector<int64_t>& values) {
  Tensor t(DType::kInt64, {int64_t(values.size())});
  for (size_t i = 0; i < values.size(); ++i) t.data<int64_t>()[i] = values[i];
  return t;
}

// prefix + i (appending, not "literal" + std::string: GCC 12 warns falsely about that
// with -Wrestrict when it is inlined into a loop).
std::string Name(const char* prefix, int i) {
  std::string name(prefix);
  name += std::to_string(i);
  return name;
}

// x float [2, 3] -> Identity -> y: the smallest model that loads.
onnx::ModelProto IdentityModel() {
  onnx::ModelProto m = BaseModel();
  AddInput(m, "x", TensorProto::FLOAT, {"2", "3"});
  AddNode(m, "Identity", {"x"}, {"y"});
  AddOutput(m, "y");
  return m;
}

// ---- UTF-8 ------------------------------------------------------------------------------

TEST(Utf8Test, AcceptsWhatPythonDecodes) {
  for (const std::string& s : {std::string(""), std::string("plain ascii"),
                               std::string("caf\xc3\xa9"), std::string("\xe2\x82\xac"),
                               std::string("\xf0\x9f\x98\x80"), std::string("\xf4\x8f\xbf\xbf"),
                               std::string("\xed\x9f\xbf"), std::string("nul\0inside", 10)})
    EXPECT_EQ(InvalidUtf8Offset(s), std::string_view::npos) << EscapeInvalidUtf8(s);
}

TEST(Utf8Test, RefusesWhatPythonRefuses) {
  struct Case {
    std::string text;
    size_t offset;
  };
  const Case cases[] = {
      {"\xff", 0},                // never valid
      {"ab\x80", 2},              // a lone continuation byte
      {"\xc0\xaf", 0},            // overlong '/'
      {"\xc1\xbf", 0},            // overlong
      {"\xe0\x80\xaf", 0},        // overlong 3-byte form
      {"\xf0\x80\x80\xaf", 0},    // overlong 4-byte form
      {"\xed\xa0\x80", 0},        // a surrogate (U+D800)
      {"\xf4\x90\x80\x80", 0},    // above U+10FFFF
      {"x\xe2\x82", 1},           // truncated at the end
      {"\xc3(", 0},               // a bad continuation
      {"ok\xf5\x80\x80\x80", 2},  // F5 never leads
  };
  for (const Case& c : cases) EXPECT_EQ(InvalidUtf8Offset(c.text), c.offset) << c.text;
}

TEST(Utf8Test, EscapesOnlyTheBadBytes) {
  EXPECT_EQ(EscapeInvalidUtf8("caf\xc3\xa9 \xff\xc3("), "caf\xc3\xa9 \\xff\\xc3(");
  EXPECT_EQ(InvalidUtf8Offset(EscapeInvalidUtf8("\xed\xa0\x80\xf4\x90")), std::string_view::npos);
}

// Every kind of text field the loader reads, made invalid one at a time.
TEST(LoaderTextTest, InvalidUtf8IsRefusedNamingTheField) {
  const std::string bad = "bad\xff";
  struct Case {
    std::function<void(onnx::ModelProto&)> corrupt;
    std::vector<std::string> message;
  };
  const std::vector<Case> cases = {
      {[&](onnx::ModelProto& m) { m.set_producer_name(bad); }, {"producer_name"}},
      {[&](onnx::ModelProto& m) { m.set_doc_string(bad); }, {"the model's doc_string"}},
      {[&](onnx::ModelProto& m) {
         auto* p = m.add_metadata_props();
         p->set_key("k");
         p->set_value(bad);
       },
       {"metadata_props[0] ('k') value"}},
      {[&](onnx::ModelProto& m) { m.mutable_graph()->set_name(bad); }, {"the graph's name"}},
      {[&](onnx::ModelProto& m) { m.mutable_graph()->mutable_input(0)->set_name(bad); },
       {"graph input 0 name"}},
      {[&](onnx::ModelProto& m) {
         m.mutable_graph()
             ->mutable_input(0)
             ->mutable_type()
             ->mutable_tensor_type()
             ->mutable_shape()
             ->mutable_dim(1)
             ->set_dim_param(bad);
       },
       {"graph input 0 ('x') dimension 1 dim_param"}},
      {[&](onnx::ModelProto& m) { m.mutable_graph()->mutable_output(0)->set_name(bad); },
       {"graph output 0 name"}},
      {[&](onnx::ModelProto& m) { m.mutable_graph()->mutable_node(0)->set_name(bad); },
       {"node 0 name"}},
      {[&](onnx::ModelProto& m) { m.mutable_graph()->mutable_node(0)->set_op_type(bad); },
       {"node 0 ('Identity1') op_type"}},
      {[&](onnx::ModelProto& m) { m.mutable_graph()->mutable_node(0)->set_output(0, bad); },
       {"node 0 ('Identity1') output 0"}},
      {[&](onnx::ModelProto& m) {
         auto* a = m.mutable_graph()->mutable_node(0)->add_attribute();
         a->set_name("mode");
         a->set_type(onnx::AttributeProto::STRING);
         a->set_s(bad);
       },
       {"node 0 ('Identity1') attribute 'mode' string value"}},
      {[&](onnx::ModelProto& m) {
         auto* a = m.mutable_graph()->mutable_node(0)->add_attribute();
         a->set_name("names");
         a->set_type(onnx::AttributeProto::STRINGS);
         a->add_strings("fine");
         a->add_strings(bad);
       },
       {"attribute 'names' strings[1]"}},
      {[&](onnx::ModelProto& m) {
         TensorProto* t = AddInitializer(m, "w", TensorProto::FLOAT, {1});
         t->set_data_location(TensorProto::EXTERNAL);
         auto* e = t->add_external_data();
         e->set_key("location");
         e->set_value(bad);
       },
       {"initializer 0 ('w') external data 'location'"}},
      {[&](onnx::ModelProto& m) { AddInitializer(m, bad, TensorProto::FLOAT, {1}); },
       {"initializer 0 name"}},
      {[&](onnx::ModelProto& m) { m.mutable_opset_import(0)->set_domain(bad); },
       {"opset_import[0] domain"}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    onnx::ModelProto m = IdentityModel();
    cases[i].corrupt(m);
    const std::string message = ErrorOf([&] { Load(m); });
    ExpectContains(message, cases[i].message);
    ExpectContains(message, {"is not valid UTF-8 (byte 0xff at offset 3)", "'bad\\xff'"});
    EXPECT_EQ(InvalidUtf8Offset(message), std::string_view::npos) << "case " << i;
  }
}

TEST(LoaderTextTest, OctetsOwnDomainIsReserved) {
  onnx::ModelProto m = IdentityModel();
  auto* o = m.add_opset_import();
  o->set_domain("octet");
  o->set_version(1);
  m.mutable_graph()->mutable_node(0)->set_op_type("QLinearMatMulFused");
  m.mutable_graph()->mutable_node(0)->set_domain("octet");
  ExpectContains(ErrorOf([&] { Load(m); }), {"domain 'octet' is reserved"});
}

// ---- the tensor size limit --------------------------------------------------------------

TEST(MemoryLimitTest, ByteSizesParse) {
  EXPECT_EQ(ParseByteSize("1000", "x"), 1000u);
  EXPECT_EQ(ParseByteSize("4K", "x"), 4096u);
  EXPECT_EQ(ParseByteSize("3m", "x"), uint64_t{3} << 20);
  EXPECT_EQ(ParseByteSize("2G", "x"), uint64_t{2} << 30);
  EXPECT_EQ(ParseByteSize("1T", "x"), uint64_t{1} << 40);
  for (const char* bad : {"", "0", "-1", "1.5G", "12 M", "1KB", "G", "99999999999999999999"})
    ExpectContains(ErrorOf([&] { ParseByteSize(bad, "OCTET_MAX_TENSOR_BYTES"); }),
                   {"OCTET_MAX_TENSOR_BYTES"});
  ExpectContains(ErrorOf([] { ParseByteSize("17179869184T", "x"); }), {"more than 2^64"});
  EXPECT_EQ(ByteCountToString(uint64_t{6} << 30), "6 GiB");
  EXPECT_EQ(ByteCountToString(1000), "1000 bytes");
  EXPECT_EQ(ByteCountToString(6319014912), "6319014912 bytes (5.9 GiB)");
}

TEST(MemoryLimitTest, DefaultIsAQuarterOfMemoryOrTheEnvironment) {
  ASSERT_EQ(unsetenv("OCTET_MAX_TENSOR_BYTES"), 0);
  const uint64_t physical =
      static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t by_default = DefaultMaxTensorBytes();
  EXPECT_LE(by_default, physical / 4);
  EXPECT_GT(by_default, 0u);
  ASSERT_EQ(setenv("OCTET_MAX_TENSOR_BYTES", "12M", 1), 0);
  EXPECT_EQ(DefaultMaxTensorBytes(), uint64_t{12} << 20);
  ASSERT_EQ(setenv("OCTET_MAX_TENSOR_BYTES", "lots", 1), 0);
  ExpectContains(ErrorOf([] { DefaultMaxTensorBytes(); }),
                 {"OCTET_MAX_TENSOR_BYTES is 'lots', not a byte count"});
  ExpectContains(ErrorOf([] { InferenceSession::FromBytes("x", 1); }),
                 {"OCTET_MAX_TENSOR_BYTES is 'lots'"});
  ASSERT_EQ(unsetenv("OCTET_MAX_TENSOR_BYTES"), 0);
}

TEST(MemoryLimitTest, TensorsBeyondTheLimitAreRefusedBeforeAllocation) {
  const TensorByteLimit limit(4096);
  EXPECT_EQ(MaxTensorBytes(), 4096u);
  EXPECT_NO_THROW(Tensor(DType::kFloat32, {1024}));
  ExpectContains(ErrorOf([] { Tensor(DType::kFloat32, {1025}); }),
                 {"float tensor of shape [1025] (1025 elements of 4 bytes) is larger than the "
                  "tensor size limit, 4 KiB"});
  {
    const TensorByteLimit inner(1 << 20);
    EXPECT_NO_THROW(Tensor(DType::kInt8, {1 << 20}));
  }
  EXPECT_EQ(MaxTensorBytes(), 4096u);
  // The workers of a thread pool take the limit of the thread that started the job.
  ThreadPool pool(3);
  std::atomic<int> refused{0};
  pool.ParallelFor(3, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) try {
        Tensor(DType::kInt8, {4097});
      } catch (const Error&) {
        ++refused;
      }
  });
  EXPECT_EQ(refused.load(), 3);
}

TEST(MemoryLimitTest, ElementCountsThatOverflowAreErrors) {
  // 2^62 float elements are 2^64 bytes: the byte count wrapped to 0 before the check, and
  // the first write crashed.
  for (const Shape& shape : {Shape{int64_t{1} << 31, int64_t{1} << 31}, Shape{int64_t{1} << 62},
                             Shape{int64_t{1} << 40, int64_t{1} << 40}, Shape{-1, 2}}) {
    const std::string message = ErrorOf([&] { Tensor(DType::kFloat32, shape); });
    EXPECT_TRUE(message.find("larger than the tensor size limit") != std::string::npos ||
                message.find("too many elements") != std::string::npos ||
                message.find("negative dimension") != std::string::npos)
        << message;
  }
}

TEST(MemoryLimitTest, InitializersBeyondTheLimitFailTheLoad) {
  onnx::ModelProto m = IdentityModel();
  TensorProto* w = AddInitializer(m, "w", TensorProto::FLOAT, {600});
  w->set_raw_data(std::string(2400, '\0'));
  EXPECT_NO_THROW(Session(m, {.max_tensor_bytes = 4096}));
  ExpectContains(ErrorOf([&] { Session(m, {.max_tensor_bytes = 2048}); }),
                 {"initializer 'w'", "larger than the tensor size limit, 2 KiB"});
}

TEST(MemoryLimitTest, ExternalDataBeyondTheLimitIsRefusedBeforeReading) {
  // A declared [2^40] float tensor in a file that does not exist: the size is refused
  // first, so nothing is read or allocated.
  const fs::path dir = fs::temp_directory_path() / ("octet_limit_" + std::to_string(getpid()));
  fs::create_directories(dir);
  onnx::ModelProto m = IdentityModel();
  TensorProto* w = AddInitializer(m, "w", TensorProto::FLOAT, {int64_t{1} << 40});
  w->set_data_location(TensorProto::EXTERNAL);
  auto* e = w->add_external_data();
  e->set_key("location");
  e->set_value("weights.bin");
  const fs::path path = dir / "model.onnx";
  std::ofstream(path, std::ios::binary) << m.SerializeAsString();
  ExpectContains(ErrorOf([&] { InferenceSession::FromFile(path.string()); }),
                 {"initializer 'w'", "1099511627776 elements of 4 bytes", "tensor size limit"});
  fs::remove_all(dir);
}

// One node whose output size comes from its inputs, fed to exceed the limit.
struct ShapeCase {
  const char* name;
  std::function<onnx::ModelProto()> model;
  std::function<std::vector<std::pair<std::string, Tensor>>()> feeds;
};

std::vector<ShapeCase> RunTimeShapeCases() {
  auto x_and_shape = [](const std::string& op) {
    onnx::ModelProto m = BaseModel();
    AddInput(m, "x", TensorProto::FLOAT, {"a", "b"});
    AddInput(m, "s", TensorProto::INT64, {"r"});
    AddNode(m, op, {"x", "s"}, {"y"});
    AddOutput(m, "y");
    return m;
  };
  auto x = [] {
    Tensor t(DType::kFloat32, {1, 1});
    return t;
  };
  const int64_t big = int64_t{1} << 31;
  return {
      // Reshape never makes more elements than its input has: its risk is the product.
      {"Reshape", [=] { return x_and_shape("Reshape"); },
       [=] {
         return std::vector<std::pair<std::string, Tensor>>{
             {"x", x()}, {"s", Int64s({int64_t{1} << 32, int64_t{1} << 32})}};
       }},
      {"Expand", [=] { return x_and_shape("Expand"); },
       [=] {
         return std::vector<std::pair<std::string, Tensor>>{{"x", x()}, {"s", Int64s({big, big})}};
       }},
      {"ConstantOfShape",
       [] {
         onnx::ModelProto m = BaseModel();
         AddInput(m, "s", TensorProto::INT64, {"r"});
         AddNode(m, "ConstantOfShape", {"s"}, {"y"});
         AddOutput(m, "y");
         return m;
       },
       [=] {
         return std::vector<std::pair<std::string, Tensor>>{{"s", Int64s({big, big})}};
       }},
      {"Pad", [=] { return x_and_shape("Pad"); },
       [=] {
         return std::vector<std::pair<std::string, Tensor>>{{"x", x()},
                                                            {"s", Int64s({0, 0, big, big})}};
       }},
      {"Resize (sizes)",
       [] {
         onnx::ModelProto m = BaseModel();
         AddInput(m, "x", TensorProto::FLOAT, {"a", "b"});
         AddInput(m, "s", TensorProto::INT64, {"r"});
         AddNode(m, "Resize", {"x", "", "", "s"}, {"y"});
         AddOutput(m, "y");
         return m;
       },
       [=] {
         return std::vector<std::pair<std::string, Tensor>>{{"x", x()}, {"s", Int64s({big, big})}};
       }},
      {"Resize (scales)",
       [] {
         onnx::ModelProto m = BaseModel();
         AddInput(m, "x", TensorProto::FLOAT, {"a", "b"});
         AddInput(m, "s", TensorProto::FLOAT, {"r"});
         AddNode(m, "Resize", {"x", "", "s"}, {"y"});
         AddOutput(m, "y");
         return m;
       },
       [=] {
         Tensor scales(DType::kFloat32, {2});
         scales.data<float>()[0] = scales.data<float>()[1] = 3e9f;
         return std::vector<std::pair<std::string, Tensor>>{{"x", x()}, {"s", scales}};
       }},
      {"Range",
       [] {
         onnx::ModelProto m = BaseModel();
         for (const char* n : {"start", "limit", "delta"}) AddInput(m, n, TensorProto::INT64, {});
         AddNode(m, "Range", {"start", "limit", "delta"}, {"y"});
         AddOutput(m, "y");
         return m;
       },
       [=] {
         auto scalar = [](int64_t v) {
           Tensor t(DType::kInt64, {});
           t.data<int64_t>()[0] = v;
           return t;
         };
         return std::vector<std::pair<std::string, Tensor>>{
             {"start", scalar(0)}, {"limit", scalar(int64_t{1} << 62)}, {"delta", scalar(1)}};
       }},
  };
}

// The example: an Expand to [2^31, 2^31] float killed the process with SIGSEGV.
TEST(MemoryLimitTest, RunTimeShapesBeyondTheLimitFailTheRun) {
  for (const ShapeCase& c : RunTimeShapeCases()) {
    SCOPED_TRACE(c.name);
    auto session = Session(c.model(), {.max_tensor_bytes = 1 << 20});
    const std::string message = ErrorOf([&] { session->Run(c.feeds()); });
    ExpectContains(message, {"opset 21"});
    EXPECT_TRUE(message.find("larger than the tensor size limit, 1 MiB") != std::string::npos ||
                message.find("too many elements") != std::string::npos)
        << message;
  }
}

TEST(MemoryLimitTest, TheSessionOptionAndTheEnvironmentSetTheLimit) {
  onnx::ModelProto m = BaseModel();
  AddInput(m, "s", TensorProto::INT64, {"r"});
  AddNode(m, "ConstantOfShape", {"s"}, {"y"});
  AddOutput(m, "y");
  const std::vector<std::pair<std::string, Tensor>> feeds = {{"s", Int64s({1024, 2})}};  // 8 KiB
  EXPECT_NO_THROW(Session(m, {.max_tensor_bytes = 8192})->Run(feeds));
  ExpectContains(ErrorOf([&] { Session(m, {.max_tensor_bytes = 8191})->Run(feeds); }),
                 {"ConstantOfShape", "tensor size limit, 8191 bytes"});
  ASSERT_EQ(setenv("OCTET_MAX_TENSOR_BYTES", "4K", 1), 0);
  auto session = Session(m);
  ASSERT_EQ(unsetenv("OCTET_MAX_TENSOR_BYTES"), 0);
  ExpectContains(ErrorOf([&] { session->Run(feeds); }), {"tensor size limit, 4 KiB"});
  EXPECT_NO_THROW(Session(m)->Run(feeds));
}

// ---- graph shape ------------------------------------------------------------------------

// A chain of 100,000 nodes: the loader's topological sort, the rewrites and the session
// walk it without recursion, and run it.
TEST(DeepGraphTest, LongChainsLoadAndRun) {
  constexpr int kDepth = 100000;
  onnx::ModelProto m = BaseModel();
  AddInput(m, "x", TensorProto::FLOAT, {"2"});
  std::string prev = "x";
  for (int i = 0; i < kDepth; ++i) {
    const std::string next = Name("v", i);
    AddNode(m, i % 2 ? "Neg" : "Relu", {prev}, {next});
    prev = next;
  }
  AddOutput(m, prev);
  // Shuffle the node order: the loader sorts them.
  auto* nodes = m.mutable_graph()->mutable_node();
  for (int i = 0; i + 1 < nodes->size(); i += 2) nodes->SwapElements(i, nodes->size() - 1 - i);
  auto session = Session(m);
  Tensor x(DType::kFloat32, {2});
  x.data<float>()[0] = 1.5f;
  x.data<float>()[1] = -2.0f;
  const std::vector<Tensor> out = session->Run({{"x", x}});
  // Relu, Neg, Relu, ...: [1.5, -2] -> [1.5, 0] -> [-1.5, -0] -> [0, 0] -> ... -> Neg: [-0, -0].
  for (int i = 0; i < 2; ++i) EXPECT_EQ(out[0].data<float>()[i], 0.0f);
}

// The lookup-table pass asks whether a node's other input is a one-element constant and
// followed a chain of pointwise producers by recursion: 100,000 of them overflowed the
// stack.
TEST(DeepGraphTest, LongConstantChainsIntoAQdqGroup) {
  constexpr int kDepth = 100000;
  onnx::ModelProto m = BaseModel();
  AddInput(m, "x", TensorProto::INT8, {"4"});
  TensorProto* s = AddInitializer(m, "s", TensorProto::FLOAT, {});
  s->add_float_data(0.5f);
  TensorProto* z = AddInitializer(m, "z", TensorProto::INT8, {});
  z->add_int32_data(0);
  TensorProto* c = AddInitializer(m, "c0", TensorProto::FLOAT, {});
  c->add_float_data(1.0f);
  for (int i = 1; i <= kDepth; ++i) AddNode(m, "Neg", {Name("c", i - 1)}, {Name("c", i)});
  AddNode(m, "DequantizeLinear", {"x", "s", "z"}, {"d"});
  AddNode(m, "Add", {"d", Name("c", kDepth)}, {"a"});
  AddNode(m, "QuantizeLinear", {"a", "s", "z"}, {"y"});
  AddOutput(m, "y");
  auto session = Session(m);
  Tensor x(DType::kInt8, {4});
  for (int i = 0; i < 4; ++i) x.data<int8_t>()[i] = static_cast<int8_t>(10 * i);
  const std::vector<Tensor> out = session->Run({{"x", x}});
  // x * 0.5 + 1 (an even number of Negs), quantized with scale 0.5: x + 2.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[0].data<int8_t>()[i], 10 * i + 2);
}

TEST(DeepGraphTest, CyclesAreRefused) {
  onnx::ModelProto m = BaseModel();
  AddInput(m, "x", TensorProto::FLOAT, {"2"});
  AddNode(m, "Add", {"x", "b"}, {"a"});
  AddNode(m, "Relu", {"a"}, {"b"});
  AddOutput(m, "b");
  ExpectContains(ErrorOf([&] { Session(m); }), {"the graph has a cycle"});
  onnx::ModelProto self = BaseModel();
  AddInput(self, "x", TensorProto::FLOAT, {"2"});
  AddNode(self, "Add", {"x", "y"}, {"y"});
  AddOutput(self, "y");
  ExpectContains(ErrorOf([&] { Session(self); }), {"the graph has a cycle"});
}

}  // namespace
}  // namespace octet
