// The kernels of QuantizeLinear, DequantizeLinear (ai.onnx, every
// opset; com.microsoft opset 1) and DynamicQuantizeLinear. The float steps
// follow ONNX Runtime 1.31.1 exactly; docs/int8.md ("Quantize and dequantize")
// lists each one and how it was established.
#include "ops/quantize_linear.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/float_types.h"
#include "core/thread_pool.h"
#include "kernels/int8/quantize.h"
#include "ops/int_params.h"
#include "ops/registry.h"

namespace octet {

namespace {

// What one schema version of the Q/DQ pair allows (restricted to the types
// octet can store: no float4e2m1, float8e8m0 scales or 2-bit integers).
struct QdqVersion {
  const char* domain;
  int since_version;
  int end_version;
  bool has_axis;         // `axis` attribute (per-axis quantization)
  bool has_block_size;   // `block_size` attribute (blocked quantization)
  bool has_saturate;     // `saturate` attribute (float8 outputs)
  bool q_output_dtype;   // QuantizeLinear `output_dtype`
  bool dq_output_dtype;  // DequantizeLinear `output_dtype`
  bool float16;          // float16 x / scales
  bool bfloat16;         // bfloat16 x / scales
  bool float8;           // float8 quantized types
  bool wide_ints;        // int16, uint16, int4, uint4
  bool mixed_q_scale;    // QuantizeLinear: y_scale may differ in type from x
  // ORT's ai.onnx QuantizeLinear has a second integer path, taken for
  // float16/bfloat16 x and for blocked quantization on a non-last axis: it
  // converts x / scale to int32 first (NaN and overflow give INT32_MIN), adds
  // the zero point with wrap-around, then clamps. com.microsoft always saturates.
  bool has_int32_path;
};

constexpr int kOpenEnd = 1 << 30;

// clang-format off
constexpr QdqVersion kQdqVersions[] = {
  //  domain       since end  axis  block  sat   qout   dqout  f16   bf16   f8     wide   mixed  int32
  {kOnnxDomain,    10,  12,   false, false, false, false, false, false, false, false, false, false, true},
  {kOnnxDomain,    13,  18,   true,  false, false, false, false, false, false, false, false, false, true},
  {kOnnxDomain,    19,  20,   true,  false, true,  false, false, true,  true,  true,  false, false, true},
  {kOnnxDomain,    21,  22,   true,  true,  true,  true,  false, true,  true,  true,  true,  false, true},
  {kOnnxDomain,    23,  23,   true,  true,  true,  true,  true,  true,  true,  true,  true,  true,  true},
  {kOnnxDomain,    24,  24,   true,  true,  true,  true,  true,  true,  true,  true,  true,  true,  true},
  {kOnnxDomain,    25,  kOpenEnd, true, true, true, true,  true,  true,  true,  true,  true,  true,  true},
  {kMsDomain,      1,   kOpenEnd, true, false, false, false, false, true, false, false, true,  false, false},
};
// clang-format on

bool IsFloatScaleType(const QdqVersion& v, DType t) {
  return t == DType::kFloat32 || (v.float16 && t == DType::kFloat16) ||
         (v.bfloat16 && t == DType::kBFloat16);
}

// Quantized types of this version; DequantizeLinear also takes int32.
bool IsQuantizedType(const QdqVersion& v, DType t, bool dequantize) {
  if (t == DType::kUInt8 || t == DType::kInt8) return true;
  if (dequantize && t == DType::kInt32) return true;
  if (v.wide_ints && OneOf(t, {DType::kUInt16, DType::kInt16, DType::kUInt4, DType::kInt4}))
    return true;
  return v.float8 && IsFloat8(t);
}

DType InputType(const std::vector<DType>& types, size_t i) {
  return i < types.size() ? types[i] : DType::kUndefined;
}

DType QuantizeOutputType(const QdqVersion& v, const Node& node, const std::vector<DType>& types) {
  const DType zero_point_type = InputType(types, 2);
  const int64_t attr = v.q_output_dtype ? node.GetInt("output_dtype", 0) : 0;
  if (attr == 0) return zero_point_type == DType::kUndefined ? DType::kUInt8 : zero_point_type;
  const DType requested = static_cast<DType>(attr);
  OCTET_CHECK(IsQuantizedType(v, requested, false), node.Describe(), ": output_dtype ", attr, " (",
              DTypeName(requested), ") is not a quantized type this opset supports");
  OCTET_CHECK(zero_point_type == DType::kUndefined || zero_point_type == requested, node.Describe(),
              ": output_dtype ", DTypeName(requested), " does not match y_zero_point dtype ",
              DTypeName(zero_point_type));
  return requested;
}

DType DequantizeOutputType(const QdqVersion& v, const Node& node, const std::vector<DType>& types) {
  const int64_t attr = v.dq_output_dtype ? node.GetInt("output_dtype", 0) : 0;
  if (attr == 0) return InputType(types, 1);
  const DType requested = static_cast<DType>(attr);
  OCTET_CHECK(OneOf(requested, {DType::kFloat32, DType::kFloat16, DType::kBFloat16}),
              node.Describe(), ": output_dtype ", attr, " (", DTypeName(requested),
              ") must be float, float16 or bfloat16");
  return requested;
}

// How the scale (and zero point) map onto x: x is viewed as [outer, axis_dim,
// inner] and element (o, a, i) uses scale index
//   o * outer_step + (a / block) * block_step + i * inner_step.
struct ScaleLayout {
  int64_t outer = 1, axis_dim = 1, inner = 1, block = 1;
  int64_t outer_step = 0, block_step = 0, inner_step = 0;

