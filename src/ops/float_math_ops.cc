// Float32 math a transformer encoder needs: unary functions and activations,
// Pow, reductions, Softmax, LayerNormalization, RMSNormalization, Gemm and Gelu (ONNX opset 20
// and com.microsoft Gelu/FastGelu). Neg/Abs also take signed integers,
// ReduceSum/Max/Min int32/int64.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/float/broadcast.h"
#include "kernels/float/sgemm.h"
#include "kernels/float/vmath.h"
#include "ops/registry.h"

namespace octet {

namespace {

constexpr int kLatest = 1 << 30;

template <typename Kernel>
std::unique_ptr<OpKernel> Create(const KernelInit& init) {
  return std::make_unique<Kernel>(init);
}

bool AllFloat32(const Node&, const std::vector<DType>& types) {
  return std::all_of(types.begin(), types.end(),
                     [](DType t) { return t == DType::kFloat32 || t == DType::kUndefined; });
}

std::vector<DType> SameAsInput0(const Node& node, const std::vector<DType>& t) {
  return std::vector<DType>(std::max<size_t>(node.outputs.size(), 1), t[0]);
}

// ---- Unary element-wise -----------------------------------------------------

// y[i] = f(x[i]) over n contiguous floats, with the node's attributes bound.
using ArrayFn = std::function<void(const float* x, float* y, int64_t n)>;

// An ArrayFn from a per-element function, inlined into the loop.
template <typename Fn>
ArrayFn PerElement(Fn fn) {
  return [fn](const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = fn(x[i]);
  };
}

// A vmath function (kernels/float/vmath.h) as an ArrayFn, on the active path.
template <void (*Fn)(const float*, float*, int64_t, Isa)>
ArrayFn VectorMath() {
  return [](const float* x, float* y, int64_t n) { Fn(x, y, n, ActiveIsa()); };
}

// Rough cost per element of a vmath function, in simple float operations:
// how much work the pool needs before splitting an array pays.
constexpr int64_t kTranscendentalCost = 16;

class UnaryKernel : public OpKernel {
 public:
  UnaryKernel(ArrayFn fn, int64_t cost) : fn_(std::move(fn)), cost_(cost) {}
  void Run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const float* px = x.data<float>();
    // Every element is written.
    float* po = ctx.AllocateUninitializedOutput(0, DType::kFloat32, x.shape()).data<float>();
    // Elements are independent: any split gives the same bits.
    vmath::ParallelForWork(
        ctx.pool(), x.numel(), x.numel() * cost_,
        [&](int64_t begin, int64_t end) { fn_(px + begin, po + begin, end - begin); });
  }

 private:
  ArrayFn fn_;
  int64_t cost_;
};

// Clip: bounds from attributes (opsets 6-10) or optional scalar inputs (11+);
// an omitted bound is the type's lowest / highest value.
class ClipKernel : public OpKernel {
 public:
  explicit ClipKernel(const KernelInit& init)
      : node_(init.node),
        min_attr_(init.node.GetFloat("min", std::numeric_limits<float>::lowest())),
        max_attr_(init.node.GetFloat("max", std::numeric_limits<float>::max())) {}

  void Run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    Tensor& out = ctx.AllocateOutput(0, x.dtype(), x.shape());
    switch (x.dtype()) {
      case DType::kFloat32:
        return Apply<float>(ctx, x, out);
      case DType::kInt8:
        return Apply<int8_t>(ctx, x, out);
      case DType::kUInt8:
        return Apply<uint8_t>(ctx, x, out);
      case DType::kInt32:
        return Apply<int32_t>(ctx, x, out);
      case DType::kInt64:
        return Apply<int64_t>(ctx, x, out);
      default:
        Fail(node_.Describe(), ": unsupported input type ", DTypeName(x.dtype()));
    }
  }

 private:
  template <typename T>
  T Bound(KernelContext& ctx, size_t input, T fallback) const {
    if (!ctx.has_input(input)) return fallback;
    const Tensor& b = ctx.input(input);
    OCTET_CHECK(b.numel() == 1, node_.Describe(), ": ", input == 1 ? "min" : "max",
                " must be a scalar, got shape ", ShapeToString(b.shape()));
    return b.data<T>()[0];
  }

  template <typename T>
  void Apply(KernelContext& ctx, const Tensor& x, Tensor& out) const {
    T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
    if (node_.opset < 11) {
      lo = static_cast<T>(min_attr_);
      hi = static_cast<T>(max_attr_);
    } else {
      lo = Bound<T>(ctx, 1, lo);
      hi = Bound<T>(ctx, 2, hi);
    }
    const T* px = x.data<T>();
    T* po = out.data<T>();
    // min(max(x, lo), hi) as ONNX defines it; NaN stays NaN.
    for (int64_t i = 0; i < x.numel(); ++i) po[i] = px[i] < lo ? lo : (px[i] > hi ? hi : px[i]);
  }

