// Vector float math (kernels/float/vmath.h) on every path against double-
// precision references: max ulp error over dense sweeps and a stride through
// every float bit pattern (tiny, huge, subnormal results, +-inf, NaN); the
// same bits on every path; lengths around the vector widths without touching
// memory past the end. Then the ops that use it, through the kernel
// registry: broadcast shapes against a naive loop, and the same bits for 1,
// 2 and 3 threads.
#include "kernels/float/vmath.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "int_op_test_util.h"
#include "ops/registry.h"

namespace octet {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

using VmathFn = void (*)(const float*, float*, int64_t, Isa);

const std::vector<Isa>& Paths() {
  static const std::vector<Isa> paths = [] {
    std::vector<Isa> p;
    for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Vnni})
      if (IsaSupported(isa)) p.push_back(isa);
    return p;
  }();
  return paths;
}

// Distance from y to the exact value in units of the float spacing at the
// exact value (2^-149 in the subnormal range). Infinite when y is NaN or a
// wrong infinity.
double UlpError(float y, double exact) {
  if (std::isnan(exact)) return std::isnan(y) ? 0 : INFINITY;
  if (std::isnan(y)) return INFINITY;
  const double largest = std::numeric_limits<float>::max();
  if (std::fabs(exact) >= largest * (1 + std::ldexp(1.0, -25)))  // rounds to inf
    return y == std::copysign(INFINITY, exact) ? 0 : INFINITY;
  if (std::isinf(y)) return INFINITY;
  int exponent;
  std::frexp(exact, &exponent);
  const double spacing = std::ldexp(1.0, std::max(exponent - 24, -149));
  return std::fabs(y - exact) / spacing;
}

// Inputs: a dense sweep of [lo, hi], a stride through every bit pattern,
// and the special values.
std::vector<float> Inputs(float lo, float hi) {
  std::vector<float> x;
  constexpr int kSteps = 200000;
  for (int i = 0; i <= kSteps; ++i) x.push_back(lo + (hi - lo) * static_cast<float>(i) / kSteps);
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 4093)
    x.push_back(std::bit_cast<float>(static_cast<uint32_t>(bits)));
  for (float v : {0.f, -0.f, kInf, -kInf, kNaN, -kNaN, 1e-45f, -1e-45f, 1e-38f, 1e-30f, -1e-30f,
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::lowest()})
    x.push_back(v);
  return x;
}

struct FunctionCase {
  const char* name;
  VmathFn fn;
  std::function<double(double)> exact;
  float lo, hi;
  double max_ulps;
};

std::vector<FunctionCase> Functions() {
  return {
      {"exp", vmath::Exp, [](double x) { return std::exp(x); }, -110.f, 95.f, 1},
      {"erf", vmath::Erf, [](double x) { return std::erf(x); }, -5.f, 5.f, 1},
      {"tanh", vmath::Tanh, [](double x) { return std::tanh(x); }, -12.f, 12.f, 1.5},
      {"logistic", vmath::Logistic, [](double x) { return 1 / (1 + std::exp(-x)); }, -110.f, 110.f,
       2.5},
  };
}

TEST(Vmath, FunctionsWithinAFewUlpsOnEveryPath) {
  for (const FunctionCase& f : Functions()) {
    const std::vector<float> x = Inputs(f.lo, f.hi);
    for (Isa isa : Paths()) {
      std::vector<float> y(x.size());
      f.fn(x.data(), y.data(), static_cast<int64_t>(x.size()), isa);
      double worst = 0;
      size_t worst_at = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const double error = UlpError(y[i], f.exact(x[i]));
        if (error > worst) {
          worst = error;
          worst_at = i;
        }
      }
      EXPECT_LE(worst, f.max_ulps)
          << f.name << " on " << IsaName(isa) << ": x=" << x[worst_at] << " gives " << y[worst_at]
          << ", exact " << f.exact(x[worst_at]);
    }
  }
}