  // Per-tensor or per-axis: no block_size (blocked layouts step along the inner dims).
  bool Unblocked() const { return inner_step == 0; }
};

// A scalar or a 1-D tensor of one element: both mean per-tensor.
bool IsScalarOrOneElementVector(const Tensor& t) { return t.shape().size() <= 1 && t.numel() == 1; }

ScaleLayout ResolveScaleLayout(const Node& node, const QdqVersion& v, const Shape& x_shape,
                               const Tensor& scale, const Tensor* zero_point,
                               const char* scale_name, const char* zero_point_name) {
  const int64_t block_size = v.has_block_size ? node.GetInt("block_size", 0) : 0;
  OCTET_CHECK(block_size >= 0, node.Describe(), ": block_size ", block_size,
              " must not be negative");
  const bool per_tensor = block_size == 0 && IsScalarOrOneElementVector(scale);
  // The spec wants equal shapes; ONNX Runtime (and ONNX's own backend tests) also
  // pair a scalar with a [1] tensor when both are per-tensor.
  if (zero_point != nullptr)
    OCTET_CHECK(zero_point->shape() == scale.shape() ||
                    (per_tensor && IsScalarOrOneElementVector(*zero_point)),
                node.Describe(), ": ", zero_point_name, " has shape ",
                ShapeToString(zero_point->shape()), " but ", scale_name, " has shape ",
                ShapeToString(scale.shape()),
                "; they must be equal (or both a scalar or a 1-element 1-D tensor)");
  const Shape& s_shape = scale.shape();
  ScaleLayout l;
  if (per_tensor) {
    l.axis_dim = NumElements(x_shape);
    return l;
  }
  const int64_t rank = static_cast<int64_t>(x_shape.size());
  int64_t axis = v.has_axis ? node.GetInt("axis", 1) : 0;
  OCTET_CHECK(v.has_axis, node.Describe(), ": ", scale_name, " has shape ", ShapeToString(s_shape),
              "; this opset only allows a scalar (per-tensor) scale");
  OCTET_CHECK(axis >= -rank && axis < rank, node.Describe(), ": axis ", axis,
              " is out of range for input of shape ", ShapeToString(x_shape));
  if (axis < 0) axis += rank;
  for (int64_t d = 0; d < axis; ++d) l.outer *= x_shape[d];
  l.axis_dim = x_shape[axis];
  for (int64_t d = axis + 1; d < rank; ++d) l.inner *= x_shape[d];
  if (block_size == 0) {
    OCTET_CHECK(s_shape.size() == 1 && s_shape[0] == l.axis_dim, node.Describe(), ": ", scale_name,
                " has shape ", ShapeToString(s_shape), "; expected a scalar or [", l.axis_dim,
                "] (per-axis on axis ", axis, " of input shape ", ShapeToString(x_shape), ")");
    l.block_step = 1;
    return l;
  }
  const int64_t blocks = (l.axis_dim + block_size - 1) / block_size;
  Shape expected = x_shape;
  expected[axis] = blocks;
  OCTET_CHECK(s_shape == expected, node.Describe(), ": ", scale_name, " has shape ",
              ShapeToString(s_shape), "; blocked quantization with block_size ", block_size,
              " on axis ", axis, " of input shape ", ShapeToString(x_shape), " needs ",
              ShapeToString(expected));
  l.block = block_size;
  l.outer_step = blocks * l.inner;
  l.block_step = l.inner;
  l.inner_step = 1;
  return l;
}

// Calls fn(element_index, scale_index) for every element of x, splitting the
// (outer, axis) rows over the pool; each element is independent, so the
// result does not depend on the split.
template <typename Fn>
void ForEachElement(const ScaleLayout& l, ThreadPool* pool, const Fn& fn) {
  const int64_t rows = l.outer * l.axis_dim;
  auto run_rows = [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t o = row / l.axis_dim, a = row % l.axis_dim;
      const int64_t base = o * l.outer_step + (a / l.block) * l.block_step;
      for (int64_t i = 0; i < l.inner; ++i) fn(row * l.inner + i, base + i * l.inner_step);
    }
  };
  constexpr int64_t kParallelElements = 1 << 16;
  if (pool != nullptr && pool->num_threads() > 1 && rows > 1 && rows * l.inner >= kParallelElements)
    pool->ParallelFor(rows, run_rows);
  else
    run_rows(0, rows);
}

// Elements per unit of parallel work in the span paths, and the size below
// which one thread does it all (a fixed split: elementwise, so the bytes
// cannot depend on it anyway).
constexpr int64_t kSpanGrain = 8 * 1024;
constexpr int64_t kSpanParallelElements = 32 * 1024;

// An unblocked layout (ScaleLayout::Unblocked) as contiguous runs of elements
// that share one scale, or, when the axis is the innermost, runs along the
// axis with one scale per element. Calls fn(first element, count, first scale
// index, per_element) for pieces of runs, split over the pool.
template <typename Fn>
void ForEachScaleRun(const ScaleLayout& l, ThreadPool* pool, const Fn& fn) {
  const int64_t total = l.outer * l.axis_dim * l.inner;
  const bool per_tensor = l.block_step == 0;
  const bool per_element = !per_tensor && l.inner == 1;
  const int64_t run_length = per_tensor ? total : per_element ? l.axis_dim : l.inner;
  const int64_t scale_period = per_tensor ? 1 : l.axis_dim;
  auto run_range = [&](int64_t begin, int64_t end) {
    int64_t run = begin / run_length, offset = begin % run_length;
    while (begin < end) {
      const int64_t count = std::min(run_length - offset, end - begin);
      fn(begin, count, per_element ? offset : run % scale_period, per_element);
      begin += count;
      ++run;
      offset = 0;
    }
  };
  if (pool == nullptr || pool->num_threads() == 1 || total < kSpanParallelElements) {
    if (total > 0) run_range(0, total);
    return;
  }
  pool->ParallelFor((total + kSpanGrain - 1) / kSpanGrain, [&](int64_t g0, int64_t g1) {
    run_range(g0 * kSpanGrain, std::min(total, g1 * kSpanGrain));
  });
}

struct IntRange {
  int32_t min, max;
};

IntRange QuantizedRange(DType t) {
  switch (t) {
    case DType::kUInt8:
      return {0, 255};
    case DType::kInt8:
      return {-128, 127};
    case DType::kUInt16:
      return {0, 65535};
    case DType::kInt16:
      return {-32768, 32767};
    case DType::kUInt4:
      return {0, 15};
    case DType::kInt4:
      return {-8, 7};
    default:
      FailInternal(DTypeName(t), " is not an integer quantized type");
  }
}

// ORT's ai.onnx path for half x and inner blocks: round half to even, convert to
// int32 where NaN and values outside int32 become INT32_MIN (x86 cvtps2dq),
// add the zero point with int32 wrap-around, clamp.
int32_t QuantizeThroughInt32(float scaled, int32_t zero_point, IntRange r) {
  const float rounded = std::nearbyint(scaled);
  const int32_t as_int = rounded >= -2147483648.0f && rounded < 2147483648.0f
                             ? static_cast<int32_t>(rounded)
                             : std::numeric_limits<int32_t>::min();
  const int32_t shifted =
      static_cast<int32_t>(static_cast<uint32_t>(as_int) + static_cast<uint32_t>(zero_point));
  return std::clamp(shifted, r.min, r.max);
}

// The values of a float32/float16/bfloat16 tensor as float32 (exact).
std::vector<float> WidenToFloat(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::kFloat32) {
    std::copy(t.data<float>(), t.data<float>() + t.numel(), out.begin());
    return out;
  }
  const uint16_t* bits = t.data<uint16_t>();
  const bool half = t.dtype() == DType::kFloat16;
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = half ? Float16BitsToFloat(bits[i]) : BFloat16BitsToFloat(bits[i]);
  return out;
}

