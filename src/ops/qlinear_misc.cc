// com.microsoft QLinearConcat, QLinearSoftmax, QLinearSigmoid and QLinearLeakyRelu
// (uint8 / int8), bit for bit with ONNX Runtime 1.31.1's CPU kernels
// (contrib_ops/cpu/quantization/qlinear_{concat,softmax,activations,lookup_table}.cc):
//
//   Concat, Sigmoid, LeakyRelu map every input byte through a 256-entry table:
//     table[b] = QuantizeLinear(f(x_scale * float(int(b as T) - x_zero)), y_scale, y_zero)
//   with MLAS's QuantizeLinear (divide, clamp in float, round half to even). Concat
//   copies bytes instead where an input's scale and zero point equal the output's.
//   Sigmoid's f is MlasComputeLogistic as x86 runs it (the FMA3 kernel: a rational
//   polynomial, not exp), LeakyRelu's `v >= 0 ? v : alpha * v`.
//
//   Softmax uses a float table of exp values built in double (SoftmaxExpTable below)
//   and requantizes each value as `nearbyintf(vt * floor(1 / y_scale) / sum) + y_zero`
//   through x86's float -> integer conversions: uint8 saturates only above 255 (an
//   overflowing product converts to 0, giving y_zero), int8 adds in int32 with
//   wrap-around and saturates to [-128, 127]. The int8 clamp was found by experiment
//   with ORT 1.31.1 (its published source truncates to 8 bits instead).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/quant.h"
#include "core/thread_pool.h"
#include "kernels/int8/lookup.h"
#include "ops/int_params.h"
#include "ops/registry.h"

