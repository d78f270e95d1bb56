// Data-movement operators for every stored dtype (the QDQ pass runs them on
// int8/uint8 data; rewrite/qdq_movement.cc): Reshape, Flatten, Squeeze,
// Unsqueeze (views of the input), Transpose, Gather, Slice (byte copies;
// Transpose and Slice through kernels/strided_copy.h).
#include <algorithm>
#include <cstring>
#include <limits>

#include "kernels/strided_copy.h"
#include "ops/registry.h"

namespace octet {

namespace {

constexpr int kOpen = 1 << 30;

// The values of a 1-D int32/int64 tensor (shapes, axes, indices).
std::vector<int64_t> ReadInts(const Node& node, const Tensor& t, const char* name) {
  OCTET_CHECK(t.dtype() == DType::kInt64 || t.dtype() == DType::kInt32, node.Describe(), ": ", name,
              " must be int64 or int32, got ", DTypeName(t.dtype()));
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i)
    v[i] = t.dtype() == DType::kInt64 ? t.data<int64_t>()[i] : t.data<int32_t>()[i];
  return v;
}

// Axes from the attribute (older opsets) or the optional input `index`.
std::vector<int64_t> AxesOf(KernelContext& ctx, int since_input_opset, size_t index) {
  const Node& node = ctx.node();
  if (node.opset < since_input_opset) return node.GetInts("axes");
  return ctx.has_input(index) ? ReadInts(node, ctx.input(index), "axes") : std::vector<int64_t>{};
}

class ReshapeKernel : public OpKernel {
 public:
  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.input(0);
    std::vector<int64_t> dims = ReadInts(node, ctx.input(1), "shape");
    const bool allow_zero = node.GetInt("allowzero", 0) != 0;
    int64_t known = 1, infer = -1;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] == 0 && !allow_zero) {
        OCTET_CHECK(i < x.rank(), node.Describe(), ": shape has 0 at index ", i,
                    " beyond the input's rank ", x.rank());
        dims[i] = x.dim(i);
      }
      if (dims[i] == -1) {
        OCTET_CHECK(infer < 0, node.Describe(), ": shape has more than one -1");
        infer = static_cast<int64_t>(i);
      } else {
        OCTET_CHECK(dims[i] >= 0, node.Describe(), ": bad shape entry ", dims[i]);
        if (__builtin_mul_overflow(known, dims[i], &known))
          Fail(node.Describe(), ": shape ", ShapeToString(dims), " has too many elements");
      }
    }
    if (infer >= 0) {
      OCTET_CHECK(known != 0 && x.numel() % known == 0, node.Describe(), ": cannot reshape ",
                  ShapeToString(x.shape()), " to ", ShapeToString(dims));
      dims[infer] = x.numel() / known;
    }
    OCTET_CHECK(NumElements(dims) == x.numel(), node.Describe(), ": cannot reshape ",
                ShapeToString(x.shape()), " to ", ShapeToString(dims));
    ctx.SetOutput(0, x.Reshaped(dims));
  }
};

class FlattenKernel : public OpKernel {
 public:
  void Run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const int64_t rank = static_cast<int64_t>(x.rank());
    int64_t axis = ctx.node().GetInt("axis", 1);
    if (axis != rank) axis = ctx.node().Axis(axis, rank);
    const Shape& s = x.shape();
    const int64_t outer = NumElements(Shape(s.begin(), s.begin() + axis));
    ctx.SetOutput(0, x.Reshaped({outer, NumElements(Shape(s.begin() + axis, s.end()))}));
  }
};

class SqueezeKernel : public OpKernel {
 public:
  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.input(0);
    const int64_t rank = static_cast<int64_t>(x.rank());
    std::vector<bool> drop(static_cast<size_t>(rank), false);
    const std::vector<int64_t> axes = AxesOf(ctx, 13, 1);
    for (int64_t a : axes) {
      const int64_t axis = node.Axis(a, rank);
      OCTET_CHECK(x.dim(axis) == 1, node.Describe(), ": cannot squeeze axis ", a, " of shape ",
                  ShapeToString(x.shape()));
      drop[axis] = true;
    }
    Shape out;
    for (int64_t d = 0; d < rank; ++d)
      if (!(axes.empty() ? x.dim(d) == 1 : drop[d])) out.push_back(x.dim(d));
    ctx.SetOutput(0, x.Reshaped(out));
  }
};

