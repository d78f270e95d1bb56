// Thread safety of InferenceSession (docs/reliability.md): one session's Run called from
// 8 threads at once gives each caller the bytes a lone run gives, and sessions created and
// destroyed meanwhile disturb nothing. The ThreadSanitizer tier (scripts/test.sh) runs
// these with every other unit test.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "onnx.pb.h"
#include "runtime/session.h"

namespace octet {
namespace {

using onnx::TensorProto;

constexpr int kThreads = 8;
constexpr int kRunsPerThread = 25;

TensorProto* Initializer(onnx::GraphProto* g, const std::string& name, int32_t type,
                         const Shape& dims) {
  TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : dims) t->add_dims(d);
  return t;
}

onnx::NodeProto* Node(onnx::GraphProto* g, const std::string& op,
                      const std::vector<std::string>& in, const std::string& out,
                      int64_t axis = -2) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(out);
  for (const auto& i : in) n->add_input(i);
  n->add_output(out);
  if (axis != -2) {
    auto* a = n->add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(axis);
  }
  return n;
}

// A QDQ MatMul group (folded into the integer GEMM), a QDQ Conv group, and float ops
// after them: x [batch, 64] -> Q/DQ -> MatMul(DQ(W int8 [64, 96], per column)) -> Q/DQ ->
// Reshape [batch, 6, 4, 4] -> Conv(DQ(K int8 [8, 6, 3, 3]), pads 1) -> Q/DQ -> Flatten ->
// Softmax -> y [batch, 128].
std::string Model() {
  std::mt19937 rng(7);
  onnx::ModelProto m;
  m.set_ir_version(10);
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(21);
  auto* g = m.mutable_graph();
  g->set_name("concurrency");
  auto* in = g->add_input();
  in->set_name("x");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(TensorProto::FLOAT);
  auto* shape = in->mutable_type()->mutable_tensor_type()->mutable_shape();
  shape->add_dim()->set_dim_param("batch");
  shape->add_dim()->set_dim_value(64);
  g->add_output()->set_name("y");

  auto scalar = [&](const std::string& name, float v) {
    Initializer(g, name, TensorProto::FLOAT, {})->add_float_data(v);
  };
  scalar("xs", 0.02f);
  scalar("hs", 0.05f);
  scalar("cs", 0.1f);
  Initializer(g, "z", TensorProto::INT8, {})->add_int32_data(0);
  TensorProto* w = Initializer(g, "w", TensorProto::INT8, {64, 96});
  for (int i = 0; i < 64 * 96; ++i) w->add_int32_data(static_cast<int>(rng() % 255) - 127);
  TensorProto* ws = Initializer(g, "ws", TensorProto::FLOAT, {96});
  for (int i = 0; i < 96; ++i) ws->add_float_data(0.001f * static_cast<float>(1 + i % 7));
  TensorProto* k = Initializer(g, "k", TensorProto::INT8, {8, 6, 3, 3});
  for (int i = 0; i < 8 * 6 * 9; ++i) k->add_int32_data(static_cast<int>(rng() % 255) - 127);
  scalar("ks", 0.003f);
  TensorProto* r = Initializer(g, "r", TensorProto::INT64, {4});
  for (int64_t d : {-1, 6, 4, 4}) r->add_int64_data(d);

  Node(g, "QuantizeLinear", {"x", "xs", "z"}, "xq");
  Node(g, "DequantizeLinear", {"xq", "xs", "z"}, "xd");
  Node(g, "DequantizeLinear", {"w", "ws"}, "wd", 1);
  Node(g, "MatMul", {"xd", "wd"}, "h");
  Node(g, "QuantizeLinear", {"h", "hs", "z"}, "hq");
  Node(g, "DequantizeLinear", {"hq", "hs", "z"}, "hd");
  Node(g, "Reshape", {"hd", "r"}, "img");
  Node(g, "DequantizeLinear", {"k", "ks"}, "kd");
  auto* pads = Node(g, "Conv", {"img", "kd"}, "c")->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  Node(g, "QuantizeLinear", {"c", "cs", "z"}, "cq");
  Node(g, "DequantizeLinear", {"cq", "cs", "z"}, "cd");
  Node(g, "Flatten", {"cd"}, "f", 1);
  Node(g, "Softmax", {"f"}, "y", -1);
  return m.SerializeAsString();
}

Tensor Input(int seed, int64_t batch) {
  std::mt19937 rng(static_cast<unsigned>(seed));
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  Tensor x(DType::kFloat32, {batch, 64});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = dist(rng);
  return x;
}

std::string Bytes(const Tensor& t) {
  return std::string(static_cast<const char*>(t.raw()), t.nbytes());
}

// Rows enough that the kernels split their work over the session's pool (a few rows run on
// the calling thread alone, and concurrent runs would then share nothing to race on).
constexpr int64_t kRows = 64;

// Eight threads share one session (2 pool threads), each running its own inputs; every
// result equals that input's result from a lone run on a fresh 1-thread session.
TEST(ConcurrencyTest, OneSessionRunFromEightThreadsGivesIdenticalBytes) {
  const std::string model = Model();
  auto reference_session = InferenceSession::FromBytes(model.data(), model.size(), {.threads = 1});
  std::vector<Tensor> inputs;
  std::vector<std::string> expected;
  for (int t = 0; t < kThreads; ++t) {
    inputs.push_back(Input(t, kRows + t % 3));
    expected.push_back(Bytes(reference_session->Run({{"x", inputs.back()}})[0]));
  }
  auto shared = InferenceSession::FromBytes(model.data(), model.size(), {.threads = 2});
  std::atomic<int> mismatches{0}, errors{0}, runs{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRunsPerThread; ++i) {
        try {
          const std::vector<Tensor> out = shared->Run({{"x", inputs[t]}});
          if (Bytes(out[0]) != expected[t]) ++mismatches;
          ++runs;
        } catch (const Error&) {
          ++errors;
        }
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(runs.load(), kThreads * kRunsPerThread);
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(errors.load(), 0);
}

// Sessions created, run and destroyed on four threads while four others run a shared one.
TEST(ConcurrencyTest, SessionsComeAndGoWhileOthersRun) {
  const std::string model = Model();
  auto shared = InferenceSession::FromBytes(model.data(), model.size(), {.threads = 2});
  const Tensor x = Input(99, kRows);
  const std::string expected = Bytes(shared->Run({{"x", x}})[0]);
  std::atomic<int> mismatches{0}, created{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      while (!stop.load())
        if (Bytes(shared->Run({{"x", x}})[0]) != expected) ++mismatches;
    });
  std::vector<std::thread> makers;
  for (int t = 0; t < 4; ++t)
    makers.emplace_back([&, t] {
      for (int i = 0; i < 6; ++i) {
        auto s = InferenceSession::FromBytes(model.data(), model.size(), {.threads = 1 + t % 2});
        if (Bytes(s->Run({{"x", x}})[0]) != expected) ++mismatches;
        ++created;
      }
    });
  for (auto& th : makers) th.join();
  stop.store(true);
  for (auto& th : threads) th.join();
  EXPECT_EQ(created.load(), 24);
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace octet
