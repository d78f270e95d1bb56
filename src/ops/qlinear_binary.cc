// com.microsoft QLinearAdd and QLinearMul (uint8 / int8, numpy broadcasting),
// bit for bit with ONNX Runtime 1.31.1 (arithmetic: kernels/int8/qlinear_binary.h),
// and octet.QdqAdd / QdqMul, which the QDQ pass (rewrite/qdq_binary.h) puts in place
// of DequantizeLinear x2 -> Add | Mul -> QuantizeLinear where ORT's result is not
// a plain QLinearAdd/Mul of the stored types.
#include "kernels/int8/qlinear_binary.h"

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/float/broadcast.h"
#include "ops/int_params.h"
#include "ops/registry.h"
#include "rewrite/qdq_binary.h"

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

int32_t ValueOfByte(uint8_t byte, DType type) {
  return type == DType::kInt8 ? int32_t{static_cast<int8_t>(byte)} : int32_t{byte};
}

// c = fn(a, b) over numpy broadcasting; fn maps the stored bytes of a and b to c's byte,
// so one loop serves every pair of 8-bit types.
template <typename Fn>
void BroadcastBytes(const Tensor& a, const Tensor& b, Tensor& c, Fn&& fn) {
  const uint8_t* pa = static_cast<const uint8_t*>(a.raw());
  const uint8_t* pb = static_cast<const uint8_t*>(b.raw());
  uint8_t* pc = static_cast<uint8_t*>(c.raw());
  ForEachBroadcast<2>(
      c.shape(), {&a.shape(), &b.shape()},
      [&](int64_t out, const std::array<int64_t, 2>& in) { pc[out] = fn(pa[in[0]], pb[in[1]]); });
}

// How a node computes: com.microsoft QLinearAdd/QLinearMul arithmetic, or the float
// DequantizeLinear -> op -> QuantizeLinear steps (octet.QdqAdd/QdqMul, arithmetic="float").
// shift: 128 for a tensor ONNX Runtime moved from int8 to uint8 (QDQS8ToU8Transformer)
// before fusing, so the QLinear arithmetic runs on value + 128 with zero point + 128.
struct BinaryForm {
  bool is_add = true;
  bool float_steps = false;
  std::array<int32_t, 3> shift{};  // a, b, c
};

class QLinearBinaryKernel : public OpKernel {
 public:
  explicit QLinearBinaryKernel(BinaryForm form) : form_(form) {}

  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& a = ctx.input(kA);
    const Tensor& b = ctx.input(kB);
    // QLinearAdd/Mul: one type T (AcceptsBinary); QdqAdd/Mul: C's zero point's, or y_type.
    const DType out_type = node.domain == kMsDomain ? a.dtype()
                           : ctx.has_input(kCZero)  ? ctx.input(kCZero).dtype()
                                                    : static_cast<DType>(node.GetInt("y_type", 0));
    OCTET_CHECK(IsInt8Type(out_type), node.Describe(), ": output type ", DTypeName(out_type),
                " is not 8-bit");
    ScalarQParams pa{ReadScalarScale(ctx, kAScale, "A_scale"), 0, a.dtype()};
    ScalarQParams pb{ReadScalarScale(ctx, kBScale, "B_scale"), 0, b.dtype()};
    ScalarQParams pc{ReadScalarScale(ctx, kCScale, "C_scale"), 0, out_type};
    pa.zero = ReadScalarZero(ctx, kAZero, pa.type, "A_zero_point");
    pb.zero = ReadScalarZero(ctx, kBZero, pb.type, "B_zero_point");
    pc.zero = ReadScalarZero(ctx, kCZero, pc.type, "C_zero_point");
    const Shape shape = BroadcastOrFail(a.shape(), b.shape(), node.Describe());
    Tensor& c = ctx.AllocateOutput(0, out_type, shape);
    if (form_.float_steps) {
      const QdqFloatBinaryArithmetic op(pa, pb, pc, form_.is_add);
      BroadcastBytes(a, b, c, [&](uint8_t x, uint8_t y) {
        return static_cast<uint8_t>(op(ValueOfByte(x, pa.type), ValueOfByte(y, pb.type)));
      });
      return;
    }
    // QLinear arithmetic on the values ONNX Runtime's fused node sees (shifted where it
    // moved a tensor to uint8); one type T for A, B and C there.
    const auto [sa, sb, sc] = form_.shift;
    QLinearBinaryParams p;
    p.type = sc != 0 ? DType::kUInt8 : out_type;
    p.a_scale = pa.scale;
    p.b_scale = pb.scale;
    p.c_scale = pc.scale;
    p.a_zero = pa.zero + sa;
    p.b_zero = pb.zero + sb;
    p.c_zero = pc.zero + sc;
    const int32_t lo = QMin(p.type), hi = QMax(p.type);
    auto store = [&](int32_t v) { return static_cast<uint8_t>(std::clamp(v, lo, hi) - sc); };
    auto value_a = [&](uint8_t x) { return ValueOfByte(x, pa.type) + sa; };
    auto value_b = [&](uint8_t y) { return ValueOfByte(y, pb.type) + sb; };
    if (form_.is_add) {
      const QLinearAddArithmetic add(p);
      const bool scalar_a = OrtTreatsAAsScalar(a.shape(), b.shape());
      BroadcastBytes(a, b, c, [&](uint8_t x, uint8_t y) {
        return store(add(value_a(x), value_b(y), scalar_a));
      });
    } else {
      const QLinearMulArithmetic mul(p);
      BroadcastBytes(a, b, c,
                     [&](uint8_t x, uint8_t y) { return store(mul(value_a(x), value_b(y))); });
    }
  }

 private:
  BinaryForm form_;
};