  const Node& node_;
  float min_attr_, max_attr_;
};

// Neg and Abs on signed integers (wrap-around for the minimum, as two's complement).
template <typename T>
void IntegerUnary(const Tensor& x, Tensor& out, bool negate) {
  const T* px = static_cast<const T*>(x.raw());
  T* po = static_cast<T*>(out.raw());
  using Wide = std::make_unsigned_t<T>;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const bool flip = negate || px[i] < 0;
    po[i] = flip ? static_cast<T>(Wide{0} - static_cast<Wide>(px[i])) : px[i];
  }
}

class NegAbsKernel : public OpKernel {
 public:
  NegAbsKernel(bool negate) : negate_(negate) {}
  void Run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    Tensor& out = ctx.AllocateOutput(0, x.dtype(), x.shape());
    switch (x.dtype()) {
      case DType::kFloat32: {
        const float* px = x.data<float>();
        float* po = out.data<float>();
        for (int64_t i = 0; i < x.numel(); ++i) po[i] = negate_ ? -px[i] : std::fabs(px[i]);
        return;
      }
      case DType::kInt8:
        return IntegerUnary<int8_t>(x, out, negate_);
      case DType::kInt16:
        return IntegerUnary<int16_t>(x, out, negate_);
      case DType::kInt32:
        return IntegerUnary<int32_t>(x, out, negate_);
      case DType::kInt64:
        return IntegerUnary<int64_t>(x, out, negate_);
      default:
        Fail(ctx.node().Describe(), ": dtype ", DTypeName(x.dtype()), " not supported");
    }
  }

 private:
  bool negate_;
};

// ---- Pow ----------------------------------------------------------------------

class PowKernel : public OpKernel {
 public:
  explicit PowKernel(const KernelInit&) {}
  void Run(KernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    const Shape shape =
        BroadcastOrFail(a.shape(), b.shape(), [&] { return ctx.node().Describe(); });
    Tensor& out = ctx.AllocateOutput(0, DType::kFloat32, shape);
    const float* pa = a.data<float>();
    float* po = out.data<float>();
    const std::vector<float> exponents = Exponents(b, ctx.node());
    if (b.numel() == 1 && shape == a.shape()) {  // one exponent: a plain loop
      const float e = exponents[0];
      if (e == 2.f) {
        for (int64_t i = 0; i < out.numel(); ++i) po[i] = Square(pa[i]);
      } else {
        for (int64_t i = 0; i < out.numel(); ++i) po[i] = std::pow(pa[i], e);
      }
      return;
    }
    ForEachBroadcast<2>(shape, {&a.shape(), &b.shape()},
                        [&](int64_t i, const std::array<int64_t, 2>& off) {
                          const float e = exponents[off[1]];
                          po[i] = e == 2.f ? Square(pa[off[0]]) : std::pow(pa[off[0]], e);
                        });
  }

 private:
  // x^2 is what exporters emit for variance; make it one exact multiply.
  static float Square(float x) { return x * x; }

  // The exponents as floats (an integer exponent converts as the cast would).
  template <typename T>
  static std::vector<float> AsFloats(const Tensor& b) {
    const T* p = b.data<T>();
    return std::vector<float>(p, p + b.numel());
  }
  static std::vector<float> Exponents(const Tensor& b, const Node& node) {
    switch (b.dtype()) {
      case DType::kFloat32:
        return AsFloats<float>(b);
      case DType::kInt32:
        return AsFloats<int32_t>(b);
      case DType::kInt64:
        return AsFloats<int64_t>(b);
      default:
        Fail(node.Describe(), ": exponent dtype ", DTypeName(b.dtype()));
    }
  }
};

// ---- Reductions ---------------------------------------------------------------

enum class ReduceOp { kSum, kMean, kMax, kMin };