namespace octet {

namespace {

using ByteTable = std::array<uint8_t, 256>;

float ReadScalarScale(const Node& node, const Tensor& t, const char* name) {
  OCTET_CHECK(t.dtype() == DType::kFloat32, node.Describe(), ": ", name, " has dtype ",
              DTypeName(t.dtype()), "; expected float");
  CheckPerTensor(node, t, name);
  return t.data<float>()[0];
}

// An optional scalar zero point of the 8-bit type `type` (0 when omitted).
int32_t ReadScalarZero(const Node& node, const Tensor* zero, DType type, const char* name) {
  if (zero == nullptr) return 0;
  CheckPerTensor(node, *zero, name);
  return ReadZeroPoints(node, *zero, type, name)[0];
}
int32_t ReadScalarZero(const KernelContext& ctx, size_t i, DType type, const char* name) {
  return ReadScalarZero(ctx.node(), ctx.has_input(i) ? &ctx.input(i) : nullptr, type, name);
}

// ORT's QlinearBuildLookupTable: dequantize all 256 bytes, transform the 256
// floats at once (MLAS kernels work on arrays), quantize back with MLAS.
template <typename Transform>
ByteTable BuildByteTable(const ScalarQParams& x, const ScalarQParams& y, Transform&& transform) {
  std::array<float, 256> dequantized, transformed;
  for (int b = 0; b < 256; ++b)
    dequantized[b] = x.scale * static_cast<float>(ByteValue(b, x.type) - x.zero);
  transform(dequantized.data(), transformed.data(), dequantized.size());
  ByteTable table;
  for (int b = 0; b < 256; ++b) table[b] = static_cast<uint8_t>(QuantizeValue(transformed[b], y));
  return table;
}

// out[i] = table[in[i]], with the 256-entry lookup kernel octet.LookupTable uses.
void MapBytes(const uint8_t* in, const ByteTable& table, uint8_t* out, int64_t n) {
  LookupTable256(in, n, 0, table.data(), 1, out);
}

// MlasLogisticKernelFma3 (x86 with AVX2 + FMA, which ORT picks on every CPU octet's
// fast paths run on): clamp to [-18, 18], p(x) / q(x) by fused multiply-adds, + 0.5,
// then only a lower clamp at 0 (the assembly has no upper clamp). maxps/minps keep
// the second operand for NaN, which the comparisons below reproduce.
void LogisticFma3(const float* in, float* out, size_t n) {
  constexpr float kLower = -18.0f, kUpper = 18.0f;
  constexpr float kAlpha9 = 4.37031012579801e-11f, kAlpha7 = 1.15627324459942e-07f,
                  kAlpha5 = 6.08574864600143e-05f, kAlpha3 = 8.51377133304701e-03f,
                  kAlpha1 = 2.48287947061529e-01f;
  constexpr float kBeta10 = 6.10247389755681e-13f, kBeta8 = 5.76102136993427e-09f,
                  kBeta6 = 6.29106785017040e-06f, kBeta4 = 1.70198817374094e-03f,
                  kBeta2 = 1.16817656904453e-01f, kBeta0 = 9.93151921023180e-01f;
  for (size_t i = 0; i < n; ++i) {
    float x = kLower > in[i] ? kLower : in[i];
    x = kUpper < x ? kUpper : x;
    const float x2 = x * x;
    float p = std::fma(x2, kAlpha9, kAlpha7);
    p = std::fma(x2, p, kAlpha5);
    p = std::fma(x2, p, kAlpha3);
    p = std::fma(x2, p, kAlpha1);
    float q = std::fma(x2, kBeta10, kBeta8);
    q = std::fma(x2, q, kBeta6);
    q = std::fma(x2, q, kBeta4);
    q = std::fma(x2, q, kBeta2);
    q = std::fma(x2, q, kBeta0);
    p = x * p;
    const float r = p / q + 0.5f;
    out[i] = 0.0f > r ? 0.0f : r;
  }
}

// ---- Element-wise lookup ops: QLinearSigmoid, QLinearLeakyRelu ---------------

enum LookupInput { kX = 0, kXScale, kXZero, kYScale, kYZero, kLookupInputCount };

class QLinearLookupKernel : public OpKernel {
 public:
  // With constant scales and zero points (what quantizers write) the table is made here,
  // once; otherwise per run.
  QLinearLookupKernel(const KernelInit& init, bool is_sigmoid, float alpha)
      : is_sigmoid_(is_sigmoid), alpha_(alpha) {
    auto constant = [&](size_t i) {
      return i < init.constant_inputs.size() ? init.constant_inputs[i] : nullptr;
    };
    auto omitted = [&](size_t i) {
      return i >= init.input_types.size() || init.input_types[i] == DType::kUndefined;
    };
    const bool zeros_known =
        (constant(kXZero) || omitted(kXZero)) && (constant(kYZero) || omitted(kYZero));
    if (constant(kXScale) && constant(kYScale) && zeros_known)
      table_ = Table(init.node, init.input_types[kX], *constant(kXScale), constant(kXZero),
                     *constant(kYScale), constant(kYZero));
  }

  void Run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(kX);
    auto optional = [&](size_t i) { return ctx.has_input(i) ? &ctx.input(i) : nullptr; };
    const ByteTable table = table_ ? *table_
                                   : Table(ctx.node(), x.dtype(), ctx.input(kXScale),
                                           optional(kXZero), ctx.input(kYScale), optional(kYZero));
    Tensor& y = ctx.AllocateUninitializedOutput(0, x.dtype(), x.shape());
    MapBytes(static_cast<const uint8_t*>(x.raw()), table, static_cast<uint8_t*>(y.raw()),
             x.numel());
  }

 private:
  ByteTable Table(const Node& node, DType type, const Tensor& x_scale, const Tensor* x_zero,
                  const Tensor& y_scale, const Tensor* y_zero) const {
    const ScalarQParams xq{ReadScalarScale(node, x_scale, "X_scale"),
                           ReadScalarZero(node, x_zero, type, "X_zero_point"), type};
    const ScalarQParams yq{ReadScalarScale(node, y_scale, "Y_scale"),
                           ReadScalarZero(node, y_zero, type, "Y_zero_point"), type};
    if (is_sigmoid_) return BuildByteTable(xq, yq, LogisticFma3);
    return BuildByteTable(xq, yq, [alpha = alpha_](const float* in, float* out, size_t n) {
      for (size_t i = 0; i < n; ++i) out[i] = in[i] >= 0.0f ? in[i] : alpha * in[i];
    });
  }

