// Dtype-generic tensor operators that exporters put around the arithmetic:
// Shape, Concat, Cast, Where, Expand, ConstantOfShape, Constant, Identity,
// Range, comparisons (Equal/Less/Greater/...), boolean logic (Not/And/Or/Xor),
// Split, Pad, ArgMax/ArgMin, TopK and Trilu. Data movement works on element
// bytes, so every storage dtype is handled; arithmetic ones dispatch on the C++
// element type.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/float_types.h"
#include "core/thread_pool.h"
#include "kernels/float/broadcast.h"
#include "kernels/strided_copy.h"
#include "ops/registry.h"

namespace octet {

namespace {

constexpr int kLatest = 1 << 30;

template <typename Kernel>
std::unique_ptr<OpKernel> Create(const KernelInit& init) {
  return std::make_unique<Kernel>(init);
}

bool AnyStorable(DType t) { return IsSupportedStorage(t) && t != DType::kString; }

// Calls fn(T{}) with T the C++ type of a numeric or bool dtype.
template <typename Fn>
decltype(auto) DispatchNumeric(DType t, const Node& node, Fn&& fn) {
  switch (t) {
    case DType::kFloat32:
      return fn(float{});
    case DType::kFloat64:
      return fn(double{});
    case DType::kInt8:
      return fn(int8_t{});
    case DType::kUInt8:
      return fn(uint8_t{});
    case DType::kInt16:
      return fn(int16_t{});
    case DType::kUInt16:
      return fn(uint16_t{});
    case DType::kInt32:
      return fn(int32_t{});
    case DType::kUInt32:
      return fn(uint32_t{});
    case DType::kInt64:
      return fn(int64_t{});
    case DType::kUInt64:
      return fn(uint64_t{});
    case DType::kBool:
      return fn(bool{});
    default:
      Fail(node.Describe(), ": dtype ", DTypeName(t), " is not supported");
  }
}

bool IsNumeric(DType t) {
  return OneOf(t, {DType::kFloat32, DType::kFloat64, DType::kInt8, DType::kUInt8, DType::kInt16,
                   DType::kUInt16, DType::kInt32, DType::kUInt32, DType::kInt64, DType::kUInt64});
}

// Copies one element of `size` bytes; sizes are 1, 2, 4 or 8.
inline void CopyElement(const uint8_t* src, uint8_t* dst, size_t size) {
  std::memcpy(dst, src, size);
}

// Reads a 1-D (or scalar) int64 tensor as a vector.
std::vector<int64_t> ReadInt64s(const Tensor& t, const Node& node, const char* what) {
  OCTET_CHECK(t.dtype() == DType::kInt64 && t.rank() <= 1, node.Describe(), ": input '", what,
              "' must be a 1-D int64 tensor, got ", DTypeName(t.dtype()), " ",
              ShapeToString(t.shape()));
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
}

// ---- Shape ----------------------------------------------------------------

class ShapeKernel : public OpKernel {
 public:
  explicit ShapeKernel(const KernelInit& init)
      : start_(init.node.GetInt("start", 0)),
        end_(init.node.FindAttribute("end") ? std::optional(init.node.GetInt("end", 0))
                                            : std::nullopt) {}
  void Run(KernelContext& ctx) override {
    const Shape& shape = ctx.input(0).shape();
    const int64_t rank = static_cast<int64_t>(shape.size());
    auto clamp = [rank](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
    const int64_t begin = clamp(start_), end = clamp(end_.value_or(rank));
    const int64_t count = std::max<int64_t>(end - begin, 0);
    Tensor& out = ctx.AllocateOutput(0, DType::kInt64, {count});
    std::copy(shape.begin() + begin, shape.begin() + begin + count, out.data<int64_t>());
  }

 private:
  int64_t start_;
  std::optional<int64_t> end_;
};

// ---- Concat ---------------------------------------------------------------

class ConcatKernel : public OpKernel {
 public:
  explicit ConcatKernel(const KernelInit& init) {
    OCTET_CHECK(init.node.FindAttribute("axis"), init.node.Describe(),
                ": attribute 'axis' is required");
    axis_ = init.node.GetInt("axis", 0);
  }
  // A KV cache's past tensors feed Concat: read in place, not copied first.
  bool ReadsOnlyInputBytes(size_t /*input*/) const override { return true; }
  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& first = ctx.input(0);
    const int64_t rank = static_cast<int64_t>(first.rank());
    OCTET_CHECK(rank > 0, node.Describe(), ": inputs must have rank >= 1");
    const int64_t axis = node.Axis(axis_, rank);
    Shape out_shape = first.shape();
    out_shape[axis] = 0;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      const Shape& s = ctx.input(i).shape();
      bool compatible = static_cast<int64_t>(s.size()) == rank;
      for (int64_t d = 0; compatible && d < rank; ++d)
        compatible = d == axis || s[d] == first.shape()[d];
      OCTET_CHECK(compatible, node.Describe(), ": input ", i, " has shape ", ShapeToString(s),
                  ", which does not match ", ShapeToString(first.shape()), " outside axis ", axis);
      OCTET_CHECK(!__builtin_add_overflow(out_shape[axis], s[axis], &out_shape[axis]),
                  node.Describe(), ": the inputs' sizes along axis ", axis, " overflow int64");
    }
    Tensor& out = ctx.AllocateUninitializedOutput(0, first.dtype(), out_shape);
    std::vector<const Tensor*> inputs(ctx.num_inputs());
    for (size_t i = 0; i < inputs.size(); ++i) inputs[i] = &ctx.input(i);
    ConcatCopy(inputs, axis, out, ctx.pool());
  }