class ReduceKernel : public OpKernel {
 public:
  ReduceKernel(const KernelInit& init, ReduceOp op, int axes_input_since)
      : op_(op),
        axes_from_input_(init.node.opset >= axes_input_since),
        axes_attr_(init.node.GetInts("axes")),
        keepdims_(init.node.GetInt("keepdims", 1) != 0),
        noop_with_empty_axes_(init.node.GetInt("noop_with_empty_axes", 0) != 0) {}

  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.input(0);
    const int64_t rank = static_cast<int64_t>(x.rank());
    std::vector<int64_t> axes = axes_attr_;
    if (axes_from_input_ && ctx.has_input(1)) {
      const Tensor& t = ctx.input(1);
      OCTET_CHECK(t.dtype() == DType::kInt64 && t.rank() <= 1, node.Describe(),
                  ": axes must be a 1-D int64 tensor");
      axes.assign(t.data<int64_t>(), t.data<int64_t>() + t.numel());
    }
    if (axes.empty() && axes_from_input_ && noop_with_empty_axes_) {
      ctx.SetOutput(0, x);
      return;
    }
    std::vector<bool> reduced(rank, axes.empty());
    for (int64_t a : axes) reduced[node.Axis(a, rank)] = true;
    Shape out_shape, kept_shape(rank);
    for (int64_t d = 0; d < rank; ++d) {
      kept_shape[d] = reduced[d] ? 1 : x.shape()[d];
      if (!reduced[d] || keepdims_) out_shape.push_back(kept_shape[d]);
    }
    int64_t group = 1;
    for (int64_t d = 0; d < rank; ++d)
      if (reduced[d]) group *= x.shape()[d];
    Tensor& out = ctx.AllocateOutput(0, x.dtype(), out_shape);
    switch (x.dtype()) {
      case DType::kFloat32:
        return Reduce<float, double>(x, out, kept_shape, group);
      case DType::kInt32:
        return Reduce<int32_t, int64_t>(x, out, kept_shape, group);
      case DType::kInt64:
        return Reduce<int64_t, int64_t>(x, out, kept_shape, group);
      default:
        Fail(node.Describe(), ": dtype ", DTypeName(x.dtype()), " not supported");
    }
  }

 private:
  // Sums accumulate in Acc (double for float) so the result is the correctly
  // rounded value of nearly every input, whatever order ONNX Runtime adds in.
  template <typename T, typename Acc>
  void Reduce(const Tensor& x, Tensor& out, const Shape& kept_shape, int64_t group) const {
    const int64_t n_out = out.numel();
    const bool extremum = op_ == ReduceOp::kMax || op_ == ReduceOp::kMin;
    std::vector<Acc> acc(n_out, extremum
                                    ? (op_ == ReduceOp::kMax ? std::numeric_limits<Acc>::lowest()
                                                             : std::numeric_limits<Acc>::max())
                                    : Acc{0});
    std::vector<bool> nan(extremum ? n_out : 0, false);
    const T* px = static_cast<const T*>(x.raw());
    if (!extremum && ReducesTrailingDims(x.shape(), kept_shape)) {
      SumContiguousGroups(px, n_out, group, acc.data());
    } else {
      WalkAndReduce(px, x.shape(), kept_shape, acc, nan);
    }
    T* po = static_cast<T*>(out.raw());
    for (int64_t j = 0; j < n_out; ++j) {
      if (op_ == ReduceOp::kMean) {
        po[j] = static_cast<T>(acc[j] / static_cast<Acc>(group));
      } else if (extremum && group == 0) {
        // ONNX: reducing an empty set gives the identity (lowest for Max, max for Min).
        po[j] = op_ == ReduceOp::kMax ? std::numeric_limits<T>::lowest()
                                      : std::numeric_limits<T>::max();
        if constexpr (std::is_floating_point_v<T>)
          po[j] = op_ == ReduceOp::kMax ? -std::numeric_limits<T>::infinity()
                                        : std::numeric_limits<T>::infinity();
      } else if (extremum && nan[j]) {
        po[j] = std::numeric_limits<T>::quiet_NaN();
      } else {
        po[j] = static_cast<T>(acc[j]);
      }
    }
  }

  // Whether every reduced dim (of more than one element) comes after every kept one:
  // then each output sums one contiguous run of x.
  static bool ReducesTrailingDims(const Shape& shape, const Shape& kept_shape) {
    bool reduced_seen = false;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == 1) continue;
      if (kept_shape[d] == 1) {
        reduced_seen = true;
      } else if (reduced_seen) {
        return false;
      }
    }
    return true;
  }

  // Each output's sum in increasing index, the walk's order; four runs at a time so
  // that their additions overlap.
  template <typename T, typename Acc>
  static void SumContiguousGroups(const T* px, int64_t n_out, int64_t group, Acc* acc) {
    int64_t j = 0;
    for (; j + 4 <= n_out; j += 4) {
      const T* run = px + j * group;
      Acc s0{0}, s1{0}, s2{0}, s3{0};
      for (int64_t i = 0; i < group; ++i) {
        s0 += static_cast<Acc>(run[i]);
        s1 += static_cast<Acc>(run[group + i]);
        s2 += static_cast<Acc>(run[2 * group + i]);
        s3 += static_cast<Acc>(run[3 * group + i]);
      }
      acc[j] = s0, acc[j + 1] = s1, acc[j + 2] = s2, acc[j + 3] = s3;
    }
    for (; j < n_out; ++j) {
      Acc sum{0};
      for (int64_t i = 0; i < group; ++i) sum += static_cast<Acc>(px[j * group + i]);
      acc[j] = sum;
    }
  }

  // Walks x, mapping each element to its output slot (reduced dims stride 0).
  template <typename T, typename Acc>
  void WalkAndReduce(const T* px, const Shape& shape, const Shape& kept_shape,
                     std::vector<Acc>& acc, std::vector<bool>& nan) const {
    const bool extremum = op_ == ReduceOp::kMax || op_ == ReduceOp::kMin;
    const int64_t numel = NumElements(shape);
    std::vector<int64_t> out_strides(kept_shape.size(), 0);
    int64_t stride = 1;
    for (size_t d = kept_shape.size(); d-- > 0;) {
      out_strides[d] = kept_shape[d] == 1 ? 0 : stride;
      stride *= kept_shape[d];
    }
    std::vector<int64_t> index(shape.size(), 0);
    int64_t slot = 0;
    for (int64_t i = 0; i < numel; ++i) {
      const Acc v = static_cast<Acc>(px[i]);
      if (extremum) {
        if constexpr (std::is_floating_point_v<T>) {
          if (std::isnan(px[i])) nan[slot] = true;
        }
        acc[slot] = op_ == ReduceOp::kMax ? std::max(acc[slot], v) : std::min(acc[slot], v);
      } else {
        acc[slot] += v;
      }
      for (size_t d = shape.size(); d-- > 0;) {
        slot += out_strides[d];
        if (++index[d] < shape[d]) break;
        slot -= out_strides[d] * shape[d];
        index[d] = 0;
      }
    }
  }

  ReduceOp op_;
  bool axes_from_input_;
  std::vector<int64_t> axes_attr_;
  bool keepdims_;
  bool noop_with_empty_axes_;
};

