// com.microsoft QLinearGlobalAveragePool and QLinearAveragePool against naive references
// written here from ONNX Runtime 1.31.1's rules (src/ops/qlinear_pool.cc's header states
// them): an int64 sum requantized once for global pooling, a float window sum for the
// windowed pool, with ORT's output sizes. Random uint8/int8 cases in both layouts, 1-D to
// 3-D, with pads, strides, ceil_mode, count_include_pad and auto_pad, on 1 and 2 threads and
// on every instruction set this machine runs (the requantization is vectorized; OCTET_ISA is
// read once per process, so each forced path runs in a re-executed child). Bit equality with
// ONNX Runtime itself is checked in tests/python/test_qlinear_pool.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <sstream>

#include "core/thread_pool.h"
#include "int_op_test_util.h"
#include "kernels/isa.h"

namespace octet {
namespace {

using int_test::ExpectError;
using int_test::Int8At;
using int_test::RandomInt8;
using int_test::RoundHalfEven;
using int_test::Scalar;
using int_test::TypeMax;
using int_test::TypeMin;
using int_test::ZeroPoints;

struct PoolCase {
  bool global_op = false;  // QLinearGlobalAveragePool, else QLinearAveragePool
  DType type = DType::kUInt8;
  int64_t batch = 1, channels = 1;
  std::vector<int64_t> spatial;
  bool channels_last = false;
  float x_scale = 0.1f, y_scale = 0.1f;
  int x_zero = 0, y_zero = 0;
  std::vector<int64_t> kernel, strides, pads;  // empty strides / pads: the defaults
  std::string auto_pad = "NOTSET";
  bool ceil_mode = false, count_include_pad = false;