bool AcceptsBinary(const Node&, const std::vector<DType>& t) {
  if (t.size() < kCScale + 1 || t.size() > kInputCount || !IsInt8Type(t[kA]) || t[kB] != t[kA])
    return false;
  for (size_t zero : {kAZero, kBZero, kCZero})
    if (zero < t.size() && t[zero] != DType::kUndefined && t[zero] != t[kA]) return false;
  return t[kAScale] == DType::kFloat32 && t[kBScale] == DType::kFloat32 &&
         t[kCScale] == DType::kFloat32;
}

// octet.QdqAdd / QdqMul (made by rewrite/qdq_binary.cc): A and B may differ in type; C's
// type is its zero point's, or attribute y_type.
bool AcceptsQdqBinary(const Node& node, const std::vector<DType>& t) {
  if (t.size() < kCScale + 1 || t.size() > kInputCount || !IsInt8Type(t[kA]) || !IsInt8Type(t[kB]))
    return false;
  const auto zero_ok = [&](size_t i, DType data) {
    return i >= t.size() || t[i] == DType::kUndefined || t[i] == data;
  };
  const bool c_typed = kCZero < t.size() && t[kCZero] != DType::kUndefined;
  const DType c_type = c_typed ? t[kCZero] : static_cast<DType>(node.GetInt("y_type", 0));
  return zero_ok(kAZero, t[kA]) && zero_ok(kBZero, t[kB]) && IsInt8Type(c_type) &&
         t[kAScale] == DType::kFloat32 && t[kBScale] == DType::kFloat32 &&
         t[kCScale] == DType::kFloat32;
}

DType QdqBinaryOutputType(const Node& node, const std::vector<DType>& t) {
  return kCZero < t.size() && t[kCZero] != DType::kUndefined
             ? t[kCZero]
             : static_cast<DType>(node.GetInt("y_type", 0));
}

BinaryForm QdqBinaryForm(const Node& node) {
  BinaryForm form;
  form.is_add = node.op_type == kQdqAddOp;
  const std::string arithmetic = node.GetString("arithmetic", "");
  OCTET_CHECK(arithmetic == "float" || arithmetic == "qlinear", node.Describe(),
              ": attribute arithmetic is '", arithmetic, "'; expected float or qlinear");
  form.float_steps = arithmetic == "float";
  const std::vector<int64_t> shift = node.GetInts("shift", {0, 0, 0});
  OCTET_CHECK(shift.size() == 3, node.Describe(), ": attribute shift needs 3 values");
  for (size_t i = 0; i < 3; ++i) {
    OCTET_CHECK(shift[i] == 0 || shift[i] == 128, node.Describe(), ": shift must be 0 or 128");
    form.shift[i] = static_cast<int32_t>(shift[i]);
  }
  return form;
}

}  // namespace

void RegisterQLinearBinaryOps(KernelRegistry& r) {
  for (const bool is_add : {true, false}) {
    r.Register({kMsDomain, is_add ? "QLinearAdd" : "QLinearMul", 1, 1 << 30, AcceptsBinary,
                [](const Node&, const std::vector<DType>& t) { return std::vector<DType>{t[kA]}; },
                [is_add](const KernelInit&) {
                  BinaryForm form;
                  form.is_add = is_add;
                  return std::make_unique<QLinearBinaryKernel>(form);
                }});
    r.Register({kOctetDomain, is_add ? kQdqAddOp : kQdqMulOp, 1, 1 << 30, AcceptsQdqBinary,
                [](const Node& node, const std::vector<DType>& t) {
                  return std::vector<DType>{QdqBinaryOutputType(node, t)};
                },
                [](const KernelInit& init) {
                  return std::make_unique<QLinearBinaryKernel>(QdqBinaryForm(init.node));
                }});
  }
}

}  // namespace octet