// ---- Softmax ------------------------------------------------------------------

class SoftmaxKernel : public OpKernel {
 public:
  explicit SoftmaxKernel(const KernelInit& init)
      : axis_(init.node.GetInt("axis", init.node.opset >= 13 ? -1 : 1)),
        coerce_2d_(init.node.opset < 13) {}
  void Run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    // Every element is written.
    Tensor& out = ctx.AllocateUninitializedOutput(0, DType::kFloat32, x.shape());
    const int64_t rank = static_cast<int64_t>(x.rank());
    if (x.numel() == 0) return;
    const int64_t axis = ctx.node().Axis(axis_, std::max<int64_t>(rank, 1));
    int64_t outer = 1, length = 1, inner = 1;
    for (int64_t d = 0; d < rank; ++d) {
      int64_t& part = d < axis ? outer : (d == axis || coerce_2d_) ? length : inner;
      part *= x.shape()[d];
    }
    const float* px = x.data<float>();
    float* po = out.data<float>();
    if (inner == 1) return vmath::ParallelSoftmaxRows(ctx.pool(), px, po, length, outer);
    // One row per (outer, inner) pair; a strided row is gathered so that
    // every row takes the same kernel.
    vmath::ParallelForWork(ctx.pool(), outer * inner, x.numel() * kTranscendentalCost,
                           [&](int64_t begin, int64_t end) {
                             std::vector<float> row(length);
                             for (int64_t r = begin; r < end; ++r) {
                               const int64_t start = r / inner * length * inner + r % inner;
                               for (int64_t j = 0; j < length; ++j) row[j] = px[start + j * inner];
                               vmath::SoftmaxRow(row.data(), row.data(), length);
                               for (int64_t j = 0; j < length; ++j) po[start + j * inner] = row[j];
                             }
                           });
  }

 private:
  int64_t axis_;
  bool coerce_2d_;
};

// ---- LayerNormalization, RMSNormalization ---------------------------------------

// Fails unless parameter t (`what`) broadcasts to the normalized shape.
void CheckNormParam(const Node& node, const Tensor& t, const char* what, const Shape& norm_shape) {
  std::optional<Shape> b = BroadcastShapes(t.shape(), norm_shape);
  OCTET_CHECK(b && *b == norm_shape, node.Describe(), ": ", what, " shape ",
              ShapeToString(t.shape()), " does not broadcast to the normalized shape ",
              ShapeToString(norm_shape));
}

// t's values over `norm_shape` as one contiguous row: t's own data when it
// has that many elements, else broadcast into `storage`.
const float* ExpandedRow(const Tensor& t, const Shape& norm_shape, std::vector<float>& storage) {
  if (t.numel() == NumElements(norm_shape)) return t.data<float>();
  storage.resize(NumElements(norm_shape));
  const float* pt = t.data<float>();
  ForEachBroadcast<1>(norm_shape, {&t.shape()}, [&](int64_t i, const std::array<int64_t, 1>& off) {
    storage[i] = pt[off[0]];
  });
  return storage.data();
}

