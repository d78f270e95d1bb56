// com.microsoft QLinearAdd and QLinearMul (uint8 / int8, numpy broadcasting),
// bit for bit with ONNX Runtime 1.31.1 (arithmetic: kernels/int8/qlinear_binary.h).
// The QDQ pass (rewrite/qdq_binary.h) also puts these nodes in place of
// DequantizeLinear x2 -> Add | Mul -> QuantizeLinear.
#include "kernels/int8/qlinear_binary.h"

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/float/broadcast.h"
#include "ops/int_params.h"
#include "ops/registry.h"

namespace octet {

namespace {

enum BinaryInput { kA = 0, kAScale, kAZero, kB, kBScale, kBZero, kCScale, kCZero, kInputCount };

// True when ORT runs this broadcast with A as the single value of each span
// (its input0scalar path, which calls the kernel with A and B swapped). ORT's
// Broadcaster decides it at the innermost dimension it starts its iterators
// on: the last one when either input is rank 0, else the innermost one where
// not both inputs are 1 (or the last of the shorter rank).
bool OrtTreatsAAsScalar(const Shape& a, const Shape& b) {
  const size_t min_rank = std::min(a.size(), b.size());
  const size_t max_rank = std::max(a.size(), b.size());
  auto dim = [](const Shape& s, size_t from_end) {
    return from_end < s.size() ? s[s.size() - 1 - from_end] : int64_t{1};
  };
  if (min_rank == 0) return dim(a, 0) <= 1;
  for (size_t i = 0; i < min_rank; ++i) {
    if (std::max(dim(a, i), dim(b, i)) == 1 && i + 1 < max_rank) continue;
    return dim(a, i) <= 1;
  }
  // The shorter input is all ones: ORT treats A as a vector from its next dim on.
  for (size_t i = min_rank; i < max_rank; ++i)
    if (std::max(dim(a, i), dim(b, i)) != 1) return dim(a, i) <= 1;
  return true;
}

float ReadScalarScale(const KernelContext& ctx, size_t i, const char* name) {
  const Tensor& t = ctx.input(i);
  OCTET_CHECK(t.dtype() == DType::kFloat32, ctx.node().Describe(), ": ", name, " has dtype ",
              DTypeName(t.dtype()), "; expected float");
  CheckPerTensor(ctx.node(), t, name);
  return t.data<float>()[0];
}

int32_t ReadScalarZero(const KernelContext& ctx, size_t i, DType type, const char* name) {
  if (!ctx.has_input(i)) return 0;
  CheckPerTensor(ctx.node(), ctx.input(i), name);
  return ReadZeroPoints(ctx.node(), ctx.input(i), type, name)[0];
}

template <typename T, typename Fn>
void BroadcastBinary(const Tensor& a, const Tensor& b, Tensor& c, Fn&& fn) {
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* pc = c.data<T>();
  constexpr int32_t kMin = std::is_signed_v<T> ? -128 : 0;
  constexpr int32_t kMax = kMin + 255;
  ForEachBroadcast<2>(c.shape(), {&a.shape(), &b.shape()},
                      [&](int64_t out, const std::array<int64_t, 2>& in) {
                        const int32_t v = fn(int32_t{pa[in[0]]}, int32_t{pb[in[1]]});
                        pc[out] = static_cast<T>(std::clamp(v, kMin, kMax));
                      });
}

class QLinearBinaryKernel : public OpKernel {
 public:
  explicit QLinearBinaryKernel(bool is_add) : is_add_(is_add) {}

  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& a = ctx.input(kA);
    const Tensor& b = ctx.input(kB);
    QLinearBinaryParams p;
    p.type = a.dtype();
    p.a_scale = ReadScalarScale(ctx, kAScale, "A_scale");
    p.b_scale = ReadScalarScale(ctx, kBScale, "B_scale");
    p.c_scale = ReadScalarScale(ctx, kCScale, "C_scale");
    p.a_zero = ReadScalarZero(ctx, kAZero, p.type, "A_zero_point");
    p.b_zero = ReadScalarZero(ctx, kBZero, p.type, "B_zero_point");
    p.c_zero = ReadScalarZero(ctx, kCZero, p.type, "C_zero_point");
    const std::optional<Shape> shape = BroadcastShapes(a.shape(), b.shape());
    OCTET_CHECK(shape.has_value(), node.Describe(), ": inputs of shapes ", ShapeToString(a.shape()),
                " and ", ShapeToString(b.shape()), " do not broadcast");
    Tensor& c = ctx.AllocateOutput(0, p.type, *shape);
    if (is_add_) {
      const QLinearAddArithmetic add(p);
      const bool scalar_a = OrtTreatsAAsScalar(a.shape(), b.shape());
      auto fn = [&](int32_t x, int32_t y) { return add(x, y, scalar_a); };
      p.type == DType::kInt8 ? BroadcastBinary<int8_t>(a, b, c, fn)
                             : BroadcastBinary<uint8_t>(a, b, c, fn);
    } else {
      const QLinearMulArithmetic mul(p);
      p.type == DType::kInt8 ? BroadcastBinary<int8_t>(a, b, c, mul)
                             : BroadcastBinary<uint8_t>(a, b, c, mul);
    }
  }

 private:
  bool is_add_;
};

bool AcceptsBinary(const Node&, const std::vector<DType>& t) {
  if (t.size() < kCScale + 1 || t.size() > kInputCount || !IsInt8Type(t[kA]) || t[kB] != t[kA])
    return false;
  for (size_t zero : {kAZero, kBZero, kCZero})
    if (zero < t.size() && t[zero] != DType::kUndefined && t[zero] != t[kA]) return false;
  return t[kAScale] == DType::kFloat32 && t[kBScale] == DType::kFloat32 &&
         t[kCScale] == DType::kFloat32;
}

}  // namespace

void RegisterQLinearBinaryOps(KernelRegistry& r) {
  for (const bool is_add : {true, false}) {
    r.Register(
        {kMsDomain, is_add ? "QLinearAdd" : "QLinearMul", 1, 1 << 30, AcceptsBinary,
         [](const Node&, const std::vector<DType>& t) { return std::vector<DType>{t[kA]}; },
         [is_add](const KernelInit&) { return std::make_unique<QLinearBinaryKernel>(is_add); }});
  }
}

}  // namespace octet