  Shape InputShape() const {
    Shape s{batch};
    if (!channels_last) s.push_back(channels);
    s.insert(s.end(), spatial.begin(), spatial.end());
    if (channels_last) s.push_back(channels);
    return s;
  }
  std::string Describe() const {
    std::ostringstream o;
    o << (global_op ? "global" : "windowed") << " " << DTypeName(type) << " "
      << ShapeToString(InputShape()) << (channels_last ? " nhwc" : " nchw") << " kernel "
      << ShapeToString(kernel) << " strides " << ShapeToString(strides) << " pads "
      << ShapeToString(pads) << " " << auto_pad << " ceil " << ceil_mode << " cip "
      << count_include_pad << " x " << x_scale << "/" << x_zero << " y " << y_scale << "/"
      << y_zero;
    return o.str();
  }
};

Tensor RunPool(const PoolCase& c, const Tensor& x, ThreadPool* pool) {
  std::map<std::string, Attribute> attributes{{"channels_last", Attribute::Int(c.channels_last)}};
  if (!c.global_op) {
    attributes["kernel_shape"] = Attribute::Ints(c.kernel);
    if (!c.strides.empty()) attributes["strides"] = Attribute::Ints(c.strides);
    if (!c.pads.empty()) attributes["pads"] = Attribute::Ints(c.pads);
    attributes["auto_pad"] = Attribute::String(c.auto_pad);
    attributes["ceil_mode"] = Attribute::Int(c.ceil_mode);
    attributes["count_include_pad"] = Attribute::Int(c.count_include_pad);
  }
  return int_test::RunNode(
      c.global_op ? "QLinearGlobalAveragePool" : "QLinearAveragePool", 1,
      {x, Scalar(c.x_scale), ZeroPoints(c.type, {}, {c.x_zero}), Scalar(c.y_scale),
       ZeroPoints(c.type, {}, {c.y_zero})},
      {.domain = kMsDomain, .attributes = attributes, .name = "pool", .pool = pool});
}

// ---- The references --------------------------------------------------------------------

int64_t ValueAt(const Tensor& x, const PoolCase& c, int64_t n, int64_t ch, int64_t pixel,
                int64_t pixels) {
  return Int8At(x, c.channels_last ? (n * pixels + pixel) * c.channels + ch
                                   : (n * c.channels + ch) * pixels + pixel);
}

// Integer sum, requantized once: round_half_even(clamp(float(acc) * m)) + y_zero.
int ReferenceGlobal(const Tensor& x, const PoolCase& c, int64_t n, int64_t ch, int64_t pixels) {
  int64_t sum = 0;
  for (int64_t p = 0; p < pixels; ++p) sum += ValueAt(x, c, n, ch, p, pixels);
  const int32_t acc = static_cast<int32_t>(static_cast<uint32_t>(sum - c.x_zero * pixels));
  const float m = c.x_scale / (c.y_scale * static_cast<float>(pixels));
  const float v = static_cast<float>(acc) * m;
  const double lo = TypeMin(c.type) - c.y_zero, hi = TypeMax(c.type) - c.y_zero;
  const double clamped = std::isnan(v) ? lo : std::clamp<double>(v, lo, hi);
  return static_cast<int>(RoundHalfEven(clamped)) + c.y_zero;
}

// ORT's output size and first window offset of one dim.
struct RefDim {
  int64_t out, pad_begin, pad_end;
};

RefDim ReferenceDim(const PoolCase& c, size_t d) {
  const int64_t in = c.spatial[d], k = c.kernel[d];
  const int64_t s = c.strides.empty() ? 1 : c.strides[d];
  const size_t dims = c.kernel.size();
  int64_t begin = c.pads.empty() ? 0 : c.pads[d], end = c.pads.empty() ? 0 : c.pads[d + dims];
  if (c.auto_pad == "VALID") begin = end = 0;
  if (c.auto_pad == "SAME_UPPER" || c.auto_pad == "SAME_LOWER") {
    const int64_t total = (static_cast<int64_t>(std::ceil(double(in) / s)) - 1) * s + k - in;
    begin = static_cast<int64_t>(std::trunc((total + (c.auto_pad == "SAME_LOWER")) / 2.0));
    end = total - begin;
  }
  const double quotient = double(in + begin + end - k) / s;
  int64_t out = static_cast<int64_t>(c.ceil_mode ? std::ceil(quotient) : std::trunc(quotient)) + 1;
  if (c.ceil_mode && (out - 1) * s >= in + begin) --out;
  return {out, begin, end};
}

// The float window average, or the global reference when the kernel is the whole input with
// no padding. Returns the expected output in NCHW order.
std::vector<int> ReferenceAverage(const Tensor& x, const PoolCase& c, Shape& nchw_out) {
  const size_t dims = c.spatial.size();
  int64_t pixels = 1;
  for (int64_t s : c.spatial) pixels *= s;
  std::vector<RefDim> rd;
  bool global = true;
  for (size_t d = 0; d < dims && !c.global_op; ++d) {
    rd.push_back(ReferenceDim(c, d));
    global = global && c.kernel[d] == c.spatial[d] && rd[d].pad_begin == 0 && rd[d].pad_end == 0;
  }
  nchw_out = {c.batch, c.channels};
  for (size_t d = 0; d < dims; ++d) nchw_out.push_back(global ? 1 : rd[d].out);
  std::vector<int> expected;
  const float x_scale = c.x_scale, y_scale = c.y_scale;
  for (int64_t n = 0; n < c.batch; ++n) {
    for (int64_t ch = 0; ch < c.channels; ++ch) {
      if (global) {
        expected.push_back(ReferenceGlobal(x, c, n, ch, pixels));
        continue;
      }
      std::vector<int64_t> o(dims, 0);
      int64_t outputs = 1;
      for (const RefDim& r : rd) outputs *= r.out;
      for (int64_t i = 0; i < outputs; ++i) {
        for (int64_t rest = i, d = static_cast<int64_t>(dims) - 1; d >= 0; --d) {
          o[d] = rest % rd[d].out;
          rest /= rd[d].out;
        }
        std::vector<int64_t> lo(dims), hi(dims);
        int64_t inside = 1, kernel_size = 1;
        for (size_t d = 0; d < dims; ++d) {
          const int64_t s = c.strides.empty() ? 1 : c.strides[d];
          const int64_t start = o[d] * s - rd[d].pad_begin;
          lo[d] = std::max<int64_t>(start, 0);
          hi[d] = std::min(start + c.kernel[d], c.spatial[d]);
          inside *= hi[d] - lo[d];
          kernel_size *= c.kernel[d];
        }
        float sum = 0.f;
        std::vector<int64_t> p = lo;
        bool empty = false;
        for (size_t d = 0; d < dims; ++d) empty = empty || lo[d] >= hi[d];
        while (!empty) {  // row-major over the window
          int64_t pixel = 0;
          for (size_t d = 0; d < dims; ++d) pixel = pixel * c.spatial[d] + p[d];
          sum += x_scale * static_cast<float>(ValueAt(x, c, n, ch, pixel, pixels) - c.x_zero);
          empty = true;  // until a dim steps forward without wrapping
          for (size_t d = dims; d-- > 0 && empty;) {
            empty = ++p[d] == hi[d];
            if (empty) p[d] = lo[d];
          }
        }
        const float average = sum / static_cast<float>(c.count_include_pad ? kernel_size : inside);
        const float r = std::nearbyint(average / y_scale + static_cast<float>(c.y_zero));
        // x86 conversion: out of int32 range (or NaN) -> INT32_MIN -> the type's minimum.
        const bool fits = r >= -2147483648.0f && r < 2147483648.0f;
        expected.push_back(
            fits ? std::clamp<int>(static_cast<int>(r), TypeMin(c.type), TypeMax(c.type))
                 : TypeMin(c.type));
      }
    }
  }
  return expected;
}

// Compares `got` (in the case's layout) with the NCHW reference.
int64_t CountMismatches(const Tensor& got, const PoolCase& c, const std::vector<int>& want,
                        const Shape& nchw_out, std::ostream& log) {
  Shape want_shape = nchw_out;
  if (c.channels_last) {
    want_shape.erase(want_shape.begin() + 1);
    want_shape.push_back(c.channels);
  }
  if (got.shape() != want_shape) {
    log << c.Describe() << ": shape " << ShapeToString(got.shape()) << " expected "
        << ShapeToString(want_shape) << "\n";
    return 1;
  }
  int64_t outputs = 1;
  for (size_t d = 2; d < nchw_out.size(); ++d) outputs *= nchw_out[d];
  int64_t bad = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(want.size()); ++i) {
    const int64_t n = i / (c.channels * outputs), ch = i / outputs % c.channels, o = i % outputs;
    const int64_t at = c.channels_last ? (n * outputs + o) * c.channels + ch : i;
    if (Int8At(got, at) != want[i] && bad++ < 3)
      log << c.Describe() << ": output " << i << " is " << Int8At(got, at) << ", expected "
          << want[i] << "\n";
  }
  return bad;
}

PoolCase RandomCase(std::mt19937& rng, int variant) {
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  PoolCase c;
  c.global_op = variant % 4 == 0;
  c.type = variant % 2 ? DType::kInt8 : DType::kUInt8;
  c.channels_last = variant % 3 == 1;
  c.batch = uniform(1, 2);
  c.channels = uniform(1, variant % 5 == 0 ? 70 : 9);
  const size_t dims = static_cast<size_t>(uniform(1, 3));
  for (size_t d = 0; d < dims; ++d) c.spatial.push_back(uniform(1, 7));
  if (variant % 4 == 1) {  // power-of-two scales: exact ties
    c.x_scale = std::ldexp(1.f, -static_cast<int>(uniform(0, 5)));
    c.y_scale = std::ldexp(1.f, -static_cast<int>(uniform(0, 5)));
  } else {
    c.x_scale = std::uniform_real_distribution<float>(0.003f, 0.4f)(rng);
    c.y_scale = std::uniform_real_distribution<float>(0.003f, 0.4f)(rng);
  }
  c.x_zero = static_cast<int>(uniform(TypeMin(c.type), TypeMax(c.type)));
  c.y_zero = static_cast<int>(uniform(TypeMin(c.type), TypeMax(c.type)));
  if (c.global_op) return c;
  for (size_t d = 0; d < dims; ++d) c.kernel.push_back(uniform(1, c.spatial[d] + 1));
  if (variant % 11 == 3) c.kernel = c.spatial;  // ORT's global path
  if (variant % 3 != 0) {
    for (size_t i = 0; i < 2 * dims; ++i) c.pads.push_back(uniform(0, c.kernel[i % dims] - 1));
  }
  if (variant % 5 != 0) {
    for (size_t d = 0; d < dims; ++d) c.strides.push_back(uniform(1, 3));
  }
  if (variant % 7 == 2) c.auto_pad = variant % 2 ? "SAME_UPPER" : "SAME_LOWER";
  if (variant % 13 == 4) c.auto_pad = "VALID";
  c.ceil_mode = uniform(0, 1) != 0;
  c.count_include_pad = uniform(0, 1) != 0;
  return c;
}

bool HasEmptyOutput(const PoolCase& c) {
  if (c.global_op) return false;
  for (size_t d = 0; d < c.spatial.size(); ++d)
    if (ReferenceDim(c, d).out <= 0) return true;
  return false;
}

int64_t FailingCases(std::ostream& log) {
  ThreadPool two_threads(2);
  std::mt19937 rng(17);
  int64_t failing = 0;
  for (int variant = 0; variant < 400; ++variant) {
    const PoolCase c = RandomCase(rng, variant);
    if (HasEmptyOutput(c)) continue;  // refusals are checked separately
    const Tensor x = RandomInt8(c.type, c.InputShape(), rng);
    Shape nchw_out;
    const std::vector<int> want = ReferenceAverage(x, c, nchw_out);
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &two_threads}) {
      try {
        failing += CountMismatches(RunPool(c, x, pool), c, want, nchw_out, log) != 0;
      } catch (const Error& e) {
        log << c.Describe() << ": " << e.what() << "\n";
        ++failing;
      }
    }
  }
  return failing;
}

