// com.microsoft QLinearGlobalAveragePool and QLinearAveragePool (uint8 / int8, channels
// first or, with channels_last=1, last), bit for bit with ONNX Runtime 1.31.1's CPU kernels
// (contrib_ops/cpu/quantization/qlinear_global_average_pool.cc, qlinear_pool.cc, MLAS's
// qlgavgpool.cpp); every rule below was checked by experiment against ORT 1.31.1
// (tests/python/test_qlinear_pool.py).
//
// QLinearGlobalAveragePool, and a QLinearAveragePool whose kernel is the whole input with no
// padding (ORT hands that case to the same code, whatever the strides and ceil_mode), sum
// in integers and requantize once (the int8 epilogue's arithmetic, kernels/int8/epilogue.h):
//   acc = sum(x) - x_zero * n             int32 with wrap-around; n = pixels per channel
//   m   = x_scale / (y_scale * float(n))  float32, in this order
//   y   = round_half_even(clamp(float(acc) * m, qmin - y_zero, qmax - y_zero)) + y_zero
// MLAS refuses n >= 2^24 and an m outside [2^-32, 256) (a NaN m passes and gives qmin), even
// for an empty batch; so does octet.
//
// QLinearAveragePool otherwise works in float: a byte is x_scale * float(x - x_zero); each
// window sums its pixels inside the input in float, from 0, in row-major window order; then
//   avg = sum / float(count)    count: the kernel size with count_include_pad, else the
//                               window's pixels inside the input
//   y   = clamp(int32(nearbyint(avg / y_scale + float(y_zero))), qmin, qmax)
// with x86's float -> int32 conversion (out of range or NaN give INT32_MIN, so an average
// too large for int32 gives qmin, as in ORT).
//
// Output sizes are ORT's PoolAttributes, which differ from the float pools' window helper
// at the edges: floor mode is (in + pads - kernel) / stride + 1 in C++ integer division
// (truncating toward zero, so a kernel less than `stride` larger than the padded input
// still gives one window); ceil mode rounds the quotient up and drops a last window starting at
// or after in + pad_begin; SAME_UPPER / SAME_LOWER pad (ceil(in / stride) - 1) * stride +
// kernel - in, halved with truncation and kept when negative (the windows then start
// inside the input). Where an output spatial dim is 0, ORT's channels_last kernel divides by
// zero (SIGFPE) and its NCHW kernel returns the empty tensor; octet returns it in both.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/int8/epilogue.h"
#include "ops/int_params.h"
#include "ops/registry.h"