class UnsqueezeKernel : public OpKernel {
 public:
  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.input(0);
    const std::vector<int64_t> axes = AxesOf(ctx, 13, 1);
    const int64_t rank = static_cast<int64_t>(x.rank() + axes.size());
    std::vector<bool> added(static_cast<size_t>(rank), false);
    for (int64_t a : axes) {
      const int64_t axis = node.Axis(a, rank);
      OCTET_CHECK(!added[axis], node.Describe(), ": axis ", a, " repeats");
      added[axis] = true;
    }
    Shape out;
    size_t next = 0;
    for (int64_t d = 0; d < rank; ++d) out.push_back(added[d] ? 1 : x.dim(next++));
    ctx.SetOutput(0, x.Reshaped(out));
  }
};

// Row-major strides of a shape, in elements.
std::vector<int64_t> Strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

class TransposeKernel : public OpKernel {
 public:
  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.input(0);
    const int64_t rank = static_cast<int64_t>(x.rank());
    std::vector<int64_t> perm = node.GetInts("perm");
    if (perm.empty())
      for (int64_t d = rank; d-- > 0;) perm.push_back(d);
    OCTET_CHECK(static_cast<int64_t>(perm.size()) == rank, node.Describe(), ": perm has ",
                perm.size(), " entries for rank ", rank);
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    const std::vector<int64_t> in_strides = Strides(x.shape());
    Shape out_shape;
    std::vector<int64_t> strides;
    for (int64_t p : perm) {
      const int64_t axis = node.Axis(p, rank);
      OCTET_CHECK(!seen[axis], node.Describe(), ": perm repeats axis ", p);
      seen[axis] = true;
      out_shape.push_back(x.dim(axis));
      strides.push_back(in_strides[axis]);
    }
    // A perm that moves only dims of size 1 keeps every element where it is (a decoding
    // step's [1, 1, heads, d] -> [1, heads, 1, d]): the output shares x's bytes, as
    // Reshape's does.
    std::vector<int64_t> moved;
    for (int64_t p : perm)
      if (x.dim(node.Axis(p, rank)) != 1) moved.push_back(node.Axis(p, rank));
    if (std::is_sorted(moved.begin(), moved.end())) {
      ctx.SetOutput(0, x.Reshaped(out_shape));
      return;
    }
    Tensor& y = ctx.AllocateUninitializedOutput(0, x.dtype(), out_shape);
    StridedCopy(x.raw(), y.raw(), DTypeSize(x.dtype()), out_shape, strides, ctx.pool());
  }
};

class GatherKernel : public OpKernel {
 public:
  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.input(0);
    const int64_t rank = static_cast<int64_t>(x.rank());
    OCTET_CHECK(rank >= 1, node.Describe(), ": data must have rank >= 1");
    const int64_t axis = node.Axis(node.GetInt("axis", 0), rank);
    const Tensor& idx = ctx.input(1);
    const std::vector<int64_t> indices = ReadInts(node, idx, "indices");
    Shape out_shape(x.shape().begin(), x.shape().begin() + axis);
    out_shape.insert(out_shape.end(), idx.shape().begin(), idx.shape().end());
    out_shape.insert(out_shape.end(), x.shape().begin() + axis + 1, x.shape().end());
    Tensor& y = ctx.AllocateOutput(0, x.dtype(), out_shape);
    const int64_t outer = NumElements(Shape(x.shape().begin(), x.shape().begin() + axis));
    const size_t inner_bytes =
        NumElements(Shape(x.shape().begin() + axis + 1, x.shape().end())) * DTypeSize(x.dtype());
    const int64_t extent = x.dim(axis);
    const auto* src = static_cast<const uint8_t*>(x.raw());
    auto* dst = static_cast<uint8_t*>(y.raw());
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t index : indices) {
        OCTET_CHECK(index >= -extent && index < extent, node.Describe(), ": index ", index,
                    " is out of range for axis ", axis, " of size ", extent);
        if (index < 0) index += extent;
        std::memcpy(dst, src + (o * extent + index) * inner_bytes, inner_bytes);
        dst += inner_bytes;
      }
    }
  }
};

