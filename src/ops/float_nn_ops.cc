// Float32 operators of convolutional networks: Conv (im2col + the float
// matmul kernel), MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool,
// BatchNormalization (inference) and Resize (nearest and linear); MaxPool
// also on int8/uint8 and nearest Resize also on int8/uint8/int32. 1-D, 2-D
// and 3-D spatial shapes share one code path: lower ranks are padded to 3-D
// with size-1 dims, which changes no index and no arithmetic.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/thread_pool.h"
#include "kernels/float/sgemm.h"
#include "ops/registry.h"

namespace octet {

namespace {

constexpr int kLatest = 1 << 30;
constexpr size_t kMaxSpatial = 3;

template <typename Kernel>
std::unique_ptr<OpKernel> Create(const KernelInit& init) {
  return std::make_unique<Kernel>(init);
}

// Spatial geometry of a window operation (conv or pool), padded to 3-D.
struct Window {
  int64_t in[kMaxSpatial] = {1, 1, 1};
  int64_t kernel[kMaxSpatial] = {1, 1, 1};
  int64_t stride[kMaxSpatial] = {1, 1, 1};
  int64_t dilation[kMaxSpatial] = {1, 1, 1};
  int64_t pad_begin[kMaxSpatial] = {0, 0, 0};
  int64_t pad_end[kMaxSpatial] = {0, 0, 0};
  int64_t out[kMaxSpatial] = {1, 1, 1};
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
  int64_t kernel_size() const { return kernel[0] * kernel[1] * kernel[2]; }
};

// Reads auto_pad/pads/strides/dilations for `kernel` over the spatial dims of
// `x_shape` (N, C, spatial...) and computes the output size.
Window MakeWindow(const Node& node, const Shape& x_shape, const std::vector<int64_t>& kernel,
                  bool ceil_mode) {
  const size_t spatial = kernel.size();
  OCTET_CHECK(spatial >= 1 && spatial <= kMaxSpatial && x_shape.size() == spatial + 2,
              node.Describe(), ": input shape ", ShapeToString(x_shape), " and kernel shape ",
              ShapeToString(kernel), " must be (N, C, 1 to 3 spatial dims) and match");
  auto list = [&](const char* name, size_t count, int64_t fill) {
    std::vector<int64_t> v = node.GetInts(name);
    if (v.empty()) v.assign(count, fill);
    OCTET_CHECK(v.size() == count, node.Describe(), ": attribute '", name, "' has ", v.size(),
                " values, expected ", count);
    return v;
  };
  const std::vector<int64_t> strides = list("strides", spatial, 1);
  const std::vector<int64_t> dilations = list("dilations", spatial, 1);
  const std::vector<int64_t> pads = list("pads", 2 * spatial, 0);
  const std::string auto_pad = node.GetString("auto_pad", "NOTSET");
  OCTET_CHECK(auto_pad == "NOTSET" || auto_pad == "VALID" || auto_pad == "SAME_UPPER" ||
                  auto_pad == "SAME_LOWER",
              node.Describe(), ": auto_pad '", auto_pad, "' is not valid");
  Window w;
  const size_t first = kMaxSpatial - spatial;
  for (size_t i = 0; i < spatial; ++i) {
    const size_t d = first + i;
    w.in[d] = x_shape[2 + i];
    w.kernel[d] = kernel[i];
    w.stride[d] = strides[i];
    w.dilation[d] = dilations[i];
    OCTET_CHECK(kernel[i] > 0 && strides[i] > 0 && dilations[i] > 0, node.Describe(),
                ": kernel, strides and dilations must be positive");
    const int64_t extent = (kernel[i] - 1) * dilations[i] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      w.out[d] = (w.in[d] + strides[i] - 1) / strides[i];
      const int64_t total = std::max<int64_t>(0, (w.out[d] - 1) * strides[i] + extent - w.in[d]);
      w.pad_begin[d] = auto_pad == "SAME_UPPER" ? total / 2 : (total + 1) / 2;
      w.pad_end[d] = total - w.pad_begin[d];
      continue;
    }
    if (auto_pad == "NOTSET") {
      w.pad_begin[d] = pads[i];
      w.pad_end[d] = pads[i + spatial];
      OCTET_CHECK(pads[i] >= 0 && pads[i + spatial] >= 0, node.Describe(), ": pads must be >= 0");
    }
    const int64_t span = w.in[d] + w.pad_begin[d] + w.pad_end[d] - extent;
    OCTET_CHECK(span >= 0, node.Describe(), ": the window (", extent,
                ") is larger than the padded input (", w.in[d] + w.pad_begin[d] + w.pad_end[d],
                ") along spatial dim ", i);
    w.out[d] = (ceil_mode ? (span + strides[i] - 1) / strides[i] : span / strides[i]) + 1;
    // A last window that would start inside the end padding is dropped (as in
    // ONNX Runtime and PyTorch).
    if (ceil_mode && (w.out[d] - 1) * strides[i] >= w.in[d] + w.pad_begin[d]) --w.out[d];
  }
  return w;
}

Shape OutputShape(const Shape& x_shape, int64_t channels, const Window& w) {
  Shape out{x_shape[0], channels};
  for (size_t d = kMaxSpatial - (x_shape.size() - 2); d < kMaxSpatial; ++d) out.push_back(w.out[d]);
  return out;
}

// ---- Conv -------------------------------------------------------------------

class ConvKernel : public OpKernel {
 public:
  explicit ConvKernel(const KernelInit& init) : group_(init.node.GetInt("group", 1)) {
    OCTET_CHECK(group_ >= 1, init.node.Describe(), ": group must be >= 1");
    // A constant W is packed once here, one GEMM A operand per group.
    const Tensor* weight = init.constant_inputs.size() > 1 ? init.constant_inputs[1] : nullptr;
    if (weight && weight->rank() >= 3 && weight->dtype() == DType::kFloat32 && weight->dim(0) > 0 &&
        weight->dim(0) % group_ == 0) {
      const int64_t mg = weight->dim(0) / group_, k = weight->numel() / weight->dim(0);
      for (int64_t g = 0; g < group_; ++g)
        packed_weight_.push_back(SgemmPackA(weight->data<float>() + g * mg * k, mg, k, k));
    }
  }
  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.input(0);
    const Tensor& weight = ctx.input(1);
    OCTET_CHECK(x.rank() >= 3 && weight.rank() == x.rank(), node.Describe(), ": X ",
                ShapeToString(x.shape()), " and W ", ShapeToString(weight.shape()),
                " must both be (N, C, spatial...)");
    std::vector<int64_t> kernel(weight.shape().begin() + 2, weight.shape().end());
    const std::vector<int64_t> kernel_attr = node.GetInts("kernel_shape");
    OCTET_CHECK(kernel_attr.empty() || kernel_attr == kernel, node.Describe(), ": kernel_shape ",
                ShapeToString(kernel_attr), " differs from W's ", ShapeToString(weight.shape()));
    const Window w = MakeWindow(node, x.shape(), kernel, false);
    const int64_t batch = x.dim(0), channels = x.dim(1), filters = weight.dim(0);
    OCTET_CHECK(
        channels % group_ == 0 && filters % group_ == 0 && weight.dim(1) * group_ == channels,
        node.Describe(), ": X has ", channels, " channels and W shape ",
        ShapeToString(weight.shape()), ", which group=", group_, " does not fit");
    const float* bias = nullptr;
    if (ctx.has_input(2)) {
      const Tensor& b = ctx.input(2);
      OCTET_CHECK(b.rank() == 1 && b.dim(0) == filters, node.Describe(), ": B shape ",
                  ShapeToString(b.shape()), " must be [", filters, "]");
      bias = b.data<float>();
    }
    Tensor& y = ctx.AllocateOutput(0, DType::kFloat32, OutputShape(x.shape(), filters, w));
    const int64_t cg = channels / group_, mg = filters / group_;
    const int64_t k = cg * w.kernel_size(), positions = w.out_size();
    bool pointwise = w.kernel_size() == 1;
    for (size_t d = 0; d < kMaxSpatial; ++d)
      pointwise = pointwise && w.stride[d] == 1 && w.pad_begin[d] == 0 && w.pad_end[d] == 0;
    std::vector<float> col(pointwise ? 0 : k * positions);
    const float* px = x.data<float>();
    const float* pw = weight.data<float>();
    float* py = y.data<float>();
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t g = 0; g < group_; ++g) {
        const float* xg = px + (n * channels + g * cg) * w.in_size();
        const float* cols = xg;
        if (!pointwise) {
          Im2Col(xg, cg, w, col.data());
          cols = col.data();
        }
        const float* wg = pw + g * mg * k;
        float* yg = py + (n * filters + g * mg) * positions;
        const bool packed =
            !packed_weight_.empty() && packed_weight_[g].rows == mg && packed_weight_[g].K == k;
        Sgemm(mg, positions, k,
              packed ? SgemmOperand::Packed(packed_weight_[g]) : SgemmOperand::RowMajor(wg, k),
              SgemmOperand::RowMajor(cols, positions), yg, positions, ctx.pool());
        if (bias)
          for (int64_t m = 0; m < mg; ++m)
            for (int64_t p = 0; p < positions; ++p) yg[m * positions + p] += bias[g * mg + m];
      }
    }
  }

 private:
  // col[(c, kd, kh, kw), (od, oh, ow)] = x[c, od*s - pad + kd*dil, ...], 0 in the padding.
  static void Im2Col(const float* x, int64_t channels, const Window& w, float* col) {
    const int64_t positions = w.out_size();
    for (int64_t c = 0; c < channels; ++c) {
      const float* xc = x + c * w.in_size();
      for (int64_t kd = 0; kd < w.kernel[0]; ++kd)
        for (int64_t kh = 0; kh < w.kernel[1]; ++kh)
          for (int64_t kw = 0; kw < w.kernel[2]; ++kw) {
            float* dst = col;
            col += positions;
            for (int64_t od = 0; od < w.out[0]; ++od) {
              const int64_t id = od * w.stride[0] - w.pad_begin[0] + kd * w.dilation[0];
              for (int64_t oh = 0; oh < w.out[1]; ++oh) {
                const int64_t ih = oh * w.stride[1] - w.pad_begin[1] + kh * w.dilation[1];
                const bool row_inside = id >= 0 && id < w.in[0] && ih >= 0 && ih < w.in[1];
                const float* src = xc + (id * w.in[1] + ih) * w.in[2];
                for (int64_t ow = 0; ow < w.out[2]; ++ow) {
                  const int64_t iw = ow * w.stride[2] - w.pad_begin[2] + kw * w.dilation[2];
                  *dst++ = row_inside && iw >= 0 && iw < w.in[2] ? src[iw] : 0.f;
                }
              }
            }
          }
    }
  }

  int64_t group_;
  std::vector<SgemmPacked> packed_weight_;
};