// Integer zero points as int32 (4-bit ones are stored one per byte).
std::vector<int32_t> ReadIntZeroPoints(const Tensor& t) {
  std::vector<int32_t> out(static_cast<size_t>(t.numel()));
  auto copy = [&](const auto* p) { std::copy(p, p + t.numel(), out.begin()); };
  switch (t.dtype()) {
    case DType::kUInt8:
    case DType::kUInt4:
      copy(t.data<uint8_t>());
      break;
    case DType::kInt8:
    case DType::kInt4:
      copy(t.data<int8_t>());
      break;
    case DType::kUInt16:
      copy(t.data<uint16_t>());
      break;
    case DType::kInt16:
      copy(t.data<int16_t>());
      break;
    case DType::kInt32:
      copy(t.data<int32_t>());
      break;
    default:
      FailInternal(DTypeName(t.dtype()), " is not an integer zero point type");
  }
  return out;
}

// ORT rejects (DequantizeLinear) or ignores (QuantizeLinear) non-zero float8
// zero points; octet rejects both rather than silently dropping a value.
void CheckFloat8ZeroPointIsZero(const Node& node, const Tensor& zero_point, const char* name) {
  const uint8_t* bits = zero_point.data<uint8_t>();
  for (int64_t i = 0; i < zero_point.numel(); ++i)
    OCTET_CHECK(Float8BitsToFloat(bits[i], zero_point.dtype()) == 0.0f, node.Describe(), ": ", name,
                " of type ", DTypeName(zero_point.dtype()),
                " must be zero (non-zero float8 zero points are not supported)");
}

