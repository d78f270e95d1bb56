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
#include <type_traits>
#include <utility>
#include <vector>

#include "core/thread_pool.h"
#include "graph/octet_ops.h"
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

// Elements per unit of parallel work, and the size below which one thread does
// it all (a fixed split: elementwise, so the bytes cannot depend on it anyway).
constexpr int64_t kSpanGrain = 8 * 1024;
constexpr int64_t kSpanParallelElements = 32 * 1024;

// c's elements (numpy broadcasting of a and b) as spans along the innermost
// dims, merged as far as both inputs walk them contiguously or not at all, so
// that each input steps by 1 or 0 within a span.
class BroadcastSpans {
 public:
  BroadcastSpans(const Shape& a, const Shape& b, const Shape& c) {
    const std::vector<int64_t> a_strides = BroadcastStrides(a, c),
                               b_strides = BroadcastStrides(b, c);
    // Dims of size 1 walk nothing; the rest, innermost first, merge into
    // the dim inside them when both inputs continue where it left off.
    for (size_t d = c.size(); d-- > 0;) {
      if (c[d] == 1) continue;
      if (!dims_.empty() && a_strides[d] == a_strides_.back() * dims_.back() &&
          b_strides[d] == b_strides_.back() * dims_.back()) {
        dims_.back() *= c[d];
        continue;
      }
      dims_.push_back(c[d]);
      a_strides_.push_back(a_strides[d]);
      b_strides_.push_back(b_strides[d]);
    }
    total_ = NumElements(c);
    if (dims_.empty()) {  // one element (or none)
      dims_.push_back(1);
      a_strides_.push_back(0);
      b_strides_.push_back(0);
    }
  }

  int64_t total() const { return total_; }

  // Calls fn(c_offset, a_offset, a_step, b_offset, b_step, count) for the
  // pieces of spans that make up c's elements [begin, end).
  template <typename Fn>
  void ForEach(int64_t begin, int64_t end, const Fn& fn) const {
    const int64_t span = dims_[0];
    int64_t row = begin / span, offset = begin % span;
    while (begin < end) {
      int64_t a_offset = offset * a_strides_[0], b_offset = offset * b_strides_[0];
      int64_t rest = row;
      for (size_t d = 1; d < dims_.size(); ++d) {
        const int64_t index = rest % dims_[d];
        rest /= dims_[d];
        a_offset += index * a_strides_[d];
        b_offset += index * b_strides_[d];
      }
      const int64_t count = std::min(span - offset, end - begin);
      fn(begin, a_offset, a_strides_[0], b_offset, b_strides_[0], count);
      begin += count;
      ++row;
      offset = 0;
    }
  }

 private:
  std::vector<int64_t> dims_, a_strides_, b_strides_;  // innermost first
  int64_t total_ = 0;
};

// c = program(a, b) over numpy broadcasting, in vector spans, split over the pool.
// b is stored bytes, or floats already dequantized (QBinaryFloatOperandSpan).
template <typename BElement>
void RunBinary(const QBinaryProgram& program, const Tensor& a, const BElement* pb,
               const Shape& b_shape, Tensor& c, ThreadPool* pool) {
  const BroadcastSpans spans(a.shape(), b_shape, c.shape());
  const auto* pa = static_cast<const uint8_t*>(a.raw());
  auto* pc = static_cast<uint8_t*>(c.raw());
  auto run = [&](int64_t begin, int64_t end) {
    spans.ForEach(begin, end,
                  [&](int64_t c_offset, int64_t a_offset, int64_t a_step, int64_t b_offset,
                      int64_t b_step, int64_t count) {
                    if constexpr (std::is_same_v<BElement, float>)
                      QBinaryFloatOperandSpan(program, pa + a_offset, a_step, pb + b_offset, b_step,
                                              pc + c_offset, count);
                    else
                      QBinarySpan(program, pa + a_offset, a_step, pb + b_offset, b_step,
                                  pc + c_offset, count);
                  });
  };
  const int64_t total = spans.total();
  if (pool == nullptr || pool->num_threads() == 1 || total < kSpanParallelElements) {
    if (total > 0) run(0, total);
    return;
  }
  pool->ParallelFor((total + kSpanGrain - 1) / kSpanGrain, [&](int64_t g0, int64_t g1) {
    run(g0 * kSpanGrain, std::min(total, g1 * kSpanGrain));
  });
}

void RunBinary(const QBinaryProgram& program, const Tensor& a, const Tensor& b, Tensor& c,
               ThreadPool* pool) {
  RunBinary(program, a, static_cast<const uint8_t*>(b.raw()), b.shape(), c, pool);
}

// An 8-bit constant operand of the float steps with constant per-tensor scale and
// zero point, dequantized once as the span would (float(q - zero) * scale).
struct DequantizedConstant {
  BinaryInput input = kB;  // kA or kB
  Shape shape;
  std::vector<float> values;
};

