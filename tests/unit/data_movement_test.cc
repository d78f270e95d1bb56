// Data movement and pooling fast paths (kernels/strided_copy.h, Transpose,
// Slice, Concat, MaxPool, nearest Resize) against naive index loops written
// here, on one thread and split over two.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <random>

#include "core/thread_pool.h"
#include "int_op_test_util.h"
#include "kernels/strided_copy.h"
#include "ops/registry.h"

namespace octet {
namespace {

using int_test::ExpectError;
using int_test::MakeTensor;

Tensor RandomBytes(DType dtype, Shape shape, uint32_t seed) {
  Tensor t(dtype, std::move(shape));
  std::mt19937 rng(seed);
  auto* p = static_cast<uint8_t*>(t.raw());
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>(rng());
  return t;
}

void ExpectSameBytes(const Tensor& actual, const Tensor& expected) {
  ASSERT_EQ(actual.dtype(), expected.dtype());
  ASSERT_EQ(actual.shape(), expected.shape());
  EXPECT_EQ(std::memcmp(actual.raw(), expected.raw(), actual.nbytes()), 0);
}

std::vector<int64_t> RowMajorStrides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

// out[index] = in[offset + sum(index_d * strides_d)], one element at a time.
Tensor NaiveGather(const Tensor& in, const Shape& out_shape, int64_t offset,
                   const std::vector<int64_t>& strides) {
  Tensor out(in.dtype(), out_shape);
  const size_t elem = DTypeSize(in.dtype());
  for (int64_t flat = 0; flat < out.numel(); ++flat) {
    int64_t rest = flat, source = offset;
    for (size_t d = out_shape.size(); d-- > 0;) {
      source += (rest % out_shape[d]) * strides[d];
      rest /= out_shape[d];
    }
    std::memcpy(static_cast<uint8_t*>(out.raw()) + flat * elem,
                static_cast<const uint8_t*>(in.raw()) + source * elem, elem);
  }
  return out;
}

const DType kElementTypes[] = {DType::kUInt8, DType::kFloat16, DType::kFloat32, DType::kInt64};

// ---- StridedCopy / Transpose ---------------------------------------------------

TEST(StridedCopy, EveryPermutationOfRanks2To5) {
  ThreadPool two(2);
  const Shape shapes[] = {{5, 3},       {3, 1, 7}, {2, 3, 5, 7}, {3, 1, 5, 2, 3},
                          {1, 4, 1, 6}, {17, 33},  {19, 2, 37}};
  for (const Shape& shape : shapes) {
    const size_t rank = shape.size();
    const std::vector<int64_t> in_strides = RowMajorStrides(shape);
    for (DType dtype : kElementTypes) {
      const Tensor x = RandomBytes(dtype, shape, 7);
      std::vector<int64_t> perm(rank);
      std::iota(perm.begin(), perm.end(), 0);
      do {
        SCOPED_TRACE(ShapeToString(shape) + " perm " + ShapeToString(perm) + " " +
                     DTypeName(dtype));
        Shape out_shape;
        std::vector<int64_t> strides;
        for (int64_t p : perm) {
          out_shape.push_back(shape[p]);
          strides.push_back(in_strides[p]);
        }
        const Tensor expected = NaiveGather(x, out_shape, 0, strides);
        Tensor actual(dtype, out_shape);
        StridedCopy(x.raw(), actual.raw(), DTypeSize(dtype), out_shape, strides, nullptr);
        ExpectSameBytes(actual, expected);
        ExpectSameBytes(
            int_test::RunNode("Transpose", 13, {x}, {{"perm", Attribute::Ints(perm)}}, &two),
            expected);
      } while (std::next_permutation(perm.begin(), perm.end()));
    }
  }
}

TEST(StridedCopy, LargeCopiesSplitOverThreadsGiveTheSameBytes) {
  ThreadPool two(2);
  const Shape shape{37, 129, 67};
  for (DType dtype : {DType::kUInt8, DType::kFloat32, DType::kInt64}) {
    const Tensor x = RandomBytes(dtype, shape, 11);
    for (const std::vector<int64_t>& perm :
         std::vector<std::vector<int64_t>>{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {2, 1, 0}, {1, 2, 0}}) {
      SCOPED_TRACE(ShapeToString(perm) + " " + DTypeName(dtype));
      std::vector<int64_t> strides;
      Shape out_shape;
      for (int64_t p : perm) {
        out_shape.push_back(shape[p]);
        strides.push_back(RowMajorStrides(shape)[p]);
      }
      const Tensor expected = NaiveGather(x, out_shape, 0, strides);
      Tensor actual(dtype, out_shape);
      StridedCopy(x.raw(), actual.raw(), DTypeSize(dtype), out_shape, strides, &two);
      ExpectSameBytes(actual, expected);
    }
  }
}

TEST(StridedCopy, NegativeZeroAndMergeableStrides) {
  const Tensor x = RandomBytes(DType::kFloat32, {4, 6, 10}, 3);
  struct Case {
    Shape shape;
    int64_t offset;
    std::vector<int64_t> strides;
  };
  const Case cases[] = {
      {{4, 6, 10}, 239, {-60, -10, -1}},  // everything reversed
      {{4, 3, 10}, 10, {60, 20, 1}},      // every other row
      {{4, 6, 5}, 1, {60, 10, 2}},        // odd columns
      {{3, 6, 10}, 0, {0, 10, 1}},        // broadcast first dim
      {{2, 2, 5}, 0, {120, 60, 1}},       // rows that merge into one run
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(ShapeToString(c.shape) + " strides " + ShapeToString(c.strides));
    Tensor actual(DType::kFloat32, c.shape);
    StridedCopy(x.data<float>() + c.offset, actual.raw(), 4, c.shape, c.strides, nullptr);
    ExpectSameBytes(actual, NaiveGather(x, c.shape, c.offset, c.strides));
  }
}

// Every other element on the last axis (stride-2 Slices, a path of its own),
// for each element size, both parities of start and row lengths around the
// vector widths.
TEST(StridedCopy, EveryOtherElementOfEachSize) {
  for (DType dtype : {DType::kUInt8, DType::kFloat16, DType::kFloat32, DType::kInt64}) {
    for (int64_t n : {1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100}) {
      for (int64_t offset : {0, 1}) {
        const Tensor x = RandomBytes(dtype, {3, 2 * n + 1}, static_cast<uint32_t>(n));
        const Shape shape{3, n};
        const std::vector<int64_t> strides{2 * n + 1, 2};
        SCOPED_TRACE(std::string(DTypeName(dtype)) + " n " + std::to_string(n) + " offset " +
                     std::to_string(offset));
        Tensor actual(dtype, shape);
        const size_t elem = DTypeSize(dtype);
        StridedCopy(static_cast<const uint8_t*>(x.raw()) + offset * elem, actual.raw(), elem, shape,
                    strides, nullptr);
        ExpectSameBytes(actual, NaiveGather(x, shape, offset, strides));
      }
    }
  }
}

TEST(StridedCopy, RejectsAnUnknownElementSize) {
  uint8_t src[16] = {}, dst[16] = {};
  ExpectError([&] { StridedCopy(src, dst, 3, {2}, {1}, nullptr); }, {"element size 3"});
}

// ---- Slice ---------------------------------------------------------------------

// Python's slice.indices(): the selected indices of one axis.
std::vector<int64_t> PythonSlice(int64_t start, int64_t stop, int64_t step, int64_t dim) {
  auto adjust = [&](int64_t v) {
    if (v < 0) {
      v += dim;
      if (v < 0) v = step < 0 ? -1 : 0;
    } else if (v >= dim) {
      v = step < 0 ? dim - 1 : dim;
    }
    return v;
  };
  const int64_t b = adjust(start), e = adjust(stop);
  std::vector<int64_t> out;
  for (int64_t i = b; step > 0 ? i < e : i > e; i += step) out.push_back(i);
  return out;
}

TEST(Slice, StepsNegativeStepsAndClampedEndsMatchPythonSlicing) {
  ThreadPool two(2);
  const Shape shape{3, 64, 1, 70};
  struct Case {
    std::vector<int64_t> starts, ends, axes, steps;
  };
  const Case cases[] = {
      {{0, 0}, {1000, 1000}, {1, 3}, {2, 2}},  // Focus: every other row and column
      {{1, 1}, {1000, 1000}, {1, 3}, {2, 2}},
      {{-1}, {-1000}, {3}, {-1}},              // reversed last axis
      {{50, -2}, {3, 5}, {1, -1}, {-7, -3}},   // negative steps, negative axis
      {{-100, 5}, {100, -5}, {0, 3}, {1, 3}},  // clamped starts and ends
      {{2}, {2}, {1}, {1}},                    // empty
      {{0, 0}, {3, 1}, {0, 2}, {1, 1}},        // the whole tensor
  };
  for (DType dtype : kElementTypes) {
    const Tensor x = RandomBytes(dtype, shape, 5);
    for (const Case& c : cases) {
      SCOPED_TRACE(ShapeToString(c.starts) + ShapeToString(c.ends) + ShapeToString(c.axes) +
                   ShapeToString(c.steps) + " " + DTypeName(dtype));
      // Reference: the per-axis index lists, then a naive multi-index copy.
      std::vector<std::vector<int64_t>> picks(shape.size());
      for (size_t d = 0; d < shape.size(); ++d) picks[d] = PythonSlice(0, shape[d], 1, shape[d]);
      for (size_t i = 0; i < c.axes.size(); ++i) {
        const size_t axis = static_cast<size_t>(c.axes[i] < 0 ? c.axes[i] + 4 : c.axes[i]);
        picks[axis] = PythonSlice(c.starts[i], c.ends[i], c.steps[i], shape[axis]);
      }
      Shape out_shape;
      for (const auto& p : picks) out_shape.push_back(static_cast<int64_t>(p.size()));
      Tensor expected(dtype, out_shape);
      const size_t elem = DTypeSize(dtype);
      const std::vector<int64_t> in_strides = RowMajorStrides(shape);
      for (int64_t flat = 0; flat < expected.numel(); ++flat) {
        int64_t rest = flat, source = 0;
        for (size_t d = out_shape.size(); d-- > 0;) {
          source += picks[d][rest % out_shape[d]] * in_strides[d];
          rest /= out_shape[d];
        }
        std::memcpy(static_cast<uint8_t*>(expected.raw()) + flat * elem,
                    static_cast<const uint8_t*>(x.raw()) + source * elem, elem);
      }
      const Tensor starts = MakeTensor<int64_t>({static_cast<int64_t>(c.starts.size())}, c.starts);
      const Tensor ends = MakeTensor<int64_t>({static_cast<int64_t>(c.ends.size())}, c.ends);
      const Tensor axes = MakeTensor<int64_t>({static_cast<int64_t>(c.axes.size())}, c.axes);
      const Tensor steps = MakeTensor<int64_t>({static_cast<int64_t>(c.steps.size())}, c.steps);
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &two})
        ExpectSameBytes(int_test::RunNode("Slice", 13, {x, starts, ends, axes, steps}, {}, pool),
                        expected);
    }
  }
}