 private:
  int64_t axis_;
};

// ---- Cast -----------------------------------------------------------------

// Truncates toward zero. Out-of-range and NaN inputs are undefined in ONNX;
// octet gives what x86 conversion instructions give (the "integer indefinite"
// value of the conversion width, then wrap-around to narrower types).
template <typename To>
To FloatToInt(double v) {
  if constexpr (sizeof(To) <= 4 && !(std::is_unsigned_v<To> && sizeof(To) == 4)) {
    const bool fits = v > -2147483649.0 && v < 2147483648.0;
    return static_cast<To>(fits ? static_cast<int32_t>(v) : std::numeric_limits<int32_t>::min());
  } else if constexpr (std::is_same_v<To, uint64_t>) {
    if (v >= 9223372036854775808.0 && v < 18446744073709551616.0) return static_cast<uint64_t>(v);
    const bool fits = v > -9223372036854775809.0 && v < 9223372036854775808.0;
    return static_cast<To>(fits ? static_cast<int64_t>(v) : std::numeric_limits<int64_t>::min());
  } else {
    const bool fits = v > -9223372036854775809.0 && v < 9223372036854775808.0;
    return static_cast<To>(fits ? static_cast<int64_t>(v) : std::numeric_limits<int64_t>::min());
  }
}

// One element of `from` converted to `To` (a numeric type or bool).
template <typename To, typename From>
To Convert(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From{};
  } else if constexpr (std::is_floating_point_v<To> || !std::is_floating_point_v<From>) {
    return static_cast<To>(v);
  } else {
    return FloatToInt<To>(static_cast<double>(v));
  }
}

bool IsCastable(DType t) {
  return IsNumeric(t) || OneOf(t, {DType::kBool, DType::kFloat16, DType::kBFloat16});
}

class CastKernel : public OpKernel {
 public:
  explicit CastKernel(const KernelInit& init)
      : to_(static_cast<DType>(init.node.GetInt("to", 0))) {}
  void Run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    Tensor& out = ctx.AllocateOutput(0, to_, x.shape());
    const int64_t n = x.numel();
    const Node& node = ctx.node();
    if (x.dtype() == to_) {
      std::memcpy(out.raw(), x.raw(), x.nbytes());
      return;
    }
    // float16/bfloat16 pass through float32, whose range and precision hold them exactly.
    if (x.dtype() == DType::kFloat16 || x.dtype() == DType::kBFloat16) {
      const uint16_t* src = static_cast<const uint16_t*>(x.raw());
      Tensor wide(DType::kFloat32, x.shape());
      float* w = wide.data<float>();
      for (int64_t i = 0; i < n; ++i)
        w[i] =
            x.dtype() == DType::kFloat16 ? Float16BitsToFloat(src[i]) : BFloat16BitsToFloat(src[i]);
      CastFromFloat(wide, out, node);
      return;
    }
    if (to_ == DType::kFloat16 || to_ == DType::kBFloat16) {
      Tensor wide(DType::kFloat32, x.shape());
      CastNumeric(x, wide, node);
      const float* w = wide.data<float>();
      uint16_t* dst = static_cast<uint16_t*>(out.raw());
      for (int64_t i = 0; i < n; ++i)
        dst[i] = to_ == DType::kFloat16 ? FloatToFloat16Bits(w[i]) : FloatToBFloat16Bits(w[i]);
      return;
    }
    CastNumeric(x, out, node);
  }

 private:
  static void CastFromFloat(const Tensor& wide, Tensor& out, const Node& node) {
    if (out.dtype() == DType::kFloat16 || out.dtype() == DType::kBFloat16) {
      const float* w = wide.data<float>();
      uint16_t* dst = static_cast<uint16_t*>(out.raw());
      for (int64_t i = 0; i < wide.numel(); ++i)
        dst[i] =
            out.dtype() == DType::kFloat16 ? FloatToFloat16Bits(w[i]) : FloatToBFloat16Bits(w[i]);
      return;
    }
    CastNumeric(wide, out, node);
  }
  static void CastNumeric(const Tensor& x, Tensor& out, const Node& node) {
    DispatchNumeric(x.dtype(), node, [&](auto from_tag) {
      using From = decltype(from_tag);
      DispatchNumeric(out.dtype(), node, [&](auto to_tag) {
        using To = decltype(to_tag);
        const From* src = static_cast<const From*>(x.raw());
        To* dst = static_cast<To*>(out.raw());
        for (int64_t i = 0; i < x.numel(); ++i) dst[i] = Convert<To>(src[i]);
      });
    });
  }

  DType to_;
};

// ---- Where / Expand -------------------------------------------------------

template <typename Storage>
void WhereTyped(const Tensor& cond, const Tensor& x, const Tensor& y, Tensor& out) {
  const bool* c = cond.data<bool>();
  const Storage* px = static_cast<const Storage*>(x.raw());
  const Storage* py = static_cast<const Storage*>(y.raw());
  Storage* po = static_cast<Storage*>(out.raw());
  ForEachBroadcast<3>(out.shape(), {&cond.shape(), &x.shape(), &y.shape()},
                      [&](int64_t i, const std::array<int64_t, 3>& off) {
                        po[i] = c[off[0]] ? px[off[1]] : py[off[2]];
                      });
}

// Calls fn(StorageType{}) with an unsigned integer type of the element size.
template <typename Fn>
void DispatchBySize(size_t size, Fn&& fn) {
  switch (size) {
    case 1:
      return fn(uint8_t{});
    case 2:
      return fn(uint16_t{});
    case 4:
      return fn(uint32_t{});
    default:
      return fn(uint64_t{});
  }
}