class QuantizeLinearKernel : public OpKernel {
 public:
  QuantizeLinearKernel(const QdqVersion& v, const KernelInit& init)
      : version_(v),
        output_type_(QuantizeOutputType(v, init.node, init.input_types)),
        saturate_(v.has_saturate ? init.node.GetInt("saturate", 1) != 0 : true),
        float32_x_(init.input_types[0] == DType::kFloat32) {}

  // float32 x goes to QuantizeSpan (run on guarded x in quantize_kernels_test)
  // or to the per-element loop; other types are widened by a copy first.
  bool ReadsOnlyInputBytes(size_t input) const override { return input == 0 && float32_x_; }

  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.input(0);
    const Tensor& scale = ctx.input(1);
    const Tensor* zero_point = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    const ScaleLayout layout =
        ResolveScaleLayout(node, version_, x.shape(), scale, zero_point, "y_scale", "y_zero_point");
    const std::vector<float> scales = ReadScales(node, scale, "y_scale");
    const std::vector<float> widened =
        x.dtype() == DType::kFloat32 ? std::vector<float>{} : WidenToFloat(x);
    const float* xs = x.dtype() == DType::kFloat32 ? x.data<float>() : widened.data();
    Tensor& y = ctx.AllocateUninitializedOutput(0, output_type_, x.shape());

