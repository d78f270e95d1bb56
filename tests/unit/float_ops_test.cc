// Float ops (MatMul, Add/Sub/Mul/Div, Relu) through the kernel registry,
// checked against naive index-based references.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "core/thread_pool.h"
#include "int_op_test_util.h"
#include "ops/registry.h"

namespace octet {
namespace {

Tensor Make(Shape shape, std::vector<float> values) {
  Tensor t(DType::kFloat32, std::move(shape));
  EXPECT_EQ(static_cast<size_t>(t.numel()), values.size());
  if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * sizeof(float));
  return t;
}

// Integer-valued floats: every product and partial sum is exact, so any
// summation order gives the same result and a double reference is exact.
Tensor SmallInts(Shape shape, uint32_t seed) {
  Tensor t(DType::kFloat32, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-8, 8);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(dist(rng));
  return t;
}

Tensor RunOp(const std::string& op, int opset, const std::vector<Tensor>& inputs,
             ThreadPool* pool = nullptr) {
  return int_test::RunNode(op, opset, {inputs.begin(), inputs.end()}, {.pool = pool});
}

std::vector<float> Values(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

// Row-major offset of `index` (aligned right) in `shape`, size-1 dims broadcast.
int64_t Offset(const Shape& shape, const std::vector<int64_t>& index) {
  int64_t offset = 0, stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    const int64_t pos = index[index.size() - shape.size() + i];
    offset += (shape[i] == 1 ? 0 : pos) * stride;
    stride *= shape[i];
  }
  return offset;
}

std::vector<int64_t> Unravel(int64_t flat, const Shape& shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

// numpy.matmul for operands of rank >= 2, in double.
std::vector<double> ReferenceMatMul(const Tensor& a, const Tensor& b, const Shape& out) {
  const int64_t k = a.shape().back();
  std::vector<double> result(NumElements(out));
  const Shape a_batch(a.shape().begin(), a.shape().end() - 2);
  const Shape b_batch(b.shape().begin(), b.shape().end() - 2);
  for (int64_t flat = 0; flat < static_cast<int64_t>(result.size()); ++flat) {
    std::vector<int64_t> idx = Unravel(flat, out);
    const int64_t i = idx[idx.size() - 2], j = idx.back();
    std::vector<int64_t> batch(idx.begin(), idx.end() - 2);
    const int64_t a_base = Offset(a_batch, batch) * a.dim(a.rank() - 2) * k;
    const int64_t b_base = Offset(b_batch, batch) * k * b.shape().back();
    double sum = 0;
    for (int64_t p = 0; p < k; ++p)
      sum += double{a.data<float>()[a_base + i * k + p]} *
             b.data<float>()[b_base + p * b.shape().back() + j];
    result[flat] = sum;
  }
  return result;
}

// Reductions over trailing dims read each output's run in place; over leading ones
// they walk x. Both add in increasing index from 0 in double: a double reference in
// that order, and the same elements transposed (reduced dim first), agree bit for bit.
TEST(FloatReduce, TrailingAndLeadingDimsAddInTheSameOrder) {
  for (const auto& [rows, length] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 576}, {5, 37}, {8, 1}, {3, 0}, {9, 130}}) {
    Tensor x(DType::kFloat32, {rows, length}), x_t(DType::kFloat32, {length, rows});
    std::mt19937 rng(static_cast<uint32_t>(rows * 1000 + length));
    std::normal_distribution<float> dist(0.f, 3.f);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < length; ++i)
        x_t.data<float>()[i * rows + r] = x.data<float>()[r * length + i] = dist(rng);
    Tensor axes_last(DType::kInt64, {1}), axes_first(DType::kInt64, {1});
    axes_last.data<int64_t>()[0] = -1;
    axes_first.data<int64_t>()[0] = 0;
    for (const char* op : {"ReduceSum", "ReduceMean"}) {
      const Tensor trailing = RunOp(op, 18, {x, axes_last});
      const Tensor leading = RunOp(op, 18, {x_t, axes_first});
      ASSERT_EQ(trailing.numel(), rows);
      ASSERT_EQ(leading.numel(), rows);
      for (int64_t r = 0; r < rows; ++r) {
        double sum = 0;
        for (int64_t i = 0; i < length; ++i) sum += x.data<float>()[r * length + i];
        const float expected = std::string(op) == "ReduceSum"
                                   ? static_cast<float>(sum)
                                   : static_cast<float>(sum / static_cast<double>(length));
        const float got = trailing.data<float>()[r], walked = leading.data<float>()[r];
        EXPECT_EQ(std::memcmp(&got, &expected, 4), 0) << op << " " << rows << "x" << length;
        EXPECT_EQ(std::memcmp(&walked, &expected, 4), 0) << op << " " << rows << "x" << length;
      }
    }
  }
}