// ---- Pools --------------------------------------------------------------------

// Calls fn(plane_index, output_position, input offsets of the window's valid
// elements, count of window positions inside the padded input) per output.
template <typename Fn>
void ForEachWindow(const Window& w, int64_t planes, Fn&& fn) {
  std::vector<int64_t> taps;
  taps.reserve(w.kernel_size());
  for (int64_t plane = 0; plane < planes; ++plane) {
    int64_t position = 0;
    for (int64_t od = 0; od < w.out[0]; ++od)
      for (int64_t oh = 0; oh < w.out[1]; ++oh)
        for (int64_t ow = 0; ow < w.out[2]; ++ow, ++position) {
          taps.clear();
          int64_t padded_count = 1;
          const int64_t o[kMaxSpatial] = {od, oh, ow};
          int64_t start[kMaxSpatial];
          for (size_t d = 0; d < kMaxSpatial; ++d) {
            start[d] = o[d] * w.stride[d] - w.pad_begin[d];
            int64_t inside_padded = 0;
            for (int64_t k = 0; k < w.kernel[d]; ++k) {
              const int64_t i = start[d] + k * w.dilation[d];
              inside_padded += i < w.in[d] + w.pad_end[d];
            }
            padded_count *= inside_padded;
          }
          for (int64_t kd = 0; kd < w.kernel[0]; ++kd) {
            const int64_t id = start[0] + kd * w.dilation[0];
            if (id < 0 || id >= w.in[0]) continue;
            for (int64_t kh = 0; kh < w.kernel[1]; ++kh) {
              const int64_t ih = start[1] + kh * w.dilation[1];
              if (ih < 0 || ih >= w.in[1]) continue;
              for (int64_t kw = 0; kw < w.kernel[2]; ++kw) {
                const int64_t iw = start[2] + kw * w.dilation[2];
                if (iw < 0 || iw >= w.in[2]) continue;
                taps.push_back((id * w.in[1] + ih) * w.in[2] + iw);
              }
            }
          }
          fn(plane, position, taps, padded_count);
        }
  }
}

