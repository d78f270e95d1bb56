// com.microsoft QLinearConcat, QLinearSoftmax, QLinearSigmoid and QLinearLeakyRelu against
// the exact real results (double), away from rounding ties where ONNX Runtime's float
// steps may land on either side. Bit equality with ONNX Runtime is checked in
// tests/python/test_qlinear_misc.py.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "int_op_test_util.h"

namespace octet {
namespace {

using int_test::ExpectError;
using int_test::Int8At;
using int_test::MakeTensor;
using int_test::RandomInt8;
using int_test::Scalar;
using int_test::TypeMax;
using int_test::TypeMin;
using int_test::ZeroPoints;

Tensor RunMsNode(const std::string& op, const std::vector<std::optional<Tensor>>& inputs,
                 const std::map<std::string, Attribute>& attributes = {}) {
  return int_test::RunNode(op, 1, inputs, {.domain = kMsDomain, .attributes = attributes});
}

Tensor AllBytes(DType type) {
  Tensor t(type, {256});
  for (int i = 0; i < 256; ++i)
    static_cast<uint8_t*>(t.raw())[i] = static_cast<uint8_t>(i + TypeMin(type));
  return t;
}

// Checks `got` = round(real) + zero clamped to the type, wherever `real` is not within
// 1e-3 of a rounding tie; returns how many values were checked.
int ExpectQuantized(const Tensor& got, int64_t i, double real, int zero, const std::string& what) {
  if (std::abs(real - std::floor(real) - 0.5) < 1e-3) return 0;
  const double want =
      std::clamp<double>(std::nearbyint(real) + zero, TypeMin(got.dtype()), TypeMax(got.dtype()));
  EXPECT_EQ(Int8At(got, i), want) << what << " element " << i << " real " << real;
  return 1;
}

struct UnaryCase {
  DType type;
  float x_scale;
  int x_zero;
  float y_scale;
  int y_zero;
};

const UnaryCase kUnaryCases[] = {
    {DType::kUInt8, 0.05f, 128, 1.f / 256, 0},  {DType::kInt8, 0.1f, -3, 1.f / 256, -128},
    {DType::kUInt8, 0.3f, 10, 0.02f, 200},      {DType::kInt8, 0.013f, 40, 0.007f, 5},
    {DType::kUInt8, 0.0371f, 77, 0.0113f, 131},
};

TEST(QLinearLookupOps, SigmoidAndLeakyReluFollowTheRealFunctionOnEveryByte) {
  for (const UnaryCase& c : kUnaryCases) {
    for (const bool sigmoid : {true, false}) {
      const float alpha = 0.13f;
      std::map<std::string, Attribute> attrs;
      if (!sigmoid) {
        Attribute a;
        a.kind = Attribute::Kind::kFloat;
        a.f = alpha;
        attrs["alpha"] = a;
      }
      const Tensor y =
          RunMsNode(sigmoid ? "QLinearSigmoid" : "QLinearLeakyRelu",
                    {AllBytes(c.type), Scalar(c.x_scale), ZeroPoints(c.type, {}, {c.x_zero}),
                     Scalar(c.y_scale), ZeroPoints(c.type, {}, {c.y_zero})},
                    attrs);
      int checked = 0;
      for (int i = 0; i < 256; ++i) {
        const double x = double{c.x_scale} * (i + TypeMin(c.type) - c.x_zero);
        const double f = sigmoid ? 1 / (1 + std::exp(-x)) : (x >= 0 ? x : double{alpha} * x);
        checked += ExpectQuantized(y, i, f / c.y_scale, c.y_zero, sigmoid ? "sigmoid" : "leaky");
      }
      EXPECT_GT(checked, 200);
    }
  }
}

TEST(QLinearConcat, CopiesMatchingInputsAndRequantizesOthers) {
  std::mt19937 rng(3);
  for (const DType type : {DType::kUInt8, DType::kInt8}) {
    // [2, 1, 3] + [2, 2, 3] + [2, 0, 3] along axis 1 (given as -2).
    const Tensor a = RandomInt8(type, {2, 1, 3}, rng);
    const Tensor b = RandomInt8(type, {2, 2, 3}, rng);
    const Tensor c = RandomInt8(type, {2, 0, 3}, rng);
    const float y_scale = 0.05f, b_scale = 0.0731f;
    const int y_zero = type == DType::kInt8 ? -7 : 120, b_zero = type == DType::kInt8 ? 9 : 100;
    const Tensor y =
        RunMsNode("QLinearConcat",
                  {Scalar(y_scale), ZeroPoints(type, {}, {y_zero}), a, Scalar(y_scale),
                   ZeroPoints(type, {}, {y_zero}), b, Scalar(b_scale),
                   ZeroPoints(type, {}, {b_zero}), c, Scalar(0.2f), ZeroPoints(type, {}, {0})},
                  {{"axis", Attribute::Int(-2)}});
    ASSERT_EQ(y.shape(), (Shape{2, 3, 3}));
    for (int64_t o = 0; o < 2; ++o) {
      for (int64_t k = 0; k < 3; ++k) EXPECT_EQ(Int8At(y, o * 9 + k), Int8At(a, o * 3 + k));
      for (int64_t k = 0; k < 6; ++k) {
        const double real = double{b_scale} * (Int8At(b, o * 6 + k) - b_zero) / y_scale;
        ExpectQuantized(y, o * 9 + 3 + k, real, y_zero, "concat");
      }
    }
  }
}

TEST(QLinearConcat, RefusesMismatchedShapes) {
  const Tensor x2(DType::kUInt8, {2, 3}), x3(DType::kUInt8, {3, 3});
  ExpectError(
      [&] {
        RunMsNode("QLinearConcat",
                  {Scalar(0.1f), ZeroPoints(DType::kUInt8, {}, {0}), x2, Scalar(0.1f),
                   ZeroPoints(DType::kUInt8, {}, {0}), x3, Scalar(0.1f),
                   ZeroPoints(DType::kUInt8, {}, {0})},
                  {{"axis", Attribute::Int(1)}});
      },
      {"QLinearConcat", "com.microsoft", "does not match"});
}

// Softmax along `length` values `stride` apart, in double.
std::vector<double> RealSoftmax(const Tensor& x, float x_scale, int64_t offset, int64_t length,
                                int64_t stride) {
  std::vector<double> e(static_cast<size_t>(length));
  double sum = 0;
  for (int64_t d = 0; d < length; ++d)
    sum += e[d] = std::exp(double{x_scale} * Int8At(x, offset + d * stride));
  for (double& v : e) v /= sum;
  return e;
}

TEST(QLinearSoftmax, FollowsTheRealSoftmaxAlongTheAxisOfEachConvention) {
  std::mt19937 rng(5);
  const float x_scale = 0.06f, y_scale = 1.f / 256;
  for (const DType type : {DType::kUInt8, DType::kInt8}) {
    const int y_zero = TypeMin(type);
    const Tensor x = RandomInt8(type, {3, 4, 5}, rng);
    // opset 13 reduces axis 1 alone; opset 11 coerces to [3, 20] at axis 1.
    for (const int64_t opset : {13, 11}) {
      const Tensor y = RunMsNode("QLinearSoftmax",
                                 {x, Scalar(x_scale), ZeroPoints(type, {}, {0}), Scalar(y_scale),
                                  ZeroPoints(type, {}, {y_zero})},
                                 {{"opset", Attribute::Int(opset)}, {"axis", Attribute::Int(1)}});
      int checked = 0;
      for (int64_t o = 0; o < 3; ++o) {
        for (int64_t i = 0; i < (opset == 13 ? 5 : 1); ++i) {
          const int64_t offset = o * 20 + i, length = opset == 13 ? 4 : 20;
          const int64_t stride = opset == 13 ? 5 : 1;
          const std::vector<double> p = RealSoftmax(x, x_scale, offset, length, stride);
          for (int64_t d = 0; d < length; ++d)
            checked += ExpectQuantized(y, offset + d * stride, p[d] * 256, y_zero, "softmax");
        }
      }
      EXPECT_GT(checked, 50);
    }
  }
}

TEST(QLinearSoftmax, SaturatesACertainProbabilityInInt8) {
  // One value per row: probability 1 -> 256 - 128 = 128, which ORT saturates to 127.
  const Tensor x = MakeTensor<int8_t>({2, 1}, {5, -100});
  const Tensor y = RunMsNode("QLinearSoftmax",
                             {x, Scalar(0.25f), ZeroPoints(DType::kInt8, {}, {0}),
                              Scalar(1.f / 128), ZeroPoints(DType::kInt8, {}, {-128})},
                             {{"opset", Attribute::Int(13)}});
  EXPECT_EQ(Int8At(y, 0), 0);  // 1 * 128 - 128
  EXPECT_EQ(Int8At(y, 1), 0);
  const Tensor z = RunMsNode("QLinearSoftmax",
                             {x, Scalar(0.25f), ZeroPoints(DType::kInt8, {}, {0}),
                              Scalar(1.f / 200), ZeroPoints(DType::kInt8, {}, {-28})},
                             {{"opset", Attribute::Int(13)}});
  EXPECT_EQ(Int8At(z, 0), 127);  // 200 - 28 = 172
}

TEST(QLinearSoftmax, RequiresTheOpsetAttribute) {
  const Tensor x(DType::kUInt8, {2, 3});
  ExpectError(
      [&] {
        RunMsNode("QLinearSoftmax", {x, Scalar(0.1f), ZeroPoints(DType::kUInt8, {}, {0}),
                                     Scalar(1.f / 256), ZeroPoints(DType::kUInt8, {}, {0})});
      },
      {"QLinearSoftmax", "com.microsoft", "opset"});
}

}  // namespace
}  // namespace octet
