// com.microsoft QGemm (ops/qgemm.cc) through the kernel registry against a
// naive int64 product written here and the documented epilogue
// (docs/int8.md; int_test::ExpectedRequant for the quantized output): every
// 8-bit type pair, transA/transB, alpha, per-tensor and per-column B
// parameters, every C layout, float / quantized / y_scale-only outputs, odd
// and empty shapes, B constant (packed at kernel creation) and per run, on 1
// and 2 threads, on every instruction set this machine runs (OCTET_ISA is
// read once per process, so each forced path runs in a re-executed child).
// tests/python/test_qgemm.py checks the same kernel against ONNX Runtime.
#include <gtest/gtest.h>

#include <bit>
#include <cstdlib>
#include <random>
#include <sstream>

#include "core/thread_pool.h"
#include "int_op_test_util.h"
#include "kernels/isa.h"

namespace octet {
namespace {

using int_test::ExpectedRequant;
using int_test::ExpectError;
using int_test::Int8At;
using int_test::MakeTensor;
using int_test::RandomInt8;
using int_test::Scalar;
using int_test::ZeroPoints;

// Runs one QGemm node; B (input 3) is a constant initializer when constant_b.
Tensor RunQGemm(const std::vector<std::optional<Tensor>>& inputs, bool trans_a, bool trans_b,
                float alpha, bool constant_b, ThreadPool* pool) {
  return int_test::RunNode("QGemm", 1, inputs,
                           {.domain = kMsDomain,
                            .attributes = {{"transA", Attribute::Int(trans_a)},
                                           {"transB", Attribute::Int(trans_b)},
                                           {"alpha", Attribute::Float(alpha)}},
                            .name = "qgemm",
                            .constant = {false, false, false, constant_b},
                            .pool = pool});
}

enum class CKind { kNone, kScalar, kColumn, kRowVectorColumn, kRow, kFull };
enum class OutKind { kFloat, kQuantized, kFloatWithYScale };

struct Case {
  DType ta, tb, ty;
  int64_t m, k, n;
  bool trans_a, trans_b, per_column, constant_b;
  float alpha;
  CKind c;
  OutKind out;
};

// Runs `c` and compares every output element with the naive reference;
// returns the number of differing elements and describes the first in `log`.
int64_t CheckCase(const Case& c, ThreadPool* pool, std::mt19937& rng, std::ostream& log) {
  const Tensor a = RandomInt8(c.ta, c.trans_a ? Shape{c.k, c.m} : Shape{c.m, c.k}, rng);
  const Tensor b = RandomInt8(c.tb, c.trans_b ? Shape{c.n, c.k} : Shape{c.k, c.n}, rng);
  std::uniform_real_distribution<float> scale_dist(0.001f, 0.1f);
  std::uniform_int_distribution<int> byte(0, 255), bias_dist(-40000, 40000);
  auto zero_of = [&](DType t) { return t == DType::kInt8 ? byte(rng) - 128 : byte(rng); };
  const float a_scale = scale_dist(rng);
  const int a_zero = zero_of(c.ta);
  const int64_t params = c.per_column ? c.n : 1;
  std::vector<float> b_scales(params);
  std::vector<int> b_zeros(params);
  for (int64_t i = 0; i < params; ++i) b_scales[i] = scale_dist(rng), b_zeros[i] = zero_of(c.tb);
  const Shape param_shape = c.per_column ? Shape{c.n} : Shape{};

  std::optional<Tensor> bias;
  Shape c_shape;
  int64_t c_row_stride = 0, c_col_stride = 0;
  switch (c.c) {
    case CKind::kNone:
      break;
    case CKind::kScalar:
      c_shape = {};
      break;
    case CKind::kColumn:
      c_shape = {c.n}, c_col_stride = 1;
      break;
    case CKind::kRowVectorColumn:
      c_shape = {1, c.n}, c_col_stride = 1;
      break;
    case CKind::kRow:
      c_shape = {c.m, 1}, c_row_stride = 1;
      break;
    case CKind::kFull:
      c_shape = {c.m, c.n}, c_row_stride = c.n, c_col_stride = 1;
      break;
  }
  if (c.c != CKind::kNone) {
    std::vector<int32_t> values(NumElements(c_shape));
    for (int32_t& v : values) v = bias_dist(rng);
    if (!values.empty()) values[0] = INT32_MAX;  // the int32 sum wraps
    bias = MakeTensor<int32_t>(c_shape, values);
  }
  const float y_scale = c.alpha * a_scale * 0.05f * static_cast<float>(c.k + 1) * 3.f;
  const int y_zero = zero_of(c.ty);

  std::vector<std::optional<Tensor>> inputs = {a,
                                               Scalar(a_scale),
                                               ZeroPoints(c.ta, {}, {a_zero}),
                                               b,
                                               MakeTensor<float>(param_shape, b_scales),
                                               ZeroPoints(c.tb, param_shape, b_zeros),
                                               bias};
  if (c.out != OutKind::kFloat) inputs.push_back(Scalar(y_scale));
  if (c.out == OutKind::kQuantized) inputs.push_back(ZeroPoints(c.ty, {}, {y_zero}));
  const Tensor y = RunQGemm(inputs, c.trans_a, c.trans_b, c.alpha, c.constant_b, pool);

  if (y.shape() != Shape{c.m, c.n}) {
    log << "shape " << ShapeToString(y.shape()) << "\n";
    return 1;
  }
  int64_t mismatches = 0;
  for (int64_t m = 0; m < c.m; ++m) {
    for (int64_t n = 0; n < c.n; ++n) {
      const int64_t col = c.per_column ? n : 0;
      int64_t acc = 0;
      for (int64_t k = 0; k < c.k; ++k) {
        const int64_t av = Int8At(a, c.trans_a ? k * c.m + m : m * c.k + k) - a_zero;
        const int64_t bv = Int8At(b, c.trans_b ? n * c.k + k : k * c.n + n) - b_zeros[col];
        acc += av * bv;
      }
      if (bias) acc += bias->data<int32_t>()[m * c_row_stride + n * c_col_stride];
      const auto acc32 = static_cast<int32_t>(static_cast<uint32_t>(acc));  // int32 wrap-around
      const float scale = (c.alpha * a_scale) * b_scales[col];
      int64_t want, got;
      if (c.out == OutKind::kQuantized) {
        want = ExpectedRequant(acc32, c.alpha * a_scale, b_scales[col], y_scale, y_zero, c.ty);
        got = Int8At(y, m * c.n + n);
      } else {
        const float multiplier = c.out == OutKind::kFloat ? scale : scale / y_scale;
        want = std::bit_cast<uint32_t>(static_cast<float>(acc32) * multiplier);
        got = std::bit_cast<uint32_t>(y.data<float>()[m * c.n + n]);
      }
      if (want != got && mismatches++ == 0)
        log << "[" << m << "," << n << "] want " << want << " got " << got << "\n";
    }
  }
  return mismatches;
}

// Every case on the active instruction set; the number of cases with a
// differing output (the first few are described in `log`).
int64_t FailingCases(std::ostream& log) {
  struct Dims {
    int64_t m, k, n;
  };
  const Dims dims[] = {{1, 1, 1},    {3, 1, 5},    {1, 7, 9}, {5, 17, 3},
                       {13, 33, 19}, {40, 70, 37}, {2, 0, 3}, {0, 4, 3}};
  const std::pair<DType, DType> types[] = {{DType::kUInt8, DType::kUInt8},
                                           {DType::kUInt8, DType::kInt8},
                                           {DType::kInt8, DType::kInt8},
                                           {DType::kInt8, DType::kUInt8}};
  ThreadPool two_threads(2);
  std::mt19937 rng(5);
  int64_t failing = 0;
  int variant = 0;
  for (const auto& [ta, tb] : types) {
    for (const Dims& d : dims) {
      for (int c_kind = 0; c_kind < 6; ++c_kind) {
        for (int out = 0; out < 3; ++out) {
          for (int trans = 0; trans < 4; ++trans) {
            ++variant;
            Case c{ta,
                   tb,
                   variant % 2 ? ta : tb,
                   d.m,
                   d.k,
                   d.n,
                   (trans & 1) != 0,
                   (trans & 2) != 0,
                   variant % 3 != 0,
                   variant % 5 < 2,
                   variant % 7 < 3 ? 0.375f : 1.f,
                   static_cast<CKind>(c_kind),
                   static_cast<OutKind>(out)};
            std::ostringstream one;
            if (CheckCase(c, variant % 4 < 2 ? nullptr : &two_threads, rng, one) != 0) {
              if (failing++ < 5)
                log << DTypeName(ta) << "/" << DTypeName(tb) << "->" << DTypeName(c.ty) << " M"
                    << d.m << " K" << d.k << " N" << d.n << " transA " << c.trans_a << " transB "
                    << c.trans_b << " per_column " << c.per_column << " C " << c_kind << " out "
                    << out << " alpha " << c.alpha << ": " << one.str();
            }
          }
        }
      }
    }
  }
  return failing;
}

TEST(QGemm, MatchesNaiveInt64ReferenceOnEveryPathAndRefusesBadInputs) {
  // Forced paths in re-executed children first: the parent's ActiveIsa()
  // must not be decided before them (the child re-runs this body up to its
  // death test).
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  for (Isa isa : SupportedIsas())
    EXPECT_EXIT(std::exit(int_test::ExitCodeWithIsa(IsaName(isa), FailingCases)),
                ::testing::ExitedWithCode(0), "")
        << IsaName(isa);

  std::ostringstream log;
  EXPECT_EQ(FailingCases(log), 0) << log.str();

  // Refusals name what is wrong.
  const Tensor a = MakeTensor<uint8_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor b = MakeTensor<int8_t>({3, 2}, {1, 2, 3, 4, 5, 6});
  const Tensor zb = ZeroPoints(DType::kInt8, {}, {0});
  auto inputs = [&](std::optional<Tensor> c, std::optional<Tensor> y_scale,
                    std::optional<Tensor> y_zero, Tensor b_scale) {
    return std::vector<std::optional<Tensor>>{
        a, Scalar(0.5f), ZeroPoints(DType::kUInt8, {}, {0}), b, b_scale, zb, c, y_scale, y_zero};
  };
  ExpectError(
      [&] {
        RunQGemm(inputs({}, {}, ZeroPoints(DType::kUInt8, {}, {3}), Scalar(1.f)), false, false, 1.f,
                 true, nullptr);
      },
      {"QGemm", "y_zero_point is given without y_scale"});
  ExpectError(
      [&] {
        RunQGemm(inputs(MakeTensor<int32_t>({3}, {1, 2, 3}), {}, {}, Scalar(1.f)), false, false,
                 1.f, false, nullptr);
      },
      {"C has shape [3]", "[M, N] = [2, 2]"});
  ExpectError(
      [&] {
        RunQGemm(inputs({}, {}, {}, MakeTensor<float>({3}, {1.f, 1.f, 1.f})), false, false, 1.f,
                 false, nullptr);
      },
      {"b_scale has shape [3]", "[N] = [2]"});
  ExpectError([&] { RunQGemm(inputs({}, {}, {}, Scalar(1.f)), false, true, 1.f, true, nullptr); },
              {"inner dimensions differ", "transB=1"});
}

}  // namespace
}  // namespace octet