class WhereKernel : public OpKernel {
 public:
  explicit WhereKernel(const KernelInit&) {}
  void Run(KernelContext& ctx) override {
    const Tensor& cond = ctx.input(0);
    const Tensor& x = ctx.input(1);
    const Tensor& y = ctx.input(2);
    std::optional<Shape> xy = BroadcastShapes(x.shape(), y.shape());
    std::optional<Shape> shape = xy ? BroadcastShapes(cond.shape(), *xy) : std::nullopt;
    OCTET_CHECK(shape.has_value(), ctx.node().Describe(), ": shapes ", ShapeToString(cond.shape()),
                ", ", ShapeToString(x.shape()), " and ", ShapeToString(y.shape()),
                " do not broadcast");
    Tensor& out = ctx.AllocateOutput(0, x.dtype(), *shape);
    DispatchBySize(DTypeSize(x.dtype()),
                   [&](auto tag) { WhereTyped<decltype(tag)>(cond, x, y, out); });
  }
};

class ExpandKernel : public OpKernel {
 public:
  explicit ExpandKernel(const KernelInit&) {}
  void Run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Shape target = ReadInt64s(ctx.input(1), ctx.node(), "shape");
    std::optional<Shape> shape = BroadcastShapes(x.shape(), target);
    OCTET_CHECK(shape.has_value(), ctx.node().Describe(), ": input shape ",
                ShapeToString(x.shape()), " does not broadcast with ", ShapeToString(target));
    // A broadcast dim is a stride-0 view: StridedCopy repeats whole contiguous runs (the
    // grouped-query attention's repeated heads) with memcpy.
    Tensor& out = ctx.AllocateUninitializedOutput(0, x.dtype(), *shape);
    StridedCopy(x.raw(), out.raw(), DTypeSize(x.dtype()), *shape,
                BroadcastStrides(x.shape(), *shape), ctx.pool());
  }
};

// ---- Constants ------------------------------------------------------------

DType ConstantOfShapeType(const Node& node) {
  const Attribute* value = node.FindAttribute("value");
  if (!value) return DType::kFloat32;
  OCTET_CHECK(value->kind == Attribute::Kind::kTensor && value->t.numel() == 1, node.Describe(),
              ": attribute 'value' must be a one-element tensor");
  return value->t.dtype();
}

class ConstantOfShapeKernel : public OpKernel {
 public:
  explicit ConstantOfShapeKernel(const KernelInit& init) {
    const Attribute* value = init.node.FindAttribute("value");
    value_ = value ? value->t : Tensor(DType::kFloat32, {1});
  }
  void Run(KernelContext& ctx) override {
    const Shape shape = ReadInt64s(ctx.input(0), ctx.node(), "input");
    for (int64_t d : shape)
      OCTET_CHECK(d >= 0, ctx.node().Describe(), ": shape ", ShapeToString(shape),
                  " has a negative dim");
    Tensor& out = ctx.AllocateOutput(0, value_.dtype(), shape);
    const size_t elem = DTypeSize(value_.dtype());
    uint8_t* dst = static_cast<uint8_t*>(out.raw());
    for (int64_t i = 0; i < out.numel(); ++i)
      CopyElement(static_cast<const uint8_t*>(value_.raw()), dst + i * elem, elem);
  }

 private:
  Tensor value_;
};

// The tensor a Constant node produces, built from whichever value attribute it has.
Tensor ConstantValue(const Node& node) {
  static const char* const kUnsupported[] = {"sparse_value", "value_string", "value_strings"};
  for (const char* name : kUnsupported)
    OCTET_CHECK(!node.FindAttribute(name), node.Describe(), ": attribute '", name,
                "' is not supported");
  if (const Attribute* a = node.FindAttribute("value")) {
    OCTET_CHECK(a->kind == Attribute::Kind::kTensor, node.Describe(),
                ": attribute 'value' must be a tensor");
    return a->t;
  }
  if (const Attribute* a = node.FindAttribute("value_float")) {
    Tensor t(DType::kFloat32, {});
    t.data<float>()[0] = node.GetFloat("value_float", 0.f);
    (void)a;
    return t;
  }
  if (node.FindAttribute("value_int")) {
    Tensor t(DType::kInt64, {});
    t.data<int64_t>()[0] = node.GetInt("value_int", 0);
    return t;
  }
  if (const Attribute* a = node.FindAttribute("value_floats")) {
    OCTET_CHECK(a->kind == Attribute::Kind::kFloats, node.Describe(),
                ": attribute 'value_floats' must be a list of floats");
    Tensor t(DType::kFloat32, {static_cast<int64_t>(a->floats.size())});
    std::copy(a->floats.begin(), a->floats.end(), t.data<float>());
    return t;
  }
  if (node.FindAttribute("value_ints")) {
    const std::vector<int64_t> ints = node.GetInts("value_ints");
    Tensor t(DType::kInt64, {static_cast<int64_t>(ints.size())});
    std::copy(ints.begin(), ints.end(), t.data<int64_t>());
    return t;
  }
  Fail(node.Describe(), ": needs one of the attributes value, value_float(s), value_int(s)");
}

class ConstantKernel : public OpKernel {
 public:
  explicit ConstantKernel(const KernelInit& init) : value_(ConstantValue(init.node)) {}
  void Run(KernelContext& ctx) override { ctx.SetOutput(0, value_); }

 private:
  Tensor value_;
};

class IdentityKernel : public OpKernel {
 public:
  explicit IdentityKernel(const KernelInit&) {}
  void Run(KernelContext& ctx) override { ctx.SetOutput(0, ctx.input(0)); }
};

// ---- Range ----------------------------------------------------------------