TEST(QLinearPool, MatchesNaiveReferenceOnEveryPathAndThreadCount) {
  // Forced paths in re-executed children first (see qgemm_test.cc).
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  for (Isa isa : SupportedIsas())
    EXPECT_EXIT(std::exit(int_test::ExitCodeWithIsa(IsaName(isa), FailingCases)),
                ::testing::ExitedWithCode(0), "")
        << IsaName(isa);
  std::ostringstream log;
  EXPECT_EQ(FailingCases(log), 0) << log.str();
}

TEST(QLinearPool, TiesSaturationAndWrapAround) {
  // Two pixels per channel, unit scales: odd sums are ties (half to even); zero points at
  // the ends saturate both ways.
  for (const DType type : {DType::kUInt8, DType::kInt8}) {
    Tensor x(type, {1, 256, 2});
    for (int i = 0; i < 256; ++i) {
      static_cast<uint8_t*>(x.raw())[2 * i] = static_cast<uint8_t>(i);
      static_cast<uint8_t*>(x.raw())[2 * i + 1] = static_cast<uint8_t>(i * 7 + 3);
    }
    for (const int y_zero : {TypeMin(type), 0, TypeMax(type)}) {
      for (const bool global_op : {true, false}) {
        PoolCase c;
        c.global_op = global_op;
        c.type = type;
        c.channels = 256;
        c.spatial = {2};
        c.kernel = {global_op ? 2 : 1};
        c.strides = {1};
        c.x_scale = c.y_scale = 1.f;
        c.y_zero = y_zero;
        Shape nchw_out;
        const std::vector<int> want = ReferenceAverage(x, c, nchw_out);
        std::ostringstream log;
        EXPECT_EQ(CountMismatches(RunPool(c, x, nullptr), c, want, nchw_out, log), 0) << log.str();
      }
    }
  }
  // 255 * 8.5M overflows int32: the sum wraps as in ONNX Runtime.
  PoolCase c;
  c.global_op = true;
  c.channels = 1;
  c.spatial = {8'500'000};
  c.x_scale = 1.f;
  c.y_scale = 4.f / 8'500'000;
  Tensor x(DType::kUInt8, c.InputShape());
  std::fill_n(static_cast<uint8_t*>(x.raw()), x.numel(), uint8_t{255});
  Shape nchw_out;
  const std::vector<int> want = ReferenceAverage(x, c, nchw_out);
  std::ostringstream log;
  EXPECT_EQ(CountMismatches(RunPool(c, x, nullptr), c, want, nchw_out, log), 0) << log.str();
  // An average past int32 converts to INT32_MIN in ORT: the type's minimum.
  PoolCase big;
  big.type = DType::kInt8;
  big.spatial = {4};
  big.kernel = {2};
  big.x_scale = 1000.f;
  big.y_scale = 1e-5f;
  Tensor bx(DType::kInt8, big.InputShape());
  for (int i = 0; i < 4; ++i) static_cast<int8_t*>(bx.raw())[i] = static_cast<int8_t>(100 - 10 * i);
  const Tensor y = RunPool(big, bx, nullptr);
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(Int8At(y, i), -128) << i;
}