// What LayerNormalization and RMSNormalization share: attributes axis and epsilon
// (stash_type 1 only), and the normalized dims [axis, rank) with Scale checked on them.
class NormKernel : public OpKernel {
 protected:
  explicit NormKernel(const KernelInit& init)
      : axis_(init.node.GetInt("axis", -1)), epsilon_(init.node.GetFloat("epsilon", 1e-5f)) {
    OCTET_CHECK(init.node.GetInt("stash_type", 1) == 1, init.node.Describe(),
                ": only stash_type 1 (float) is supported");
  }
  Shape NormShape(const KernelContext& ctx) const {
    const Tensor& x = ctx.input(0);
    const int64_t axis = ctx.node().Axis(axis_, static_cast<int64_t>(x.rank()));
    const Shape norm_shape(x.shape().begin() + axis, x.shape().end());
    CheckNormParam(ctx.node(), ctx.input(1), "Scale", norm_shape);
    return norm_shape;
  }
  int64_t axis_;
  float epsilon_;
};

class LayerNormKernel : public NormKernel {
 public:
  explicit LayerNormKernel(const KernelInit& init) : NormKernel(init) {}
  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.input(0);
    const Tensor& scale = ctx.input(1);
    const int64_t rank = static_cast<int64_t>(x.rank());
    const Shape norm_shape = NormShape(ctx);
    const int64_t axis = rank - static_cast<int64_t>(norm_shape.size());
    const bool has_bias = ctx.has_input(2);
    if (has_bias) CheckNormParam(node, ctx.input(2), "B", norm_shape);
    // Scale and B as rows of the normalized size (expanded when they broadcast).
    const int64_t size = NumElements(norm_shape);
    std::vector<float> scale_row, bias_row;
    const float* ps = ExpandedRow(scale, norm_shape, scale_row);
    const float* pb = has_bias ? ExpandedRow(ctx.input(2), norm_shape, bias_row) : nullptr;
    // Every element is written.
    Tensor& y = ctx.AllocateUninitializedOutput(0, DType::kFloat32, x.shape());
    Shape stat_shape(x.shape().begin(), x.shape().begin() + axis);
    stat_shape.resize(rank, 1);
    float* mean_out = ctx.output_wanted(1)
                          ? ctx.AllocateOutput(1, DType::kFloat32, stat_shape).data<float>()
                          : nullptr;
    float* inv_std_out = ctx.output_wanted(2)
                             ? ctx.AllocateOutput(2, DType::kFloat32, stat_shape).data<float>()
                             : nullptr;
    const int64_t rows = size == 0 ? 0 : x.numel() / size;
    const float* px = x.data<float>();
    float* py = y.data<float>();
    vmath::ParallelForWork(ctx.pool(), rows, x.numel() * 4, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        float mean, inv_std;
        vmath::LayerNormRow(px + r * size, ps, pb, epsilon_, py + r * size, size, &mean, &inv_std);
        if (mean_out) mean_out[r] = mean;
        if (inv_std_out) inv_std_out[r] = inv_std;
      }
    });
  }
};

// RMSNormalization (opset 23) as its function body's nodes run in octet: Pow(x, 2) (one
// multiply), ReduceMean over [axis, rank) (the ReduceMean kernel's double sum in increasing
// index, divided in double), Add(epsilon), Sqrt, Reciprocal (1 / r), Mul(x, .), Mul(.,
// Scale), each rounded to float where the node rounds: rewrite/float_rms_norm.h puts it in
// place of those nodes without changing a bit.
class RmsNormKernel : public NormKernel {
 public:
  explicit RmsNormKernel(const KernelInit& init) : NormKernel(init) {}
  void Run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& scale = ctx.input(1);
    const Shape norm_shape = NormShape(ctx);
    const int64_t size = NumElements(norm_shape);
    std::vector<float> scale_row;
    const float* ps = ExpandedRow(scale, norm_shape, scale_row);
    Tensor& y = ctx.AllocateUninitializedOutput(0, DType::kFloat32, x.shape());
    const int64_t rows = size == 0 ? 0 : x.numel() / size;
    const float* px = x.data<float>();
    float* py = y.data<float>();
    vmath::ParallelForWork(ctx.pool(), rows, x.numel() * 4, [&](int64_t begin, int64_t end) {
      // Rows r.. r + count - 1 from their sums of squares.
      auto normalize = [&](int64_t r, int64_t count, const double* sums) {
        for (int64_t k = 0; k < count; ++k) {
          const float mean = static_cast<float>(sums[k] / static_cast<double>(size));
          const float inverse = 1.f / std::sqrt(mean + epsilon_);
          const float* xr = px + (r + k) * size;
          float* yr = py + (r + k) * size;
          for (int64_t i = 0; i < size; ++i) yr[i] = (xr[i] * inverse) * ps[i];
        }
      };
      // Eight rows' sums at once, so that their additions overlap (each row's in order).
      constexpr int64_t kRows = 8;
      int64_t r = begin;
      for (; r + kRows <= end; r += kRows) {
        double sums[kRows] = {};
        for (int64_t i = 0; i < size; ++i)
#pragma GCC unroll 8
          for (int64_t k = 0; k < kRows; ++k) {
            const float v = px[(r + k) * size + i];
            sums[k] += static_cast<double>(v * v);
          }
        normalize(r, kRows, sums);
      }
      for (; r < end; ++r) {
        double sum = 0;
        for (int64_t i = 0; i < size; ++i)
          sum += static_cast<double>(px[r * size + i] * px[r * size + i]);
        normalize(r, 1, &sum);
      }
    });
  }
};