// The window of one spatial axis of a pool: output o reads input
// o * stride - pad_begin + k * dilation for k in [k_begin[o], k_end[o]), the
// taps inside the input; output o of tap k exists for o in [o_begin[k], o_end[k]).
struct AxisTaps {
  std::vector<int64_t> k_begin, k_end, o_begin, o_end;
};

AxisTaps TapsAlong(const Window& w, size_t d) {
  const int64_t in = w.in[d], stride = w.stride[d], dilation = w.dilation[d];
  const int64_t pad = w.pad_begin[d], kernel = w.kernel[d], out = w.out[d];
  auto ceil_div = [](int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -(-a / b); };
  AxisTaps t;
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = o * stride - pad;
    const int64_t first = start < 0 ? ceil_div(-start, dilation) : 0;
    const int64_t count = start < in ? (in - start - 1) / dilation + 1 : 0;
    t.k_begin.push_back(std::min(first, kernel));
    t.k_end.push_back(std::max(std::min(count, kernel), t.k_begin.back()));
  }
  for (int64_t k = 0; k < kernel; ++k) {
    const int64_t shift = k * dilation - pad;  // input index of output 0's tap k
    t.o_begin.push_back(std::clamp<int64_t>(ceil_div(-shift, stride), 0, out));
    t.o_end.push_back(std::clamp<int64_t>(ceil_div(in - shift, stride), t.o_begin.back(), out));
  }
  return t;
}

bool IsIdentityAxis(const Window& w, size_t d) {
  return w.kernel[d] == 1 && w.stride[d] == 1 && w.pad_begin[d] == 0 && w.pad_end[d] == 0;
}

template <typename T>
T LowestOf() {
  return std::is_floating_point_v<T> ? -std::numeric_limits<T>::infinity()
                                     : std::numeric_limits<T>::lowest();
}

// dst[b, o, j] = max over the taps of o of src[b, i, j], for a [outer, in,
// inner] source and [outer, out, inner] destination. Taps are visited in
// increasing k with a strict `>`, as the generic loop does, so the first of
// equal values wins (+0 vs -0) and a NaN never replaces a number.
template <typename T>
void MaxAlongAxis(const T* src, T* dst, int64_t outer, int64_t in, int64_t out, int64_t inner,
                  const Window& w, size_t d, const AxisTaps& taps) {
  const T lowest = LowestOf<T>();
  const int64_t stride = w.stride[d];
  for (int64_t b = 0; b < outer; ++b) {
    const T* s = src + b * in * inner;
    T* o_row = dst + b * out * inner;
    std::fill(o_row, o_row + out * inner, lowest);
    for (int64_t k = 0; k < w.kernel[d]; ++k) {
      const int64_t shift = k * w.dilation[d] - w.pad_begin[d];
      if (inner == 1 && stride == 1) {  // the common case, kept apart so it vectorizes
        for (int64_t o = taps.o_begin[k]; o < taps.o_end[k]; ++o) {
          const T v = s[o + shift];
          o_row[o] = v > o_row[o] ? v : o_row[o];
        }
        continue;
      }
      if (inner == 1) {
        for (int64_t o = taps.o_begin[k]; o < taps.o_end[k]; ++o) {
          const T v = s[o * stride + shift];
          o_row[o] = v > o_row[o] ? v : o_row[o];
        }
        continue;
      }
      for (int64_t o = taps.o_begin[k]; o < taps.o_end[k]; ++o) {
        const T* s_row = s + (o * stride + shift) * inner;
        T* d_row = o_row + o * inner;
        for (int64_t j = 0; j < inner; ++j) d_row[j] = s_row[j] > d_row[j] ? s_row[j] : d_row[j];
      }
    }
  }
}

// o[i] = max(o[i], in[i + offset]) for i in [0, n), with the strict `>` of
// the generic scan; one long loop the compiler vectorizes.
template <typename T>
void MaxInto(T* o, const T* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = in[i] > o[i] ? in[i] : o[i];
}