class RangeKernel : public OpKernel {
 public:
  explicit RangeKernel(const KernelInit&) {}
  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    for (size_t i = 0; i < 3; ++i)
      OCTET_CHECK(ctx.input(i).numel() == 1, node.Describe(), ": input ", i,
                  " must be a scalar, got shape ", ShapeToString(ctx.input(i).shape()));
    DispatchNumeric(ctx.input(0).dtype(), node, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!std::is_same_v<T, bool>) {
        const T start = *static_cast<const T*>(ctx.input(0).raw());
        const T limit = *static_cast<const T*>(ctx.input(1).raw());
        const T delta = *static_cast<const T*>(ctx.input(2).raw());
        OCTET_CHECK(delta != T{0}, node.Describe(), ": delta must not be zero");
        const double count = std::ceil((static_cast<double>(limit) - static_cast<double>(start)) /
                                       static_cast<double>(delta));
        // Checked before the conversion: NaN, inf or a count beyond int64 has no size.
        OCTET_CHECK(!std::isnan(count), node.Describe(), ": start ", static_cast<double>(start),
                    ", limit ", static_cast<double>(limit), " and delta ",
                    static_cast<double>(delta), " give no element count");
        OCTET_CHECK(count < 0x1p62, node.Describe(), ": start ", static_cast<double>(start),
                    ", limit ", static_cast<double>(limit), " and delta ",
                    static_cast<double>(delta), " give ", count, " elements: too many elements");
        const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
        Tensor& out = ctx.AllocateOutput(0, ctx.input(0).dtype(), {n});
        T* po = static_cast<T*>(out.raw());
        // Repeated addition, as ONNX Runtime computes it (not start + i * delta); integers
        // wrap (the step after the last element may pass the type's range).
        T value = start;
        for (int64_t i = 0; i < n; ++i) {
          po[i] = value;
          if constexpr (std::is_integral_v<T>)
            value = static_cast<T>(static_cast<std::make_unsigned_t<T>>(value) +
                                   static_cast<std::make_unsigned_t<T>>(delta));
          else
            value = static_cast<T>(value + delta);
        }
      }
    });
  }
};

// ---- Comparison and logic -------------------------------------------------

enum class CompareOp { kEqual, kLess, kGreater, kLessOrEqual, kGreaterOrEqual };

class CompareKernel : public OpKernel {
 public:
  CompareKernel(const KernelInit&, CompareOp op) : op_(op) {}
  void Run(KernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    const Shape shape =
        BroadcastOrFail(a.shape(), b.shape(), [&] { return ctx.node().Describe(); });
    Tensor& out = ctx.AllocateOutput(0, DType::kBool, shape);
    bool* po = out.data<bool>();
    DispatchNumeric(a.dtype(), ctx.node(), [&](auto tag) {
      using T = decltype(tag);
      const T* pa = static_cast<const T*>(a.raw());
      const T* pb = static_cast<const T*>(b.raw());
      auto run = [&](auto cmp) {
        ForEachBroadcast<2>(shape, {&a.shape(), &b.shape()},
                            [&](int64_t i, const std::array<int64_t, 2>& off) {
                              po[i] = cmp(pa[off[0]], pb[off[1]]);
                            });
      };
      switch (op_) {
        case CompareOp::kEqual:
          return run([](T x, T y) { return x == y; });
        case CompareOp::kLess:
          return run([](T x, T y) { return x < y; });
        case CompareOp::kGreater:
          return run([](T x, T y) { return x > y; });
        case CompareOp::kLessOrEqual:
          return run([](T x, T y) { return x <= y; });
        case CompareOp::kGreaterOrEqual:
          return run([](T x, T y) { return x >= y; });
      }
    });
  }

 private:
  CompareOp op_;
};

enum class LogicOp { kAnd, kOr, kXor };

class LogicKernel : public OpKernel {
 public:
  LogicKernel(const KernelInit&, LogicOp op) : op_(op) {}
  void Run(KernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    const Shape shape =
        BroadcastOrFail(a.shape(), b.shape(), [&] { return ctx.node().Describe(); });
    Tensor& out = ctx.AllocateOutput(0, DType::kBool, shape);
    const bool* pa = a.data<bool>();
    const bool* pb = b.data<bool>();
    bool* po = out.data<bool>();
    const LogicOp op = op_;
    ForEachBroadcast<2>(
        shape, {&a.shape(), &b.shape()}, [&](int64_t i, const std::array<int64_t, 2>& off) {
          const bool x = pa[off[0]], y = pb[off[1]];
          po[i] = op == LogicOp::kAnd ? (x && y) : op == LogicOp::kOr ? (x || y) : (x != y);
        });
  }

 private:
  LogicOp op_;
};

class NotKernel : public OpKernel {
 public:
  explicit NotKernel(const KernelInit&) {}
  void Run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    Tensor& out = ctx.AllocateOutput(0, DType::kBool, x.shape());
    for (int64_t i = 0; i < x.numel(); ++i) out.data<bool>()[i] = !x.data<bool>()[i];
  }
};

// ---- Split ----------------------------------------------------------------