TEST(Vmath, SpecialValuesMatchTheStandardLibrary) {
  const float specials[] = {0.f, -0.f, kInf, -kInf, kNaN, 200.f, -200.f, 1e-40f, -1e-40f};
  for (Isa isa : Paths()) {
    for (float v : specials) {
      float y;
      vmath::Exp(&v, &y, 1, isa);
      EXPECT_TRUE(std::bit_cast<uint32_t>(y) == std::bit_cast<uint32_t>(std::exp(v)) ||
                  (std::isnan(y) && std::isnan(v)))
          << "exp(" << v << ") = " << y << " on " << IsaName(isa);
      vmath::Erf(&v, &y, 1, isa);
      EXPECT_TRUE(y == std::erf(v) || (std::isnan(y) && std::isnan(v)))
          << "erf(" << v << ") = " << y << " on " << IsaName(isa);
      vmath::Tanh(&v, &y, 1, isa);
      EXPECT_TRUE(y == std::tanh(v) || (std::isnan(y) && std::isnan(v)))
          << "tanh(" << v << ") = " << y << " on " << IsaName(isa);
      vmath::Logistic(&v, &y, 1, isa);
      const float logistic = static_cast<float>(1 / (1 + std::exp(-double(v))));
      EXPECT_TRUE(y == logistic || (std::isnan(y) && std::isnan(v)))
          << "logistic(" << v << ") = " << y << " on " << IsaName(isa);
    }
    // Signs of zero survive odd functions.
    for (VmathFn fn : {vmath::Erf, vmath::Tanh}) {
      const float negative_zero = -0.f;
      float y;
      fn(&negative_zero, &y, 1, isa);
      EXPECT_TRUE(std::signbit(y) && y == 0.f) << IsaName(isa);
    }
  }
}

TEST(Vmath, GeluNearDoubleReference) {
  std::vector<float> x;
  for (int i = -4000; i <= 4000; ++i) x.push_back(i / 500.f);
  for (Isa isa : Paths()) {
    std::vector<float> y(x.size()), z(x.size());
    vmath::GeluErf(x.data(), y.data(), static_cast<int64_t>(x.size()), isa);
    vmath::GeluTanh(x.data(), z.data(), static_cast<int64_t>(x.size()), isa);
    for (size_t i = 0; i < x.size(); ++i) {
      const double v = x[i];
      const double erf_exact = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
      const double tanh_exact =
          0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
      // A few ulps of the terms, which may cancel: 1 + erf(x) for x < 0.
      const double tolerance = 8 * std::ldexp(1.0, -24) * (std::fabs(v) + std::fabs(erf_exact));
      EXPECT_NEAR(y[i], erf_exact, tolerance) << "gelu(" << v << ") on " << IsaName(isa);
      EXPECT_NEAR(z[i], tanh_exact, tolerance) << "gelu_tanh(" << v << ") on " << IsaName(isa);
    }
  }
}

bool SameBitsOrBothNaN(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b) ||
         (std::isnan(a) && std::isnan(b));
}

// Runs fn on `n` values followed by sentinels, and checks the sentinels.
std::vector<float> RunGuarded(const std::function<void(const float*, float*, int64_t)>& fn,
                              const std::vector<float>& x) {
  constexpr int kGuard = 40;
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> y(n + kGuard, 12345.f);
  fn(x.data(), y.data(), n);
  for (int64_t i = n; i < n + kGuard; ++i) EXPECT_EQ(y[i], 12345.f) << "wrote past n=" << n;
  y.resize(n);
  return y;
}

std::vector<float> RandomValues(int64_t n, uint32_t seed, float lo = -6.f, float hi = 6.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& e : v) e = dist(rng);
  return v;
}

const int64_t kLengths[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 100, 257};

TEST(Vmath, EveryPathGivesTheScalarPathsBitsForEveryLength) {
  for (const FunctionCase& f : Functions()) {
    for (int64_t n : kLengths) {
      std::vector<float> x = RandomValues(n, static_cast<uint32_t>(n));
      if (n > 3) x[3] = kNaN;
      if (n > 5) x[5] = -kInf;
      auto run = [&](Isa isa) {
        return RunGuarded([&](const float* in, float* out, int64_t m) { f.fn(in, out, m, isa); },
                          x);
      };
      const std::vector<float> scalar = run(Isa::kScalar);
      for (Isa isa : Paths()) {
        const std::vector<float> y = run(isa);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_TRUE(SameBitsOrBothNaN(y[i], scalar[i]))
              << f.name << " n=" << n << " i=" << i << " on " << IsaName(isa);
      }
    }
  }
}