// True when the pool is 2-D (D untouched) with stride 1 on H and W, so that
// PaddedPlaneMax applies.
bool IsFlatStrideOne(const Window& w) {
  if (!IsIdentityAxis(w, 0) || w.stride[1] != 1 || w.stride[2] != 1) return false;
  for (size_t d = 1; d < kMaxSpatial; ++d)
    if (w.out[d] != w.in[d] + w.pad_begin[d] + w.pad_end[d] - (w.kernel[d] - 1) * w.dilation[d])
      return false;
  return true;
}

// The two passes of a stride-1 2-D pool over a copy of the plane padded with
// the lowest value (which is never strictly greater, so never chosen): each
// tap is one long loop over the flat padded buffer, output (r, c) landing at
// r * padded_width + c.
template <typename T>
void PaddedPlaneMax(const T* x_plane, T* y_plane, const Window& w, std::vector<T>& padded,
                    std::vector<T>& row_max) {
  const int64_t height = w.in[1], width = w.in[2];
  const int64_t padded_height = height + w.pad_begin[1] + w.pad_end[1];
  const int64_t padded_width = width + w.pad_begin[2] + w.pad_end[2];
  padded.assign(static_cast<size_t>(padded_height * padded_width), LowestOf<T>());
  for (int64_t r = 0; r < height; ++r)
    std::copy(x_plane + r * width, x_plane + (r + 1) * width,
              padded.data() + (r + w.pad_begin[1]) * padded_width + w.pad_begin[2]);
  const int64_t row_count = padded_height * padded_width - (w.kernel[2] - 1) * w.dilation[2];
  row_max.assign(static_cast<size_t>(row_count), LowestOf<T>());
  for (int64_t k = 0; k < w.kernel[2]; ++k)
    MaxInto(row_max.data(), padded.data() + k * w.dilation[2], row_count);
  const int64_t out_count = (w.out[1] - 1) * padded_width + w.out[2];
  padded.assign(static_cast<size_t>(out_count), LowestOf<T>());  // reused for the output
  for (int64_t k = 0; k < w.kernel[1]; ++k)
    MaxInto(padded.data(), row_max.data() + k * w.dilation[1] * padded_width, out_count);
  for (int64_t r = 0; r < w.out[1]; ++r)
    std::copy(padded.data() + r * padded_width, padded.data() + r * padded_width + w.out[2],
              y_plane + r * w.out[2]);
}

// MaxPool without the Indices output as 1-D max passes along W, H and D (a
// max over a box is a max of maxes; PaddedPlaneMax for stride-1 2-D pools). The generic loop's
// result is the first tap when that is NaN, else the max of the non-NaN taps; the passes give the
// latter, and the first tap is checked afterwards. Planes run in parallel.
template <typename T>
void SeparableMaxPool(const T* x, T* y, const Window& w, int64_t planes, ThreadPool* pool) {
  AxisTaps taps[kMaxSpatial];
  for (size_t d = 0; d < kMaxSpatial; ++d) taps[d] = TapsAlong(w, d);
  std::vector<size_t> pass_axes;  // innermost first
  for (size_t d = kMaxSpatial; d-- > 0;)
    if (!IsIdentityAxis(w, d)) pass_axes.push_back(d);
  const int64_t in_size = w.in_size(), out_size = w.out_size();
  const bool flat = !pass_axes.empty() && IsFlatStrideOne(w);
  auto run = [&](int64_t begin, int64_t end) {
    std::vector<T> scratch[2];
    for (int64_t plane = begin; plane < end; ++plane) {
      const T* current = x + plane * in_size;
      T* y_plane = y + plane * out_size;
      int64_t dims[kMaxSpatial] = {w.in[0], w.in[1], w.in[2]};
      if (flat) {
        PaddedPlaneMax(current, y_plane, w, scratch[0], scratch[1]);
        current = y_plane;
      }
      for (size_t p = 0; p < (flat ? 0 : pass_axes.size()); ++p) {
        const size_t d = pass_axes[p];
        int64_t outer = 1, inner = 1;
        for (size_t e = 0; e < d; ++e) outer *= dims[e];
        for (size_t e = d + 1; e < kMaxSpatial; ++e) inner *= dims[e];
        T* target = y_plane;  // the last pass writes the output
        if (p + 1 < pass_axes.size()) {
          scratch[p % 2].resize(static_cast<size_t>(outer * w.out[d] * inner));
          target = scratch[p % 2].data();
        }
        MaxAlongAxis(current, target, outer, dims[d], w.out[d], inner, w, d, taps[d]);
        current = target;
        dims[d] = w.out[d];
      }
      if (pass_axes.empty()) std::copy(current, current + out_size, y_plane);
      if constexpr (std::is_floating_point_v<T>) {
        const T* x_plane = x + plane * in_size;
        int64_t nan_count = 0;
        for (int64_t i = 0; i < in_size; ++i) nan_count += x_plane[i] != x_plane[i];
        if (nan_count == 0) continue;
        int64_t pos = 0;
        for (int64_t od = 0; od < w.out[0]; ++od)
          for (int64_t oh = 0; oh < w.out[1]; ++oh)
            for (int64_t ow = 0; ow < w.out[2]; ++ow, ++pos) {
              const int64_t o[kMaxSpatial] = {od, oh, ow};
              int64_t offset = 0;
              bool has_tap = true;
              for (size_t d = 0; d < kMaxSpatial; ++d) {
                has_tap = has_tap && taps[d].k_begin[o[d]] < taps[d].k_end[o[d]];
                const int64_t i =
                    o[d] * w.stride[d] - w.pad_begin[d] + taps[d].k_begin[o[d]] * w.dilation[d];
                offset = offset * w.in[d] + i;
              }
              if (has_tap && std::isnan(x_plane[offset])) y_plane[pos] = x_plane[offset];
            }
      }
    }
  };
  ParallelFor(pool, planes, run);
}