class SplitKernel : public OpKernel {
 public:
  explicit SplitKernel(const KernelInit& init)
      : axis_(init.node.GetInt("axis", 0)),
        split_attr_(init.node.GetInts("split")),
        num_outputs_(init.node.GetInt("num_outputs", 0)) {}
  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.input(0);
    const int64_t rank = static_cast<int64_t>(x.rank());
    const int64_t axis = node.Axis(axis_, rank);
    const int64_t dim = x.shape()[axis];
    const int64_t outputs = static_cast<int64_t>(ctx.num_outputs());
    std::vector<int64_t> split = split_attr_;
    if (ctx.has_input(1)) split = ReadInt64s(ctx.input(1), node, "split");
    if (split.empty()) {
      if (num_outputs_ > 0) {
        // Opset 18: chunks of ceil(dim / n), the last one smaller.
        OCTET_CHECK(num_outputs_ == outputs, node.Describe(), ": num_outputs is ", num_outputs_,
                    " but the node has ", outputs, " outputs");
        const int64_t chunk = (dim + outputs - 1) / outputs;
        for (int64_t i = 0; i < outputs; ++i)
          split.push_back(std::clamp<int64_t>(dim - i * chunk, 0, chunk));
      } else {
        OCTET_CHECK(node.opset < 18, node.Describe(),
                    ": needs the 'split' input or the 'num_outputs' attribute");
        OCTET_CHECK(dim % outputs == 0, node.Describe(), ": dim ", dim, " of axis ", axis,
                    " does not split evenly into ", outputs, " outputs");
        split.assign(outputs, dim / outputs);
      }
    }
    int64_t sum = 0;
    for (int64_t s : split) {
      OCTET_CHECK(s >= 0 && !__builtin_add_overflow(sum, s, &sum), node.Describe(),
                  ": split sizes ", ShapeToString(split), " must be >= 0 and sum to dim ", dim);
    }
    OCTET_CHECK(static_cast<int64_t>(split.size()) == outputs && sum == dim, node.Describe(),
                ": split sizes ", ShapeToString(split), " do not divide dim ", dim, " into ",
                outputs, " outputs");
    const size_t elem = DTypeSize(x.dtype());
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
    for (int64_t d = axis + 1; d < rank; ++d) inner *= x.shape()[d];
    const uint8_t* src = static_cast<const uint8_t*>(x.raw());
    const size_t in_row = static_cast<size_t>(dim * inner) * elem;
    size_t column = 0;
    for (int64_t i = 0; i < outputs; ++i) {
      const size_t out_row = static_cast<size_t>(split[i] * inner) * elem;
      if (ctx.output_wanted(i)) {
        Shape shape = x.shape();
        shape[axis] = split[i];
        uint8_t* dst = static_cast<uint8_t*>(ctx.AllocateOutput(i, x.dtype(), shape).raw());
        for (int64_t o = 0; o < outer; ++o)
          std::memcpy(dst + o * out_row, src + o * in_row + column, out_row);
      }
      column += out_row;
    }
  }

 private:
  int64_t axis_;
  std::vector<int64_t> split_attr_;
  int64_t num_outputs_;
};

// ---- Pad ------------------------------------------------------------------

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

class PadKernel : public OpKernel {
 public:
  explicit PadKernel(const KernelInit& init) {
    const Node& node = init.node;
    const std::string mode = node.GetString("mode", "constant");
    if (mode == "constant")
      mode_ = PadMode::kConstant;
    else if (mode == "reflect")
      mode_ = PadMode::kReflect;
    else if (mode == "edge")
      mode_ = PadMode::kEdge;
    else if (mode == "wrap" && node.opset >= 19)
      mode_ = PadMode::kWrap;
    else
      Fail(node.Describe(), ": mode '", mode, "' is not supported");
    if (node.opset < 11) {
      OCTET_CHECK(node.FindAttribute("pads"), node.Describe(), ": attribute 'pads' is required");
      pads_attr_ = node.GetInts("pads");
      value_attr_ = node.GetFloat("value", 0.f);
    }
  }
  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.input(0);
    const int64_t rank = static_cast<int64_t>(x.rank());
    std::vector<int64_t> pads =
        node.opset < 11 ? pads_attr_ : ReadInt64s(ctx.input(1), node, "pads");
    // Opset 18 `axes`: pads name only these axes.
    std::vector<int64_t> axes;
    if (ctx.has_input(3)) {
      axes = ReadInt64s(ctx.input(3), node, "axes");
      for (int64_t& a : axes) a = node.Axis(a, rank);
    } else {
      for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
    }
    const int64_t count = static_cast<int64_t>(axes.size());
    OCTET_CHECK(static_cast<int64_t>(pads.size()) == 2 * count, node.Describe(), ": pads has ",
                pads.size(), " values, expected ", 2 * count);
    std::vector<int64_t> begin(rank, 0), end(rank, 0);
    for (int64_t i = 0; i < count; ++i) {
      begin[axes[i]] = pads[i];
      end[axes[i]] = pads[i + count];
    }
    Shape out_shape(rank);
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t in = x.shape()[d];
      // A crop beyond the whole dim is no crop ONNX defines (and would overflow its negation).
      OCTET_CHECK(begin[d] >= -in && end[d] >= -in, node.Describe(), ": pads ", ShapeToString(pads),
                  " remove more than dim ", d, " of input ", ShapeToString(x.shape()));
      OCTET_CHECK(!__builtin_add_overflow(in, begin[d], &out_shape[d]) &&
                      !__builtin_add_overflow(out_shape[d], end[d], &out_shape[d]),
                  node.Describe(), ": pads ", ShapeToString(pads), " overflow dim ", d);
      OCTET_CHECK(out_shape[d] >= 0, node.Describe(), ": pads ", ShapeToString(pads),
                  " remove more than dim ", d, " of input ", ShapeToString(x.shape()));
      const bool padded = begin[d] > 0 || end[d] > 0;
      if (padded && mode_ != PadMode::kConstant)
        OCTET_CHECK(
            out_shape[d] - std::max<int64_t>(begin[d], 0) - std::max<int64_t>(end[d], 0) > 0,
            node.Describe(), ": cannot pad an empty dim in mode edge/reflect/wrap");
      if (mode_ == PadMode::kReflect && padded)
        OCTET_CHECK(begin[d] < in && end[d] < in, node.Describe(), ": reflect pads ", begin[d], ",",
                    end[d], " must be smaller than dim ", d, " (", in, ")");
    }
    Tensor& out = ctx.AllocateOutput(0, x.dtype(), out_shape);
    const size_t elem = DTypeSize(x.dtype());
    Tensor value(x.dtype(), {});
    if (node.opset < 11) {
      DispatchNumeric(x.dtype(), node, [&](auto tag) {
        using T = decltype(tag);
        *static_cast<T*>(value.raw()) = Convert<T>(value_attr_);
      });
    } else if (ctx.has_input(2) && ctx.input(2).numel() > 0) {
      OCTET_CHECK(ctx.input(2).dtype() == x.dtype(), node.Describe(),
                  ": constant_value must have the data's dtype");
      std::memcpy(value.raw(), ctx.input(2).raw(), elem);
    }
    if (out.numel() == 0) return;
    // Source index along one dim, or -1 for the constant value. Negative pads
    // crop first; the other modes then pad from the cropped range (as ONNX Runtime).
    auto source = [&](int64_t d, int64_t o) -> int64_t {
      const int64_t first = std::max<int64_t>(-begin[d], 0);
      const int64_t len = x.shape()[d] - first - std::max<int64_t>(-end[d], 0);
      int64_t i = o - std::max<int64_t>(begin[d], 0);
      if (i >= 0 && i < len) return first + i;
      switch (mode_) {
        case PadMode::kConstant:
          return -1;
        case PadMode::kEdge:
          return first + std::clamp<int64_t>(i, 0, len - 1);
        case PadMode::kReflect: {
          if (len == 1) return first;
          const int64_t period = 2 * (len - 1);
          i = ((i % period) + period) % period;
          return first + (i < len ? i : period - i);
        }
        case PadMode::kWrap:
          return first + ((i % len) + len) % len;
      }
      return -1;
    };
    std::vector<int64_t> in_strides(rank, 1);
    for (int64_t d = rank - 1; d > 0; --d) in_strides[d - 1] = in_strides[d] * x.shape()[d];
    const uint8_t* src = static_cast<const uint8_t*>(x.raw());
    uint8_t* dst = static_cast<uint8_t*>(out.raw());
    std::vector<int64_t> index(rank, 0);
    for (int64_t flat = 0; flat < out.numel(); ++flat) {
      int64_t offset = 0;
      bool inside = true;
      for (int64_t d = 0; d < rank && inside; ++d) {
        const int64_t i = source(d, index[d]);
        inside = i >= 0;
        offset += i * in_strides[d];
      }
      CopyElement(inside ? src + offset * elem : static_cast<const uint8_t*>(value.raw()),
                  dst + flat * elem, elem);
      for (int64_t d = rank; d-- > 0;) {
        if (++index[d] < out_shape[d]) break;
        index[d] = 0;
      }
    }
  }

 private:
  PadMode mode_ = PadMode::kConstant;
  std::vector<int64_t> pads_attr_;
  float value_attr_ = 0.f;
};

