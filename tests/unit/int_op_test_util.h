// Helpers shared by the integer operator tests (integer_matmul_test.cc,
// integer_conv_test.cc): building tensors, running one node through the
// kernel registry, and the requantization formula written out independently
// of src/kernels/int8/requantize.h.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "ops/registry.h"

namespace octet::int_test {

template <typename T>
Tensor MakeTensor(Shape shape, const std::vector<T>& values) {
  Tensor t(DTypeOf<T>::value, std::move(shape));
  EXPECT_EQ(static_cast<size_t>(t.numel()), values.size());
  if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * sizeof(T));
  return t;
}

template <typename T>
Tensor Scalar(T value) {
  return MakeTensor<T>({}, {value});
}

// A uint8 or int8 tensor with uniformly random values over the whole type range.
inline Tensor RandomInt8(DType dtype, Shape shape, std::mt19937& rng) {
  Tensor t(dtype, std::move(shape));
  std::uniform_int_distribution<int> dist(0, 255);
  auto* p = static_cast<uint8_t*>(t.raw());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<uint8_t>(dist(rng));
  return t;
}

// Element i of a uint8 or int8 tensor as an integer.
inline int64_t Int8At(const Tensor& t, int64_t i) {
  const uint8_t byte = static_cast<const uint8_t*>(t.raw())[i];
  return t.dtype() == DType::kInt8 ? static_cast<int8_t>(byte) : byte;
}

// A zero point tensor of `dtype` holding `values` with `shape`.
inline Tensor ZeroPoints(DType dtype, Shape shape, const std::vector<int>& values) {
  Tensor t(dtype, std::move(shape));
  EXPECT_EQ(static_cast<size_t>(t.numel()), values.size());
  for (size_t i = 0; i < values.size(); ++i)
    static_cast<uint8_t*>(t.raw())[i] = static_cast<uint8_t>(values[i]);
  return t;
}

inline int TypeMin(DType t) { return t == DType::kInt8 ? -128 : 0; }
inline int TypeMax(DType t) { return t == DType::kInt8 ? 127 : 255; }

// How RunNode runs a node: its domain, attributes and name, the inputs handed to the
// kernel at creation as a session hands it initializers (so weights are packed once),
// the pool (nullptr: the calling thread only), and how many runs (a second run must
// give the same bytes: it reuses what creation prepared).
struct NodeRun {
  std::string domain = kOnnxDomain;
  std::map<std::string, Attribute> attributes = {};
  std::string name = "node_under_test";
  std::vector<bool> constant = {};
  ThreadPool* pool = nullptr;
  int runs = 1;
};

// Runs one node through the registry as a session would; nullopt inputs are omitted
// optional inputs. Checks the output types against infer_types; returns output 0.
inline Tensor RunNode(const std::string& op, int opset,
                      const std::vector<std::optional<Tensor>>& inputs, const NodeRun& how) {
  Node node;
  node.name = how.name;
  node.op_type = op;
  node.domain = how.domain;
  node.opset = opset;
  node.attributes = how.attributes;
  std::vector<DType> types;
  std::vector<const Tensor*> ptrs, constants;
  for (size_t i = 0; i < inputs.size(); ++i) {
    node.inputs.push_back(inputs[i] ? static_cast<int>(i) : -1);
    types.push_back(inputs[i] ? inputs[i]->dtype() : DType::kUndefined);
    ptrs.push_back(inputs[i] ? &*inputs[i] : nullptr);
    const bool constant = i < how.constant.size() && how.constant[i];
    constants.push_back(inputs[i] && constant ? &*inputs[i] : nullptr);
  }
  node.outputs = {static_cast<int>(inputs.size())};
  const KernelDef& def = KernelRegistry::Global().Find(node, types);
  const std::vector<DType> out_types = def.infer_types(node, types);
  auto kernel = def.create(KernelInit{node, types, constants, how.pool});
  Tensor out;
  for (int run = 0; run < how.runs; ++run) {
    KernelContext ctx(node, ptrs, how.pool);
    kernel->Run(ctx);
    EXPECT_EQ(out_types, std::vector<DType>{ctx.outputs()[0].dtype()});
    if (run > 0) {
      EXPECT_EQ(std::memcmp(out.raw(), ctx.outputs()[0].raw(), out.nbytes()), 0);
    }
    out = ctx.outputs()[0];
  }
  return out;
}

// The ai.onnx form most tests use.
inline Tensor RunNode(const std::string& op, int opset,
                      const std::vector<std::optional<Tensor>>& inputs,
                      const std::map<std::string, Attribute>& attributes = {},
                      ThreadPool* pool = nullptr) {
  return RunNode(op, opset, inputs, NodeRun{.attributes = attributes, .pool = pool});
}

// For tests that force an instruction set in a re-executed child: sets OCTET_ISA, runs
// count_failures (which logs what failed) and returns the child's exit code.
inline int ExitCodeWithIsa(const char* isa,
                           const std::function<int64_t(std::ostream&)>& count_failures) {
  setenv("OCTET_ISA", isa, 1);
  std::ostringstream log;
  const int64_t failing = count_failures(log);
  std::fprintf(stderr, "%s", log.str().c_str());
  return failing == 0 ? 0 : 1;
}

// Rounds half to even by comparing with the floor (no reliance on the FPU mode).
inline double RoundHalfEven(double v) {
  const double r = std::floor(v);
  const double frac = v - r;
  if (frac > 0.5) return r + 1;
  if (frac < 0.5) return r;
  return std::fmod(r, 2.0) == 0 ? r : r + 1;
}

// docs/int8.md: m = (a_scale * b_scale) / y_scale in float32; float32(acc) * m
// (one float32 product); clamp to [qmin - zp, qmax - zp]; round half to even; + zp.
inline int ExpectedRequant(int64_t acc, float a_scale, float b_scale, float y_scale, int zp,
                           DType out) {
  const float product = a_scale * b_scale;
  const float multiplier = product / y_scale;
  const float scaled = static_cast<float>(static_cast<int32_t>(acc)) * multiplier;
  double v = scaled;
  v = std::min<double>(std::max<double>(v, TypeMin(out) - zp), TypeMax(out) - zp);
  return static_cast<int>(RoundHalfEven(v)) + zp;
}

// Runs `fn` and checks it throws octet::Error whose message contains every part.
template <typename Fn>
void ExpectError(Fn fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an octet::Error containing '" << parts[0] << "'";
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const auto& part : parts)
      EXPECT_NE(message.find(part), std::string::npos) << "message: " << message;
  }
}

}  // namespace octet::int_test
