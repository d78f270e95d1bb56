// Helpers shared by the integer operator tests (integer_matmul_test.cc,
// integer_conv_test.cc): building tensors, running one node through the
// kernel registry, and the requantization formula written out independently
// of src/kernels/int8/requantize.h.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

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

// Runs one node on `pool` (nullptr: the calling thread only); nullopt inputs are
// omitted optional inputs. Returns output 0.
inline Tensor RunNode(const std::string& op, int opset,
                      const std::vector<std::optional<Tensor>>& inputs,
                      const std::map<std::string, Attribute>& attributes = {},
                      const std::string& name = "node_under_test", ThreadPool* pool = nullptr) {
  Node node;
  node.name = name;
  node.op_type = op;
  node.domain = kOnnxDomain;
  node.opset = opset;
  node.attributes = attributes;
  std::vector<DType> types;
  std::vector<const Tensor*> ptrs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    node.inputs.push_back(inputs[i] ? static_cast<int>(i) : -1);
    types.push_back(inputs[i] ? inputs[i]->dtype() : DType::kUndefined);
    ptrs.push_back(inputs[i] ? &*inputs[i] : nullptr);
  }
  node.outputs = {static_cast<int>(inputs.size())};
  const KernelDef& def = KernelRegistry::Global().Find(node, types);
  const std::vector<DType> out_types = def.infer_types(node, types);
  KernelInit init{node, types, std::vector<const Tensor*>(inputs.size(), nullptr), pool};
  auto kernel = def.create(init);
  KernelContext ctx(node, ptrs, pool);
  kernel->Run(ctx);
  EXPECT_EQ(out_types, std::vector<DType>{ctx.outputs()[0].dtype()});
  return ctx.outputs()[0];
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