// Pow by one exponent runs a plain loop: x^2 is x * x, other exponents std::pow, the
// same as an exponent broadcast from a tensor of several equal values.
TEST(FloatPow, OneExponentMatchesItsBroadcastForm) {
  Tensor x(DType::kFloat32, {3, 7});
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(0.1f, 4.f);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = dist(rng);
  for (float e : {2.f, 3.f, 0.5f}) {
    const Tensor one = RunOp("Pow", 15, {x, Make({}, {e})});
    const Tensor per_column = RunOp("Pow", 15, {x, Make({7}, std::vector<float>(7, e))});
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float v = x.data<float>()[i];
      const float expected = e == 2.f ? v * v : std::pow(v, e);
      EXPECT_EQ(one.data<float>()[i], expected) << "exponent " << e;
      EXPECT_EQ(per_column.data<float>()[i], expected) << "exponent " << e;
    }
  }
}

TEST(FloatMatMul, MatchesReferenceWithBatchBroadcast) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 4}, {4, 5}}, {{2, 3, 4}, {4, 5}}, {{3, 4}, {2, 4, 5}}, {{2, 1, 3, 4}, {5, 4, 2}},
      {{1, 1}, {1, 1}}, {{7, 33}, {33, 17}}, {{2, 0, 3}, {3, 4}}, {{2, 3, 0}, {0, 4}}};
  uint32_t seed = 1;
  for (const auto& [sa, sb] : cases) {
    Tensor a = SmallInts(sa, seed++), b = SmallInts(sb, seed++);
    Tensor c = RunOp("MatMul", 13, {a, b});
    Shape batch_a(sa.begin(), sa.end() - 2), batch_b(sb.begin(), sb.end() - 2);
    Shape expected_shape(std::max(batch_a.size(), batch_b.size()));
    for (size_t i = 0; i < expected_shape.size(); ++i) {
      auto dim = [&](const Shape& s) {
        size_t off = expected_shape.size() - s.size();
        return i < off ? int64_t{1} : s[i - off];
      };
      expected_shape[i] = std::max(dim(batch_a), dim(batch_b));
    }
    expected_shape.push_back(sa[sa.size() - 2]);
    expected_shape.push_back(sb.back());
    ASSERT_EQ(c.shape(), expected_shape) << ShapeToString(sa) << " x " << ShapeToString(sb);
    std::vector<double> ref = ReferenceMatMul(a, b, expected_shape);
    for (int64_t i = 0; i < c.numel(); ++i)
      ASSERT_EQ(c.data<float>()[i], ref[i]) << ShapeToString(sa) << " x " << ShapeToString(sb);
  }
}