  bool is_sigmoid_;
  float alpha_;
  std::optional<ByteTable> table_;
};

bool AcceptsLookup(const Node&, const std::vector<DType>& t) {
  if (t.size() < kYScale + 1 || t.size() > kLookupInputCount || !Is8Bit(t[kX])) return false;
  for (size_t zero : {kXZero, kYZero})
    if (zero < t.size() && t[zero] != DType::kUndefined && t[zero] != t[kX]) return false;
  return t[kXScale] == DType::kFloat32 && t[kYScale] == DType::kFloat32;
}

// ---- QLinearConcat ------------------------------------------------------------

class QLinearConcatKernel : public OpKernel {
 public:
  explicit QLinearConcatKernel(const KernelInit& init) {
    OCTET_CHECK(init.node.FindAttribute("axis"), init.node.Describe(),
                ": attribute 'axis' is required");
    axis_ = init.node.GetInt("axis", 0);
  }

  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const DType type = ctx.input(1).dtype();
    const ScalarQParams yq{ReadScalarScale(node, ctx.input(0), "Y_scale"),
                           ReadScalarZero(ctx, 1, type, "Y_zero_point"), type};
    const size_t count = (ctx.num_inputs() - 2) / 3;
    const Tensor& first = ctx.input(2);
    const int64_t rank = static_cast<int64_t>(first.rank());
    const std::optional<int64_t> axis = NormalizeAxis(axis_, rank);
    OCTET_CHECK(axis.has_value(), node.Describe(), ": axis ", axis_, " is out of range for rank ",
                rank);
    Shape out_shape = first.shape();
    out_shape[*axis] = 0;
    for (size_t i = 0; i < count; ++i) {
      const Shape& s = ctx.input(2 + 3 * i).shape();
      bool compatible = static_cast<int64_t>(s.size()) == rank;
      for (int64_t d = 0; compatible && d < rank; ++d)
        compatible = d == *axis || s[d] == first.shape()[d];
      OCTET_CHECK(compatible, node.Describe(), ": input ", 2 + 3 * i, " has shape ",
                  ShapeToString(s), ", which does not match ", ShapeToString(first.shape()),
                  " outside axis ", *axis);
      OCTET_CHECK(!__builtin_add_overflow(out_shape[*axis], s[*axis], &out_shape[*axis]),
                  node.Describe(), ": the inputs' sizes along axis ", *axis, " overflow int64");
    }
    Tensor& out = ctx.AllocateOutput(0, type, out_shape);
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < *axis; ++d) outer *= out_shape[d];
    for (int64_t d = *axis + 1; d < rank; ++d) inner *= out_shape[d];
    const int64_t out_row = out_shape[*axis] * inner;
    uint8_t* dst = static_cast<uint8_t*>(out.raw());
    int64_t column = 0;
    for (size_t i = 0; i < count; ++i) {
      const size_t tuple = 2 + 3 * i;
      const Tensor& in = ctx.input(tuple);
      const ScalarQParams xq{ReadScalarScale(node, ctx.input(tuple + 1), "X_scale"),
                             ReadScalarZero(ctx, tuple + 2, type, "X_zero_point"), type};
      // ORT copies when the float scales compare equal (so 0.0 == -0.0) and zero points match.
      const bool copy = xq.scale == yq.scale && xq.zero == yq.zero;
      const ByteTable table =
          copy ? ByteTable{}
               : BuildByteTable(xq, yq, [](const float* in_values, float* out_values, size_t n) {
                   std::copy(in_values, in_values + n, out_values);
                 });
      const int64_t in_row = in.shape()[*axis] * inner;
      const uint8_t* src = static_cast<const uint8_t*>(in.raw());
      for (int64_t o = 0; o < outer; ++o) {
        uint8_t* row = dst + o * out_row + column;
        if (copy)
          std::memcpy(row, src + o * in_row, static_cast<size_t>(in_row));
        else
          MapBytes(src + o * in_row, table, row, in_row);
      }
      column += in_row;
    }
  }

 private:
  int64_t axis_;
};