// The constant operand (B tried first), or nothing when neither qualifies; the
// per-run path then reads and checks everything as usual.
std::optional<DequantizedConstant> DequantizeConstantOperand(const KernelInit& init) {
  const auto constant = [&](size_t i) {
    return i < init.constant_inputs.size() ? init.constant_inputs[i] : nullptr;
  };
  for (const BinaryInput input : {kB, kA}) {
    const Tensor* data = constant(input);
    const Tensor* scale = constant(input + 1);
    const size_t zero_index = input + 2;
    const bool zero_omitted =
        zero_index >= init.input_types.size() || init.input_types[zero_index] == DType::kUndefined;
    const Tensor* zero = constant(zero_index);
    if (data == nullptr || !Is8Bit(data->dtype()) || scale == nullptr ||
        scale->dtype() != DType::kFloat32 || NumElements(scale->shape()) != 1 ||
        (!zero_omitted &&
         (zero == nullptr || zero->dtype() != data->dtype() || NumElements(zero->shape()) != 1)))
      continue;
    const int32_t zero_value =
        zero_omitted ? 0 : ReadZeroPoints(init.node, *zero, data->dtype(), "zero point")[0];
    const float scale_value = scale->data<float>()[0];
    DequantizedConstant result;
    result.input = input;
    result.shape = data->shape();
    const int64_t n = NumElements(data->shape());
    result.values.resize(static_cast<size_t>(n));
    const auto* bytes = static_cast<const uint8_t*>(data->raw());
    const bool is_signed = data->dtype() == DType::kInt8;
    for (int64_t i = 0; i < n; ++i) {
      const int32_t q = is_signed ? int32_t{static_cast<int8_t>(bytes[i])} : int32_t{bytes[i]};
      result.values[static_cast<size_t>(i)] = static_cast<float>(q - zero_value) * scale_value;
    }
    return result;
  }
  return std::nullopt;
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
  explicit QLinearBinaryKernel(BinaryForm form,
                               std::optional<DequantizedConstant> constant = std::nullopt)
      : form_(form), constant_(std::move(constant)) {}

  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& a = ctx.input(kA);
    const Tensor& b = ctx.input(kB);
    // QLinearAdd/Mul: one type T (AcceptsBinary); QdqAdd/Mul: C's zero point's, or y_type.
    const DType out_type = node.domain == kMsDomain ? a.dtype()
                           : ctx.has_input(kCZero)  ? ctx.input(kCZero).dtype()
                                                    : static_cast<DType>(node.GetInt("y_type", 0));
    OCTET_CHECK(Is8Bit(out_type), node.Describe(), ": output type ", DTypeName(out_type),
                " is not 8-bit");
    ScalarQParams pa{ReadScalarScale(ctx, kAScale, "A_scale"), 0, a.dtype()};
    ScalarQParams pb{ReadScalarScale(ctx, kBScale, "B_scale"), 0, b.dtype()};
    ScalarQParams pc{ReadScalarScale(ctx, kCScale, "C_scale"), 0, out_type};
    pa.zero = ReadScalarZero(ctx, kAZero, pa.type, "A_zero_point");
    pb.zero = ReadScalarZero(ctx, kBZero, pb.type, "B_zero_point");
    pc.zero = ReadScalarZero(ctx, kCZero, pc.type, "C_zero_point");
    const Shape shape = BroadcastOrFail(a.shape(), b.shape(), [&] { return node.Describe(); });
    Tensor& c = ctx.AllocateUninitializedOutput(0, out_type, shape);  // every element is written
    if (form_.float_steps && constant_) {
      // The other operand takes A's place; the constant one is read as floats.
      const bool constant_b = constant_->input == kB;
      RunBinary(QdqFloatBinaryProgram(constant_b ? pa : pb, constant_b ? pb : pa, pc, form_.is_add),
                constant_b ? a : b, constant_->values.data(), constant_->shape, c, ctx.pool());
      return;
    }
    if (form_.float_steps) {
      RunBinary(QdqFloatBinaryProgram(pa, pb, pc, form_.is_add), a, b, c, ctx.pool());
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
    QBinaryProgram program = form_.is_add
                                 ? QLinearAddProgram(p, OrtTreatsAAsScalar(a.shape(), b.shape()))
                                 : QLinearMulProgram(p);
    program.a_signed = pa.type == DType::kInt8;
    program.b_signed = pb.type == DType::kInt8;
    program.a_offset = sa;
    program.b_offset = sb;
    program.c_offset = sc;
    RunBinary(program, a, b, c, ctx.pool());
  }

 private:
  BinaryForm form_;
  std::optional<DequantizedConstant> constant_;  // float steps only
};

bool AcceptsBinary(const Node&, const std::vector<DType>& t) {
  if (t.size() < kCScale + 1 || t.size() > kInputCount || !Is8Bit(t[kA]) || t[kB] != t[kA])
    return false;
  for (size_t zero : {kAZero, kBZero, kCZero})
    if (zero < t.size() && t[zero] != DType::kUndefined && t[zero] != t[kA]) return false;
  return t[kAScale] == DType::kFloat32 && t[kBScale] == DType::kFloat32 &&
         t[kCScale] == DType::kFloat32;
}

// octet.QdqAdd / QdqMul (made by rewrite/qdq_binary.cc): A and B may differ in type; C's
// type is its zero point's, or attribute y_type.
bool AcceptsQdqBinary(const Node& node, const std::vector<DType>& t) {
  if (t.size() < kCScale + 1 || t.size() > kInputCount || !Is8Bit(t[kA]) || !Is8Bit(t[kB]))
    return false;
  const auto zero_ok = [&](size_t i, DType data) {
    return i >= t.size() || t[i] == DType::kUndefined || t[i] == data;
  };
  const bool c_typed = kCZero < t.size() && t[kCZero] != DType::kUndefined;
  const DType c_type = c_typed ? t[kCZero] : static_cast<DType>(node.GetInt("y_type", 0));
  return zero_ok(kAZero, t[kA]) && zero_ok(kBZero, t[kB]) && Is8Bit(c_type) &&
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
                  const BinaryForm form = QdqBinaryForm(init.node);
                  return std::make_unique<QLinearBinaryKernel>(
                      form, form.float_steps ? DequantizeConstantOperand(init) : std::nullopt);
                }});
  }
}

}  // namespace octet