TEST(FloatMatMul, OneDimensionalOperandsDropTheAddedDim) {
  Tensor v = Make({3}, {1, 2, 3});
  Tensor m = Make({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor vm = RunOp("MatMul", 13, {v, m});
  EXPECT_EQ(vm.shape(), (Shape{2}));
  EXPECT_EQ(Values(vm), (std::vector<float>{22, 28}));
  Tensor mt = Make({2, 3}, {1, 3, 5, 2, 4, 6});
  Tensor mv = RunOp("MatMul", 13, {mt, v});
  EXPECT_EQ(mv.shape(), (Shape{2}));
  EXPECT_EQ(Values(mv), (std::vector<float>{22, 28}));
  Tensor vv = RunOp("MatMul", 13, {v, v});
  EXPECT_EQ(vv.shape(), (Shape{}));
  EXPECT_EQ(Values(vv), (std::vector<float>{14}));
}

TEST(FloatMatMul, AccumulatesInOrderWithFusedMultiplyAdd) {
  // 1 * 1e8 then + 1 * 1 then + 1 * -1e8: in order, the 1 is lost (1e8 + 1
  // rounds to 1e8 in float), so the documented order gives 0, not 1.
  Tensor a = Make({1, 3}, {1, 1, 1});
  Tensor b = Make({3, 1}, {1e8f, 1, -1e8f});
  EXPECT_EQ(Values(RunOp("MatMul", 13, {a, b})), (std::vector<float>{0}));
  // Each step is one fma: after -1 comes x * x + (-1) with x = 1 + 2^-12,
  // exactly 2^-11 + 2^-24; rounding x * x first would lose the 2^-24.
  const float x = 1.f + std::ldexp(1.f, -12);
  Tensor c = Make({1, 2}, {1, x});
  Tensor d = Make({2, 1}, {-1, x});
  EXPECT_EQ(Values(RunOp("MatMul", 13, {c, d})),
            (std::vector<float>{std::ldexp(1.f, -11) + std::ldexp(1.f, -24)}));
}

TEST(FloatMatMul, ResultDoesNotDependOnThreadCount) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist;
  Tensor a(DType::kFloat32, {3, 37, 129}), b(DType::kFloat32, {129, 65});
  for (int64_t i = 0; i < a.numel(); ++i) a.data<float>()[i] = dist(rng);
  for (int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] = dist(rng);
  ThreadPool one(1), two(2), three(3);
  Tensor r1 = RunOp("MatMul", 13, {a, b}, &one);
  Tensor r2 = RunOp("MatMul", 13, {a, b}, &two);
  Tensor r3 = RunOp("MatMul", 13, {a, b}, &three);
  EXPECT_EQ(std::memcmp(r1.raw(), r2.raw(), r1.nbytes()), 0);
  EXPECT_EQ(std::memcmp(r1.raw(), r3.raw(), r1.nbytes()), 0);
}

void ExpectError(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(FloatMatMul, ClearErrors) {
  ExpectError(
      [] {
        RunOp("MatMul", 13,
              {Make({2, 3}, std::vector<float>(6)), Make({4, 2}, std::vector<float>(8))});
      },
      "inner dimensions differ, A has shape [2,3] and B has shape [4,2]");
  ExpectError(
      [] {
        RunOp("MatMul", 13, {SmallInts({2, 2, 3}, 1), SmallInts({3, 3, 2}, 2)});
      },
      "do not broadcast");
  ExpectError([] { RunOp("MatMul", 13, {Make({}, {1}), Make({1}, {1})}); }, "rank >= 1");
  ExpectError(
      [] {
        Tensor i(DType::kInt32, {2, 2});
        RunOp("MatMul", 13, {i, i});
      },
      "MatMul(ai.onnx, opset 13) node 'node_under_test': unsupported input types (int32, int32)");
}

TEST(FloatBinary, BroadcastsLikeNumpy) {
  Tensor a = SmallInts({2, 3, 1}, 3), b = SmallInts({4}, 4);
  for (const auto& [op, fn] :
       std::vector<std::pair<std::string, std::function<float(float, float)>>>{
           {"Add", [](float x, float y) { return x + y; }},
           {"Sub", [](float x, float y) { return x - y; }},
           {"Mul", [](float x, float y) { return x * y; }},
           {"Div", [](float x, float y) { return x / y; }}}) {
    Tensor c = RunOp(op, 14, {a, b});
    ASSERT_EQ(c.shape(), (Shape{2, 3, 4})) << op;
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t k = 0; k < 4; ++k) {
          const float expected = fn(a.data<float>()[i * 3 + j], b.data<float>()[k]);
          const float got = c.data<float>()[(i * 3 + j) * 4 + k];
          if (std::isnan(expected))
            EXPECT_TRUE(std::isnan(got)) << op;
          else
            EXPECT_EQ(got, expected) << op << " at " << i << "," << j << "," << k;
        }
  }
}

TEST(FloatBinary, ScalarsMiddleBroadcastAndEmpty) {
  EXPECT_EQ(Values(RunOp("Add", 13, {Make({}, {1.5f}), Make({2}, {1, 2})})),
            (std::vector<float>{2.5f, 3.5f}));
  Tensor s = RunOp("Mul", 13, {Make({}, {3}), Make({}, {-2})});
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(Values(s), (std::vector<float>{-6}));
  Tensor mid = RunOp("Sub", 13, {Make({2, 1, 2}, {1, 2, 3, 4}), Make({1, 3, 1}, {10, 20, 30})});
  EXPECT_EQ(mid.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(Values(mid),
            (std::vector<float>{-9, -8, -19, -18, -29, -28, -7, -6, -17, -16, -27, -26}));
  Tensor empty = RunOp("Add", 13, {Make({0, 3}, {}), Make({1, 3}, {1, 2, 3})});
  EXPECT_EQ(empty.shape(), (Shape{0, 3}));
  ExpectError(
      [] {
        RunOp("Add", 13, {Make({2}, {1, 2}), Make({3}, {1, 2, 3})});
      },
      "shapes [2] and [3] do not broadcast");
  ExpectError(
      [] {
        RunOp("Add", 6, {Make({2}, {1, 2}), Make({2}, {1, 2})});
      },
      "unsupported opset for Add(ai.onnx, opset 6)");
}

TEST(FloatRelu, ClampsNegativesAndKeepsNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor r = RunOp("Relu", 14, {Make({2, 3}, {-1.5f, 0.f, 2.f, -0.f, nan, 1e-40f})});
  EXPECT_EQ(r.shape(), (Shape{2, 3}));
  std::vector<float> v = Values(r);
  EXPECT_EQ(v[0], 0.f);
  EXPECT_EQ(v[1], 0.f);
  EXPECT_EQ(v[2], 2.f);
  EXPECT_EQ(v[3], 0.f);
  EXPECT_TRUE(std::isnan(v[4]));
  EXPECT_EQ(v[5], 1e-40f);
}

}  // namespace
}  // namespace octet