TEST(Vmath, InPlaceEqualsOutOfPlace) {
  const std::vector<float> x = RandomValues(77, 5);
  for (Isa isa : Paths()) {
    std::vector<float> out(x.size()), in_place = x;
    vmath::Erf(x.data(), out.data(), 77, isa);
    vmath::Erf(in_place.data(), in_place.data(), 77, isa);
    EXPECT_EQ(out, in_place) << IsaName(isa);
  }
}

TEST(Vmath, BinaryIsTheIeeeOperationForEveryStep) {
  const BinaryOp ops[] = {BinaryOp::kAdd, BinaryOp::kSub, BinaryOp::kMul, BinaryOp::kDiv};
  for (int64_t n : kLengths) {
    std::vector<float> a = RandomValues(n + 1, 1), b = RandomValues(n + 1, 2);
    if (n > 2) b[2] = 0.f;  // division by zero: inf or NaN
    for (BinaryOp op : ops)
      for (int a_step : {0, 1})
        for (int b_step : {0, 1})
          for (Isa isa : Paths()) {
            const std::vector<float> y = RunGuarded(
                [&](const float*, float* out, int64_t m) {
                  vmath::Binary(op, a.data(), a_step, b.data(), b_step, out, m, isa);
                },
                std::vector<float>(n));
            for (int64_t i = 0; i < n; ++i) {
              const float x = a[i * a_step], z = b[i * b_step];
              const float expected = op == BinaryOp::kAdd   ? x + z
                                     : op == BinaryOp::kSub ? x - z
                                     : op == BinaryOp::kMul ? x * z
                                                            : x / z;
              ASSERT_TRUE(SameBitsOrBothNaN(y[i], expected))
                  << "op " << static_cast<int>(op) << " steps " << a_step << b_step << " n=" << n
                  << " i=" << i << " on " << IsaName(isa);
            }
          }
  }
}

std::vector<double> SoftmaxReference(const std::vector<float>& x) {
  double max = -INFINITY, sum = 0;
  for (float v : x) max = std::max(max, double(v));
  std::vector<double> e(x.size());
  for (size_t i = 0; i < x.size(); ++i) sum += e[i] = std::exp(double(x[i]) - max);
  for (double& v : e) v /= sum;
  return e;
}

TEST(Vmath, SoftmaxRowNearDoubleAndSameBitsOnEveryPath) {
  for (int64_t n : kLengths) {
    if (n == 0) continue;
    std::vector<float> x = RandomValues(n, static_cast<uint32_t>(n) + 7, -20.f, 20.f);
    if (n > 4) x[4] = -kInf;  // masked position: exactly 0
    const std::vector<double> exact = SoftmaxReference(x);
    auto run = [&](Isa isa) {
      return RunGuarded(
          [&](const float* in, float* out, int64_t m) { vmath::SoftmaxRow(in, out, m, isa); }, x);
    };
    const std::vector<float> scalar = run(Isa::kScalar);
    for (Isa isa : Paths()) {
      const std::vector<float> y = run(isa);
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_NEAR(y[i], exact[i], 4e-6 * exact[i] + 1e-30) << "n=" << n << " i=" << i;
        ASSERT_EQ(std::bit_cast<uint32_t>(y[i]), std::bit_cast<uint32_t>(scalar[i]))
            << "n=" << n << " i=" << i << " on " << IsaName(isa);
      }
      if (n > 4) {
        EXPECT_EQ(y[4], 0.f);
      }
    }
  }
}

TEST(Vmath, ExpAtAndBelowItsLowerBoundIsZeroAndSubnormalsRoundOnce) {
  // Lanes at the lower bound (-104) take a shortcut to 0; lanes above it keep
  // the subnormal results, within one subnormal step of the exact value.
  std::vector<float> x;
  for (float v = -112.f; v <= -86.f; v += 1.f / 64) x.push_back(v);
  for (float v : {-kInf, -1e30f, -104.f, -103.99999237060546875f}) x.push_back(v);
  for (Isa isa : Paths()) {
    std::vector<float> y(x.size());
    vmath::Exp(x.data(), y.data(), static_cast<int64_t>(x.size()), isa);
    for (size_t i = 0; i < x.size(); ++i) {
      const double exact = std::exp(static_cast<double>(x[i]));
      if (x[i] <= -104.f) {
        ASSERT_EQ(std::bit_cast<uint32_t>(y[i]), 0u) << x[i] << " on " << IsaName(isa);
      } else {
        ASSERT_NEAR(y[i], exact, 1.5e-45 + 4e-7 * exact) << x[i] << " on " << IsaName(isa);
      }
    }
  }
}