class PoolKernel : public OpKernel {
 public:
  PoolKernel(const KernelInit& init, bool is_max) : is_max_(is_max) {
    const Node& node = init.node;
    kernel_ = node.GetInts("kernel_shape");
    OCTET_CHECK(!kernel_.empty(), node.Describe(), ": attribute 'kernel_shape' is required");
    ceil_mode_ = node.GetInt("ceil_mode", 0) != 0;
    count_include_pad_ = node.GetInt("count_include_pad", 0) != 0;
    OCTET_CHECK(node.GetInt("storage_order", 0) == 0, node.Describe(),
                ": storage_order=1 is not supported");
  }
  void Run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Window w = MakeWindow(ctx.node(), x.shape(), kernel_, ceil_mode_);
    const int64_t planes = x.dim(0) * x.dim(1);
    const Shape out_shape = OutputShape(x.shape(), x.dim(1), w);
    Tensor& y = ctx.AllocateUninitializedOutput(0, x.dtype(), out_shape);
    const int64_t in_size = w.in_size(), out_size = w.out_size();
    if (!is_max_) {
      const float* px = x.data<float>();
      float* py = y.data<float>();
      ForEachWindow(
          w, planes,
          [&](int64_t plane, int64_t pos, const std::vector<int64_t>& taps, int64_t padded_count) {
            float sum = 0.f;
            for (int64_t t : taps) sum += px[plane * in_size + t];
            const int64_t count =
                count_include_pad_ ? padded_count : static_cast<int64_t>(taps.size());
            py[plane * out_size + pos] = count > 0 ? sum / static_cast<float>(count) : 0.f;
          });
      return;
    }
    int64_t* indices = ctx.output_wanted(1)
                           ? ctx.AllocateOutput(1, DType::kInt64, out_shape).data<int64_t>()
                           : nullptr;
    if (!indices) {
      switch (x.dtype()) {
        case DType::kFloat32:
          return SeparableMaxPool(x.data<float>(), y.data<float>(), w, planes, ctx.pool());
        case DType::kInt8:
          return SeparableMaxPool(x.data<int8_t>(), y.data<int8_t>(), w, planes, ctx.pool());
        case DType::kUInt8:
          return SeparableMaxPool(x.data<uint8_t>(), y.data<uint8_t>(), w, planes, ctx.pool());
        default:
          Fail(ctx.node().Describe(), ": dtype ", DTypeName(x.dtype()), " not supported");
      }
    }
    auto max_pool = [&](auto tag) {
      using T = decltype(tag);
      const T* px = static_cast<const T*>(x.raw());
      T* py = static_cast<T*>(y.raw());
      ForEachWindow(w, planes,
                    [&](int64_t plane, int64_t pos, const std::vector<int64_t>& taps, int64_t) {
                      T best = std::numeric_limits<T>::lowest();
                      if constexpr (std::is_floating_point_v<T>)
                        best = -std::numeric_limits<T>::infinity();
                      int64_t best_index = -1;
                      for (int64_t t : taps) {
                        const T v = px[plane * in_size + t];
                        if (best_index < 0 || v > best) {
                          best = v;
                          best_index = t;
                        }
                      }
                      py[plane * out_size + pos] = best;
                      if (indices) indices[plane * out_size + pos] = plane * in_size + best_index;
                    });
    };
    switch (x.dtype()) {
      case DType::kFloat32:
        return max_pool(float{});
      case DType::kInt8:
        return max_pool(int8_t{});
      case DType::kUInt8:
        return max_pool(uint8_t{});
      default:
        Fail(ctx.node().Describe(), ": dtype ", DTypeName(x.dtype()), " not supported");
    }
  }

 private:
  bool is_max_;
  std::vector<int64_t> kernel_;
  bool ceil_mode_ = false;
  bool count_include_pad_ = false;
};

class GlobalPoolKernel : public OpKernel {
 public:
  GlobalPoolKernel(const KernelInit&, bool is_max) : is_max_(is_max) {}
  void Run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    OCTET_CHECK(x.rank() >= 3, ctx.node().Describe(), ": input shape ", ShapeToString(x.shape()),
                " must be (N, C, spatial...)");
    Shape out_shape(x.rank(), 1);
    out_shape[0] = x.dim(0);
    out_shape[1] = x.dim(1);
    Tensor& y = ctx.AllocateOutput(0, DType::kFloat32, out_shape);
    const int64_t planes = x.dim(0) * x.dim(1), size = x.numel() / std::max<int64_t>(planes, 1);
    const float* px = x.data<float>();
    float* py = y.data<float>();
    for (int64_t p = 0; p < planes; ++p) {
      const float* plane = px + p * size;
      if (is_max_) {
        py[p] = size ? *std::max_element(plane, plane + size) : 0.f;
      } else {
        double sum = 0;
        for (int64_t i = 0; i < size; ++i) sum += plane[i];
        py[p] = static_cast<float>(sum / static_cast<double>(size));
      }
    }
  }

 private:
  bool is_max_;
};

// ---- BatchNormalization -------------------------------------------------------