class SliceKernel : public OpKernel {
 public:
  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.input(0);
    const int64_t rank = static_cast<int64_t>(x.rank());
    std::vector<int64_t> starts, ends, axes, steps;
    if (node.opset < 10) {
      starts = node.GetInts("starts");
      ends = node.GetInts("ends");
      axes = node.GetInts("axes");
    } else {
      starts = ReadInts(node, ctx.input(1), "starts");
      ends = ReadInts(node, ctx.input(2), "ends");
      if (ctx.has_input(3)) axes = ReadInts(node, ctx.input(3), "axes");
      if (ctx.has_input(4)) steps = ReadInts(node, ctx.input(4), "steps");
    }
    if (axes.empty())
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    if (steps.empty()) steps.assign(starts.size(), 1);
    OCTET_CHECK(ends.size() == starts.size() && axes.size() == starts.size() &&
                    steps.size() == starts.size(),
                node.Describe(), ": starts, ends, axes and steps differ in length");
    Shape out_shape = x.shape();
    std::vector<int64_t> first(static_cast<size_t>(rank), 0), step(static_cast<size_t>(rank), 1);
    for (size_t i = 0; i < starts.size(); ++i) {
      const int64_t a = node.Axis(axes[i], rank), dim = x.dim(a), s = steps[i];
      OCTET_CHECK(s != 0, node.Describe(), ": step 0 on axis ", axes[i]);
      auto clamp_index = [&](int64_t v, int64_t lo, int64_t hi) {
        if (v < 0) v += dim;
        return std::clamp(v, lo, hi);
      };
      int64_t b = starts[i], e = ends[i];
      // Counts as 1 + (span - 1) / |step|: steps up to the int64 limits do not overflow.
      if (s > 0) {
        b = clamp_index(b, 0, dim);
        e = clamp_index(e, 0, dim);
        out_shape[a] = e > b ? 1 + (e - b - 1) / s : 0;
      } else {
        b = clamp_index(b, 0, dim - 1);
        e = ends[i] < -dim ? -1 : clamp_index(e, -1, dim - 1);
        const int64_t magnitude =
            s == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::max() : -s;
        out_shape[a] = b > e ? 1 + (b - e - 1) / magnitude : 0;
      }
      first[a] = b;
      // With one element along the axis the step is never taken (and |s| may be huge).
      step[a] = out_shape[a] > 1 ? s : 1;
    }
    const std::vector<int64_t> in_strides = Strides(x.shape());
    int64_t offset = 0;
    std::vector<int64_t> strides(static_cast<size_t>(rank));
    for (int64_t d = 0; d < rank; ++d) {
      offset += first[d] * in_strides[d];
      strides[d] = step[d] * in_strides[d];
    }
    Tensor& y = ctx.AllocateUninitializedOutput(0, x.dtype(), out_shape);
    const size_t elem = DTypeSize(x.dtype());
    if (y.numel() > 0)
      StridedCopy(static_cast<const uint8_t*>(x.raw()) + offset * elem, y.raw(), elem, out_shape,
                  strides, ctx.pool());
  }
};

bool AnyStored(const Node&, const std::vector<DType>& t) {
  return !t.empty() && IsSupportedStorage(t[0]);
}

std::vector<DType> SameAsData(const Node&, const std::vector<DType>& t) { return {t[0]}; }

template <typename Kernel>
std::function<std::unique_ptr<OpKernel>(const KernelInit&)> Make() {
  return [](const KernelInit&) { return std::make_unique<Kernel>(); };
}

}  // namespace

void RegisterShapeOps(KernelRegistry& r) {
  r.Register({kOnnxDomain, "Reshape", 5, kOpen, AnyStored, SameAsData, Make<ReshapeKernel>()});
  r.Register({kOnnxDomain, "Flatten", 1, kOpen, AnyStored, SameAsData, Make<FlattenKernel>()});
  r.Register({kOnnxDomain, "Squeeze", 1, kOpen, AnyStored, SameAsData, Make<SqueezeKernel>()});
  r.Register({kOnnxDomain, "Unsqueeze", 1, kOpen, AnyStored, SameAsData, Make<UnsqueezeKernel>()});
  r.Register({kOnnxDomain, "Transpose", 1, kOpen, AnyStored, SameAsData, Make<TransposeKernel>()});
  r.Register({kOnnxDomain, "Gather", 1, kOpen, AnyStored, SameAsData, Make<GatherKernel>()});
  r.Register({kOnnxDomain, "Slice", 1, kOpen, AnyStored, SameAsData, Make<SliceKernel>()});
}

}  // namespace octet