namespace octet {

namespace {

enum PoolInput { kX = 0, kXScale, kXZero, kYScale, kYZero, kPoolInputCount };

// ORT's limit on the spatial rank of a windowed (not global) QLinearAveragePool.
constexpr size_t kMaxWindowDims = 3;

struct PoolQuantParams {
  float x_scale;
  int32_t x_zero;
  float y_scale;
  int32_t y_zero;
};

PoolQuantParams ReadQuantParams(const KernelContext& ctx, DType type) {
  const Node& node = ctx.node();
  auto scale = [&](size_t i, const char* name) {
    CheckPerTensor(node, ctx.input(i), name);
    return ReadScales(node, ctx.input(i), name)[0];
  };
  auto zero = [&](size_t i, const char* name) {
    if (!ctx.has_input(i)) return 0;  // an omitted y_zero_point (QLinearAveragePool)
    CheckPerTensor(node, ctx.input(i), name);
    return ReadZeroPoints(node, ctx.input(i), type, name)[0];
  };
  return {scale(kXScale, "x_scale"), zero(kXZero, "x_zero_point"), scale(kYScale, "y_scale"),
          zero(kYZero, "y_zero_point")};
}

// ORT 1.31.1 cannot load QLinearGlobalAveragePool without both zero points (its schema
// requires them) nor QLinearAveragePool without x_zero_point (type inference fails); an
// omitted y_zero_point of QLinearAveragePool is 0.
void CheckZeroPointsGiven(const KernelInit& init, bool y_zero_required) {
  for (size_t i : {kXZero, kYZero}) {
    if (i == kYZero && !y_zero_required) continue;
    OCTET_CHECK(i < init.input_types.size() && init.input_types[i] != DType::kUndefined,
                init.node.Describe(), ": ", i == kXZero ? "x_zero_point" : "y_zero_point",
                " is omitted; ONNX Runtime 1.31.1 cannot run this node without it");
  }
}

// What ORT's static_cast<int32_t>(nearbyintf(v)) gives on x86: v rounded half to even, and
// INT32_MIN (cvttss2si's answer) for NaN and values outside int32. The rounding adds and
// subtracts 2^23, where floats are spaced 1 apart (no libm call: this runs per output).
int32_t RoundToInt32LikeX86(float v) {
  if (!(v < 0x1p23f && v > -0x1p23f)) return TruncateToInt32LikeX86(v);  // integral or NaN
  return TruncateToInt32LikeX86(v >= 0.f ? (v + 0x1p23f) - 0x1p23f : (v - 0x1p23f) + 0x1p23f);
}

// ---- Integer global average ----------------------------------------------------------

// Sums `count` bytes of 8-bit type T with uint32 wrap-around (MLAS adds in int32).
template <typename T>
uint32_t SumBytes(const T* x, int64_t count) {
  uint32_t sum = 0;
  for (int64_t i = 0; i < count; ++i) sum += static_cast<uint32_t>(static_cast<int32_t>(x[i]));
  return sum;
}

// The global average of `batch` images of `channels` x `image` pixels (NCHW when
// !channels_last, else NHWC) into batch * channels outputs.
void GlobalAverage(const Node& node, const uint8_t* x, uint8_t* y, DType type,
                   const PoolQuantParams& q, int64_t batch, int64_t channels, int64_t image,
                   bool channels_last, ThreadPool* pool) {
  OCTET_CHECK(image < (int64_t{1} << 24), node.Describe(), ": ", image,
              " pixels per channel; ONNX Runtime's limit is 2^24 - 1");
  const float multiplier = q.x_scale / (q.y_scale * static_cast<float>(image));
  OCTET_CHECK(!(multiplier < 0x1.0p-32f || multiplier >= 256.0f), node.Describe(),
              ": x_scale / (y_scale * pixels) = ", multiplier,
              " is outside [2^-32, 256), which ONNX Runtime refuses");
  // -x_zero * image in int32, wrapping as the x86 multiply does.
  const int32_t bias =
      static_cast<int32_t>(static_cast<uint32_t>(-q.x_zero) * static_cast<uint32_t>(image));
  Epilogue e;
  e.output = EightBitOutput(type);
  e.multiplier = {&multiplier};
  e.bias = {&bias};
  e.zero_point = q.y_zero;
  const Isa isa = ActiveIsa();
  auto sum = [&](int64_t offset, int64_t count) {
    return type == DType::kInt8 ? SumBytes(reinterpret_cast<const int8_t*>(x) + offset, count)
                                : SumBytes(x + offset, count);
  };
  if (!channels_last || channels == 1) {
    // One output per contiguous (n, c) row of `image` pixels.
    ParallelFor(pool, batch * channels, [&](int64_t begin, int64_t end) {
      std::vector<int32_t> acc(static_cast<size_t>(end - begin));
      for (int64_t r = begin; r < end; ++r)
        acc[r - begin] = static_cast<int32_t>(sum(r * image, image));
      ApplyEpilogueBlock(e, acc.data(), end - begin, 0, 1, 0, end - begin, y + begin, end - begin,
                         isa);
    });
    return;
  }
  ParallelFor(pool, batch, [&](int64_t begin, int64_t end) {
    std::vector<uint32_t> acc(static_cast<size_t>(channels));
    for (int64_t n = begin; n < end; ++n) {
      std::fill(acc.begin(), acc.end(), 0u);
      const uint8_t* image_bytes = x + n * image * channels;
      for (int64_t p = 0; p < image; ++p) {
        const uint8_t* pixel = image_bytes + p * channels;
        if (type == DType::kInt8) {
          for (int64_t c = 0; c < channels; ++c)
            acc[c] += static_cast<uint32_t>(static_cast<int32_t>(static_cast<int8_t>(pixel[c])));
        } else {
          for (int64_t c = 0; c < channels; ++c) acc[c] += pixel[c];
        }
      }
      ApplyEpilogueBlock(e, reinterpret_cast<const int32_t*>(acc.data()), channels, 0, 1, 0,
                         channels, y + n * channels, channels, isa);
    }
  });
}

Shape GlobalOutputShape(const Shape& x_shape, bool channels_last) {
  Shape out = x_shape;
  const size_t first = channels_last ? 1 : 2;
  for (size_t d = first; d < first + x_shape.size() - 2; ++d) out[d] = 1;
  return out;
}

class QLinearGlobalAveragePoolKernel : public OpKernel {
 public:
  explicit QLinearGlobalAveragePoolKernel(const KernelInit& init)
      : channels_last_(init.node.GetInt("channels_last", 0) != 0) {
    CheckZeroPointsGiven(init, true);
  }

  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.input(kX);
    OCTET_CHECK(x.rank() >= 3, node.Describe(), ": input shape ", ShapeToString(x.shape()),
                " must have at least 3 dims (N, C, spatial...)");
    const PoolQuantParams q = ReadQuantParams(ctx, x.dtype());
    const int64_t channels = channels_last_ ? x.shape().back() : x.dim(1);
    int64_t image = 1;
    for (size_t d = channels_last_ ? 1 : 2, i = 0; i < x.rank() - 2; ++d, ++i) image *= x.dim(d);
    Tensor& y =
        ctx.AllocateUninitializedOutput(0, x.dtype(), GlobalOutputShape(x.shape(), channels_last_));
    GlobalAverage(node, static_cast<const uint8_t*>(x.raw()), static_cast<uint8_t*>(y.raw()),
                  x.dtype(), q, x.dim(0), channels, image, channels_last_, ctx.pool());
  }