TEST(QLinearPool, RefusesWhatOnnxRuntimeRefuses) {
  PoolCase c;
  c.global_op = true;
  c.spatial = {3, 3};
  const Tensor x(DType::kUInt8, c.InputShape());
  c.x_scale = 256.f * 9 * c.y_scale;
  ExpectError([&] { RunPool(c, x, nullptr); },
              {"QLinearGlobalAveragePool", "com.microsoft", "outside [2^-32, 256)"});
  c.x_scale = -0.1f;
  ExpectError([&] { RunPool(c, x, nullptr); }, {"outside [2^-32, 256)"});
  c.x_scale = 0.1f;
  c.spatial = {1 << 24};
  const Tensor huge(DType::kUInt8, c.InputShape());
  ExpectError([&] { RunPool(c, huge, nullptr); }, {"2^24"});

  PoolCase w;
  w.spatial = {4, 4};
  w.kernel = {2, 2};
  const Tensor x4(DType::kUInt8, w.InputShape());
  auto expect = [&](PoolCase bad, const Tensor& input, const char* message) {
    ExpectError([&] { RunPool(bad, input, nullptr); }, {"QLinearAveragePool", message});
  };
  PoolCase bad = w;
  bad.pads = {2, 0, 0, 0};
  expect(bad, x4, "smaller than the kernel");
  bad = w;
  bad.strides = {1};
  expect(bad, x4, "'strides' needs 2");
  bad = w;
  bad.auto_pad = "SAME";
  expect(bad, x4, "auto_pad 'SAME'");
  bad = w;
  bad.kernel = {6, 1};  // (4 - 6) / 1 + 1 < 0
  expect(bad, x4, "output size along spatial dim 0 is -1");
  bad = w;
  bad.kernel = {2};
  expect(bad, x4, "1 spatial dims");
  bad = w;
  bad.spatial = {1, 1, 1, 2};
  bad.kernel = {1, 1, 1, 1};
  expect(bad, Tensor(DType::kUInt8, bad.InputShape()), "1 to 3");
  bad = w;
  bad.spatial = {0, 4};
  expect(bad, Tensor(DType::kUInt8, bad.InputShape()), "empty outside the batch");
}

}  // namespace
}  // namespace octet