// ---- Gemm ---------------------------------------------------------------------

// A row-major copy of the 2-D tensor t, transposed when `transpose`.
std::vector<float> Matrix(const Tensor& t, bool transpose) {
  const int64_t rows = t.dim(0), cols = t.dim(1);
  const float* p = t.data<float>();
  if (!transpose) return std::vector<float>(p, p + t.numel());
  std::vector<float> m(t.numel());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) m[j * rows + i] = p[i * cols + j];
  return m;
}

class GemmKernel : public OpKernel {
 public:
  explicit GemmKernel(const KernelInit& init)
      : trans_a_(init.node.GetInt("transA", 0) != 0),
        trans_b_(init.node.GetInt("transB", 0) != 0),
        alpha_(init.node.GetFloat("alpha", 1.f)),
        beta_(init.node.GetFloat("beta", 1.f)) {
    // A constant B is transposed and packed once here.
    if (init.constant_inputs.size() > 1 && init.constant_inputs[1] &&
        init.constant_inputs[1]->rank() == 2) {
      const Tensor& b = *init.constant_inputs[1];
      b_k_ = trans_b_ ? b.dim(1) : b.dim(0);
      b_n_ = trans_b_ ? b.dim(0) : b.dim(1);
      const std::vector<float> b_matrix = Matrix(b, trans_b_);
      packed_b_ = SgemmPackB(b_matrix.data(), b_k_, b_n_, b_n_);
    }
  }
  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    OCTET_CHECK(a.rank() == 2 && b.rank() == 2, node.Describe(), ": A and B must be 2-D, got ",
                ShapeToString(a.shape()), " and ", ShapeToString(b.shape()));
    const int64_t m = trans_a_ ? a.dim(1) : a.dim(0), k = trans_a_ ? a.dim(0) : a.dim(1);
    const int64_t kb = trans_b_ ? b.dim(1) : b.dim(0), n = trans_b_ ? b.dim(0) : b.dim(1);
    OCTET_CHECK(k == kb, node.Describe(), ": inner dimensions differ, A ", ShapeToString(a.shape()),
                (trans_a_ ? " (transposed)" : ""), " and B ", ShapeToString(b.shape()),
                (trans_b_ ? " (transposed)" : ""));
    Tensor& y = ctx.AllocateOutput(0, DType::kFloat32, {m, n});
    const Shape y_shape{m, n};
    const bool has_c = ctx.has_input(2) && beta_ != 0.f;
    if (has_c) {
      const Tensor& c = ctx.input(2);
      std::optional<Shape> bs = BroadcastShapes(c.shape(), y_shape);
      OCTET_CHECK(bs && *bs == y_shape, node.Describe(), ": C shape ", ShapeToString(c.shape()),
                  " does not broadcast to ", ShapeToString(y_shape));
    }
    std::vector<float> a_matrix = trans_a_ ? Matrix(a, true) : std::vector<float>();
    const float* pa = trans_a_ ? a_matrix.data() : a.data<float>();
    std::vector<float> b_matrix;
    SgemmOperand b_operand;
    if (packed_b_.data && b_k_ == k && b_n_ == n) {
      b_operand = SgemmOperand::Packed(packed_b_);
    } else if (trans_b_) {
      b_matrix = Matrix(b, true);
      b_operand = SgemmOperand::RowMajor(b_matrix.data(), n);
    } else {
      b_operand = SgemmOperand::RowMajor(b.data<float>(), n);
    }
    float* py = y.data<float>();
    Sgemm(m, n, k, SgemmOperand::RowMajor(pa, k), b_operand, py, n, ctx.pool());
    if (alpha_ != 1.f)
      for (int64_t i = 0; i < m * n; ++i) py[i] *= alpha_;
    if (has_c) {
      const Tensor& c = ctx.input(2);
      const float* pc = c.data<float>();
      ForEachBroadcast<1>(y_shape, {&c.shape()}, [&](int64_t i, const std::array<int64_t, 1>& off) {
        py[i] += beta_ * pc[off[0]];
      });
    }
  }

 private:
  bool trans_a_, trans_b_;
  float alpha_, beta_;
  SgemmPacked packed_b_;
  int64_t b_k_ = 0, b_n_ = 0;
};