// ---- ArgMax / ArgMin / TopK / Trilu ---------------------------------------

// x viewed as [outer, extent, inner] around `axis`.
struct AxisView {
  int64_t outer = 1, extent = 1, inner = 1;
  AxisView(const Shape& shape, int64_t axis) {
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
      (d < axis ? outer : d == axis ? extent : inner) *= shape[d];
  }
};

// a ranks before b in TopK's order: the larger (largest) or smaller first, NaN before every
// number either way.
template <typename T>
bool RanksBefore(T a, T b, bool largest) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return !std::isnan(b);
    if (std::isnan(b)) return false;
  }
  return largest ? a > b : a < b;
}

class ArgExtremumKernel : public OpKernel {
 public:
  ArgExtremumKernel(const KernelInit& init, bool largest)
      : largest_(largest),
        axis_(init.node.GetInt("axis", 0)),
        keepdims_(init.node.GetInt("keepdims", 1) != 0),
        select_last_(init.node.GetInt("select_last_index", 0) != 0) {}
  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.input(0);
    const int64_t rank = static_cast<int64_t>(x.rank());
    const int64_t axis = node.Axis(axis_, std::max<int64_t>(rank, 1));
    OCTET_CHECK(rank > 0 && x.shape()[axis] > 0, node.Describe(),
                ": needs a non-empty axis, got shape ", ShapeToString(x.shape()));
    Shape out_shape = x.shape();
    if (keepdims_) {
      out_shape[axis] = 1;
    } else {
      out_shape.erase(out_shape.begin() + axis);
    }
    Tensor& out = ctx.AllocateUninitializedOutput(0, DType::kInt64, out_shape);
    const AxisView v(x.shape(), axis);
    int64_t* po = out.data<int64_t>();
    DispatchNumeric(x.dtype(), node, [&](auto tag) {
      using T = decltype(tag);
      const T* px = static_cast<const T*>(x.raw());
      for (int64_t o = 0; o < v.outer; ++o) {
        for (int64_t i = 0; i < v.inner; ++i) {
          const T* row = px + o * v.extent * v.inner + i;
          // Plain comparisons from the first element, as ONNX Runtime does: a NaN is never
          // taken over a number, and a leading NaN is kept.
          int64_t best = 0;
          for (int64_t k = 1; k < v.extent; ++k) {
            const T a = row[k * v.inner], b = row[best * v.inner];
            const bool take =
                select_last_ ? (largest_ ? a >= b : a <= b) : (largest_ ? a > b : a < b);
            if (take) best = k;
          }
          po[o * v.inner + i] = best;
        }
      }
    });
  }

 private:
  bool largest_;
  int64_t axis_;
  bool keepdims_;
  bool select_last_;
};