    if (IsFloat8(output_type_)) {
      if (zero_point != nullptr) CheckFloat8ZeroPointIsZero(node, *zero_point, "y_zero_point");
      uint8_t* out = y.data<uint8_t>();
      ForEachElement(layout, ctx.pool(), [&](int64_t e, int64_t s) {
        out[e] = FloatToFloat8Bits(xs[e] / scales[s], output_type_, saturate_);
      });
      return;
    }
    const std::vector<int32_t> zero_points =
        zero_point != nullptr ? ReadIntZeroPoints(*zero_point) : std::vector<int32_t>(1, 0);
    if (x.dtype() == DType::kFloat32 && layout.Unblocked() && IsSpanQuantizedType(output_type_)) {
      QuantizeWithSpans(layout, xs, scales, zero_points, y, ctx.pool());
      return;
    }
    const IntRange range = QuantizedRange(output_type_);
    const bool blocked_inner = layout.inner_step == 1 && layout.inner > 1;
    const bool through_int32 =
        version_.has_int32_path && (x.dtype() != DType::kFloat32 || blocked_inner);
    auto quantize = [&](auto* out) {
      using Out = std::remove_pointer_t<decltype(out)>;
      ForEachElement(layout, ctx.pool(), [&](int64_t e, int64_t s) {
        const float scaled = xs[e] / scales[s];
        const int32_t zp = zero_points[zero_point != nullptr ? s : 0];
        out[e] =
            static_cast<Out>(through_int32 ? QuantizeThroughInt32(scaled, zp, range)
                                           : QuantizeScaledValue(scaled, zp, range.min, range.max));
      });
    };
    switch (output_type_) {
      case DType::kUInt8:
      case DType::kUInt4:
        quantize(y.data<uint8_t>());
        break;
      case DType::kInt8:
      case DType::kInt4:
        quantize(y.data<int8_t>());
        break;
      case DType::kUInt16:
        quantize(y.data<uint16_t>());
        break;
      case DType::kInt16:
        quantize(y.data<int16_t>());
        break;
      default:
        FailInternal(node.Describe(), " has output type ", DTypeName(output_type_));
    }
  }

 private:
  // float32 x, unblocked, 8/16-bit y: the vector kernels (kernels/int8/quantize.h).
  void QuantizeWithSpans(const ScaleLayout& layout, const float* xs,
                         const std::vector<float>& scales, std::vector<int32_t> zero_points,
                         Tensor& y, ThreadPool* pool) const {
    zero_points.resize(scales.size(), 0);  // no zero point: 0 for every scale
    const size_t element_size = DTypeSize(output_type_);
    auto* out = static_cast<uint8_t*>(y.raw());
    ForEachScaleRun(layout, pool, [&](int64_t first, int64_t count, int64_t s, bool per_element) {
      const QuantizeSpanParams p{scales.data() + s, zero_points.data() + s, per_element,
                                 output_type_};
      QuantizeSpan(xs + first, count, p, out + first * element_size);
    });
  }

  const QdqVersion& version_;
  DType output_type_;
  bool saturate_;
  bool float32_x_;
};

class DequantizeLinearKernel : public OpKernel {
 public:
  DequantizeLinearKernel(const QdqVersion& v, const KernelInit& init)
      : version_(v), output_type_(DequantizeOutputType(v, init.node, init.input_types)) {}

  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.input(0);
    const Tensor& scale = ctx.input(1);
    const Tensor* zero_point = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    if (zero_point != nullptr)
      OCTET_CHECK(zero_point->dtype() == x.dtype(), node.Describe(), ": x_zero_point has dtype ",
                  DTypeName(zero_point->dtype()), " but x has dtype ", DTypeName(x.dtype()));
    const ScaleLayout layout =
        ResolveScaleLayout(node, version_, x.shape(), scale, zero_point, "x_scale", "x_zero_point");
    const std::vector<float> scales = ReadScales(node, scale, "x_scale");
    Tensor& y = ctx.AllocateUninitializedOutput(0, output_type_, x.shape());

    // value(e) is x[e] - zero point as float; the product with the scale is
    // taken in float32 and then narrowed to the output type.
    auto dequantize = [&](const auto& value) {
      auto store = [&](auto* out, const auto& narrow) {
        ForEachElement(layout, ctx.pool(),
                       [&](int64_t e, int64_t s) { out[e] = narrow(value(e, s) * scales[s]); });
      };
      switch (output_type_) {
        case DType::kFloat32:
          store(y.data<float>(), [](float f) { return f; });
          break;
        case DType::kFloat16:
          store(y.data<uint16_t>(), FloatToFloat16Bits);
          break;
        case DType::kBFloat16:
          store(y.data<uint16_t>(), FloatToBFloat16Bits);
          break;
        default:
          FailInternal(node.Describe(), " has output type ", DTypeName(output_type_));
      }
    };