// ---- Concat --------------------------------------------------------------------

TEST(Concat, LargeAndSmallBlocksOnEveryAxis) {
  ThreadPool two(2);
  for (const Shape& base : std::vector<Shape>{{2, 3, 5}, {3, 300, 257}}) {
    for (int64_t axis = 0; axis < 3; ++axis) {
      std::vector<Tensor> inputs;
      for (int64_t i = 0; i < 3; ++i) {
        Shape s = base;
        s[axis] += i;
        inputs.push_back(RandomBytes(DType::kFloat32, s, static_cast<uint32_t>(i)));
      }
      Shape out_shape = base;
      out_shape[axis] = 3 * base[axis] + 3;
      Tensor expected(DType::kFloat32, out_shape);
      const std::vector<int64_t> out_strides = RowMajorStrides(out_shape);
      int64_t at = 0;
      for (const Tensor& in : inputs) {
        const std::vector<int64_t> in_strides = RowMajorStrides(in.shape());
        for (int64_t flat = 0; flat < in.numel(); ++flat) {
          int64_t target = 0;
          for (size_t d = 0; d < 3; ++d) {
            const int64_t i = flat / in_strides[d] % in.shape()[d];
            target += (d == static_cast<size_t>(axis) ? i + at : i) * out_strides[d];
          }
          expected.data<float>()[target] = in.data<float>()[flat];
        }
        at += in.shape()[axis];
      }
      SCOPED_TRACE(ShapeToString(base) + " axis " + std::to_string(axis));
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &two})
        ExpectSameBytes(int_test::RunNode("Concat", 13, {inputs.begin(), inputs.end()},
                                          {{"axis", Attribute::Int(axis)}}, pool),
                        expected);
    }
  }
}