class BatchNormKernel : public OpKernel {
 public:
  explicit BatchNormKernel(const KernelInit& init)
      : epsilon_(init.node.GetFloat("epsilon", 1e-5f)) {
    const Node& node = init.node;
    OCTET_CHECK(node.GetInt("training_mode", 0) == 0, node.Describe(),
                ": training_mode=1 is not supported (inference only)");
    OCTET_CHECK(node.GetInt("spatial", 1) == 1, node.Describe(), ": spatial=0 is not supported");
    for (size_t i = 1; i < node.outputs.size(); ++i)
      OCTET_CHECK(node.outputs[i] < 0, node.Describe(),
                  ": the training outputs (mean, var, ...) are not supported");
  }
  void Run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    OCTET_CHECK(x.rank() >= 2, ctx.node().Describe(), ": input must be (N, C, ...)");
    const int64_t channels = x.dim(1);
    for (size_t i = 1; i < 5; ++i)
      OCTET_CHECK(ctx.input(i).numel() == channels, ctx.node().Describe(), ": input ", i, " shape ",
                  ShapeToString(ctx.input(i).shape()), " must have ", channels, " elements");
    const float* scale = ctx.input(1).data<float>();
    const float* bias = ctx.input(2).data<float>();
    const float* mean = ctx.input(3).data<float>();
    const float* var = ctx.input(4).data<float>();
    // Folded per channel, as ONNX Runtime does: y = x * a + (B - mean * a).
    std::vector<float> a(channels), b(channels);
    for (int64_t c = 0; c < channels; ++c) {
      a[c] = scale[c] / std::sqrt(var[c] + epsilon_);
      b[c] = bias[c] - mean[c] * a[c];
    }
    Tensor& y = ctx.AllocateOutput(0, DType::kFloat32, x.shape());
    const int64_t size = x.dim(0) && channels ? x.numel() / (x.dim(0) * channels) : 0;
    const float* px = x.data<float>();
    float* py = y.data<float>();
    for (int64_t n = 0; n < x.dim(0); ++n)
      for (int64_t c = 0; c < channels; ++c) {
        const int64_t base = (n * channels + c) * size;
        for (int64_t i = 0; i < size; ++i) py[base + i] = px[base + i] * a[c] + b[c];
      }
  }

 private:
  float epsilon_;
};

// ---- Resize -------------------------------------------------------------------

enum class CoordinateMode {
  kHalfPixel,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kHalfPixelSymmetric,
  kTfHalfPixelForNn
};
enum class NearestMode { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kSimple };

// y[i_0, ..., i_last] = x[source[0][i_0], ..., source[last][i_last]], element
// bytes copied as T. An output row whose source row equals the previous
// row's (upsampling along an outer axis) is a copy of that output row.
template <typename T>
void NearestCopy(const Tensor& x, const std::vector<std::vector<int64_t>>& source, Tensor& y,
                 ThreadPool* pool) {
  const Shape& out_shape = y.shape();
  const size_t rank = out_shape.size();  // >= 1
  const int64_t row_len = out_shape.back();
  const int64_t rows = y.numel() / row_len;
  std::vector<int64_t> in_strides(rank, 1);
  for (size_t d = rank; d-- > 1;) in_strides[d - 1] = in_strides[d] * x.shape()[d];
  const std::vector<int64_t>& columns = source.back();
  const T* px = static_cast<const T*>(x.raw());
  T* py = static_cast<T*>(y.raw());
  auto copy_rows = [&](int64_t begin, int64_t end) {
    int64_t previous = -1;
    for (int64_t row = begin; row < end; ++row) {
      int64_t offset = 0, rest = row;
      for (size_t d = rank - 1; d-- > 0;) {
        offset += source[d][rest % out_shape[d]] * in_strides[d];
        rest /= out_shape[d];
      }
      T* dst = py + row * row_len;
      if (offset == previous) {
        std::memcpy(dst, dst - row_len, static_cast<size_t>(row_len) * sizeof(T));
        continue;
      }
      const T* src = px + offset;
      for (int64_t o = 0; o < row_len; ++o) dst[o] = src[columns[o]];
      previous = offset;
    }
  };
  ParallelFor(y.nbytes() >= (size_t{1} << 18) ? pool : nullptr, rows, copy_rows);
}