    if (IsFloat8(x.dtype())) {
      if (zero_point != nullptr) CheckFloat8ZeroPointIsZero(node, *zero_point, "x_zero_point");
      const uint8_t* bits = x.data<uint8_t>();
      const DType type = x.dtype();
      dequantize([&](int64_t e, int64_t) { return Float8BitsToFloat(bits[e], type); });
      return;
    }
    std::vector<int32_t> zero_points =
        zero_point != nullptr ? ReadIntZeroPoints(*zero_point) : std::vector<int32_t>(1, 0);
    if (output_type_ == DType::kFloat32 && layout.Unblocked() && IsSpanQuantizedType(x.dtype())) {
      // The vector kernels (kernels/int8/quantize.h); no zero point: 0 for every scale.
      zero_points.resize(scales.size(), 0);
      const size_t element_size = DTypeSize(x.dtype());
      const auto* in = static_cast<const uint8_t*>(x.raw());
      float* out = y.data<float>();
      ForEachScaleRun(layout, ctx.pool(),
                      [&](int64_t first, int64_t count, int64_t s, bool per_element) {
                        const QuantizeSpanParams p{scales.data() + s, zero_points.data() + s,
                                                   per_element, x.dtype()};
                        DequantizeSpan(in + first * element_size, count, p, out + first);
                      });
      return;
    }
    // x - zero point in int32 with wrap-around (only int32 x can wrap), then to float.
    auto from_ints = [&](const auto* xs) {
      dequantize([&, xs](int64_t e, int64_t s) {
        const int32_t zp = zero_points[zero_point != nullptr ? s : 0];
        const uint32_t diff =
            static_cast<uint32_t>(static_cast<int32_t>(xs[e])) - static_cast<uint32_t>(zp);
        return static_cast<float>(static_cast<int32_t>(diff));
      });
    };
    switch (x.dtype()) {
      case DType::kUInt8:
      case DType::kUInt4:
        from_ints(x.data<uint8_t>());
        break;
      case DType::kInt8:
      case DType::kInt4:
        from_ints(x.data<int8_t>());
        break;
      case DType::kUInt16:
        from_ints(x.data<uint16_t>());
        break;
      case DType::kInt16:
        from_ints(x.data<int16_t>());
        break;
      case DType::kInt32:
        from_ints(x.data<int32_t>());
        break;
      default:
        FailInternal(node.Describe(), " has input type ", DTypeName(x.dtype()));
    }
  }

 private:
  const QdqVersion& version_;
  DType output_type_;
};

// Elements per unit of parallel work in DynamicQuantizeToUint8: a fixed size,
// so the min/max partials (merged in chunk order) never depend on the threads.
constexpr int64_t kDynamicQuantizeChunk = 16 * 1024;

// Calls fn(begin, end) for the chunks of [0, n), split over the pool.
template <typename Fn>
void ForEachChunk(ThreadPool* pool, int64_t n, const Fn& fn) {
  const int64_t chunks = (n + kDynamicQuantizeChunk - 1) / kDynamicQuantizeChunk;
  auto run = [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c)
      fn(c * kDynamicQuantizeChunk, std::min(n, (c + 1) * kDynamicQuantizeChunk));
  };
  if (pool != nullptr)
    pool->ParallelFor(chunks, run);
  else
    run(0, chunks);
}

// DynamicQuantizeLinear (uint8): y, scale and zero point of DynamicQuantizeToUint8.
class DynamicQuantizeLinearKernel : public OpKernel {
 public:
  void Run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    uint8_t* y = ctx.AllocateUninitializedOutput(0, DType::kUInt8, x.shape()).data<uint8_t>();
    const DynamicQuantization q = DynamicQuantizeToUint8(x.data<float>(), x.numel(), y, ctx.pool());
    if (ctx.num_outputs() > 1)
      ctx.AllocateOutput(1, DType::kFloat32, {}).data<float>()[0] = q.scale;
    if (ctx.num_outputs() > 2)
      ctx.AllocateOutput(2, DType::kUInt8, {}).data<uint8_t>()[0] =
          static_cast<uint8_t>(q.zero_point);
  }
};