// ---- Gelu / FastGelu -----------------------------------------------------------

// com.microsoft FastGelu: tanh-approximated Gelu of x (+ bias, broadcast along the last dim).
class FastGeluKernel : public OpKernel {
 public:
  explicit FastGeluKernel(const KernelInit&) {}
  void Run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const float* px = x.data<float>();
    const int64_t work = x.numel() * kTranscendentalCost;
    if (!ctx.has_input(1)) {
      // Every element is written.
      float* po = ctx.AllocateUninitializedOutput(0, DType::kFloat32, x.shape()).data<float>();
      vmath::ParallelForWork(ctx.pool(), x.numel(), work, [&](int64_t begin, int64_t end) {
        vmath::GeluTanh(px + begin, po + begin, end - begin);
      });
      return;
    }
    const Tensor& bias = ctx.input(1);
    OCTET_CHECK(bias.rank() == 1 && x.rank() >= 1 && bias.dim(0) == x.shape().back(),
                ctx.node().Describe(), ": bias shape ", ShapeToString(bias.shape()),
                " must be [last dim of input ", ShapeToString(x.shape()), "]");
    float* po = ctx.AllocateUninitializedOutput(0, DType::kFloat32, x.shape()).data<float>();
    const float* pb = bias.data<float>();
    const int64_t width = bias.dim(0);
    const int64_t rows = width == 0 ? 0 : x.numel() / width;
    vmath::ParallelForWork(ctx.pool(), rows, work, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        float* row = po + r * width;
        vmath::Binary(BinaryOp::kAdd, px + r * width, 1, pb, 1, row, width);
        vmath::GeluTanh(row, row, width);
      }
    });
  }
};

}  // namespace