TEST(Vmath, NormalizedExpsAreSoftmaxBitForBit) {
  // The MaskedSoftmax lookup path: exps from a table, then NormalizeRow.
  for (int64_t n : kLengths) {
    if (n == 0) continue;
    std::vector<float> x = RandomValues(n, static_cast<uint32_t>(n) + 11, -20.f, 20.f);
    if (n > 4) x[4] = -kInf;
    const float max = *std::max_element(x.begin(), x.end());
    for (Isa isa : Paths()) {
      std::vector<float> softmax(n), exps(n);
      vmath::SoftmaxRow(x.data(), softmax.data(), n, isa);
      for (int64_t i = 0; i < n; ++i) exps[i] = x[i] - max;
      vmath::Exp(exps.data(), exps.data(), n, isa);
      vmath::NormalizeRow(exps.data(), n, isa);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(std::bit_cast<uint32_t>(exps[i]), std::bit_cast<uint32_t>(softmax[i]))
            << "n=" << n << " i=" << i << " on " << IsaName(isa);
      }
    }
  }
}

TEST(Vmath, SoftmaxRowsGiveEachRowsSoftmaxRowBits) {
  // Rows run several at once: every row count up to past two blocks, rows with
  // a NaN, an infinity or only -inf among them, a padded row stride, in place.
  for (int64_t n : {1, 7, 16, 33, 128}) {
    for (int64_t rows = 0; rows <= 9; ++rows) {
      const int64_t ld = n + 3;
      std::vector<float> x =
          RandomValues(rows * ld, static_cast<uint32_t>(n * 16 + rows), -30.f, 30.f);
      if (rows > 2) x[2 * ld + n / 2] = kNaN;
      if (rows > 5) x[5 * ld] = kInf;
      if (rows > 6) std::fill_n(x.begin() + 6 * ld, n, -kInf);
      for (Isa isa : Paths()) {
        std::vector<float> y(x.size(), 7.f), in_place = x, expected(x.size(), 7.f);
        for (int64_t r = 0; r < rows; ++r)
          vmath::SoftmaxRow(x.data() + r * ld, expected.data() + r * ld, n, isa);
        vmath::SoftmaxRows(x.data(), y.data(), n, rows, ld, isa);
        vmath::SoftmaxRows(in_place.data(), in_place.data(), n, rows, ld, isa);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t i = 0; i < ld; ++i) {
            const int64_t at = r * ld + i;
            const float want = i < n ? expected[at] : 7.f;  // the stride's gap stays untouched
            ASSERT_EQ(std::bit_cast<uint32_t>(y[at]), std::bit_cast<uint32_t>(want))
                << "n=" << n << " rows=" << rows << " r=" << r << " i=" << i << " on "
                << IsaName(isa);
            ASSERT_EQ(std::bit_cast<uint32_t>(in_place[at]),
                      std::bit_cast<uint32_t>(i < n ? expected[at] : x[at]))
                << "in place, n=" << n << " rows=" << rows << " r=" << r << " i=" << i;
          }
      }
    }
  }
}

TEST(Vmath, SoftmaxRowsWithNaNInfinityOrOnlyMinusInfinityAreNaN) {
  for (Isa isa : Paths()) {
    for (float special : {kNaN, kInf}) {
      std::vector<float> x = RandomValues(19, 3);
      x[11] = special;
      std::vector<float> y(x.size());
      vmath::SoftmaxRow(x.data(), y.data(), 19, isa);
      for (float v : y) EXPECT_TRUE(std::isnan(v)) << special << " on " << IsaName(isa);
    }
    std::vector<float> x(21, -kInf), y(21);
    vmath::SoftmaxRow(x.data(), y.data(), 21, isa);
    for (float v : y) EXPECT_TRUE(std::isnan(v)) << IsaName(isa);
    const float one_value = -1e30f;
    float out;
    vmath::SoftmaxRow(&one_value, &out, 1, isa);
    EXPECT_EQ(out, 1.f);
  }
}