class ResizeKernel : public OpKernel {
 public:
  explicit ResizeKernel(const KernelInit& init) {
    const Node& node = init.node;
    const std::string mode = node.GetString("mode", "nearest");
    OCTET_CHECK(mode == "nearest" || mode == "linear", node.Describe(), ": mode '", mode,
                "' is not supported (nearest and linear are)");
    linear_ = mode == "linear";
    // ONNX Runtime interpolates 8-bit data in float, or in fixed point for
    // NHWC-like scales, with its own rounding; octet does not reproduce that.
    OCTET_CHECK(!linear_ || init.input_types[0] == DType::kFloat32, node.Describe(),
                ": linear Resize of ", DTypeName(init.input_types[0]),
                " data is not supported (only nearest is; linear needs float32 data)");
    OCTET_CHECK(node.GetInt("antialias", 0) == 0, node.Describe(), ": antialias is not supported");
    const std::string policy = node.GetString("keep_aspect_ratio_policy", "stretch");
    OCTET_CHECK(policy == "stretch", node.Describe(), ": keep_aspect_ratio_policy '", policy,
                "' is not supported");
    axes_ = node.GetInts("axes");
    if (node.opset < 11) {
      coordinate_ = CoordinateMode::kAsymmetric;
      nearest_ = NearestMode::kSimple;
      return;
    }
    const std::string coord = node.GetString("coordinate_transformation_mode", "half_pixel");
    if (coord == "half_pixel")
      coordinate_ = CoordinateMode::kHalfPixel;
    else if (coord == "pytorch_half_pixel")
      coordinate_ = CoordinateMode::kPytorchHalfPixel;
    else if (coord == "align_corners")
      coordinate_ = CoordinateMode::kAlignCorners;
    else if (coord == "asymmetric")
      coordinate_ = CoordinateMode::kAsymmetric;
    else if (coord == "half_pixel_symmetric")
      coordinate_ = CoordinateMode::kHalfPixelSymmetric;
    else if (coord == "tf_half_pixel_for_nn")
      coordinate_ = CoordinateMode::kTfHalfPixelForNn;
    else
      Fail(node.Describe(), ": coordinate_transformation_mode '", coord, "' is not supported");
    const std::string nearest = node.GetString("nearest_mode", "round_prefer_floor");
    if (nearest == "round_prefer_floor")
      nearest_ = NearestMode::kRoundPreferFloor;
    else if (nearest == "round_prefer_ceil")
      nearest_ = NearestMode::kRoundPreferCeil;
    else if (nearest == "floor")
      nearest_ = NearestMode::kFloor;
    else if (nearest == "ceil")
      nearest_ = NearestMode::kCeil;
    else
      Fail(node.Describe(), ": nearest_mode '", nearest, "' is not valid");
  }

  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.input(0);
    const int64_t rank = static_cast<int64_t>(x.rank());
    OCTET_CHECK(rank >= 1, node.Describe(), ": input must have rank >= 1");
    std::vector<int64_t> axes = axes_;
    if (axes.empty())
      for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
    for (int64_t& a : axes) {
      OCTET_CHECK(a >= -rank && a < rank, node.Describe(), ": axis ", a, " out of range");
      if (a < 0) a += rank;
    }
    std::vector<float> scales(rank, 1.f);
    Shape out_shape = x.shape();
    const int scales_input = node.opset < 11 ? 1 : 2;
    const bool has_sizes = node.opset >= 11 && ctx.has_input(3) && ctx.input(3).numel() > 0;
    const bool has_scales = ctx.has_input(scales_input) && ctx.input(scales_input).numel() > 0;
    OCTET_CHECK(has_sizes != has_scales, node.Describe(),
                ": exactly one of scales and sizes must be given");
    const Tensor& given = ctx.input(has_sizes ? 3 : scales_input);
    OCTET_CHECK(given.numel() == static_cast<int64_t>(axes.size()), node.Describe(), ": ",
                (has_sizes ? "sizes" : "scales"), " has ", given.numel(), " values, expected ",
                axes.size());
    for (size_t i = 0; i < axes.size(); ++i) {
      const int64_t a = axes[i];
      if (has_sizes) {
        out_shape[a] = given.data<int64_t>()[i];
        OCTET_CHECK(out_shape[a] >= 0, node.Describe(), ": sizes must be >= 0");
        scales[a] = x.shape()[a] ? static_cast<float>(out_shape[a]) / x.shape()[a] : 1.f;
      } else {
        scales[a] = given.data<float>()[i];
        OCTET_CHECK(scales[a] > 0, node.Describe(), ": scales must be > 0");
        // Checked before the conversion: a float beyond int64 (or inf) has no size.
        const float size = static_cast<float>(x.shape()[a]) * scales[a];
        OCTET_CHECK(size < 0x1p62f, node.Describe(), ": scale ", scales[a], " makes axis ", a, " (",
                    x.shape()[a], ") too long");
        out_shape[a] = static_cast<int64_t>(size);
      }
    }
    if (x.numel() == 0 || NumElements(out_shape) == 0) {
      ctx.AllocateOutput(0, x.dtype(), out_shape);
      return;
    }
    if (linear_) {
      // Separable: one 1-D interpolation pass per resized axis.
      Tensor current = x;
      for (int64_t a = 0; a < rank; ++a) {
        if (out_shape[a] == x.shape()[a] && scales[a] == 1.f) continue;
        current = LinearAlongAxis(current, a, out_shape[a], scales[a]);
      }
      ctx.SetOutput(0, current.data<float>() == x.data<float>() ? x.Clone() : current);
      return;
    }
    Tensor& y = ctx.AllocateUninitializedOutput(0, x.dtype(), out_shape);
    // An axis with scale 1 maps each index to itself, whatever the coordinate
    // transformation would say (as ONNX Runtime: tf_half_pixel_for_nn with
    // ceil would otherwise shift it by one).
    std::vector<std::vector<int64_t>> source(rank);
    for (int64_t a = 0; a < rank; ++a)
      for (int64_t o = 0; o < out_shape[a]; ++o)
        source[a].push_back(
            scales[a] == 1.f ? o : NearestIndex(o, scales[a], x.shape()[a], out_shape[a]));
    switch (DTypeSize(x.dtype())) {
      case 1:
        return NearestCopy<uint8_t>(x, source, y, ctx.pool());
      case 4:
        return NearestCopy<uint32_t>(x, source, y, ctx.pool());
      default:
        Fail(node.Describe(), ": dtype ", DTypeName(x.dtype()), " not supported");
    }
  }

 private:
  // The input coordinate of output coordinate `o` (float arithmetic, as ONNX Runtime).
  float Original(int64_t o, float scale, int64_t in, int64_t out) const {
    const float x = static_cast<float>(o);
    switch (coordinate_) {
      case CoordinateMode::kHalfPixel:
        return (x + 0.5f) / scale - 0.5f;
      case CoordinateMode::kPytorchHalfPixel:
        return out > 1 ? (x + 0.5f) / scale - 0.5f : 0.f;
      case CoordinateMode::kAlignCorners:
        return out == 1 ? 0.f : x * static_cast<float>(in - 1) / static_cast<float>(out - 1);
      case CoordinateMode::kAsymmetric:
        return x / scale;
      case CoordinateMode::kTfHalfPixelForNn:
        return (x + 0.5f) / scale;
      case CoordinateMode::kHalfPixelSymmetric: {
        const float adjustment = static_cast<float>(out) / (scale * static_cast<float>(in));
        const float center = static_cast<float>(in) / 2.f;
        return center * (1.f - adjustment) + (x + 0.5f) / scale - 0.5f;
      }
    }
    return x;
  }

  int64_t NearestIndex(int64_t o, float scale, int64_t in, int64_t out) const {
    const float x = Original(o, scale, in, out);
    float rounded = 0.f;
    switch (nearest_) {
      case NearestMode::kRoundPreferFloor:
        rounded = x == std::floor(x) + 0.5f ? std::floor(x) : std::round(x);
        break;
      case NearestMode::kRoundPreferCeil:
        rounded = std::round(x);
        break;
      case NearestMode::kFloor:
        rounded = std::floor(x);
        break;
      case NearestMode::kCeil:
        rounded = std::ceil(x);
        break;
      case NearestMode::kSimple:
        rounded = scale < 1.f ? std::ceil(x) : std::trunc(x);
        break;
    }
    return std::clamp<int64_t>(static_cast<int64_t>(rounded), 0, in - 1);
  }

  Tensor LinearAlongAxis(const Tensor& x, int64_t axis, int64_t out_len, float scale) const {
    const int64_t in_len = x.shape()[axis];
    Shape shape = x.shape();
    shape[axis] = out_len;
    Tensor y(DType::kFloat32, shape);
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
    for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
    std::vector<int64_t> lo(out_len), hi(out_len);
    std::vector<float> w_lo(out_len), w_hi(out_len);
    for (int64_t o = 0; o < out_len; ++o) {
      const float c =
          std::clamp(Original(o, scale, in_len, out_len), 0.f, static_cast<float>(in_len - 1));
      lo[o] = std::min(static_cast<int64_t>(c), in_len - 1);
      hi[o] = std::min(lo[o] + 1, in_len - 1);
      w_hi[o] = lo[o] == hi[o] ? 0.5f : c - static_cast<float>(lo[o]);
      w_lo[o] = lo[o] == hi[o] ? 0.5f : 1.f - w_hi[o];
    }
    const float* px = x.data<float>();
    float* py = y.data<float>();
    for (int64_t b = 0; b < outer; ++b)
      for (int64_t o = 0; o < out_len; ++o) {
        const float* a_row = px + (b * in_len + lo[o]) * inner;
        const float* b_row = px + (b * in_len + hi[o]) * inner;
        float* dst = py + (b * out_len + o) * inner;
        for (int64_t i = 0; i < inner; ++i) dst[i] = w_lo[o] * a_row[i] + w_hi[o] * b_row[i];
      }
    return y;
  }

  bool linear_ = false;
  CoordinateMode coordinate_ = CoordinateMode::kHalfPixel;
  NearestMode nearest_ = NearestMode::kRoundPreferFloor;
  std::vector<int64_t> axes_;
};