 private:
  bool channels_last_;
};

// ---- Windowed average -------------------------------------------------------------------

struct PoolAttrs {
  std::vector<int64_t> kernel, strides, pads;  // pads: all begins, then all ends
  std::string auto_pad;
  bool ceil_mode = false;
  bool count_include_pad = false;
  bool channels_last = false;
};

// Reads and checks the attributes as ORT does when it creates the kernel.
PoolAttrs ReadPoolAttrs(const Node& node) {
  PoolAttrs a;
  a.kernel = node.GetInts("kernel_shape");
  const size_t dims = a.kernel.size();
  OCTET_CHECK(dims > 0, node.Describe(), ": attribute 'kernel_shape' is required");
  a.strides = node.GetInts("strides");
  if (a.strides.empty()) a.strides.assign(dims, 1);
  a.pads = node.GetInts("pads");
  if (a.pads.empty()) a.pads.assign(2 * dims, 0);
  OCTET_CHECK(a.strides.size() == dims && a.pads.size() == 2 * dims, node.Describe(),
              ": 'strides' needs ", dims, " values and 'pads' ", 2 * dims,
              " (one per kernel dim), got ", a.strides.size(), " and ", a.pads.size());
  OCTET_CHECK(!node.FindAttribute("dilations"), node.Describe(),
              ": attribute 'dilations' is not part of QLinearAveragePool");
  for (size_t d = 0; d < dims; ++d) {
    OCTET_CHECK(a.kernel[d] > 0 && a.strides[d] > 0, node.Describe(),
                ": kernel_shape and strides must be positive");
    OCTET_CHECK(a.pads[d] >= 0 && a.pads[d + dims] >= 0 && a.pads[d] < a.kernel[d] &&
                    a.pads[d + dims] < a.kernel[d],
                node.Describe(), ": pads must be >= 0 and smaller than the kernel");
  }
  a.auto_pad = node.GetString("auto_pad", "NOTSET");
  OCTET_CHECK(a.auto_pad == "NOTSET" || a.auto_pad == "VALID" || a.auto_pad == "SAME_UPPER" ||
                  a.auto_pad == "SAME_LOWER",
              node.Describe(), ": auto_pad '", a.auto_pad, "' is not valid");
  a.ceil_mode = node.GetInt("ceil_mode", 0) != 0;
  a.count_include_pad = node.GetInt("count_include_pad", 0) != 0;
  a.channels_last = node.GetInt("channels_last", 0) != 0;
  return a;
}

// One spatial dim of the windows: output j covers input [j * stride - pad_begin, + kernel)
// clipped to [0, in).
struct WindowDim {
  int64_t in = 1, kernel = 1, stride = 1, pad_begin = 0, out = 1;
  int64_t begin(int64_t j) const { return std::max<int64_t>(j * stride - pad_begin, 0); }
  int64_t end(int64_t j) const { return std::min(j * stride - pad_begin + kernel, in); }
};

// ORT's PoolAttributes::ComputeSizePadDilations for one dim (see the file comment); sets
// `pad_total` to the pads the dim really has (auto_pad overrides `pads`).
WindowDim MakeWindowDim(const Node& node, const PoolAttrs& a, size_t d, int64_t in,
                        int64_t& pad_total) {
  const size_t dims = a.kernel.size();
  WindowDim w{in, a.kernel[d], a.strides[d], a.pads[d], 1};
  int64_t pad_end = a.pads[d + dims];
  if (a.auto_pad == "VALID") {
    w.pad_begin = pad_end = 0;
  } else if (a.auto_pad != "NOTSET") {
    const int64_t needed = ((in + w.stride - 1) / w.stride - 1) * w.stride + w.kernel - in;
    w.pad_begin = a.auto_pad == "SAME_UPPER" ? needed / 2 : (needed + 1) / 2;
    pad_end = needed - w.pad_begin;
  }
  const int64_t span = in + w.pad_begin + pad_end - w.kernel;
  if (!a.ceil_mode) {
    w.out = span / w.stride + 1;
  } else {
    w.out = (span > 0 ? (span + w.stride - 1) / w.stride : span / w.stride) + 1;
    if ((w.out - 1) * w.stride >= in + w.pad_begin) --w.out;
  }
  OCTET_CHECK(w.out >= 0, node.Describe(), ": the output size along spatial dim ", d, " is ", w.out,
              " (kernel_shape, pads and strides do not fit the input)");
  pad_total = w.pad_begin + pad_end;
  return w;
}

class QLinearAveragePoolKernel : public OpKernel {
 public:
  explicit QLinearAveragePoolKernel(const KernelInit& init) : attrs_(ReadPoolAttrs(init.node)) {
    CheckZeroPointsGiven(init, false);
  }

  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.input(kX);
    const DType type = x.dtype();
    const size_t dims = attrs_.kernel.size();
    OCTET_CHECK(x.rank() >= 3 && x.rank() == dims + 2, node.Describe(), ": input shape ",
                ShapeToString(x.shape()), " must be (N, C, spatial...) with ", dims,
                " spatial dims (kernel_shape ", ShapeToString(attrs_.kernel), ")");
    const PoolQuantParams q = ReadQuantParams(ctx, type);
    // The shape as (N, C, spatial...) whatever the layout.
    Shape nchw = x.shape();
    if (attrs_.channels_last) {
      nchw.insert(nchw.begin() + 1, nchw.back());
      nchw.pop_back();
    }
    OCTET_CHECK(x.numel() > 0 || nchw[0] == 0, node.Describe(), ": input shape ",
                ShapeToString(x.shape()), " is empty outside the batch dim");
    std::vector<WindowDim> windows;
    bool global = true;
    for (size_t d = 0; d < dims; ++d) {
      int64_t pad_total = 0;
      windows.push_back(MakeWindowDim(node, attrs_, d, nchw[2 + d], pad_total));
      global = global && pad_total == 0 && attrs_.kernel[d] == nchw[2 + d];
    }
    Shape out_shape = {nchw[0]};
    if (!attrs_.channels_last) out_shape.push_back(nchw[1]);
    for (const WindowDim& w : windows) out_shape.push_back(w.out);
    if (attrs_.channels_last) out_shape.push_back(nchw[1]);
    Tensor& y = ctx.AllocateUninitializedOutput(0, type, out_shape);
    const uint8_t* px = static_cast<const uint8_t*>(x.raw());
    uint8_t* py = static_cast<uint8_t*>(y.raw());
    if (global) {
      int64_t image = 1;
      for (size_t d = 0; d < dims; ++d) image *= nchw[2 + d];
      GlobalAverage(node, px, py, type, q, nchw[0], nchw[1], image, attrs_.channels_last,
                    ctx.pool());
      return;
    }
    OCTET_CHECK(dims <= kMaxWindowDims, node.Describe(), ": ", dims,
                " spatial dims; ONNX Runtime pools 1 to 3 (or the whole input)");
    // Lower ranks become 3-D with leading size-1 dims (same order, same arithmetic).
    windows.insert(windows.begin(), kMaxWindowDims - dims, WindowDim{});
    WindowedAverage(px, py, type, q, nchw[0], nchw[1], windows, ctx.pool());
  }