// TopK: the k first elements along `axis` in rank order, equal values by lower index (what
// ONNX Runtime returns for numbers; with NaNs its order follows its heap, not a rule).
// sorted = 0 leaves the order to the implementation; this one returns the sorted order then.
class TopKKernel : public OpKernel {
 public:
  explicit TopKKernel(const KernelInit& init)
      : k_from_input_(init.node.opset >= 10),
        k_attr_(init.node.GetInt("k", -1)),
        axis_(init.node.GetInt("axis", -1)),
        largest_(init.node.GetInt("largest", 1) != 0) {}
  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.input(0);
    int64_t k = k_attr_;
    if (k_from_input_) {
      const std::vector<int64_t> kv = ReadInt64s(ctx.input(1), node, "K");
      OCTET_CHECK(kv.size() == 1, node.Describe(), ": input 'K' must hold one value");
      k = kv[0];
    }
    const int64_t rank = static_cast<int64_t>(x.rank());
    OCTET_CHECK(rank > 0, node.Describe(), ": input must have rank >= 1");
    const int64_t axis = node.Axis(axis_, rank);
    OCTET_CHECK(k >= 0 && k <= x.shape()[axis], node.Describe(), ": k = ", k, " is outside [0, ",
                x.shape()[axis], "] for shape ", ShapeToString(x.shape()));
    Shape out_shape = x.shape();
    out_shape[axis] = k;
    Tensor& values = ctx.AllocateUninitializedOutput(0, x.dtype(), out_shape);
    Tensor& indices = ctx.AllocateUninitializedOutput(1, DType::kInt64, out_shape);
    const AxisView v(x.shape(), axis);
    std::vector<int64_t> order(v.extent);
    DispatchNumeric(x.dtype(), node, [&](auto tag) {
      using T = decltype(tag);
      const T* px = static_cast<const T*>(x.raw());
      T* pv = static_cast<T*>(values.raw());
      int64_t* pi = indices.data<int64_t>();
      for (int64_t o = 0; o < v.outer; ++o) {
        for (int64_t i = 0; i < v.inner; ++i) {
          const T* row = px + o * v.extent * v.inner + i;
          for (int64_t e = 0; e < v.extent; ++e) order[e] = e;
          auto before = [&](int64_t a, int64_t b) {
            if (RanksBefore(row[a * v.inner], row[b * v.inner], largest_)) return true;
            if (RanksBefore(row[b * v.inner], row[a * v.inner], largest_)) return false;
            return a < b;
          };
          std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
          for (int64_t j = 0; j < k; ++j) {
            const int64_t at = (o * k + j) * v.inner + i;
            pv[at] = row[order[j] * v.inner];
            pi[at] = order[j];
          }
        }
      }
    });
  }

 private:
  bool k_from_input_;
  int64_t k_attr_;
  int64_t axis_;
  bool largest_;
};

// Trilu: keeps the upper (j - i >= k) or lower (j - i <= k) triangle of each matrix in the last
// two dims and zeroes the rest.
class TriluKernel : public OpKernel {
 public:
  explicit TriluKernel(const KernelInit& init) : upper_(init.node.GetInt("upper", 1) != 0) {}
  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.input(0);
    OCTET_CHECK(x.rank() >= 2, node.Describe(), ": input must have rank >= 2, got shape ",
                ShapeToString(x.shape()));
    int64_t k = 0;
    if (ctx.has_input(1)) {
      const std::vector<int64_t> kv = ReadInt64s(ctx.input(1), node, "k");
      OCTET_CHECK(kv.size() == 1, node.Describe(), ": input 'k' must hold one value");
      k = kv[0];
    }
    const int64_t rows = x.shape()[x.rank() - 2], cols = x.shape()[x.rank() - 1];
    Tensor& out = ctx.AllocateOutput(0, x.dtype(), x.shape());
    const size_t elem = DTypeSize(x.dtype());
    const auto* src = static_cast<const uint8_t*>(x.raw());
    auto* dst = static_cast<uint8_t*>(out.raw());
    const int64_t matrices = rows * cols == 0 ? 0 : x.numel() / (rows * cols);
    for (int64_t m = 0; m < matrices; ++m) {
      for (int64_t i = 0; i < rows; ++i) {
        // Columns [begin, end) of row i are kept; the rest stay zero.
        const int64_t begin = upper_ ? std::clamp(i + k, int64_t{0}, cols) : 0;
        const int64_t end = upper_ ? cols : std::clamp(i + k + 1, int64_t{0}, cols);
        if (end <= begin) continue;
        const int64_t at = (m * rows + i) * cols + begin;
        std::memcpy(dst + at * elem, src + at * elem, (end - begin) * elem);
      }
    }
  }

 private:
  bool upper_;
};

// ---- Registration helpers ---------------------------------------------------

std::vector<DType> SameAsInput0(const Node&, const std::vector<DType>& t) { return {t[0]}; }
std::vector<DType> Int64Output(const Node&, const std::vector<DType>&) { return {DType::kInt64}; }
std::vector<DType> BoolOutput(const Node&, const std::vector<DType>&) { return {DType::kBool}; }

bool AllSame(const std::vector<DType>& t) {
  return std::all_of(t.begin(), t.end(), [&](DType x) { return x == t[0]; });
}

}  // namespace

