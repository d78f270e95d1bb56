// MatMulInteger, QLinearMatMul and com.microsoft MatMulIntegerToFloat /
// DynamicQuantizeMatMul through the kernel registry, and the requantization
// epilogue (kernels/int8/epilogue.h) on its own. Products are checked
// against naive int64 loops written here; requantized values against the
// documented formula (int_op_test_util.h), hand-worked values, the ONNX
// backend tests' expected outputs and ONNX Runtime 1.31.1 outputs. The fast
// path is run with B (and its parameters) as constants packed at kernel
// creation and as per-run inputs, on 1, 2 and 3 threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/thread_pool.h"
#include "int_op_test_util.h"
#include "kernels/int8/epilogue.h"
#include "kernels/int8/gemm.h"

namespace octet {
namespace {

using int_test::ExpectedRequant;
using int_test::ExpectError;
using int_test::Int8At;
using int_test::MakeTensor;
using int_test::RandomInt8;
using int_test::RunNode;
using int_test::Scalar;
using int_test::TypeMax;
using int_test::TypeMin;
using int_test::ZeroPoints;

// ---------------------------------------------------------------- epilogue

std::vector<int> RequantizeToInts(const std::vector<int32_t>& acc, int64_t rows, int64_t cols,
                                  const Epilogue& p) {
  std::vector<uint8_t> out(acc.size(), 0xAA);
  ApplyEpilogueBlock(p, acc.data(), cols, 0, rows, 0, cols, out.data(), cols, ActiveIsa());
  std::vector<int> values;
  for (uint8_t v : out)
    values.push_back(p.output == EpilogueOutput::kInt8 ? static_cast<int8_t>(v) : v);
  return values;
}

TEST(Requantize, TiesRoundHalfToEven) {
  const float half = 0.5f;
  const std::vector<int32_t> acc = {-7, -5, -3, -1, 1, 3, 5, 7, 9};
  Epilogue p;
  p.multiplier.data = &half;
  p.zero_point = 0;
  p.output = EpilogueOutput::kInt8;
  // -3.5 -2.5 -1.5 -0.5 0.5 1.5 2.5 3.5 4.5, worked by hand.
  EXPECT_EQ(RequantizeToInts(acc, 1, 9, p), (std::vector<int>{-4, -2, -2, 0, 0, 2, 2, 4, 4}));
  p.zero_point = 10;
  p.output = EpilogueOutput::kUInt8;
  EXPECT_EQ(RequantizeToInts(acc, 1, 9, p), (std::vector<int>{6, 8, 8, 10, 10, 12, 12, 14, 14}));
}

TEST(Requantize, SaturatesAtZeroPointLimits) {
  const float one = 1.f;
  const std::vector<int32_t> acc = {-1000, -256, -255, -1, 0, 1, 255, 256, 1000};
  Epilogue p;
  p.multiplier.data = &one;
  p.output = EpilogueOutput::kUInt8;
  p.zero_point = 0;
  EXPECT_EQ(RequantizeToInts(acc, 1, 9, p), (std::vector<int>{0, 0, 0, 0, 0, 1, 255, 255, 255}));
  p.zero_point = 255;
  EXPECT_EQ(RequantizeToInts(acc, 1, 9, p),
            (std::vector<int>{0, 0, 0, 254, 255, 255, 255, 255, 255}));
  p.output = EpilogueOutput::kInt8;
  p.zero_point = -128;
  EXPECT_EQ(RequantizeToInts(acc, 1, 9, p),
            (std::vector<int>{-128, -128, -128, -128, -128, -127, 127, 127, 127}));
  p.zero_point = 127;
  EXPECT_EQ(RequantizeToInts(acc, 1, 9, p),
            (std::vector<int>{-128, -128, -128, 126, 127, 127, 127, 127, 127}));
}

TEST(Requantize, OverflowingAndNaNProductsClampLikeOnnxRuntime) {
  // tools/probe_ort_requant.py: multiplier 1e30 gives qmax / qmin (no int32
  // conversion overflow); multiplier inf with acc 0 (NaN) gives qmin.
  const float huge = 1e30f;
  const float inf = std::numeric_limits<float>::infinity();
  Epilogue p;
  p.zero_point = 5;
  p.output = EpilogueOutput::kUInt8;
  p.multiplier.data = &huge;
  EXPECT_EQ(RequantizeToInts({32385, -32385, 0}, 1, 3, p), (std::vector<int>{255, 0, 5}));
  p.multiplier.data = &inf;
  EXPECT_EQ(RequantizeToInts({1, -1, 0}, 1, 3, p), (std::vector<int>{255, 0, 0}));
  p.output = EpilogueOutput::kInt8;
  EXPECT_EQ(RequantizeToInts({1, -1, 0}, 1, 3, p), (std::vector<int>{127, -128, -128}));
}

TEST(Requantize, BiasIsAddedInInt32BeforeTheFloatConversion) {
  // acc + bias = 2^24 + 2 converts exactly: (2^24 + 2) * 2^-25 = 0.5 + 2^-24 -> 1.
  // Converting acc and bias separately would give 2^24 -> 0.5 -> 0.
  const float multiplier = std::ldexp(1.f, -25);
  const int32_t bias = (1 << 24) + 1;
  Epilogue p;
  p.multiplier.data = &multiplier;
  p.bias.data = &bias;
  p.output = EpilogueOutput::kUInt8;
  EXPECT_EQ(RequantizeToInts({1}, 1, 1, p), std::vector<int>{1});
}

TEST(Requantize, PerColumnMultiplierAndBiasWithLeadingDimensions) {
  const std::vector<float> multipliers = {0.5f, 1.f, 2.f};
  const std::vector<int32_t> bias = {1, -2, 3};
  const int32_t acc[2][4] = {{1, 2, 3, 99}, {-4, 5, -6, 99}};
  uint8_t out[2][5];
  std::memset(out, 0xEE, sizeof(out));
  Epilogue p;
  p.multiplier.data = multipliers.data();
  p.multiplier.per_column = true;
  p.bias.data = bias.data();
  p.bias.per_column = true;
  p.zero_point = 100;
  p.output = EpilogueOutput::kUInt8;
  ApplyEpilogueBlock(p, &acc[0][0], 4, 0, 2, 0, 3, &out[0][0], 5, ActiveIsa());
  // (1+1)*0.5=1, (2-2)*1=0, (3+3)*2=12; (-4+1)*0.5=-1.5->-2, (5-2)*1=3, (-6+3)*2=-6.
  EXPECT_EQ(std::vector<int>(out[0], out[0] + 5), (std::vector<int>{101, 100, 112, 0xEE, 0xEE}));
  EXPECT_EQ(std::vector<int>(out[1], out[1] + 5), (std::vector<int>{98, 103, 94, 0xEE, 0xEE}));
}

TEST(Requantize, MultiplierIsFormedAsProductThenQuotient) {
  const float a = 0.0123f, b = 0.0456f, y = 0.0789f;
  EXPECT_EQ(RequantizeMultiplier(a, b, y), (a * b) / y);
}

// ---------------------------------------------------------------- references

// A quantization parameter of A (per tensor, [M] or A's shape with last dim 1)
// or of B (per tensor, [N] or B's shape with dim -2 = 1): value for matrix
// `matrix` of the operand and row/column `i` of `count`.
int64_t ParamIndex(const Tensor& param, int64_t matrix, int64_t i, int64_t count) {
  return param.numel() == 1 ? 0 : matrix * count + i;
}

struct ExpectedMatMul {
  Shape shape;
  std::vector<int64_t> acc;
  std::vector<int64_t> b_matrix_of_entry;  // B matrix used by each output batch entry
  int64_t m = 0, n = 0;
};

// numpy.matmul of (A - za) and (B - zb) in int64, written independently of the op.
ExpectedMatMul NaiveMatMul(const Tensor& a, const Tensor* za, const Tensor& b, const Tensor* zb) {
  Shape as = a.shape(), bs = b.shape();
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  const size_t batch_rank = std::max(as.size(), bs.size()) - 2;
  Shape ab(batch_rank, 1), bb(batch_rank, 1), batch(batch_rank, 1);
  std::copy(as.begin(), as.end() - 2, ab.end() - (as.size() - 2));
  std::copy(bs.begin(), bs.end() - 2, bb.end() - (bs.size() - 2));
  for (size_t d = 0; d < batch_rank; ++d) batch[d] = ab[d] == 1 ? bb[d] : ab[d];
  ExpectedMatMul r;
  r.m = m;
  r.n = n;
  r.shape = batch;
  if (a.rank() > 1) r.shape.push_back(m);
  if (b.rank() > 1) r.shape.push_back(n);
  int64_t entries = 1;
  for (int64_t d : batch) entries *= d;
  for (int64_t e = 0; e < entries; ++e) {
    // Unravel e, then ravel into A's and B's batch dims (size-1 dims broadcast).
    int64_t rest = e, a_mat = 0, b_mat = 0, a_mul = 1, b_mul = 1;
    for (size_t d = batch_rank; d-- > 0;) {
      const int64_t idx = rest % batch[d];
      rest /= batch[d];
      a_mat += (ab[d] == 1 ? 0 : idx) * a_mul;
      b_mat += (bb[d] == 1 ? 0 : idx) * b_mul;
      a_mul *= ab[d];
      b_mul *= bb[d];
    }
    r.b_matrix_of_entry.push_back(b_mat);
    for (int64_t i = 0; i < m; ++i) {
      const int64_t zai = za ? Int8At(*za, ParamIndex(*za, a_mat, i, m)) : 0;
      for (int64_t j = 0; j < n; ++j) {
        const int64_t zbj = zb ? Int8At(*zb, ParamIndex(*zb, b_mat, j, n)) : 0;
        int64_t sum = 0;
        for (int64_t p = 0; p < k; ++p)
          sum += (Int8At(a, (a_mat * m + i) * k + p) - zai) *
                 (Int8At(b, (b_mat * k + p) * n + j) - zbj);
        r.acc.push_back(sum);
      }
    }
  }
  return r;
}

std::vector<int64_t> Int32Values(const Tensor& t) {
  const int32_t* p = t.data<int32_t>();
  return std::vector<int64_t>(p, p + t.numel());
}

std::vector<int64_t> Int8Values(const Tensor& t) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(Int8At(t, i));
  return v;
}

const std::vector<std::pair<DType, DType>> kTypePairs = {{DType::kUInt8, DType::kUInt8},
                                                         {DType::kUInt8, DType::kInt8},
                                                         {DType::kInt8, DType::kUInt8},
                                                         {DType::kInt8, DType::kInt8}};

// ---------------------------------------------------------------- MatMulInteger

struct ShapePair {
  Shape a, b;
};

const std::vector<ShapePair> kShapes = {{{1, 1}, {1, 1}},
                                        {{3, 1}, {1, 5}},
                                        {{7, 13}, {13, 9}},
                                        {{16, 33}, {33, 17}},
                                        {{2, 5, 4}, {4, 3}},
                                        {{5, 4}, {2, 4, 3}},
                                        {{2, 1, 3, 6}, {4, 6, 5}},
                                        {{3, 1, 2, 4}, {1, 2, 4, 7}},
                                        {{6}, {6, 4}},
                                        {{2, 6, 4}, {4}},
                                        {{5}, {5}},
                                        {{0, 4}, {4, 3}},
                                        {{3, 4}, {4, 0}},
                                        {{3, 0}, {0, 5}},
                                        {{2, 0, 3, 4}, {4, 2}}};

TEST(MatMulInteger, MatchesNaiveLoopsOnShapeGridAndEveryTypePair) {
  std::mt19937 rng(11);
  for (const auto& [ta, tb] : kTypePairs) {
    for (const ShapePair& s : kShapes) {
      SCOPED_TRACE(ShapeToString(s.a) + " x " + ShapeToString(s.b) + " " + DTypeName(ta) + "/" +
                   DTypeName(tb));
      const Tensor a = RandomInt8(ta, s.a, rng);
      const Tensor b = RandomInt8(tb, s.b, rng);
      // Zero points at the type limits and in the middle.
      for (int z : {0, 1, 2}) {
        const int za_value = z == 0 ? TypeMin(ta) : z == 1 ? TypeMax(ta) : 3;
        const int zb_value = z == 0 ? TypeMax(tb) : z == 1 ? TypeMin(tb) : 100;
        const Tensor za = ZeroPoints(ta, {}, {za_value});
        const Tensor zb = ZeroPoints(tb, {1}, {zb_value});
        const Tensor y = RunNode("MatMulInteger", 10, {a, b, za, zb});
        const ExpectedMatMul want = NaiveMatMul(a, &za, b, &zb);
        EXPECT_EQ(y.shape(), want.shape);
        EXPECT_EQ(Int32Values(y), want.acc);
      }
      // Without zero points.
      const Tensor y = RunNode("MatMulInteger", 10, {a, b});
      EXPECT_EQ(Int32Values(y), NaiveMatMul(a, nullptr, b, nullptr).acc);
    }
  }
}

TEST(MatMulInteger, FullRangeValuesDoNotSaturate) {
  // (255 - 0) * (-128 - 127) = -65025 per step; K = 2000 gives -130,050,000.
  const int64_t k = 2000;
  const Tensor a = MakeTensor<uint8_t>({2, k}, std::vector<uint8_t>(2 * k, 255));
  const Tensor b = MakeTensor<int8_t>({k, 3}, std::vector<int8_t>(3 * k, -128));
  const Tensor y = RunNode("MatMulInteger", 10, {a, b, Scalar<uint8_t>(0), Scalar<int8_t>(127)});
  EXPECT_EQ(Int32Values(y), std::vector<int64_t>(6, -65025 * k));
  const Tensor a8 = MakeTensor<int8_t>({1, k}, std::vector<int8_t>(k, -128));
  const Tensor y8 = RunNode("MatMulInteger", 10, {a8, b, Scalar<int8_t>(127), Scalar<int8_t>(127)});
  EXPECT_EQ(Int32Values(y8), std::vector<int64_t>(3, 255 * 255 * k));
}

TEST(MatMulInteger, PerRowAndPerColumnZeroPoints) {
  std::mt19937 rng(5);
  struct Case {
    Shape a, b, za, zb;
  };
  const std::vector<Case> cases = {{{4, 6}, {6, 5}, {4}, {5}},
                                   {{4, 6}, {6, 5}, {4, 1}, {1, 5}},
                                   {{2, 3, 6}, {2, 6, 5}, {2, 3, 1}, {2, 1, 5}},
                                   {{2, 3, 6}, {6, 5}, {2, 3, 1}, {5}},
                                   {{3, 6}, {2, 6, 5}, {3}, {2, 1, 5}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(ShapeToString(c.a) + " x " + ShapeToString(c.b));
    for (const auto& [ta, tb] : kTypePairs) {
      const Tensor a = RandomInt8(ta, c.a, rng);
      const Tensor b = RandomInt8(tb, c.b, rng);
      const Tensor za = RandomInt8(ta, c.za, rng);
      const Tensor zb = RandomInt8(tb, c.zb, rng);
      const Tensor y = RunNode("MatMulInteger", 10, {a, b, za, zb});
      EXPECT_EQ(Int32Values(y), NaiveMatMul(a, &za, b, &zb).acc);
    }
  }
}

TEST(MatMulInteger, OnnxBackendTestCase) {
  // onnx/backend/test/case/node/matmulinteger.py
  const Tensor a = MakeTensor<uint8_t>({4, 3}, {11, 7, 3, 10, 6, 2, 9, 5, 1, 8, 4, 0});
  const Tensor b = MakeTensor<uint8_t>({3, 2}, {1, 4, 2, 5, 3, 6});
  const Tensor y = RunNode("MatMulInteger", 10,
                           {a, b, MakeTensor<uint8_t>({}, {12}), MakeTensor<uint8_t>({}, {0})});
  EXPECT_EQ(y.shape(), (Shape{4, 2}));
  EXPECT_EQ(Int32Values(y), (std::vector<int64_t>{-38, -83, -44, -98, -50, -113, -56, -128}));
}

TEST(MatMulInteger, ErrorsNameTheNode) {
  const Tensor a = MakeTensor<uint8_t>({2, 3}, std::vector<uint8_t>(6, 1));
  const Tensor b = MakeTensor<int8_t>({4, 2}, std::vector<int8_t>(8, 1));
  const Tensor b_ok = MakeTensor<int8_t>({3, 2}, std::vector<int8_t>(6, 1));
  ExpectError(
      [&] {
        RunNode("MatMulInteger", 10, {a, b});
      },
      {"MatMulInteger(ai.onnx, opset 10) node 'node_under_test'", "inner dimensions"});
  ExpectError(
      [&] {
        RunNode("MatMulInteger", 10, {a, b_ok, std::nullopt, Scalar<uint8_t>(0)});
      },
      {"node_under_test", "unsupported input types"});
  ExpectError(
      [&] {
        RunNode("MatMulInteger", 10, {a, b_ok, std::nullopt, MakeTensor<int8_t>({3}, {0, 0, 0})});
      },
      {"node_under_test", "b_zero_point", "[3]"});
  ExpectError(
      [&] {
        RunNode("MatMulInteger", 10, {a, b_ok, MakeTensor<uint8_t>({3}, {0, 0, 0})});
      },
      {"node_under_test", "a_zero_point", "[3]"});
  const Tensor a3 = MakeTensor<uint8_t>({2, 2, 3}, std::vector<uint8_t>(12, 1));
  const Tensor b3 = MakeTensor<int8_t>({3, 3, 2}, std::vector<int8_t>(18, 1));
  ExpectError([&] { RunNode("MatMulInteger", 10, {a3, b3}); }, {"do not broadcast"});
  ExpectError([&] { RunNode("MatMulInteger", 10, {Scalar<uint8_t>(1), b_ok}); }, {"rank >= 1"});
}

// ---------------------------------------------------------------- QLinearMatMul

struct QParams {
  float a_scale, y_scale;
  int za, zy;
};

// Runs QLinearMatMul and compares with the naive product and the documented epilogue.
void CheckQLinearMatMul(int opset, const Tensor& a, const Tensor& b, const QParams& q,
                        const Tensor& b_scale, const Tensor& zb, DType y_type) {
  const Tensor za = ZeroPoints(a.dtype(), {}, {q.za});
  const Tensor zy = ZeroPoints(y_type, {1}, {q.zy});
  const Tensor y = RunNode("QLinearMatMul", opset,
                           {a, Scalar(q.a_scale), za, b, b_scale, zb, Scalar(q.y_scale), zy});
  const ExpectedMatMul want = NaiveMatMul(a, &za, b, &zb);
  ASSERT_EQ(y.shape(), want.shape);
  ASSERT_EQ(y.dtype(), y_type);
  const float* bs = b_scale.data<float>();
  std::vector<int64_t> expected;
  for (size_t i = 0; i < want.acc.size(); ++i) {
    const int64_t entry = static_cast<int64_t>(i) / (want.m * want.n);
    const int64_t col = static_cast<int64_t>(i) % want.n;
    const float b_scale_value = bs[ParamIndex(b_scale, want.b_matrix_of_entry[entry], col, want.n)];
    expected.push_back(
        ExpectedRequant(want.acc[i], q.a_scale, b_scale_value, q.y_scale, q.zy, y_type));
  }
  EXPECT_EQ(Int8Values(y), expected);
}

TEST(QLinearMatMul, MatchesReferenceOnShapeGridAndEveryTypeCombination) {
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  for (int opset : {10, 21}) {
    for (const auto& [ta, tb] : kTypePairs) {
      for (DType ty : {DType::kUInt8, DType::kInt8}) {
        for (const ShapePair& s : kShapes) {
          SCOPED_TRACE(ShapeToString(s.a) + " x " + ShapeToString(s.b) + " " + DTypeName(ta) + "/" +
                       DTypeName(tb) + "->" + DTypeName(ty));
          const Tensor a = RandomInt8(ta, s.a, rng);
          const Tensor b = RandomInt8(tb, s.b, rng);
          // Scales sized so outputs spread over the range and reach saturation.
          const int64_t k = s.a.back();
          const QParams q{scale(rng), 0.f, TypeMin(ta) + 70, TypeMax(ty) - 90};
          QParams qs = q;
          qs.y_scale = q.a_scale * 0.02f * std::sqrt(static_cast<float>(std::max<int64_t>(k, 1)));
          CheckQLinearMatMul(opset, a, b, qs, Scalar(scale(rng)), ZeroPoints(tb, {}, {TypeMax(tb)}),
                             ty);
        }
      }
    }
  }
}

TEST(QLinearMatMul, PerColumnScalesAndZeroPointsWithBatches) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> scale(0.002f, 0.03f);
  std::uniform_int_distribution<int> zero(0, 255);
  struct Case {
    Shape a, b, b_param;
  };
  const std::vector<Case> cases = {{{5, 8}, {8, 7}, {7}},
                                   {{5, 8}, {8, 7}, {1, 7}},
                                   {{3, 5, 8}, {3, 8, 7}, {3, 1, 7}},
                                   {{2, 1, 5, 8}, {3, 8, 7}, {3, 1, 7}},
                                   {{8}, {2, 8, 7}, {2, 1, 7}}};
  for (const Case& c : cases) {
    for (const auto& [ta, tb] : kTypePairs) {
      SCOPED_TRACE(ShapeToString(c.a) + " x " + ShapeToString(c.b));
      const Tensor a = RandomInt8(ta, c.a, rng);
      const Tensor b = RandomInt8(tb, c.b, rng);
      Tensor b_scale(DType::kFloat32, c.b_param);
      for (int64_t i = 0; i < b_scale.numel(); ++i) b_scale.data<float>()[i] = scale(rng);
      const Tensor zb = RandomInt8(tb, c.b_param, rng);
      const QParams q{0.02f, 0.05f, TypeMin(ta) + zero(rng) % 256, TypeMin(ta) + zero(rng)};
      CheckQLinearMatMul(10, a, b, q, b_scale, zb, ta);
    }
  }
}

TEST(QLinearMatMul, EmptyAndZeroDepthProducts) {
  // K = 0: every accumulator is 0, so every output is the output zero point.
  const Tensor a = MakeTensor<uint8_t>({3, 0}, {});
  const Tensor b = MakeTensor<int8_t>({0, 4}, {});
  const Tensor y = RunNode("QLinearMatMul", 10,
                           {a, Scalar(0.1f), Scalar<uint8_t>(3), b, Scalar(0.2f),
                            Scalar<int8_t>(-5), Scalar(0.3f), Scalar<uint8_t>(77)});
  EXPECT_EQ(y.shape(), (Shape{3, 4}));
  EXPECT_EQ(Int8Values(y), std::vector<int64_t>(12, 77));
  const Tensor a0 = MakeTensor<uint8_t>({2, 0, 3}, {});
  const Tensor b0 = MakeTensor<int8_t>({3, 4}, std::vector<int8_t>(12, 1));
  const Tensor y0 = RunNode("QLinearMatMul", 10,
                            {a0, Scalar(0.1f), Scalar<uint8_t>(3), b0, Scalar(0.2f),
                             Scalar<int8_t>(-5), Scalar(0.3f), Scalar<uint8_t>(77)});
  EXPECT_EQ(y0.shape(), (Shape{2, 0, 4}));
}

TEST(QLinearMatMul, TiesAndSaturationAtZeroPointLimits) {
  // The probe's ties case (tools/probe_ort_requant.py): multiplier 0.5 and
  // acc = 3 * (a - a_zero) puts every odd accumulator on a .5 tie; zero points
  // at the type limits saturate half of the outputs.
  for (DType t : {DType::kUInt8, DType::kInt8}) {
    const int a_zero = t == DType::kUInt8 ? 128 : 0;
    std::vector<int> a_values;
    for (int v = TypeMin(t); v <= TypeMax(t); ++v) a_values.push_back(v);
    const Tensor a = ZeroPoints(t, {256, 1}, a_values);
    for (int y_zero : {TypeMin(t), TypeMax(t), TypeMin(t) + 128}) {
      const Tensor y =
          RunNode("QLinearMatMul", 10,
                  {a, Scalar(0.5f), ZeroPoints(t, {}, {a_zero}), ZeroPoints(t, {1, 1}, {3}),
                   Scalar(1.f), ZeroPoints(t, {}, {0}), Scalar(1.f), ZeroPoints(t, {}, {y_zero})});
      std::vector<int64_t> expected;
      for (int v : a_values) {
        const int64_t acc = 3 * (v - a_zero);
        // acc / 2 rounded half to even, worked with integers.
        const int64_t half = acc >= 0 ? acc / 2 : -((-acc) / 2);
        int64_t rounded = half;
        if (acc % 2 != 0) rounded = (half % 2 == 0) ? half : half + (acc > 0 ? 1 : -1);
        expected.push_back(std::clamp<int64_t>(rounded + y_zero, TypeMin(t), TypeMax(t)));
      }
      EXPECT_EQ(Int8Values(y), expected) << DTypeName(t) << " y_zero " << y_zero;
    }
  }
}

TEST(QLinearMatMul, MultiplierOrderMatchesOnnxRuntime) {
  // tools/probe_ort_requant.py (emit_order_test_case): b_scale walks ulps around
  // 0.5 * y_scale / a_scale, every acc * multiplier sits next to a .5 tie, and
  // a*(b/y), (a/y)*b, a*b*(1/y) and a double-precision multiplier each give a
  // different output somewhere. Expected values: ONNX Runtime 1.31.1.
  const float a_scale = 0x1.490418p-4f, y_scale = 0x1.e05480p-5f;
  const std::vector<float> b_scale = {
      0x1.75bbdep-2f, 0x1.75bbe0p-2f, 0x1.75bbe2p-2f, 0x1.75bbe4p-2f,
      0x1.75bbe6p-2f, 0x1.75bbe8p-2f, 0x1.75bbeap-2f, 0x1.75bbecp-2f,
      0x1.75bbeep-2f, 0x1.75bbf0p-2f, 0x1.75bbf2p-2f, 0x1.75bbf4p-2f,
      0x1.75bbf6p-2f, 0x1.75bbf8p-2f, 0x1.75bbfap-2f, 0x1.75bbfcp-2f};
  const Tensor a = MakeTensor<uint8_t>({6, 1}, {129, 131, 125, 133, 127, 121});
  const Tensor b = MakeTensor<int8_t>({1, 16}, std::vector<int8_t>(16, 1));
  const Tensor y =
      RunNode("QLinearMatMul", 21,
              {a, Scalar(a_scale), Scalar<uint8_t>(128), b, MakeTensor<float>({16}, b_scale),
               MakeTensor<int8_t>({16}, std::vector<int8_t>(16, 0)), Scalar(y_scale),
               Scalar<uint8_t>(128)});
  std::vector<int64_t> ort;
  auto row = [&](int before, int value_before, int value_after) {
    for (int i = 0; i < 16; ++i) ort.push_back(i < before ? value_before : value_after);
  };
  row(9, 128, 129);  // acc 1
  row(9, 129, 130);  // acc 3
  row(9, 127, 126);  // acc -3
  row(9, 130, 131);  // acc 5
  row(9, 128, 127);  // acc -1
  row(9, 125, 124);  // acc -7
  EXPECT_EQ(Int8Values(y), ort);
}

// onnx/backend/test/case/node/qlinearmatmul.py, 2-D and 3-D, float32 and
// float16 scales (opset 21).
TEST(QLinearMatMul, OnnxBackendTestCases) {
  for (bool is_signed : {false, true}) {
    for (bool half : {false, true}) {
      const int shift = is_signed ? 127 : 0;
      auto q8 = [&](Shape shape, std::vector<int> values) {
        for (int& v : values) v -= shift;
        return ZeroPoints(is_signed ? DType::kInt8 : DType::kUInt8, std::move(shape), values);
      };
      // float16 bits of 0.0066, 0.00705, 0.0107 (numpy.float16).
      auto scale = [&](float value, uint16_t half_bits) {
        return half ? MakeTensor<uint16_t>({1}, {half_bits}) : MakeTensor<float>({1}, {value});
      };
      const Tensor a_scale = scale(0.0066f, 0x1ec2), b_scale = scale(0.00705f, 0x1f38),
                   y_scale = scale(0.0107f, 0x217a);
      auto as_half = [&](const Tensor& t) {
        return half ? Tensor::View(DType::kFloat16, {1}, const_cast<void*>(t.raw()), nullptr) : t;
      };
      const Tensor a = q8({2, 4}, {208, 236, 0, 238, 3, 214, 255, 29});
      const Tensor b = q8({4, 3}, {152, 51, 244, 60, 26, 255, 0, 127, 246, 127, 254, 247});
      const Tensor y = RunNode("QLinearMatMul", 21,
                               {a, as_half(a_scale), q8({1}, {113}), b, as_half(b_scale),
                                q8({1}, {114}), as_half(y_scale), q8({1}, {118})});
      const std::vector<int64_t> want = is_signed ? std::vector<int64_t>{41, -12, -9, 1, -75, -128}
                                                  : std::vector<int64_t>{168, 115, 255, 1, 66, 151};
      EXPECT_EQ(Int8Values(y), want) << (is_signed ? "int8" : "uint8") << (half ? " float16" : "");

      std::vector<int> a3 = {208, 236, 0, 238, 3, 214, 255, 29};
      a3.insert(a3.end(), a3.begin(), a3.end());
      std::vector<int> b3 = {152, 51, 244, 60, 26, 255, 0, 127, 246, 127, 254, 247};
      b3.insert(b3.end(), b3.begin(), b3.end());
      const Tensor y3 =
          RunNode("QLinearMatMul", 21,
                  {q8({2, 2, 4}, a3), as_half(a_scale), q8({1}, {113}), q8({2, 4, 3}, b3),
                   as_half(b_scale), q8({1}, {114}), as_half(y_scale), q8({1}, {118})});
      std::vector<int64_t> want3 = want;
      want3.insert(want3.end(), want.begin(), want.end());
      EXPECT_EQ(y3.shape(), (Shape{2, 2, 3}));
      EXPECT_EQ(Int8Values(y3), want3);
    }
  }
}

TEST(QLinearMatMul, ErrorsNameTheNode) {
  const Tensor a = MakeTensor<uint8_t>({2, 3}, std::vector<uint8_t>(6, 1));
  const Tensor b = MakeTensor<int8_t>({3, 2}, std::vector<int8_t>(6, 1));
  const Tensor b_bad = MakeTensor<int8_t>({2, 2}, std::vector<int8_t>(4, 1));
  auto run = [&](int opset, const Tensor& a_scale, const Tensor& za, const Tensor& bb,
                 const Tensor& b_scale, const Tensor& zb) {
    RunNode("QLinearMatMul", opset,
            {a, a_scale, za, bb, b_scale, zb, Scalar(0.1f), Scalar<uint8_t>(0)});
  };
  ExpectError(
      [&] { run(10, Scalar(1.f), Scalar<uint8_t>(0), b_bad, Scalar(1.f), Scalar<int8_t>(0)); },
      {"QLinearMatMul(ai.onnx, opset 10) node 'node_under_test'", "inner dimensions"});
  ExpectError(
      [&] {
        run(10, MakeTensor<float>({2}, {1.f, 1.f}), MakeTensor<uint8_t>({2}, {0, 0}), b,
            Scalar(1.f), Scalar<int8_t>(0));
      },
      {"node_under_test", "a_scale", "per-tensor"});
  ExpectError(
      [&] {
        run(10, Scalar(1.f), Scalar<uint8_t>(0), b, MakeTensor<float>({3}, {1.f, 1.f, 1.f}),
            Scalar<int8_t>(0));
      },
      {"node_under_test", "b_scale", "[3]"});
  // Zero point dtype differs from its input's: no kernel.
  ExpectError([&] { run(10, Scalar(1.f), Scalar<int8_t>(0), b, Scalar(1.f), Scalar<int8_t>(0)); },
              {"node_under_test", "unsupported input types"});
  // float16 scales only from opset 21; float8 inputs never.
  const Tensor half_one = MakeTensor<uint16_t>({}, {0x3c00});
  const Tensor half_scale = Tensor::View(DType::kFloat16, {}, const_cast<void*>(half_one.raw()));
  ExpectError([&] { run(10, half_scale, Scalar<uint8_t>(0), b, half_scale, Scalar<int8_t>(0)); },
              {"node_under_test", "unsupported input types (uint8, float16"});
  const Tensor f8 = Tensor(DType::kFloat8E4M3FN, {2, 3});
  ExpectError(
      [&] {
        RunNode("QLinearMatMul", 21,
                {f8, Scalar(1.f), Tensor(DType::kFloat8E4M3FN, {}), b, Scalar(1.f),
                 Scalar<int8_t>(0), Scalar(1.f), Scalar<uint8_t>(0)});
      },
      {"node_under_test", "float8e4m3fn"});
}

}  // namespace
}  // namespace octet