void RegisterQdqVersion(KernelRegistry& r, const QdqVersion& v) {
  KernelDef q;
  q.domain = v.domain;
  q.op_type = "QuantizeLinear";
  q.since_version = v.since_version;
  q.end_version = v.end_version;
  q.accepts = [&v](const Node&, const std::vector<DType>& types) {
    const DType x = InputType(types, 0), scale = InputType(types, 1), zp = InputType(types, 2);
    return IsFloatScaleType(v, x) && IsFloatScaleType(v, scale) &&
           (v.mixed_q_scale || scale == x) &&
           (zp == DType::kUndefined || IsQuantizedType(v, zp, false));
  };
  q.infer_types = [&v](const Node& node, const std::vector<DType>& types) {
    return std::vector<DType>{QuantizeOutputType(v, node, types)};
  };
  q.create = [&v](const KernelInit& init) -> std::unique_ptr<OpKernel> {
    return std::make_unique<QuantizeLinearKernel>(v, init);
  };
  r.Register(std::move(q));

  KernelDef dq;
  dq.domain = v.domain;
  dq.op_type = "DequantizeLinear";
  dq.since_version = v.since_version;
  dq.end_version = v.end_version;
  dq.accepts = [&v](const Node&, const std::vector<DType>& types) {
    const DType x = InputType(types, 0), scale = InputType(types, 1), zp = InputType(types, 2);
    return IsQuantizedType(v, x, true) && IsFloatScaleType(v, scale) &&
           (zp == DType::kUndefined || zp == x);
  };
  dq.infer_types = [&v](const Node& node, const std::vector<DType>& types) {
    return std::vector<DType>{DequantizeOutputType(v, node, types)};
  };
  dq.create = [&v](const KernelInit& init) -> std::unique_ptr<OpKernel> {
    return std::make_unique<DequantizeLinearKernel>(v, init);
  };
  r.Register(std::move(dq));
}

}  // namespace

DynamicQuantization DynamicQuantizeToUint8(const float* x, int64_t n, uint8_t* y,
                                           ThreadPool* pool) {
  const int64_t chunks = (n + kDynamicQuantizeChunk - 1) / kDynamicQuantizeChunk;
  std::vector<float> lows(chunks, 0.f), highs(chunks, 0.f);
  std::vector<char> nans(chunks, 0);
  ForEachChunk(pool, n, [&](int64_t begin, int64_t end) {
    const FloatRange r = RangeWithZero(x + begin, end - begin);
    const int64_t c = begin / kDynamicQuantizeChunk;
    lows[c] = r.low;
    highs[c] = r.high;
    nans[c] = r.has_nan;
  });
  float low = 0.f, high = 0.f;
  for (int64_t c = 0; c < chunks; ++c) {
    low = std::min(low, lows[c]);
    high = std::max(high, highs[c]);
  }
  // ORT's SIMD min/max drops or keeps NaNs depending on their position;
  // octet propagates them.
  if (std::find(nans.begin(), nans.end(), 1) != nans.end())
    low = high = std::numeric_limits<float>::quiet_NaN();

  DynamicQuantization q;
  q.scale = high == low ? 1.0f : (high - low) / 255.0f;
  const float initial_zero_point = 0.0f - low / q.scale;
  q.zero_point =
      std::isnan(initial_zero_point)
          ? 255
          : static_cast<int32_t>(std::nearbyint(std::clamp(initial_zero_point, 0.0f, 255.0f)));
  const QuantizeSpanParams span{&q.scale, &q.zero_point, false, DType::kUInt8};
  ForEachChunk(pool, n, [&](int64_t begin, int64_t end) {
    QuantizeSpan(x + begin, end - begin, span, y + begin);
  });
  return q;
}

void RegisterQuantizeOps(KernelRegistry& r) {
  for (const QdqVersion& v : kQdqVersions) RegisterQdqVersion(r, v);

  KernelDef dynamic;
  dynamic.domain = kOnnxDomain;
  dynamic.op_type = "DynamicQuantizeLinear";
  dynamic.since_version = 11;
  dynamic.accepts = [](const Node&, const std::vector<DType>& types) {
    return types.size() == 1 && types[0] == DType::kFloat32;
  };
  dynamic.infer_types = [](const Node&, const std::vector<DType>&) {
    return std::vector<DType>{DType::kUInt8, DType::kFloat32, DType::kUInt8};
  };
  dynamic.create = [](const KernelInit&) -> std::unique_ptr<OpKernel> {
    return std::make_unique<DynamicQuantizeLinearKernel>();
  };
  r.Register(std::move(dynamic));
}

}  // namespace octet