void RegisterTensorOps(KernelRegistry& r) {
  auto first_storable = [](const Node&, const std::vector<DType>& t) {
    return !t.empty() && AnyStorable(t[0]);
  };
  r.Register({kOnnxDomain, "Shape", 1, kLatest, first_storable, Int64Output, Create<ShapeKernel>});
  r.Register(
      {kOnnxDomain, "Identity", 1, kLatest, first_storable, SameAsInput0, Create<IdentityKernel>});
  r.Register({kOnnxDomain, "Concat", 4, kLatest,
              [](const Node&, const std::vector<DType>& t) {
                return !t.empty() && AnyStorable(t[0]) && AllSame(t);
              },
              SameAsInput0, Create<ConcatKernel>});
  r.Register({kOnnxDomain, "Cast", 6, kLatest,
              [](const Node& n, const std::vector<DType>& t) {
                return IsCastable(t[0]) && IsCastable(static_cast<DType>(n.GetInt("to", 0)));
              },
              [](const Node& n, const std::vector<DType>&) {
                return std::vector<DType>{static_cast<DType>(n.GetInt("to", 0))};
              },
              Create<CastKernel>});
  r.Register({kOnnxDomain, "Where", 9, kLatest,
              [](const Node&, const std::vector<DType>& t) {
                return t.size() == 3 && t[0] == DType::kBool && AnyStorable(t[1]) && t[1] == t[2];
              },
              [](const Node&, const std::vector<DType>& t) { return std::vector<DType>{t[1]}; },
              Create<WhereKernel>});
  r.Register({kOnnxDomain, "Expand", 8, kLatest,
              [](const Node&, const std::vector<DType>& t) {
                return t.size() == 2 && AnyStorable(t[0]) && t[1] == DType::kInt64;
              },
              SameAsInput0, Create<ExpandKernel>});
  r.Register({kOnnxDomain, "ConstantOfShape", 9, kLatest,
              [](const Node& n, const std::vector<DType>& t) {
                return t.size() == 1 && t[0] == DType::kInt64 &&
                       AnyStorable(ConstantOfShapeType(n));
              },
              [](const Node& n, const std::vector<DType>&) {
                return std::vector<DType>{ConstantOfShapeType(n)};
              },
              Create<ConstantOfShapeKernel>});
  r.Register({kOnnxDomain, "Constant", 1, kLatest,
              [](const Node&, const std::vector<DType>& t) { return t.empty(); },
              [](const Node& n, const std::vector<DType>&) {
                return std::vector<DType>{ConstantValue(n).dtype()};
              },
              Create<ConstantKernel>});
  r.Register({kOnnxDomain, "Range", 11, kLatest,
              [](const Node&, const std::vector<DType>& t) {
                return t.size() == 3 && AllSame(t) &&
                       OneOf(t[0], {DType::kFloat32, DType::kFloat64, DType::kInt16, DType::kInt32,
                                    DType::kInt64});
              },
              SameAsInput0, Create<RangeKernel>});
  const std::pair<const char*, CompareOp> compares[] = {
      {"Equal", CompareOp::kEqual},
      {"Less", CompareOp::kLess},
      {"Greater", CompareOp::kGreater},
      {"LessOrEqual", CompareOp::kLessOrEqual},
      {"GreaterOrEqual", CompareOp::kGreaterOrEqual}};
  for (const auto& [name, op] : compares) {
    const bool is_equal = op == CompareOp::kEqual;
    const int since = op == CompareOp::kLessOrEqual || op == CompareOp::kGreaterOrEqual ? 12 : 7;
    r.Register(
        {kOnnxDomain, name, since, kLatest,
         [is_equal](const Node&, const std::vector<DType>& t) {
           return t.size() == 2 && t[0] == t[1] &&
                  (IsNumeric(t[0]) || (is_equal && t[0] == DType::kBool));
         },
         BoolOutput,
         [op = op](const KernelInit& init) { return std::make_unique<CompareKernel>(init, op); }});
  }
  const std::pair<const char*, LogicOp> logic[] = {
      {"And", LogicOp::kAnd}, {"Or", LogicOp::kOr}, {"Xor", LogicOp::kXor}};
  auto all_bool = [](const Node&, const std::vector<DType>& t) {
    return std::all_of(t.begin(), t.end(), [](DType x) { return x == DType::kBool; });
  };
  for (const auto& [name, op] : logic)
    r.Register(
        {kOnnxDomain, name, 7, kLatest, all_bool, BoolOutput,
         [op = op](const KernelInit& init) { return std::make_unique<LogicKernel>(init, op); }});
  r.Register({kOnnxDomain, "Not", 1, kLatest, all_bool, BoolOutput, Create<NotKernel>});
  // Split-1 took the split as an optional second input with other rules; not supported.
  r.Register({kOnnxDomain, "Split", 2, kLatest,
              [](const Node&, const std::vector<DType>& t) {
                return AnyStorable(t[0]) &&
                       (t.size() < 2 || OneOf(t[1], {DType::kInt64, DType::kUndefined}));
              },
              [](const Node& n, const std::vector<DType>& t) {
                return std::vector<DType>(n.outputs.size(), t[0]);
              },
              Create<SplitKernel>});
  r.Register({kOnnxDomain, "Pad", 2, kLatest,
              [](const Node& n, const std::vector<DType>& t) {
                if (n.opset < 11) return IsNumeric(t[0]);
                return AnyStorable(t[0]) && t.size() >= 2 && t[1] == DType::kInt64;
              },
              SameAsInput0, Create<PadKernel>});
  for (const bool largest : {true, false})
    r.Register(
        {kOnnxDomain, largest ? "ArgMax" : "ArgMin", 1, kLatest,
         [](const Node&, const std::vector<DType>& t) { return t.size() == 1 && IsNumeric(t[0]); },
         Int64Output,
         [largest](const KernelInit& init) {
           return std::make_unique<ArgExtremumKernel>(init, largest);
         }});
  r.Register({kOnnxDomain, "TopK", 1, kLatest,
              [](const Node& n, const std::vector<DType>& t) {
                return IsNumeric(t[0]) &&
                       (n.opset < 10 || (t.size() == 2 && t[1] == DType::kInt64));
              },
              [](const Node&, const std::vector<DType>& t) {
                return std::vector<DType>{t[0], DType::kInt64};
              },
              Create<TopKKernel>});
  r.Register({kOnnxDomain, "Trilu", 14, kLatest,
              [](const Node&, const std::vector<DType>& t) {
                return AnyStorable(t[0]) &&
                       (t.size() < 2 || OneOf(t[1], {DType::kInt64, DType::kUndefined}));
              },
              SameAsInput0, Create<TriluKernel>});
}

}  // namespace octet