TEST(Vmath, LayerNormRowNearDoubleAndSameBitsOnEveryPath) {
  for (int64_t n : kLengths) {
    if (n == 0) continue;
    // A large common offset: the mean must not lose the deviations.
    std::vector<float> x = RandomValues(n, static_cast<uint32_t>(n) + 11, 95.f, 105.f);
    const std::vector<float> scale = RandomValues(n, 21), bias = RandomValues(n, 22);
    double mean = 0, variance = 0;
    for (float v : x) mean += v;
    mean /= n;
    for (float v : x) variance += (v - mean) * (v - mean);
    variance /= n;
    const double inv_std = 1 / std::sqrt(variance + 1e-5f);
    std::vector<float> scalar;
    for (Isa isa : Paths()) {
      for (const float* b : {bias.data(), static_cast<const float*>(nullptr)}) {
        float got_mean, got_inv_std;
        const std::vector<float> y = RunGuarded(
            [&](const float* in, float* out, int64_t m) {
              vmath::LayerNormRow(in, scale.data(), b, 1e-5f, out, m, &got_mean, &got_inv_std, isa);
            },
            x);
        EXPECT_NEAR(got_mean, mean, 1e-6 * std::fabs(mean));
        EXPECT_NEAR(got_inv_std, inv_std, 1e-6 * inv_std);
        for (int64_t i = 0; i < n; ++i) {
          const double exact = (x[i] - mean) * inv_std * scale[i] + (b ? b[i] : 0.0);
          EXPECT_NEAR(y[i], exact, 1e-5 * (1 + std::fabs(scale[i]))) << "n=" << n << " i=" << i;
        }
        if (b == nullptr) continue;
        if (isa == Isa::kScalar) scalar = y;
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(std::bit_cast<uint32_t>(y[i]), std::bit_cast<uint32_t>(scalar[i]))
              << "n=" << n << " i=" << i << " on " << IsaName(isa);
      }
    }
  }
}

// ---- the ops, through the registry ---------------------------------------------

Tensor FloatTensor(Shape shape, const std::vector<float>& values) {
  Tensor t(DType::kFloat32, std::move(shape));
  if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * sizeof(float));
  return t;
}

Tensor RunOp(const std::string& op, int opset, const std::vector<Tensor>& inputs, ThreadPool* pool,
             std::map<std::string, Attribute> attributes = {},
             const std::string& domain = kOnnxDomain) {
  return int_test::RunNode(op, opset, {inputs.begin(), inputs.end()},
                           {.domain = domain, .attributes = std::move(attributes), .pool = pool});
}

std::vector<float> Values(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

// The flat offset in `in` of output element `flat` under numpy broadcasting.
int64_t BroadcastOffset(int64_t flat, const Shape& out, const Shape& in) {
  int64_t offset = 0, stride = 1;
  for (size_t k = 0; k < out.size(); ++k) {
    const size_t d = out.size() - 1 - k;
    const int64_t index = flat % out[d];
    flat /= out[d];
    if (k < in.size()) {
      const int64_t size = in[in.size() - 1 - k];
      offset += (size == 1 ? 0 : index) * stride;
      stride *= size;
    }
  }
  return offset;
}

TEST(VmathOps, BinaryBroadcastShapesMatchANaiveLoopForEveryThreadCount) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{128, 384}, {384}},
      {{128, 384}, {128, 1}},
      {{384}, {128, 384}},
      {{300, 700}, {300, 700}},
      {{1}, {300, 700}},
      {{300, 700}, {}},
      {{4, 1}, {1, 5}},
      {{2, 3, 4, 5}, {3, 1, 5}},
      {{8, 32, 52, 52}, {8, 32, 1, 1}},
      {{7, 1, 300}, {7, 90, 1}},
      {{0, 3}, {3}},
      {{2, 1, 1, 9}, {1, 6, 5, 1}},
  };
  const std::pair<const char*, BinaryOp> ops[] = {{"Add", BinaryOp::kAdd},
                                                  {"Sub", BinaryOp::kSub},
                                                  {"Mul", BinaryOp::kMul},
                                                  {"Div", BinaryOp::kDiv}};
  ThreadPool two(2), three(3);
  for (const auto& [a_shape, b_shape] : cases) {
    const Tensor a = FloatTensor(a_shape, RandomValues(NumElements(a_shape), 1));
    const Tensor b = FloatTensor(b_shape, RandomValues(NumElements(b_shape), 2));
    for (const auto& [name, op] : ops) {
      const Tensor one = RunOp(name, 14, {a, b}, nullptr);
      const Shape& out = one.shape();
      const float* pa = a.data<float>();
      const float* pb = b.data<float>();
      for (int64_t i = 0; i < one.numel(); ++i) {
        const float x = pa[BroadcastOffset(i, out, a_shape)];
        const float z = pb[BroadcastOffset(i, out, b_shape)];
        const float expected = op == BinaryOp::kAdd   ? x + z
                               : op == BinaryOp::kSub ? x - z
                               : op == BinaryOp::kMul ? x * z
                                                      : x / z;
        ASSERT_EQ(one.data<float>()[i], expected) << name << " " << ShapeToString(a_shape) << " "
                                                  << ShapeToString(b_shape) << " at " << i;
      }
      for (ThreadPool* pool : {&two, &three})
        EXPECT_EQ(Values(RunOp(name, 14, {a, b}, pool)), Values(one))
            << name << " " << ShapeToString(a_shape) << " " << ShapeToString(b_shape);
    }
  }
}