// ---- MaxPool -------------------------------------------------------------------

struct PoolCase {
  Shape x_shape;
  std::vector<int64_t> kernel, strides, dilations, pads;
  bool ceil_mode = false;
  std::string auto_pad = "NOTSET";
};

// Output extent and padding of one spatial axis, written out from the ONNX
// MaxPool definition.
struct AxisGeometry {
  int64_t out, pad_begin;
};

AxisGeometry Geometry(const PoolCase& c, size_t i) {
  const size_t n = c.kernel.size();
  const int64_t in = c.x_shape[2 + i];
  const int64_t stride = c.strides.empty() ? 1 : c.strides[i];
  const int64_t dilation = c.dilations.empty() ? 1 : c.dilations[i];
  const int64_t extent = (c.kernel[i] - 1) * dilation + 1;
  if (c.auto_pad == "SAME_UPPER" || c.auto_pad == "SAME_LOWER") {
    const int64_t out = (in + stride - 1) / stride;
    const int64_t total = std::max<int64_t>(0, (out - 1) * stride + extent - in);
    return {out, c.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2};
  }
  const int64_t pb = c.pads.empty() ? 0 : c.pads[i], pe = c.pads.empty() ? 0 : c.pads[i + n];
  const double span = static_cast<double>(in + pb + pe - extent) / static_cast<double>(stride);
  int64_t out = static_cast<int64_t>(c.ceil_mode ? std::ceil(span) : std::floor(span)) + 1;
  if (c.ceil_mode && (out - 1) * stride >= in + pb) --out;
  return {out, pb};
}