 private:
  void WindowedAverage(const uint8_t* x, uint8_t* y, DType type, const PoolQuantParams& q,
                       int64_t batch, int64_t channels, const std::vector<WindowDim>& w,
                       ThreadPool* pool) const {
    float dequantized[256];
    for (int b = 0; b < 256; ++b)
      dequantized[b] = q.x_scale * static_cast<float>(ByteValue(b, type) - q.x_zero);
    const int32_t qmin = type == DType::kInt8 ? -128 : 0;
    const float y_zero = static_cast<float>(q.y_zero);
    const int64_t kernel_size = w[0].kernel * w[1].kernel * w[2].kernel;
    const int64_t in_image = w[0].in * w[1].in * w[2].in;
    const int64_t out_image = w[0].out * w[1].out * w[2].out;
    auto quantize = [&](float sum, int64_t count) {
      const float average = sum / static_cast<float>(count);
      const int32_t v = RoundToInt32LikeX86(average / q.y_scale + y_zero);
      return static_cast<uint8_t>(std::clamp(v, qmin, qmin + 255));
    };
    // Calls fn(window pixel offset within an image) over output `o`'s window in ORT's
    // order and returns the divisor (the channels_last path).
    auto for_window = [&](int64_t o, auto&& fn) {
      const int64_t j2 = o % w[2].out, j1 = o / w[2].out % w[1].out, j0 = o / w[2].out / w[1].out;
      const int64_t b0 = w[0].begin(j0), e0 = w[0].end(j0), b1 = w[1].begin(j1), e1 = w[1].end(j1),
                    b2 = w[2].begin(j2), e2 = w[2].end(j2);
      for (int64_t i0 = b0; i0 < e0; ++i0)
        for (int64_t i1 = b1; i1 < e1; ++i1)
          for (int64_t i2 = b2; i2 < e2; ++i2) fn((i0 * w[1].in + i1) * w[2].in + i2);
      return attrs_.count_include_pad ? kernel_size : (e0 - b0) * (e1 - b1) * (e2 - b2);
    };
    if (!attrs_.channels_last) {
      // Runs of kLanes outputs along the last dim are summed together from a dequantized
      // copy of the plane whose rows are padded with 0.f: each output still adds its own taps
      // in ORT's order, and a tap outside the input adds 0.f, which leaves every sum
      // unchanged (up to the sign of a zero sum, which quantizes alike).
      constexpr int64_t kLanes = 8;
      const WindowDim& last = w[2];
      const int64_t runs = (last.out + kLanes - 1) / kLanes;
      const int64_t lead = std::max<int64_t>(last.pad_begin, 0);  // zeros before a row
      const int64_t row_length = std::max(
          lead + last.in, lead - last.pad_begin + (runs * kLanes - 1) * last.stride + last.kernel);
      ParallelFor(pool, batch * channels, [&](int64_t begin, int64_t end) {
        std::vector<float> rows(static_cast<size_t>(w[0].in * w[1].in * row_length), 0.f);
        for (int64_t plane = begin; plane < end; ++plane) {
          const uint8_t* image = x + plane * in_image;
          for (int64_t r = 0; r < w[0].in * w[1].in; ++r)
            for (int64_t i2 = 0; i2 < last.in; ++i2)
              rows[r * row_length + lead + i2] = dequantized[image[r * last.in + i2]];
          uint8_t* out = y + plane * out_image;
          for (int64_t j0 = 0; j0 < w[0].out; ++j0) {
            for (int64_t j1 = 0; j1 < w[1].out; ++j1) {
              const int64_t b0 = w[0].begin(j0), e0 = w[0].end(j0), b1 = w[1].begin(j1),
                            e1 = w[1].end(j1);
              for (int64_t j2 = 0; j2 < last.out; j2 += kLanes) {
                float sums[kLanes] = {};
                for (int64_t i0 = b0; i0 < e0; ++i0) {
                  for (int64_t i1 = b1; i1 < e1; ++i1) {
                    const float* row = rows.data() + (i0 * w[1].in + i1) * row_length + lead -
                                       last.pad_begin + j2 * last.stride;
                    for (int64_t t = 0; t < last.kernel; ++t)
                      for (int64_t l = 0; l < kLanes; ++l) sums[l] += row[l * last.stride + t];
                  }
                }
                for (int64_t l = 0; l < std::min(kLanes, last.out - j2); ++l) {
                  const int64_t count =
                      attrs_.count_include_pad
                          ? kernel_size
                          : (e0 - b0) * (e1 - b1) * (last.end(j2 + l) - last.begin(j2 + l));
                  out[(j0 * w[1].out + j1) * last.out + j2 + l] = quantize(sums[l], count);
                }
              }
            }
          }
        }
      });
      return;
    }
    ParallelFor(pool, batch * out_image, [&](int64_t begin, int64_t end) {
      std::vector<float> sums(static_cast<size_t>(channels));
      // The current image dequantized once, so that the window sums add whole pixels of
      // floats (vectorizable).
      std::vector<float> image(static_cast<size_t>(in_image * channels));
      int64_t image_n = -1;
      for (int64_t i = begin; i < end; ++i) {
        const int64_t n = i / out_image, o = i % out_image;
        if (n != image_n) {
          const uint8_t* bytes = x + n * in_image * channels;
          for (size_t k = 0; k < image.size(); ++k) image[k] = dequantized[bytes[k]];
          image_n = n;
        }
        std::fill(sums.begin(), sums.end(), 0.f);
        const int64_t count = for_window(o, [&](int64_t p) {
          const float* pixel = image.data() + p * channels;
          for (int64_t c = 0; c < channels; ++c) sums[c] += pixel[c];
        });
        for (int64_t c = 0; c < channels; ++c) y[i * channels + c] = quantize(sums[c], count);
      }
    });
  }

  PoolAttrs attrs_;
};

bool AcceptsPool(const Node&, const std::vector<DType>& t) {
  if (t.size() < kYScale + 1 || t.size() > kPoolInputCount || !Is8Bit(t[kX])) return false;
  for (size_t zero : {kXZero, kYZero})
    if (zero < t.size() && t[zero] != DType::kUndefined && t[zero] != t[kX]) return false;
  return t[kXScale] == DType::kFloat32 && t[kYScale] == DType::kFloat32;
}

}  // namespace

void RegisterQLinearPoolOps(KernelRegistry& r) {
  auto same_as_x = [](const Node&, const std::vector<DType>& t) {
    return std::vector<DType>{t[kX]};
  };
  r.Register({kMsDomain, "QLinearGlobalAveragePool", 1, 1 << 30, AcceptsPool, same_as_x,
              [](const KernelInit& init) {
                return std::make_unique<QLinearGlobalAveragePoolKernel>(init);
              }});
  r.Register(
      {kMsDomain, "QLinearAveragePool", 1, 1 << 30, AcceptsPool, same_as_x,
       [](const KernelInit& init) { return std::make_unique<QLinearAveragePoolKernel>(init); }});
}

}  // namespace octet