bool FloatData(const Node&, const std::vector<DType>& t) {
  return std::all_of(t.begin(), t.end(),
                     [](DType d) { return d == DType::kFloat32 || d == DType::kUndefined; });
}

}  // namespace

void RegisterFloatNnOps(KernelRegistry& r) {
  r.Register({kOnnxDomain, "Conv", 1, kLatest, FloatData, FloatOutput, Create<ConvKernel>});
  // MaxPool 1-7 has no Indices output; int8/uint8 data since opset 12.
  r.Register({kOnnxDomain, "MaxPool", 1, kLatest,
              [](const Node& n, const std::vector<DType>& t) {
                return t.size() == 1 &&
                       (t[0] == DType::kFloat32 ||
                        (n.opset >= 12 && OneOf(t[0], {DType::kInt8, DType::kUInt8})));
              },
              [](const Node& n, const std::vector<DType>& t) {
                std::vector<DType> out{t[0]};
                if (n.outputs.size() > 1) out.push_back(DType::kInt64);
                return out;
              },
              [](const KernelInit& init) { return std::make_unique<PoolKernel>(init, true); }});
  r.Register({kOnnxDomain, "AveragePool", 7, kLatest, FloatData, FloatOutput,
              [](const KernelInit& init) { return std::make_unique<PoolKernel>(init, false); }});
  r.Register(
      {kOnnxDomain, "GlobalAveragePool", 1, kLatest, FloatData, FloatOutput,
       [](const KernelInit& init) { return std::make_unique<GlobalPoolKernel>(init, false); }});
  r.Register(
      {kOnnxDomain, "GlobalMaxPool", 1, kLatest, FloatData, FloatOutput,
       [](const KernelInit& init) { return std::make_unique<GlobalPoolKernel>(init, true); }});
  r.Register({kOnnxDomain, "BatchNormalization", 7, kLatest, FloatData,
              [](const Node& n, const std::vector<DType>&) {
                return std::vector<DType>(std::max<size_t>(n.outputs.size(), 1), DType::kFloat32);
              },
              Create<BatchNormKernel>});
  // Nearest copies elements, so 8-bit and int32 data are supported too (as in
  // ONNX Runtime's CPU kernel); linear needs float (checked at creation).
  r.Register({kOnnxDomain, "Resize", 10, kLatest,
              [](const Node& n, const std::vector<DType>& t) {
                if (t.empty() ||
                    !OneOf(t[0], {DType::kFloat32, DType::kInt32, DType::kInt8, DType::kUInt8}))
                  return false;
                if (n.opset < 11) return t.size() == 2 && t[1] == DType::kFloat32;
                return (t.size() < 3 || OneOf(t[2], {DType::kFloat32, DType::kUndefined})) &&
                       (t.size() < 4 || OneOf(t[3], {DType::kInt64, DType::kUndefined}));
              },
              [](const Node&, const std::vector<DType>& t) { return std::vector<DType>{t[0]}; },
              Create<ResizeKernel>});
}

}  // namespace octet