// The generic scan: the first tap inside the input, replaced by every later
// tap that is strictly greater (so a leading NaN stays, later NaNs never win).
template <typename T>
Tensor NaiveMaxPool(const Tensor& x, const PoolCase& c) {
  const size_t n = c.kernel.size();
  std::vector<AxisGeometry> g;
  Shape out_shape{x.dim(0), x.dim(1)};
  for (size_t i = 0; i < n; ++i) {
    g.push_back(Geometry(c, i));
    out_shape.push_back(g[i].out);
  }
  Tensor y(x.dtype(), out_shape);
  const int64_t planes = x.dim(0) * x.dim(1);
  const int64_t in_size = x.numel() / planes, out_size = y.numel() / planes;
  const int64_t taps = NumElements(c.kernel);
  for (int64_t plane = 0; plane < planes; ++plane)
    for (int64_t pos = 0; pos < out_size; ++pos) {
      T best = std::is_floating_point_v<T> ? -std::numeric_limits<T>::infinity()
                                           : std::numeric_limits<T>::lowest();
      bool found = false;
      for (int64_t t = 0; t < taps; ++t) {
        int64_t offset = 0, o_rest = pos, k_rest = t;
        bool inside = true;
        std::vector<int64_t> index(n);
        for (size_t i = n; i-- > 0;) {
          const int64_t o = o_rest % g[i].out, k = k_rest % c.kernel[i];
          o_rest /= g[i].out;
          k_rest /= c.kernel[i];
          const int64_t stride = c.strides.empty() ? 1 : c.strides[i];
          const int64_t dilation = c.dilations.empty() ? 1 : c.dilations[i];
          index[i] = o * stride - g[i].pad_begin + k * dilation;
          inside = inside && index[i] >= 0 && index[i] < c.x_shape[2 + i];
        }
        if (!inside) continue;
        for (size_t i = 0; i < n; ++i) offset = offset * c.x_shape[2 + i] + index[i];
        const T v = static_cast<const T*>(x.raw())[plane * in_size + offset];
        if (!found || v > best) best = v;
        found = true;
      }
      static_cast<T*>(y.raw())[plane * out_size + pos] = best;
    }
  return y;
}