TEST(VmathOps, SameBitsForOneTwoAndThreeThreads) {
  ThreadPool two(2), three(3);
  const Shape shape{3, 12, 130, 70};  // past the parallel threshold; odd row lengths
  const Tensor x = FloatTensor(shape, RandomValues(NumElements(shape), 9));
  const Tensor scale = FloatTensor({70}, RandomValues(70, 10));
  const Tensor bias = FloatTensor({70}, RandomValues(70, 11));
  struct Case {
    const char* op;
    int opset;
    std::vector<Tensor> inputs;
    std::map<std::string, Attribute> attributes;
    const char* domain;
  };
  const std::vector<Case> cases = {
      {"Erf", 13, {x}, {}, kOnnxDomain},
      {"Sigmoid", 13, {x}, {}, kOnnxDomain},
      {"Tanh", 13, {x}, {}, kOnnxDomain},
      {"Exp", 13, {x}, {}, kOnnxDomain},
      {"Gelu", 20, {x}, {}, kOnnxDomain},
      {"Gelu", 1, {x}, {}, kMsDomain},
      {"FastGelu", 1, {x, bias}, {}, kMsDomain},
      {"Softmax", 13, {x}, {}, kOnnxDomain},
      {"Softmax", 13, {x}, {{"axis", Attribute::Int(1)}}, kOnnxDomain},
      {"LayerNormalization", 17, {x, scale, bias}, {}, kOnnxDomain},
  };
  for (const Case& c : cases) {
    const std::vector<float> one =
        Values(RunOp(c.op, c.opset, c.inputs, nullptr, c.attributes, c.domain));
    for (ThreadPool* pool : {&two, &three})
      EXPECT_EQ(Values(RunOp(c.op, c.opset, c.inputs, pool, c.attributes, c.domain)), one)
          << c.op << " with " << pool->num_threads() << " threads";
  }
}

TEST(VmathOps, StridedSoftmaxMatchesDoubleReference) {
  const Shape shape{2, 5, 3, 4};
  const std::vector<float> values = RandomValues(NumElements(shape), 12, -10.f, 10.f);
  const Tensor x = FloatTensor(shape, values);
  const std::vector<float> y =
      Values(RunOp("Softmax", 13, {x}, nullptr, {{"axis", Attribute::Int(1)}}));
  for (int64_t o = 0; o < 2; ++o)
    for (int64_t in = 0; in < 12; ++in) {
      std::vector<float> row;
      for (int64_t j = 0; j < 5; ++j) row.push_back(values[(o * 5 + j) * 12 + in]);
      const std::vector<double> exact = SoftmaxReference(row);
      for (int64_t j = 0; j < 5; ++j)
        EXPECT_NEAR(y[(o * 5 + j) * 12 + in], exact[j], 4e-6 * exact[j]);
    }
}

}  // namespace
}  // namespace octet