bool AcceptsConcat(const Node&, const std::vector<DType>& t) {
  if (t.size() < 5 || (t.size() - 2) % 3 != 0 || t[0] != DType::kFloat32 || !Is8Bit(t[1]))
    return false;
  for (size_t i = 2; i < t.size(); i += 3)
    if (t[i] != t[1] || t[i + 1] != DType::kFloat32 || t[i + 2] != t[1]) return false;
  return true;
}

// ---- QLinearSoftmax -----------------------------------------------------------

// ORT's QlinearBuildLookupTableUint32 (with its float EXP_OUT_DTYPE): entry i is
// exp(x_scale * (i - 255 + shift)) where x - max(row) = i - 255, and the shift
// keeps a row's sum of `reduce_len` entries below FLT_MAX:
//   shift = max(0, log(FLT_MAX / reduce_len) - 5) / x_scale   (the division in float)
using ExpTable = std::array<float, 256>;

ExpTable SoftmaxExpTable(float x_scale, int64_t reduce_len) {
  double shift = std::log(std::numeric_limits<float>::max() / static_cast<float>(reduce_len));
  shift = std::max(0.0, shift - 5.0) / x_scale;
  ExpTable table;
  for (int i = 0; i < 256; ++i)
    table[i] = static_cast<float>(
        std::exp((static_cast<double>(i) - 255 + shift) * static_cast<double>(x_scale)));
  return table;
}

// What ORT's float -> uint32 cast gives on x86: a 64-bit cvttss2si (out of range and NaN
// give INT64_MIN, whose low half is 0). Its float -> int32 casts: TruncateToInt32LikeX86.
uint32_t TruncateToUint32LikeX86(float v) {
  return v >= -9.223372036854775808e18f && v < 9.223372036854775808e18f
             ? static_cast<uint32_t>(static_cast<int64_t>(v))
             : 0u;
}

// One softmax row of `length` 8-bit values `stride` bytes apart.
template <typename T>
void SoftmaxRow(const T* x, T* y, int64_t length, int64_t stride, const ExpTable& table,
                float y_scale_inverse, int32_t y_zero, const Node& node) {
  T x_max = x[0];
  for (int64_t d = 1; d < length; ++d) x_max = std::max(x_max, x[d * stride]);
  auto exp_of = [&](T v) { return table[255 - (int32_t{x_max} - int32_t{v})]; };
  float sum = 0.f;
  for (int64_t d = 0; d < length; ++d) sum += exp_of(x[d * stride]);
  // ORT leaves the rest of its block unwritten here; octet refuses instead.
  OCTET_CHECK(sum != 0.f, node.Describe(), ": the exp sum of a row is 0 (X_scale is not usable)");
  for (int64_t d = 0; d < length; ++d) {
    const float rounded = std::nearbyint(exp_of(x[d * stride]) * y_scale_inverse / sum);
    if constexpr (std::is_same_v<T, uint8_t>) {
      const uint32_t v = TruncateToUint32LikeX86(rounded) + static_cast<uint32_t>(y_zero);
      y[d * stride] = static_cast<uint8_t>(v > 255 ? 255 : v);
    } else {
      const int32_t v = static_cast<int32_t>(
          static_cast<uint32_t>(TruncateToInt32LikeX86(rounded)) + static_cast<uint32_t>(y_zero));
      y[d * stride] = static_cast<int8_t>(std::clamp(v, -128, 127));
    }
  }
}