std::map<std::string, Attribute> PoolAttributes(const PoolCase& c) {
  std::map<std::string, Attribute> a{{"kernel_shape", Attribute::Ints(c.kernel)}};
  if (!c.strides.empty()) a["strides"] = Attribute::Ints(c.strides);
  if (!c.dilations.empty()) a["dilations"] = Attribute::Ints(c.dilations);
  if (!c.pads.empty()) a["pads"] = Attribute::Ints(c.pads);
  if (c.ceil_mode) a["ceil_mode"] = Attribute::Int(1);
  if (c.auto_pad != "NOTSET") a["auto_pad"] = Attribute::String(c.auto_pad);
  return a;
}

const PoolCase kPoolCases[] = {
    {{1, 6, 13, 13}, {5, 5}, {}, {}, {2, 2, 2, 2}},  // the SPP block of YOLO-style detectors
    {{1, 6, 13, 13}, {13, 13}, {}, {}, {6, 6, 6, 6}},
    {{2, 3, 11, 9}, {3, 2}, {2, 3}, {}, {1, 0, 1, 1}, true},
    {{1, 2, 10, 12}, {3, 3}, {1, 2}, {2, 3}, {2, 1, 0, 2}},
    {{1, 2, 9, 8}, {2, 2}, {2, 2}, {}, {}, false, "SAME_LOWER"},
    {{1, 2, 9, 8}, {4, 3}, {3, 1}, {}, {}, false, "SAME_UPPER"},
    {{1, 3, 17}, {4}, {3}, {2}, {1, 2}, true},
    {{1, 2, 5, 6, 7}, {2, 3, 2}, {1, 2, 2}, {2, 1, 1}, {1, 0, 1, 0, 1, 1}, true},
    {{1, 3, 9, 11}, {3, 2}, {1, 1}, {2, 3}, {1, 0, 2, 3}},  // stride 1, dilated
    {{1, 2, 7, 6}, {4, 3}, {}, {}, {}, false, "SAME_UPPER"},
    {{1, 2, 6, 5}, {2, 3}, {}, {}, {1, 1, 1, 1}, true},
    {{1, 1, 7, 7}, {1, 1}, {1, 1}, {}, {}},  // identity
    {{1, 2, 8, 8}, {1, 1}, {2, 3}, {}, {}},  // pure subsampling
};

template <typename T>
Tensor RandomPoolInput(DType dtype, const Shape& shape, uint32_t seed, bool specials) {
  Tensor x(dtype, shape);
  std::mt19937 rng(seed);
  T* p = static_cast<T*>(x.raw());
  for (int64_t i = 0; i < x.numel(); ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      // Few distinct values, so ties (and +0 / -0) are common.
      p[i] = static_cast<float>(static_cast<int>(rng() % 9) - 4) * 0.5f;
      if (p[i] == 0 && rng() % 2) p[i] = -0.f;
      if (specials && rng() % 11 == 0) p[i] = std::numeric_limits<float>::quiet_NaN();
      if (specials && rng() % 17 == 0) p[i] = -std::numeric_limits<float>::infinity();
    } else {
      p[i] = static_cast<T>(rng());
    }
  }
  return x;
}