namespace octet {
namespace {

using int_test::ExpectedRequant;
using int_test::MakeTensor;
using int_test::RandomInt8;
using int_test::Scalar;
using int_test::TypeMax;
using int_test::TypeMin;
using int_test::ZeroPoints;

// ---------------------------------------------------------------- fast path

// Runs one node as a session would: the inputs marked in `constant` are given
// to the kernel at creation (so B is packed once), and `pool` runs the product.
Tensor RunWith(const std::string& domain, const std::string& op, int opset,
               const std::vector<std::optional<Tensor>>& inputs, const std::vector<bool>& constant,
               ThreadPool* pool) {
  return RunNode(
      op, opset, inputs,
      {.domain = domain, .name = "fast_node", .constant = constant, .pool = pool, .runs = 2});
}

// Each configuration: no pool, pools of 1, 2 and 3 threads.
struct Pools {
  ThreadPool one{1}, two{2}, three{3};
  std::vector<ThreadPool*> all() { return {nullptr, &one, &two, &three}; }
};

int64_t Wrap32(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }

TEST(MatMulIntegerFast, ConstantAndPerRunWeightsOnEveryThreadCount) {
  std::mt19937 rng(41);
  Pools pools;
  struct Case {
    Shape a, b, za, zb;
  };
  // GEMV, row blocks (K = 33000 gives 128-row blocks, with per-row zero points
  // crossing them), a batch of A against one 2-D constant B, batched B,
  // per-row / per-column zero points, attention-like heads (small products shared out whole).
  const std::vector<Case> cases = {
      {{1, 512}, {512, 300}, {}, {}},        {{1, 5, 64, 32}, {1, 5, 32, 64}, {}, {}},
      {{300, 40}, {40, 1024}, {}, {1024}},   {{130, 33000}, {33000, 3}, {130}, {3}},
      {{2, 3, 130, 24}, {24, 40}, {}, {40}}, {{2, 5, 8}, {2, 8, 33}, {2, 5, 1}, {2, 1, 33}},
      {{17, 9}, {9, 70}, {17}, {}},          {{4, 0}, {0, 6}, {}, {}}};
  for (const Case& c : cases) {
    for (const auto& [ta, tb] : kTypePairs) {
      SCOPED_TRACE(ShapeToString(c.a) + " x " + ShapeToString(c.b) + " " + DTypeName(ta) + "/" +
                   DTypeName(tb));
      const Tensor a = RandomInt8(ta, c.a, rng);
      const Tensor b = RandomInt8(tb, c.b, rng);
      const Tensor za =
          c.za.empty() ? ZeroPoints(ta, {}, {TypeMax(ta)}) : RandomInt8(ta, c.za, rng);
      const Tensor zb =
          c.zb.empty() ? ZeroPoints(tb, {}, {TypeMin(tb)}) : RandomInt8(tb, c.zb, rng);
      const ExpectedMatMul want = NaiveMatMul(a, &za, b, &zb);
      for (bool constant : {false, true}) {
        for (ThreadPool* pool : pools.all()) {
          const Tensor y = RunWith(kOnnxDomain, "MatMulInteger", 10, {a, b, za, zb},
                                   {false, constant, constant, constant}, pool);
          EXPECT_EQ(y.shape(), want.shape);
          EXPECT_EQ(Int32Values(y), want.acc)
              << "constant " << constant << " threads " << (pool ? pool->num_threads() : 0);
        }
      }
    }
  }
}

TEST(MatMulIntegerFast, KBeyondTheExactGemmLimitWrapsLikeInt32) {
  // 255 * -255 per step over K = kGemmMaxK + 5 steps: the true sum is below
  // INT32_MIN, so the int32 result wraps (as in ONNX Runtime); B is packed in
  // two K chunks whose products are added with wrap-around.
  const int64_t k = kGemmMaxK + 5;
  std::mt19937 rng(43);
  Tensor a = MakeTensor<uint8_t>({2, k}, std::vector<uint8_t>(2 * k, 255));
  static_cast<uint8_t*>(a.raw())[k + 7] = 3;  // one row not at the extreme
  const Tensor b = MakeTensor<int8_t>({k, 3}, std::vector<int8_t>(3 * k, -128));
  const Tensor za = Scalar<uint8_t>(0), zb = Scalar<int8_t>(127);
  const ExpectedMatMul want = NaiveMatMul(a, &za, b, &zb);
  std::vector<int64_t> wrapped;
  for (int64_t v : want.acc) wrapped.push_back(Wrap32(v));
  EXPECT_NE(wrapped, want.acc);  // the case does overflow int32
  Pools pools;
  for (bool constant : {false, true}) {
    const Tensor y =
        RunWith(kOnnxDomain, "MatMulInteger", 10, {a, b, za, zb}, {false, constant}, &pools.two);
    EXPECT_EQ(Int32Values(y), wrapped);
  }
  const Tensor r = RandomInt8(DType::kInt8, {k, 5}, rng),
               ar = RandomInt8(DType::kUInt8, {3, k}, rng);
  const Tensor y = RunWith(kOnnxDomain, "MatMulInteger", 10, {ar, r}, {false, true}, nullptr);
  std::vector<int64_t> want_r;
  for (int64_t v : NaiveMatMul(ar, nullptr, r, nullptr).acc) want_r.push_back(Wrap32(v));
  EXPECT_EQ(Int32Values(y), want_r);
}

TEST(QLinearMatMulFast, ConstantWeightsAndScalesOnEveryThreadCount) {
  std::mt19937 rng(47);
  std::uniform_real_distribution<float> scale(0.002f, 0.03f);
  Pools pools;
  struct Case {
    Shape a, b, b_param;
  };
  const std::vector<Case> cases = {{{1, 700}, {700, 260}, {260}},
                                   {{200, 64}, {64, 300}, {}},
                                   {{300, 8}, {8, 2100}, {2100}},  // 128-row blocks
                                   {{3, 70, 33}, {33, 65}, {1, 65}},
                                   {{2, 9, 16}, {2, 16, 40}, {2, 1, 40}},
                                   // Attention heads: run-time B packed per product, A
                                   // read in place, requantized in the AVX-512 tile.
                                   {{2, 6, 128, 32}, {2, 6, 32, 128}, {}},
                                   {{2, 5, 128, 128}, {2, 5, 128, 32}, {2, 5, 1, 32}},
                                   {{4, 100, 64}, {1, 64, 45}, {1, 1, 45}}};
  for (const Case& c : cases) {
    for (const auto& [ta, tb] : kTypePairs) {
      for (DType ty : {DType::kUInt8, DType::kInt8}) {
        SCOPED_TRACE(ShapeToString(c.a) + " x " + ShapeToString(c.b) + " -> " + DTypeName(ty));
        const Tensor a = RandomInt8(ta, c.a, rng);
        const Tensor b = RandomInt8(tb, c.b, rng);
        Tensor b_scale(DType::kFloat32, c.b_param);
        for (int64_t i = 0; i < b_scale.numel(); ++i) b_scale.data<float>()[i] = scale(rng);
        const Tensor zb = RandomInt8(tb, c.b_param, rng);
        const float a_scale = 0.02f;
        const float y_scale = a_scale * 0.015f * std::sqrt(static_cast<float>(c.a.back()));
        const int a_zero = TypeMin(ta) + 77, y_zero = TypeMin(ty) + 120;
        const Tensor za = ZeroPoints(ta, {}, {a_zero}), zy = ZeroPoints(ty, {}, {y_zero});
        const ExpectedMatMul want = NaiveMatMul(a, &za, b, &zb);
        std::vector<int64_t> expected;
        for (size_t i = 0; i < want.acc.size(); ++i) {
          const int64_t entry = static_cast<int64_t>(i) / (want.m * want.n);
          const int64_t col = static_cast<int64_t>(i) % want.n;
          const float bs =
              b_scale
                  .data<float>()[ParamIndex(b_scale, want.b_matrix_of_entry[entry], col, want.n)];
          expected.push_back(ExpectedRequant(want.acc[i], a_scale, bs, y_scale, y_zero, ty));
        }
        for (bool constant : {false, true}) {
          for (ThreadPool* pool : pools.all()) {
            const Tensor y = RunWith(
                kOnnxDomain, "QLinearMatMul", 10,
                {a, Scalar(a_scale), za, b, b_scale, zb, Scalar(y_scale), zy},
                {false, constant, constant, constant, constant, constant, constant, constant},
                pool);
            EXPECT_EQ(Int8Values(y), expected)
                << "constant " << constant << " threads " << (pool ? pool->num_threads() : 0);
          }
        }
      }
    }
  }
}

// ------------------------------------------------ com.microsoft float outputs

// float(acc) * (a_scale * b_scale[n]), rounded to float32, then + bias[n]
// rounded to float32 (no fused multiply-add), written independently.
float ExpectedFloatOutput(int64_t acc, float a_scale, float b_scale, const float* bias) {
  const float multiplier = a_scale * b_scale;
  const float product = static_cast<float>(
      static_cast<double>(static_cast<float>(static_cast<int32_t>(acc))) * multiplier);
  return bias ? static_cast<float>(static_cast<double>(product) + *bias) : product;
}

std::vector<float> ExpectedFloatMatMul(const Tensor& a, const Tensor* za, float a_scale,
                                       const Tensor& b, const Tensor& b_scale, const Tensor* zb,
                                       const Tensor* bias) {
  const ExpectedMatMul want = NaiveMatMul(a, za, b, zb);
  std::vector<float> y;
  for (size_t i = 0; i < want.acc.size(); ++i) {
    const int64_t entry = static_cast<int64_t>(i) / (want.m * want.n);
    const int64_t col = static_cast<int64_t>(i) % want.n;
    const float bs =
        b_scale.data<float>()[ParamIndex(b_scale, want.b_matrix_of_entry[entry], col, want.n)];
    y.push_back(
        ExpectedFloatOutput(want.acc[i], a_scale, bs, bias ? bias->data<float>() + col : nullptr));
  }
  return y;
}

std::vector<float> FloatValues(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

struct FloatCase {
  Shape a, b, b_param;
  bool bias;
};

const std::vector<FloatCase> kFloatCases = {{{1, 300}, {300, 70}, {}, true},
                                            {{37, 64}, {64, 129}, {129}, true},
                                            {{2, 150, 33}, {33, 300}, {300}, false},
                                            {{5, 8}, {8, 3}, {}, false},
                                            {{130, 256}, {256, 128}, {128}, true}};

// ------------------------------------------ QLinearMatMul with folded head Transposes

// numpy.transpose of a 4-D int8 tensor, written independently of the kernel.
Tensor Transpose4(const Tensor& t, const std::vector<int64_t>& perm) {
  const Shape& in = t.shape();
  Tensor out(t.dtype(), {in[perm[0]], in[perm[1]], in[perm[2]], in[perm[3]]});
  const int64_t in_strides[4] = {in[1] * in[2] * in[3], in[2] * in[3], in[3], 1};
  const auto* src = static_cast<const uint8_t*>(t.raw());
  auto* dst = static_cast<uint8_t*>(out.raw());
  int64_t i = 0;
  for (int64_t a = 0; a < out.dim(0); ++a)
    for (int64_t b = 0; b < out.dim(1); ++b)
      for (int64_t c = 0; c < out.dim(2); ++c)
        for (int64_t d = 0; d < out.dim(3); ++d)
          dst[i++] = src[a * in_strides[perm[0]] + b * in_strides[perm[1]] +
                         c * in_strides[perm[2]] + d * in_strides[perm[3]]];
  return out;
}

// octet_a_perm / octet_b_perm / octet_y_perm (rewrite/int8_attention.h): A and B
// stored untransposed, Y stored transposed, against the naive product of the
// transposed operands, requantized by the documented formula.
TEST(QLinearMatMulFast, FoldedHeadTransposesReadAndWriteThroughStrides) {
  std::mt19937 rng(53);
  Pools pools;
  const std::vector<int64_t> heads_swap = {0, 2, 1, 3}, keys = {0, 2, 3, 1};
  struct Case {
    Shape q, k;   // stored [B, S, H, D] operands; S x D (times) D x S' or S x S' x S' x D
    bool scores;  // Q K^T (B perm [0, 2, 3, 1]) or P V (B perm [0, 2, 1, 3])
    bool a_perm, b_perm, y_perm;
  };
  const std::vector<Case> cases = {
      {{2, 128, 3, 32}, {2, 128, 3, 32}, true, true, true, false},  // MiniLM's Q K^T
      {{2, 7, 3, 8}, {2, 9, 3, 8}, true, true, true, true},
      {{1, 5, 2, 5}, {1, 6, 2, 5}, true, false, true, false},         // K not a multiple of 4
      {{2, 128, 3, 128}, {2, 128, 3, 32}, false, false, true, true},  // MiniLM's P V
      {{2, 7, 3, 9}, {2, 9, 3, 11}, false, true, true, true},
      {{3, 4, 2, 6}, {3, 6, 2, 5}, false, false, false, true},
      {{1, 130, 1, 20}, {1, 20, 1, 130}, false, true, false, true},  // 128-row blocks
  };
  for (const Case& c : cases) {
    for (const auto& [ta, tb] : kTypePairs) {
      for (DType ty : {DType::kUInt8, DType::kInt8}) {
        SCOPED_TRACE(ShapeToString(c.q) + " " + ShapeToString(c.k) + (c.scores ? " QK " : " PV ") +
                     std::to_string(c.a_perm) + std::to_string(c.b_perm) +
                     std::to_string(c.y_perm) + " " + DTypeName(ta) + "/" + DTypeName(tb) + "->" +
                     DTypeName(ty));
        const Tensor a_stored = RandomInt8(ta, c.q, rng);
        const Tensor b_stored = RandomInt8(tb, c.k, rng);
        const std::vector<int64_t> b_perm = c.scores ? keys : heads_swap;
        // Operands not read through a perm are given already transposed.
        const Tensor a_logical = Transpose4(a_stored, heads_swap);
        const Tensor b_logical = Transpose4(b_stored, b_perm);
        const Tensor& a_in = c.a_perm ? a_stored : a_logical;
        const Tensor& b_in = c.b_perm ? b_stored : b_logical;
        const float a_scale = 0.02f, b_scale = 0.01f;
        const float y_scale = a_scale * 0.015f * std::sqrt(static_cast<float>(a_logical.dim(3)));
        const int a_zero = TypeMin(ta) + 77, b_zero = TypeMin(tb) + 140, y_zero = TypeMin(ty) + 120;
        const Tensor za = ZeroPoints(ta, {}, {a_zero}), zb = ZeroPoints(tb, {}, {b_zero});
        const Tensor zy = ZeroPoints(ty, {}, {y_zero});
        const ExpectedMatMul want = NaiveMatMul(a_logical, &za, b_logical, &zb);
        Tensor expected_logical(ty, want.shape);
        for (size_t i = 0; i < want.acc.size(); ++i)
          static_cast<uint8_t*>(expected_logical.raw())[i] = static_cast<uint8_t>(
              ExpectedRequant(want.acc[i], a_scale, b_scale, y_scale, y_zero, ty));
        const Tensor expected =
            c.y_perm ? Transpose4(expected_logical, heads_swap) : expected_logical;
        std::map<std::string, Attribute> attributes;
        if (c.a_perm) attributes["octet_a_perm"] = Attribute::Ints(heads_swap);
        if (c.b_perm) attributes["octet_b_perm"] = Attribute::Ints(b_perm);
        if (c.y_perm) attributes["octet_y_perm"] = Attribute::Ints(heads_swap);
        for (ThreadPool* pool : pools.all()) {
          const Tensor y =
              RunNode("QLinearMatMul", 10,
                      {a_in, Scalar(a_scale), za, b_in, Scalar(b_scale), zb, Scalar(y_scale), zy},
                      {.attributes = attributes,
                       .name = "fast_node",
                       .constant = {false, true, true, false, true, true, true, true},
                       .pool = pool,
                       .runs = 2});
          ASSERT_EQ(y.shape(), expected.shape());
          EXPECT_EQ(Int8Values(y), Int8Values(expected))
              << "threads " << (pool ? pool->num_threads() : 0);
        }
      }
    }
  }
}

TEST(QLinearMatMulFast, FoldedHeadTransposeErrorsNameTheNode) {
  std::mt19937 rng(5);
  const Tensor a = RandomInt8(DType::kUInt8, {1, 2, 4, 8}, rng);  // [1, 2, 4, 8] x K^T [1, 2, 8, 4]
  const Tensor b = RandomInt8(DType::kUInt8, {1, 4, 2, 8}, rng);
  const Tensor z = Scalar<uint8_t>(0);
  const std::vector<std::optional<Tensor>> inputs = {a, Scalar(0.1f), z, b, Scalar(0.1f),
                                                     z, Scalar(0.5f), z};
  auto run = [&](const std::string& attr, std::vector<int64_t> perm,
                 std::vector<std::optional<Tensor>> in, std::vector<bool> constant = {}) {
    RunNode("QLinearMatMul", 10, in,
            {.attributes = {{attr, Attribute::Ints(std::move(perm))}},
             .name = "heads",
             .constant = std::move(constant)});
  };
  ExpectError(
      [&] {
        run("octet_a_perm", {0, 2, 3, 1}, inputs);
      },
      {"node 'heads'", "octet_a_perm must be [0, 2, 1, 3]"});
  ExpectError(
      [&] {
        run("octet_b_perm", {0, 1, 3, 2}, inputs);
      },
      {"node 'heads'", "octet_b_perm must be [0, 2, 1, 3] or [0, 2, 3, 1]"});
  std::vector<std::optional<Tensor>> flat = inputs;
  flat[0] = RandomInt8(DType::kUInt8, {4, 2, 8}, rng);
  ExpectError([&] { run("octet_a_perm", {0, 2, 1, 3}, flat); }, {"node 'heads'", "must be 4-D"});
  ExpectError(
      [&] {
        run("octet_b_perm", {0, 2, 3, 1}, inputs,
            {false, true, true, true, true, true, true, true});
      },
      {"node 'heads'", "constant B"});
  std::vector<std::optional<Tensor>> per_column = inputs;
  per_column[4] = MakeTensor<float>({1, 2, 1, 4}, std::vector<float>(8, 0.1f));
  ExpectError([&] { run("octet_b_perm", {0, 2, 3, 1}, per_column); }, {"node 'heads'", "b_scale"});
}

TEST(MatMulIntegerToFloat, MatchesTheFloatOrderOnEveryThreadCount) {
  std::mt19937 rng(53);
  std::uniform_real_distribution<float> scale(0.001f, 0.05f), bias_dist(-20.f, 20.f);
  Pools pools;
  for (const FloatCase& c : kFloatCases) {
    for (const auto& [ta, tb] : kTypePairs) {
      SCOPED_TRACE(ShapeToString(c.a) + " x " + ShapeToString(c.b) + " " + DTypeName(ta) + "/" +
                   DTypeName(tb));
      const Tensor a = RandomInt8(ta, c.a, rng);
      const Tensor b = RandomInt8(tb, c.b, rng);
      Tensor b_scale(DType::kFloat32, c.b_param), bias(DType::kFloat32, {c.b.back()});
      for (int64_t i = 0; i < b_scale.numel(); ++i) b_scale.data<float>()[i] = scale(rng);
      for (int64_t i = 0; i < bias.numel(); ++i) bias.data<float>()[i] = bias_dist(rng);
      const Tensor zb = RandomInt8(tb, c.b_param, rng);
      const Tensor za = ZeroPoints(ta, {}, {TypeMin(ta) + 99});
      const float a_scale = scale(rng);
      const std::vector<float> expected =
          ExpectedFloatMatMul(a, &za, a_scale, b, b_scale, &zb, c.bias ? &bias : nullptr);
      for (bool constant : {false, true}) {
        for (ThreadPool* pool : pools.all()) {
          std::vector<std::optional<Tensor>> inputs = {a, b, Scalar(a_scale), b_scale, za, zb};
          if (c.bias) inputs.push_back(bias);
          const Tensor y =
              RunWith(kMsDomain, "MatMulIntegerToFloat", 1, inputs,
                      {false, constant, constant, constant, constant, constant, constant}, pool);
          EXPECT_EQ(FloatValues(y), expected);
        }
      }
    }
  }
}

TEST(DynamicQuantizeMatMul, QuantizesAsDynamicQuantizeLinearThenMatchesTheFloatOrder) {
  std::mt19937 rng(59);
  std::normal_distribution<float> x_dist(0.3f, 2.f);
  std::uniform_real_distribution<float> scale(0.001f, 0.05f), bias_dist(-20.f, 20.f);
  Pools pools;
  for (const FloatCase& c : kFloatCases) {
    for (DType tb : {DType::kUInt8, DType::kInt8}) {
      SCOPED_TRACE(ShapeToString(c.a) + " x " + ShapeToString(c.b) + " " + DTypeName(tb));
      Tensor x(DType::kFloat32, c.a);
      for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = x_dist(rng);
      // DynamicQuantizeLinear (docs/int8.md), written out here.
      float low = 0.f, high = 0.f;
      for (int64_t i = 0; i < x.numel(); ++i) {
        low = std::min(low, x.data<float>()[i]);
        high = std::max(high, x.data<float>()[i]);
      }
      const float a_scale = (high - low) / 255.f;
      const int a_zero =
          static_cast<int>(int_test::RoundHalfEven(std::clamp(0.f - low / a_scale, 0.f, 255.f)));
      Tensor a(DType::kUInt8, c.a);
      for (int64_t i = 0; i < x.numel(); ++i) {
        const float q = std::clamp(x.data<float>()[i] / a_scale, static_cast<float>(-a_zero),
                                   static_cast<float>(255 - a_zero));
        static_cast<uint8_t*>(a.raw())[i] =
            static_cast<uint8_t>(int_test::RoundHalfEven(q) + a_zero);
      }
      const Tensor za = ZeroPoints(DType::kUInt8, {}, {a_zero});
      const Tensor b = RandomInt8(tb, c.b, rng);
      Tensor b_scale(DType::kFloat32, c.b_param), bias(DType::kFloat32, {c.b.back()});
      for (int64_t i = 0; i < b_scale.numel(); ++i) b_scale.data<float>()[i] = scale(rng);
      for (int64_t i = 0; i < bias.numel(); ++i) bias.data<float>()[i] = bias_dist(rng);
      const Tensor zb = RandomInt8(tb, c.b_param, rng);
      const std::vector<float> expected =
          ExpectedFloatMatMul(a, &za, a_scale, b, b_scale, &zb, c.bias ? &bias : nullptr);
      for (bool constant : {false, true}) {
        for (ThreadPool* pool : pools.all()) {
          std::vector<std::optional<Tensor>> inputs = {x, b, b_scale, zb};
          if (c.bias) inputs.push_back(bias);
          const Tensor y = RunWith(kMsDomain, "DynamicQuantizeMatMul", 1, inputs,
                                   {false, constant, constant, constant, constant}, pool);
          EXPECT_EQ(FloatValues(y), expected);
        }
      }
    }
  }
}

TEST(MatMulIntegerToFloat, ErrorsNameTheNode) {
  const Tensor a = MakeTensor<uint8_t>({2, 3}, std::vector<uint8_t>(6, 1));
  const Tensor b = MakeTensor<int8_t>({3, 2}, std::vector<int8_t>(6, 1));
  int_test::ExpectError(
      [&] {
        RunWith(kMsDomain, "MatMulIntegerToFloat", 1,
                {a, b, MakeTensor<float>({2}, {1.f, 1.f}), Scalar(1.f)}, {}, nullptr);
      },
      {"MatMulIntegerToFloat(com.microsoft, opset 1) node 'fast_node'", "a_scale"});
  int_test::ExpectError(
      [&] {
        RunWith(kMsDomain, "MatMulIntegerToFloat", 1,
                {a, b, Scalar(1.f), Scalar(1.f), std::nullopt, std::nullopt,
                 MakeTensor<float>({3}, {1.f, 1.f, 1.f})},
                {}, nullptr);
      },
      {"fast_node", "bias", "[3]"});
  int_test::ExpectError(
      [&] {
        RunWith(kMsDomain, "DynamicQuantizeMatMul", 1,
                {MakeTensor<float>({2, 3}, std::vector<float>(6, 1.f)), b,
                 MakeTensor<float>({3}, {1.f, 1.f, 1.f})},
                {}, nullptr);
      },
      {"DynamicQuantizeMatMul(com.microsoft, opset 1)", "b_scale", "[3]"});
}

}  // namespace
}  // namespace octet