class QLinearSoftmaxKernel : public OpKernel {
 public:
  explicit QLinearSoftmaxKernel(const KernelInit& init) {
    const Node& node = init.node;
    OCTET_CHECK(node.FindAttribute("opset"), node.Describe(), ": attribute 'opset' is required");
    opset_ = node.GetInt("opset", 13);
    // The schema's default (-1) fills a missing axis before ORT's kernel looks, so its
    // opset-dependent default (1 below 13) never applies.
    axis_ = node.GetInt("axis", -1);
  }

  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.input(kX);
    const DType type = x.dtype();
    const float x_scale = ReadScalarScale(node, ctx.input(kXScale), "X_scale");
    if (ctx.has_input(kXZero)) ReadScalarZero(ctx, kXZero, type, "X_zero_point");  // checked only
    const float y_scale = ReadScalarScale(node, ctx.input(kYScale), "Y_scale");
    const int32_t y_zero = ReadScalarZero(ctx, kYZero, type, "Y_zero_point");
    Tensor& y = ctx.AllocateOutput(0, type, x.shape());
    if (x.numel() == 0) return;
    const int64_t rank = static_cast<int64_t>(x.rank());
    const std::optional<int64_t> axis = NormalizeAxis(axis_, rank);
    OCTET_CHECK(axis.has_value(), node.Describe(), ": axis ", axis_, " is out of range for rank ",
                rank);
    // Opset < 13 (the node's `opset` attribute) coerces to 2-D at axis; 13+ reduces one axis.
    int64_t outer = 1, length = 1, inner = 1;
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t dim = x.shape()[d];
      if (d < *axis)
        outer *= dim;
      else if (d == *axis || opset_ < 13)
        length *= dim;
      else
        inner *= dim;
    }
    const ExpTable table = SoftmaxExpTable(x_scale, length);
    const float y_scale_inverse = std::floor(1.0f / y_scale);
    auto rows = [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t offset = (r / inner) * length * inner + r % inner;
        if (type == DType::kInt8)
          SoftmaxRow(x.data<int8_t>() + offset, y.data<int8_t>() + offset, length, inner, table,
                     y_scale_inverse, y_zero, node);
        else
          SoftmaxRow(x.data<uint8_t>() + offset, y.data<uint8_t>() + offset, length, inner, table,
                     y_scale_inverse, y_zero, node);
      }
    };
    ParallelFor(ctx.pool(), outer * inner, rows);
  }

 private:
  int64_t opset_;
  int64_t axis_;
};

}  // namespace

void RegisterQLinearMiscOps(KernelRegistry& r) {
  auto same_as_x = [](const Node&, const std::vector<DType>& t) {
    return std::vector<DType>{t[0]};
  };
  r.Register({kMsDomain, "QLinearSigmoid", 1, 1 << 30, AcceptsLookup, same_as_x,
              [](const KernelInit& init) {
                return std::make_unique<QLinearLookupKernel>(init, true, 0.f);
              }});
  r.Register({kMsDomain, "QLinearLeakyRelu", 1, 1 << 30, AcceptsLookup, same_as_x,
              [](const KernelInit& init) {
                return std::make_unique<QLinearLookupKernel>(init, false,
                                                             init.node.GetFloat("alpha", 0.01f));
              }});
  r.Register({kMsDomain, "QLinearSoftmax", 1, 1 << 30, AcceptsLookup, same_as_x,
              [](const KernelInit& init) { return std::make_unique<QLinearSoftmaxKernel>(init); }});
  r.Register({kMsDomain, "QLinearConcat", 1, 1 << 30, AcceptsConcat,
              [](const Node&, const std::vector<DType>& t) { return std::vector<DType>{t[1]}; },
              [](const KernelInit& init) { return std::make_unique<QLinearConcatKernel>(init); }});
}

}  // namespace octet