template <typename T>
void CheckMaxPool(DType dtype, bool specials) {
  ThreadPool two(2);
  uint32_t seed = 0;
  for (const PoolCase& c : kPoolCases) {
    SCOPED_TRACE(ShapeToString(c.x_shape) + " kernel " + ShapeToString(c.kernel) + " " +
                 DTypeName(dtype) + (specials ? " with NaN/-inf" : ""));
    const Tensor x = RandomPoolInput<T>(dtype, c.x_shape, ++seed, specials);
    const Tensor expected = NaiveMaxPool<T>(x, c);
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &two})
      ExpectSameBytes(int_test::RunNode("MaxPool", 12, {x}, PoolAttributes(c), pool), expected);
  }
}

TEST(MaxPool, FloatMatchesTheGenericScanBitForBit) { CheckMaxPool<float>(DType::kFloat32, false); }

TEST(MaxPool, NaNFirstTapStaysAndLaterNaNsNeverWin) { CheckMaxPool<float>(DType::kFloat32, true); }

TEST(MaxPool, Int8AndUInt8) {
  CheckMaxPool<int8_t>(DType::kInt8, false);
  CheckMaxPool<uint8_t>(DType::kUInt8, false);
}

// ---- Resize (nearest) ------------------------------------------------------------

TEST(ResizeNearest, UpAndDownsamplingEveryElementSize) {
  ThreadPool two(2);
  struct Case {
    Shape x_shape;
    std::vector<float> scales;
  };
  // Scales whose source coordinates are exact in float, so floor(o / s) in
  // double is the reference for asymmetric + floor.
  const Case cases[] = {{{1, 3, 13, 13}, {1, 1, 2, 2}},
                        {{1, 64, 40, 41}, {1, 1, 2, 2}},
                        {{2, 3, 8, 12}, {1, 2, 0.5f, 0.25f}},
                        {{3, 5, 7}, {4, 1, 2}}};
  for (DType dtype : {DType::kUInt8, DType::kInt8, DType::kFloat32, DType::kInt32}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(ShapeToString(c.x_shape) + " " + DTypeName(dtype));
      const Tensor x = RandomBytes(dtype, c.x_shape, 9);
      const size_t rank = c.x_shape.size();
      Shape out_shape;
      for (size_t d = 0; d < rank; ++d)
        out_shape.push_back(static_cast<int64_t>(static_cast<double>(c.x_shape[d]) * c.scales[d]));
      Tensor expected(dtype, out_shape);
      const size_t elem = DTypeSize(dtype);
      const std::vector<int64_t> in_strides = RowMajorStrides(c.x_shape);
      for (int64_t flat = 0; flat < expected.numel(); ++flat) {
        int64_t rest = flat, source = 0;
        for (size_t d = rank; d-- > 0;) {
          const int64_t o = rest % out_shape[d];
          rest /= out_shape[d];
          const int64_t i = static_cast<int64_t>(std::floor(static_cast<double>(o) / c.scales[d]));
          source += std::min(i, c.x_shape[d] - 1) * in_strides[d];
        }
        std::memcpy(static_cast<uint8_t*>(expected.raw()) + flat * elem,
                    static_cast<const uint8_t*>(x.raw()) + source * elem, elem);
      }
      const Tensor scales = MakeTensor<float>({static_cast<int64_t>(rank)}, c.scales);
      const std::map<std::string, Attribute> attrs{
          {"mode", Attribute::String("nearest")},
          {"coordinate_transformation_mode", Attribute::String("asymmetric")},
          {"nearest_mode", Attribute::String("floor")}};
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &two})
        ExpectSameBytes(int_test::RunNode("Resize", 13, {x, std::nullopt, scales}, attrs, pool),
                        expected);
    }
  }
}

TEST(ResizeNearest, LinearOn8BitDataIsRefused) {
  const Tensor x = RandomBytes(DType::kUInt8, {1, 1, 2, 2}, 1);
  const Tensor scales = MakeTensor<float>({4}, {1, 1, 2, 2});
  ExpectError(
      [&] {
        int_test::RunNode("Resize", 13, {x, std::nullopt, scales},
                          {{"mode", Attribute::String("linear")}});
      },
      {"node_under_test", "linear Resize of uint8", "not supported"});
}

}  // namespace
}  // namespace octet