void RegisterFloatMathOps(KernelRegistry& r) {
  auto float_output = [](const Node&, const std::vector<DType>&) {
    return std::vector<DType>{DType::kFloat32};
  };
  // make_fn(node) -> ArrayFn; cost: simple float operations per element.
  auto unary = [&](const char* name, int since, int64_t cost, auto make_fn) {
    r.Register({kOnnxDomain, name, since, kLatest, AllFloat32, float_output,
                [make_fn, cost](const KernelInit& init) {
                  return std::make_unique<UnaryKernel>(make_fn(init.node), cost);
                }});
  };
  auto simple = [](auto fn) { return [fn](const Node&) { return PerElement(fn); }; };
  auto vector_math = [](ArrayFn fn) { return [fn](const Node&) { return fn; }; };
  // Opsets 1-5 of these had the legacy `consumed_inputs` attribute; not supported.
  unary("Sqrt", 6, 1, simple([](float x) { return std::sqrt(x); }));
  unary("Exp", 6, kTranscendentalCost, vector_math(VectorMath<vmath::Exp>()));
  unary("Log", 6, kTranscendentalCost, simple([](float x) { return std::log(x); }));
  unary("Reciprocal", 6, 1, simple([](float x) { return 1.f / x; }));
  unary("Tanh", 6, kTranscendentalCost, vector_math(VectorMath<vmath::Tanh>()));
  unary("Sigmoid", 6, kTranscendentalCost, vector_math(VectorMath<vmath::Logistic>()));
  unary("Erf", 9, kTranscendentalCost, vector_math(VectorMath<vmath::Erf>()));
  unary("Sin", 7, kTranscendentalCost, simple([](float x) { return std::sin(x); }));
  unary("Cos", 7, kTranscendentalCost, simple([](float x) { return std::cos(x); }));
  unary("Floor", 6, 1, simple([](float x) { return std::floor(x); }));
  unary("Ceil", 6, 1, simple([](float x) { return std::ceil(x); }));
  // Round: half to even (the default FP rounding mode).
  unary("Round", 11, 1, simple([](float x) { return std::nearbyint(x); }));
  unary("HardSigmoid", 6, 1, [](const Node& n) {
    const float alpha = n.GetFloat("alpha", 0.2f), beta = n.GetFloat("beta", 0.5f);
    return PerElement([alpha, beta](float x) { return std::clamp(alpha * x + beta, 0.f, 1.f); });
  });
  unary("HardSwish", 14, 1,
        simple([](float x) { return x * std::clamp(x / 6.f + 0.5f, 0.f, 1.f); }));
  unary("LeakyRelu", 6, 1, [](const Node& n) {
    const float alpha = n.GetFloat("alpha", 0.01f);
    return PerElement([alpha](float x) { return x < 0.f ? alpha * x : x; });
  });
  unary("Gelu", 20, kTranscendentalCost, [](const Node& n) {
    const std::string approximate = n.GetString("approximate", "none");
    if (approximate == "none") return VectorMath<vmath::GeluErf>();
    if (approximate == "tanh") return VectorMath<vmath::GeluTanh>();
    Fail(n.Describe(), ": attribute approximate='", approximate, "' must be 'none' or 'tanh'");
  });
  r.Register({kOnnxDomain, "Clip", 6, 10, AllFloat32, float_output, Create<ClipKernel>});
  r.Register({kOnnxDomain, "Clip", 11, kLatest,
              [](const Node& n, const std::vector<DType>& t) {
                const bool ints_allowed = n.opset >= 12;
                if (t.empty() || !(t[0] == DType::kFloat32 ||
                                   (ints_allowed && OneOf(t[0], {DType::kInt8, DType::kUInt8,
                                                                 DType::kInt32, DType::kInt64}))))
                  return false;
                for (size_t i = 1; i < t.size(); ++i)
                  if (t[i] != DType::kUndefined && t[i] != t[0]) return false;
                return true;
              },
              SameAsInput0, Create<ClipKernel>});
  r.Register({kMsDomain, "Gelu", 1, kLatest, AllFloat32, float_output, [](const KernelInit&) {
                return std::make_unique<UnaryKernel>(VectorMath<vmath::GeluErf>(),
                                                     kTranscendentalCost);
              }});
  r.Register({kMsDomain, "FastGelu", 1, kLatest, AllFloat32, float_output, Create<FastGeluKernel>});

  auto signed_or_float = [](const Node&, const std::vector<DType>& t) {
    return t.size() == 1 && OneOf(t[0], {DType::kFloat32, DType::kInt8, DType::kInt16,
                                         DType::kInt32, DType::kInt64});
  };
  r.Register({kOnnxDomain, "Neg", 6, kLatest, signed_or_float, SameAsInput0,
              [](const KernelInit&) { return std::make_unique<NegAbsKernel>(true); }});
  r.Register({kOnnxDomain, "Abs", 6, kLatest, signed_or_float, SameAsInput0,
              [](const KernelInit&) { return std::make_unique<NegAbsKernel>(false); }});
  r.Register({kOnnxDomain, "Pow", 7, kLatest,
              [](const Node&, const std::vector<DType>& t) {
                return t.size() == 2 && t[0] == DType::kFloat32 &&
                       OneOf(t[1], {DType::kFloat32, DType::kInt32, DType::kInt64});
              },
              float_output, Create<PowKernel>});

  // axes moved from an attribute to an input: ReduceSum at 13, the others at 18.
  const std::tuple<const char*, ReduceOp, int> reductions[] = {{"ReduceSum", ReduceOp::kSum, 13},
                                                               {"ReduceMean", ReduceOp::kMean, 18},
                                                               {"ReduceMax", ReduceOp::kMax, 18},
                                                               {"ReduceMin", ReduceOp::kMin, 18}};
  for (const auto& [name, op, axes_input_since] : reductions) {
    r.Register(
        {kOnnxDomain, name, 1, kLatest,
         [op = op](const Node&, const std::vector<DType>& t) {
           const bool dtype_ok = op == ReduceOp::kMean
                                     ? t[0] == DType::kFloat32
                                     : OneOf(t[0], {DType::kFloat32, DType::kInt32, DType::kInt64});
           return dtype_ok && (t.size() < 2 || OneOf(t[1], {DType::kInt64, DType::kUndefined}));
         },
         SameAsInput0,
         [op = op, since = axes_input_since](const KernelInit& init) {
           return std::make_unique<ReduceKernel>(init, op, since);
         }});
  }
  r.Register({kOnnxDomain, "Softmax", 1, kLatest, AllFloat32, float_output, Create<SoftmaxKernel>});
  r.Register({kOnnxDomain, "LayerNormalization", 17, kLatest, AllFloat32,
              [](const Node& n, const std::vector<DType>&) {
                return std::vector<DType>(std::max<size_t>(n.outputs.size(), 1), DType::kFloat32);
              },
              Create<LayerNormKernel>});
  r.Register({kOnnxDomain, "RMSNormalization", 23, kLatest, AllFloat32, float_output,
              Create<RmsNormKernel>});
  // Gemm 1-6 had the legacy `broadcast` attribute and required C.
  r.Register({kOnnxDomain, "Gemm", 7, kLatest, AllFloat32, float_output, Create<GemmKernel>});
}

}  // namespace octet
