// QuantizeLinear, DequantizeLinear (ai.onnx and com.microsoft) and
// DynamicQuantizeLinear. Expectations are computed here from the formulas
// (double arithmetic, explicit round-half-even) or are values measured with
// ONNX Runtime 1.31.1 (marked "ORT 1.31.1").
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/float_types.h"
#include "core/thread_pool.h"
#include "int_op_test_util.h"
#include "ops/registry.h"

namespace octet {
namespace {

using int_test::MakeTensor;
using int_test::RoundHalfEven;
using int_test::Scalar;

struct OpCall {
  std::string domain = kOnnxDomain;
  std::string op = "QuantizeLinear";
  int opset = 21;
  std::map<std::string, Attribute> attributes = {};
  int num_outputs = 1;
  ThreadPool* pool = nullptr;
};

// Runs one node through the registry and checks infer_types against the outputs.
std::vector<Tensor> RunOp(const OpCall& call, const std::vector<std::optional<Tensor>>& inputs) {
  Node node;
  node.name = "n";
  node.op_type = call.op;
  node.domain = call.domain;
  node.opset = call.opset;
  node.attributes = call.attributes;
  std::vector<DType> types;
  std::vector<const Tensor*> ptrs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    node.inputs.push_back(inputs[i] ? static_cast<int>(i) : -1);
    types.push_back(inputs[i] ? inputs[i]->dtype() : DType::kUndefined);
    ptrs.push_back(inputs[i] ? &*inputs[i] : nullptr);
  }
  for (int i = 0; i < call.num_outputs; ++i) node.outputs.push_back(100 + i);
  const KernelDef& def = KernelRegistry::Global().Find(node, types);
  const std::vector<DType> out_types = def.infer_types(node, types);
  KernelInit init{node, types, std::vector<const Tensor*>(inputs.size(), nullptr), call.pool};
  auto kernel = def.create(init);
  KernelContext ctx(node, ptrs, call.pool);
  kernel->Run(ctx);
  for (size_t i = 0; i < out_types.size() && i < ctx.outputs().size(); ++i)
    EXPECT_EQ(out_types[i], ctx.outputs()[i].dtype());
  return ctx.outputs();
}

Tensor Typed(DType dtype, Shape shape, const std::vector<int>& values) {
  Tensor t(dtype, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) {
    switch (DTypeSize(dtype)) {
      case 1:
        static_cast<uint8_t*>(t.raw())[i] = static_cast<uint8_t>(values[i]);
        break;
      case 2:
        static_cast<uint16_t*>(t.raw())[i] = static_cast<uint16_t>(values[i]);
        break;
      default:
        static_cast<int32_t*>(t.raw())[i] = values[i];
        break;
    }
  }
  return t;
}

int64_t IntAt(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kUInt8:
    case DType::kUInt4:
      return t.data<uint8_t>()[i];
    case DType::kInt8:
    case DType::kInt4:
      return t.data<int8_t>()[i];
    case DType::kUInt16:
      return t.data<uint16_t>()[i];
    case DType::kInt16:
      return t.data<int16_t>()[i];
    case DType::kInt32:
      return t.data<int32_t>()[i];
    default:
      ADD_FAILURE() << "not an integer tensor";
      return 0;
  }
}

struct Range {
  int64_t min, max;
};
Range RangeOf(DType t) {
  switch (t) {
    case DType::kUInt8:
      return {0, 255};
    case DType::kInt8:
      return {-128, 127};
    case DType::kUInt16:
      return {0, 65535};
    case DType::kInt16:
      return {-32768, 32767};
    case DType::kUInt4:
      return {0, 15};
    case DType::kInt4:
      return {-8, 7};
    default:
      return {0, 0};
  }
}

// The spec's formula in double: the float32 quotient x / s is the correctly
// rounded quotient, which double division followed by rounding to float gives.
int64_t ExpectedQuantize(float x, float s, int64_t zp, Range r) {
  const float quotient = static_cast<float>(static_cast<double>(x) / static_cast<double>(s));
  if (std::isnan(quotient)) return r.min;
  const double v = RoundHalfEven(quotient) + zp;
  return static_cast<int64_t>(
      std::clamp(v, static_cast<double>(r.min), static_cast<double>(r.max)));
}

std::map<std::string, Attribute> Attrs(std::initializer_list<std::pair<const char*, int64_t>> kv) {
  std::map<std::string, Attribute> m;
  for (const auto& [k, v] : kv) m[k] = Attribute::Int(v);
  return m;
}

TEST(QuantizeLinear, RoundsHalfToEvenAndAddsZeroPoint) {
  const std::vector<float> x = {0.5f, 1.5f, 2.5f, -2.5f, 3.5f, -0.5f, -1.5f, 2.4999998f};
  Tensor y = RunOp(
      {}, {MakeTensor<float>({8}, x), Scalar<float>(1.0f), Typed(DType::kUInt8, {}, {128})})[0];
  const std::vector<int> expected = {128, 130, 130, 126, 132, 128, 126, 130};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(IntAt(y, i), expected[i]) << x[i];
}

TEST(QuantizeLinear, NoZeroPointGivesUint8) {
  Tensor y = RunOp({.opset = 10},
                   {MakeTensor<float>({3}, {2.5f, -1.0f, 300.0f}), Scalar(1.0f), std::nullopt})[0];
  ASSERT_EQ(y.dtype(), DType::kUInt8);
  EXPECT_EQ(IntAt(y, 0), 2);
  EXPECT_EQ(IntAt(y, 1), 0);
  EXPECT_EQ(IntAt(y, 2), 255);
}

TEST(QuantizeLinear, DividesByTheScale) {
  // ORT 1.31.1: cases where x * (1 / s) rounds differently from x / s.
  struct Case {
    uint32_t x_bits, s_bits;
    int expected;
  };
  const Case cases[] = {{0x3f511c9b, 0x3c60ed4b, 59},
                        {0xc0e23467, 0x3dc252d0, -75},
                        {0x3f6e9ac8, 0x3dc8ee22, 10},
                        {0x3f81556f, 0x3c613bf8, 74}};
  for (const Case& c : cases) {
    const float x = std::bit_cast<float>(c.x_bits), s = std::bit_cast<float>(c.s_bits);
    ASSERT_NE(std::nearbyint(x * (1.0f / s)), std::nearbyint(x / s));
    Tensor y = RunOp({}, {MakeTensor<float>({1}, {x}), Scalar(s), Typed(DType::kInt8, {}, {0})})[0];
    EXPECT_EQ(IntAt(y, 0), c.expected);
  }
}

TEST(QuantizeLinear, RandomTiesAndSaturationForEveryIntegerType) {
  std::mt19937 rng(7);
  for (DType t :
       {DType::kUInt8, DType::kInt8, DType::kUInt16, DType::kInt16, DType::kUInt4, DType::kInt4}) {
    const Range r = RangeOf(t);
    for (int64_t zp : {r.min, r.max, (r.min + r.max) / 2}) {
      std::uniform_real_distribution<float> scale_dist(0.001f, 0.2f);
      const float s = scale_dist(rng);
      std::vector<float> x;
      std::uniform_int_distribution<int64_t> k(2 * r.min - 5, 2 * r.max + 5);
      for (int i = 0; i < 257; ++i) x.push_back(static_cast<float>((k(rng) + 0.5) * s));
      x.push_back(1e30f);
      x.push_back(-1e30f);
      Tensor y = RunOp({}, {MakeTensor<float>({static_cast<int64_t>(x.size())}, x), Scalar(s),
                            Typed(t, {}, {static_cast<int>(zp)})})[0];
      ASSERT_EQ(y.dtype(), t);
      for (size_t i = 0; i < x.size(); ++i)
        ASSERT_EQ(IntAt(y, i), ExpectedQuantize(x[i], s, zp, r))
            << DTypeName(t) << " zp " << zp << " x " << x[i] << " s " << s;
    }
  }
}

TEST(QuantizeLinear, Int4AndUint16Limits) {
  Tensor y4 = RunOp({}, {MakeTensor<float>({5}, {-9.f, -8.f, 0.f, 7.f, 8.f}), Scalar(1.0f),
                         Typed(DType::kInt4, {}, {0})})[0];
  const int e4[] = {-8, -8, 0, 7, 7};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(IntAt(y4, i), e4[i]);
  Tensor y16 = RunOp({}, {MakeTensor<float>({4}, {-1.f, 0.f, 65535.f, 70000.f}), Scalar(1.0f),
                          Typed(DType::kUInt16, {}, {0})})[0];
  const int e16[] = {0, 0, 65535, 65535};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(IntAt(y16, i), e16[i]);
}

TEST(QuantizeLinear, Float32NanAndInfinity) {
  // ORT 1.31.1 (MLAS clamps in float before rounding): NaN -> qmin, +-inf saturate.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = INFINITY;
  for (DType t : {DType::kUInt8, DType::kInt8, DType::kInt16, DType::kInt4}) {
    Tensor y =
        RunOp({}, {MakeTensor<float>({3}, {nan, inf, -inf}), Scalar(1.0f), Typed(t, {}, {1})})[0];
    EXPECT_EQ(IntAt(y, 0), RangeOf(t).min) << DTypeName(t);
    EXPECT_EQ(IntAt(y, 1), RangeOf(t).max) << DTypeName(t);
    EXPECT_EQ(IntAt(y, 2), RangeOf(t).min) << DTypeName(t);
  }
}

Tensor Halves(DType t, Shape shape, const std::vector<float>& values) {
  Tensor out(t, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i)
    out.data<uint16_t>()[i] =
        t == DType::kFloat16 ? FloatToFloat16Bits(values[i]) : FloatToBFloat16Bits(values[i]);
  return out;
}

TEST(QuantizeLinear, HalfInputsDivideInFloat32) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-40.0f, 40.0f);
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    std::vector<float> x;
    for (int i = 0; i < 200; ++i) x.push_back(dist(rng));
    Tensor xt = Halves(t, {200}, x);
    Tensor st = Halves(t, {}, {0.3f});
    const float s = t == DType::kFloat16 ? Float16BitsToFloat(st.data<uint16_t>()[0])
                                         : BFloat16BitsToFloat(st.data<uint16_t>()[0]);
    Tensor y = RunOp({}, {xt, st, Typed(DType::kInt8, {}, {3})})[0];
    for (int i = 0; i < 200; ++i) {
      const uint16_t b = xt.data<uint16_t>()[i];
      const float xv = t == DType::kFloat16 ? Float16BitsToFloat(b) : BFloat16BitsToFloat(b);
      ASSERT_EQ(IntAt(y, i), ExpectedQuantize(xv, s, 3, RangeOf(DType::kInt8)));
    }
  }
}

TEST(QuantizeLinear, Float16SpecialValuesFollowOrt) {
  // ORT 1.31.1, ai.onnx QuantizeLinear with float16 x: NaN, +-inf and
  // quotients beyond int32 become INT32_MIN, then + zero point wraps, then clamp.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = INFINITY;
  Tensor x = Halves(DType::kFloat16, {5}, {nan, inf, -inf, 60000.f, 2.5f});
  Tensor s = Halves(DType::kFloat16, {}, {1e-5f});
  Tensor y = RunOp({}, {x, s, Typed(DType::kInt8, {}, {-3})})[0];
  for (int i = 0; i < 5; ++i) EXPECT_EQ(IntAt(y, i), 127) << i;
  y = RunOp({}, {x, s, Typed(DType::kInt8, {}, {3})})[0];
  const int e_i8[] = {-128, -128, -128, -128, 127};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(IntAt(y, i), e_i8[i]) << i;
  y = RunOp({}, {x, s, Typed(DType::kUInt8, {}, {10})})[0];
  const int e_u8[] = {0, 0, 0, 0, 255};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(IntAt(y, i), e_u8[i]) << i;
  // ORT 1.31.1, com.microsoft QuantizeLinear with float16 x saturates like float32.
  y = RunOp({.domain = kMsDomain, .opset = 1}, {x, s, Typed(DType::kInt8, {}, {-3})})[0];
  const int e_ms[] = {-128, 127, -128, 127, 127};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(IntAt(y, i), e_ms[i]) << i;
}

TEST(QuantizeLinear, PerAxisAndNegativeAxis) {
  // x [2,3,4]; per-axis on axis 1 (also spelled -2).
  std::vector<float> x(24);
  for (int i = 0; i < 24; ++i) x[i] = (i - 11) * 0.75f;
  const std::vector<float> scales = {0.5f, 0.25f, 2.0f};
  const std::vector<int> zps = {-5, 0, 7};
  for (int64_t axis : {1, -2}) {
    Tensor y = RunOp({.attributes = Attrs({{"axis", axis}})},
                     {MakeTensor<float>({2, 3, 4}, x), MakeTensor<float>({3}, scales),
                      Typed(DType::kInt8, {3}, zps)})[0];
    for (int i = 0; i < 24; ++i) {
      const int c = (i / 4) % 3;
      ASSERT_EQ(IntAt(y, i), ExpectedQuantize(x[i], scales[c], zps[c], RangeOf(DType::kInt8)));
    }
  }
}

TEST(QuantizeLinear, BlockedWithPartialLastBlock) {
  // x [3,5], axis 1, block_size 2 -> scale [3,3]; the last block has one column.
  std::vector<float> x(15), scales(9);
  std::vector<int> zps(9);
  for (int i = 0; i < 15; ++i) x[i] = (i * 7 % 11 - 5) * 1.3f;
  for (int i = 0; i < 9; ++i) {
    scales[i] = 0.2f + 0.1f * i;
    zps[i] = i - 4;
  }
  for (DType t : {DType::kInt8, DType::kInt4}) {
    Tensor y = RunOp({.attributes = Attrs({{"axis", 1}, {"block_size", 2}})},
                     {MakeTensor<float>({3, 5}, x), MakeTensor<float>({3, 3}, scales),
                      Typed(t, {3, 3}, zps)})[0];
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 5; ++c) {
        const int si = r * 3 + c / 2;
        ASSERT_EQ(IntAt(y, r * 5 + c),
                  ExpectedQuantize(x[r * 5 + c], scales[si], zps[si], RangeOf(t)))
            << DTypeName(t) << " " << r << "," << c;
      }
  }
  // Blocked on axis 0: x [5,2], block 3 -> scale [2,2].
  Tensor y = RunOp({.attributes = Attrs({{"axis", 0}, {"block_size", 3}})},
                   {MakeTensor<float>({5, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}),
                    MakeTensor<float>({2, 2}, {1, 2, 4, 8}), std::nullopt})[0];
  const int expected[] = {1, 1, 3, 2, 5, 3, 2, 1, 2, 1};  // 6/2=3, 7/4=1.75, 10/8=1.25
  for (int i = 0; i < 10; ++i) EXPECT_EQ(IntAt(y, i), expected[i]) << i;
}

TEST(QuantizeLinear, BlockedOnInnerAxisOverflowFollowsOrt) {
  // ORT 1.31.1: blocked on a non-last axis goes through int32 (NaN, +-inf and
  // 3e9 become INT32_MIN, + zero point wraps, then clamp); on the last axis it saturates.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = INFINITY;
  Tensor x = MakeTensor<float>({2, 6}, {nan, inf, -inf, 3e9f, 2.5f, 3.5f, 1, 2, 3, 4, 5, 6});
  Tensor y = RunOp({.attributes = Attrs({{"axis", 0}, {"block_size", 2}})},
                   {x, MakeTensor<float>({1, 6}, std::vector<float>(6, 1.0f)),
                    Typed(DType::kInt8, {1, 6}, std::vector<int>(6, -5))})[0];
  const int expected[] = {127, 127, 127, 127, -3, -1};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(IntAt(y, i), expected[i]) << i;
  y = RunOp({.attributes = Attrs({{"axis", 1}, {"block_size", 6}})},
            {x, MakeTensor<float>({2, 1}, {1.0f, 1.0f}), Typed(DType::kInt8, {2, 1}, {-5, -5})})[0];
  const int saturated[] = {-128, 127, -128, 127, -3, -1};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(IntAt(y, i), saturated[i]) << i;
}

TEST(QuantizeLinear, Float8SaturateTable) {
  // ONNX spec tables for float8 conversion (also what ORT 1.31.1 gives).
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = INFINITY;
  const std::vector<float> x = {nan, inf, -inf, 1e9f, -1e9f, 448.f, 3.f, -0.0f};
  struct Expect {
    DType t;
    int saturate;
    std::vector<int> bits;
  };
  const Expect cases[] = {
      {DType::kFloat8E4M3FN, 1, {0x7F, 0x7E, 0xFE, 0x7E, 0xFE, 0x7E, 0x44, 0x80}},
      {DType::kFloat8E4M3FN, 0, {0x7F, 0x7F, 0xFF, 0x7F, 0xFF, 0x7E, 0x44, 0x80}},
      {DType::kFloat8E4M3FNUZ, 1, {0x80, 0x7F, 0xFF, 0x7F, 0xFF, 0x7F, 0x4C, 0x00}},
      {DType::kFloat8E4M3FNUZ, 0, {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x4C, 0x00}},
      {DType::kFloat8E5M2, 1, {0x7F, 0x7B, 0xFB, 0x7B, 0xFB, 0x5F, 0x42, 0x80}},
      {DType::kFloat8E5M2, 0, {0x7F, 0x7C, 0xFC, 0x7C, 0xFC, 0x5F, 0x42, 0x80}},
      {DType::kFloat8E5M2FNUZ, 1, {0x80, 0x7F, 0xFF, 0x7F, 0xFF, 0x63, 0x46, 0x00}},
      {DType::kFloat8E5M2FNUZ, 0, {0x80, 0x80, 0x80, 0x80, 0x80, 0x63, 0x46, 0x00}},
  };
  for (const Expect& c : cases) {
    Tensor y = RunOp({.attributes = Attrs({{"saturate", c.saturate}})},
                     {MakeTensor<float>({8}, x), Scalar(1.0f), Typed(c.t, {}, {0})})[0];
    ASSERT_EQ(y.dtype(), c.t);
    for (int i = 0; i < 8; ++i)
      EXPECT_EQ(y.data<uint8_t>()[i], c.bits[i])
          << DTypeName(c.t) << " saturate " << c.saturate << " x " << x[i];
  }
  // output_dtype without a zero point.
  Tensor y = RunOp({.attributes = Attrs({{"output_dtype", 17}})},
                   {MakeTensor<float>({1}, {6.0f}), Scalar(2.0f), std::nullopt})[0];
  EXPECT_EQ(y.dtype(), DType::kFloat8E4M3FN);
  EXPECT_EQ(y.data<uint8_t>()[0], 0x44);  // 3.0 = 1.5 * 2^1: exponent field 8, mantissa 4
}

TEST(QuantizeLinear, Float8WithoutSaturationRoundsBeforeTheOverflowCheck) {
  // ONNX spec (Cast / QuantizeLinear, saturate=0): [x] is x rounded to the
  // target's mantissa width (to nearest even); [x] > FLT_MAX gives NaN for
  // E4M3FN and inf for E5M2. ORT 1.31.1 differs on E4M3FN [480, 496) (gives
  // 448) and E5M2 [61440, 65536) (gives NaN); octet follows the spec, as does
  // onnx.reference.ReferenceEvaluator.
  struct Expect {
    DType t;
    float x;
    int bits;
  };
  const Expect cases[] = {
      {DType::kFloat8E4M3FN, 464.0f, 0x7E},   // tie between 448 and 480: even is 448
      {DType::kFloat8E4M3FN, 465.0f, 0x7F},   // [x] = 480 > 448
      {DType::kFloat8E4M3FN, 480.0f, 0x7F},   // ORT 1.31.1: 0x7E
      {DType::kFloat8E4M3FN, 495.5f, 0x7F},   // ORT 1.31.1: 0x7E
      {DType::kFloat8E4M3FN, -488.0f, 0xFF},  // ORT 1.31.1: 0xFE
      {DType::kFloat8E4M3FN, 496.0f, 0x7F},  {DType::kFloat8E5M2, 61439.996f, 0x7B},  // [x] = 57344
      {DType::kFloat8E5M2, 61440.0f, 0x7C},   // tie between 57344 and 65536: even is inf
      {DType::kFloat8E5M2, 65535.0f, 0x7C},   // ORT 1.31.1: 0x7F (NaN)
      {DType::kFloat8E5M2, -62000.0f, 0xFC},  // ORT 1.31.1: 0xFF
      {DType::kFloat8E5M2, 65536.0f, 0x7C},
  };
  for (const Expect& c : cases) {
    Tensor y = RunOp({.attributes = Attrs({{"saturate", 0}})},
                     {MakeTensor<float>({1}, {c.x}), Scalar(1.0f), Typed(c.t, {}, {0})})[0];
    EXPECT_EQ(y.data<uint8_t>()[0], c.bits) << DTypeName(c.t) << " x " << c.x;
  }
}

TEST(DequantizeLinear, PerTensorPerAxisBlocked) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> byte(-128, 127);
  std::vector<int> x(24);
  for (int& v : x) v = byte(rng);
  // (float)(x - zp) * s; the double product of two floats rounds to float correctly.
  auto expect = [](int q, int zp, float s) {
    return static_cast<float>(static_cast<double>(q - zp) * static_cast<double>(s));
  };
  Tensor y =
      RunOp({.op = "DequantizeLinear", .opset = 10},
            {Typed(DType::kInt8, {24}, x), Scalar(0.037f), Typed(DType::kInt8, {}, {-7})})[0];
  for (int i = 0; i < 24; ++i) ASSERT_EQ(y.data<float>()[i], expect(x[i], -7, 0.037f));

  const std::vector<float> s3 = {0.5f, 0.013f, 3.25f};
  y = RunOp({.op = "DequantizeLinear", .opset = 13, .attributes = Attrs({{"axis", -1}})},
            {Typed(DType::kInt8, {8, 3}, x), MakeTensor<float>({3}, s3),
             Typed(DType::kInt8, {3}, {1, -2, 3})})[0];
  const int zp3[] = {1, -2, 3};
  for (int i = 0; i < 24; ++i) ASSERT_EQ(y.data<float>()[i], expect(x[i], zp3[i % 3], s3[i % 3]));

  // x [4,6], axis 1, block 4 -> scale [4,2].
  std::vector<float> sb(8);
  for (int i = 0; i < 8; ++i) sb[i] = 0.1f * (i + 1);
  y = RunOp({.op = "DequantizeLinear", .attributes = Attrs({{"axis", 1}, {"block_size", 4}})},
            {Typed(DType::kInt8, {4, 6}, x), MakeTensor<float>({4, 2}, sb), std::nullopt})[0];
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 6; ++c)
      ASSERT_EQ(y.data<float>()[r * 6 + c], expect(x[r * 6 + c], 0, sb[r * 2 + c / 4]));
}

TEST(DequantizeLinear, WideAndNarrowIntegerTypes) {
  struct Case {
    DType t;
    int x, zp;
  };
  const Case cases[] = {{DType::kUInt16, 65535, 0}, {DType::kInt16, -32768, 32767},
                        {DType::kUInt4, 15, 3},     {DType::kInt4, -8, 7},
                        {DType::kUInt8, 0, 255},    {DType::kInt32, 16777217, 0}};
  for (const Case& c : cases) {
    Tensor y = RunOp({.op = "DequantizeLinear"},
                     {Typed(c.t, {1}, {c.x}), Scalar(0.5f), Typed(c.t, {}, {c.zp})})[0];
    EXPECT_EQ(y.data<float>()[0],
              static_cast<float>(static_cast<double>(static_cast<float>(c.x - c.zp)) * 0.5))
        << DTypeName(c.t);
  }
}

TEST(DequantizeLinear, Int32SubtractsInInt32WithWrapAround) {
  // ORT 1.31.1: DequantizeLinear(int32 x = -2^31, zp = 5) gives 2147483648.0
  // (x - zp wraps to 2147483643, which rounds to 2^31 as float).
  Tensor y = RunOp({.op = "DequantizeLinear"},
                   {MakeTensor<int32_t>({2}, {std::numeric_limits<int32_t>::min(), 16777217}),
                    Scalar(1.0f), Scalar<int32_t>(5)})[0];
  EXPECT_EQ(y.data<float>()[0], 2147483648.0f);
  EXPECT_EQ(y.data<float>()[1], 16777212.0f);
}

TEST(DequantizeLinear, Float16OutputRoundsTheFloat32Product) {
  // ORT 1.31.1: int16 [18795, 29262] * float16 0.5923 (0x38bd) -> bits [29040, 29755]:
  // the float32 product rounded to float16 (not the exact product).
  Tensor s(DType::kFloat16, {});
  s.data<uint16_t>()[0] = 0x38bd;
  Tensor y = RunOp({.op = "DequantizeLinear"},
                   {Typed(DType::kInt16, {2}, {18795, 29262}), s, std::nullopt})[0];
  ASSERT_EQ(y.dtype(), DType::kFloat16);
  EXPECT_EQ(y.data<uint16_t>()[0], 29040);
  EXPECT_EQ(y.data<uint16_t>()[1], 29755);
  // output_dtype (opset 23) with a float32 scale: float32 product, then float16.
  y = RunOp({.op = "DequantizeLinear", .opset = 23, .attributes = Attrs({{"output_dtype", 10}})},
            {Typed(DType::kInt8, {1}, {100}), Scalar(0.1f), std::nullopt})[0];
  ASSERT_EQ(y.dtype(), DType::kFloat16);
  EXPECT_EQ(y.data<uint16_t>()[0], FloatToFloat16Bits(100 * 0.1f));
  y = RunOp({.op = "DequantizeLinear", .opset = 23, .attributes = Attrs({{"output_dtype", 16}})},
            {Typed(DType::kInt8, {1}, {-3}), Scalar(0.5f), std::nullopt})[0];
  ASSERT_EQ(y.dtype(), DType::kBFloat16);
  EXPECT_EQ(y.data<uint16_t>()[0], 0xBFC0);  // -1.5
}

TEST(DequantizeLinear, Float8IncludingNaN) {
  Tensor x = Typed(DType::kFloat8E4M3FN, {4}, {0x44, 0xFE, 0x7F, 0x80});
  Tensor y = RunOp({.op = "DequantizeLinear", .opset = 19}, {x, Scalar(2.0f), std::nullopt})[0];
  EXPECT_EQ(y.data<float>()[0], 6.0f);
  EXPECT_EQ(y.data<float>()[1], -896.0f);
  EXPECT_EQ(std::bit_cast<uint32_t>(y.data<float>()[2]), 0x7FC00000u);  // ORT 1.31.1
  EXPECT_EQ(std::bit_cast<uint32_t>(y.data<float>()[3]), 0x80000000u);
  Tensor uz = Typed(DType::kFloat8E5M2FNUZ, {1}, {0x80});
  y = RunOp({.op = "DequantizeLinear", .opset = 19}, {uz, Scalar(1.0f), std::nullopt})[0];
  EXPECT_EQ(std::bit_cast<uint32_t>(y.data<float>()[0]), 0xFFC00000u);  // ORT 1.31.1
}

TEST(ComMicrosoftQdq, PerAxisDefaultAxisAndTypes) {
  // com.microsoft axis defaults to 1: x [3,4] with 4 scales.
  std::vector<float> x(12);
  for (int i = 0; i < 12; ++i) x[i] = static_cast<float>(i);
  const std::vector<float> s = {1, 2, 4, 8};
  Tensor y = RunOp({.domain = kMsDomain, .opset = 1},
                   {MakeTensor<float>({3, 4}, x), MakeTensor<float>({4}, s),
                    Typed(DType::kUInt16, {4}, {0, 1, 2, 3})})[0];
  ASSERT_EQ(y.dtype(), DType::kUInt16);
  for (int i = 0; i < 12; ++i)
    EXPECT_EQ(IntAt(y, i), ExpectedQuantize(x[i], s[i % 4], i % 4, RangeOf(DType::kUInt16)));
  Tensor d = RunOp({.domain = kMsDomain, .op = "DequantizeLinear", .opset = 1},
                   {y, MakeTensor<float>({4}, s), Typed(DType::kUInt16, {4}, {0, 1, 2, 3})})[0];
  for (int i = 0; i < 12; ++i) EXPECT_EQ(d.data<float>()[i], (IntAt(y, i) - i % 4) * s[i % 4]);
}

TEST(DynamicQuantizeLinear, MatchesTheFormula) {
  std::mt19937 rng(9);
  for (int trial = 0; trial < 50; ++trial) {
    // All positive, all negative, or mixed signs.
    const float lo_bound = trial % 3 == 0 ? 0.5f : -3.0f;
    const float hi_bound = trial % 3 != 0 && trial % 5 == 0 ? -0.1f : 7.0f;
    std::uniform_real_distribution<float> dist(lo_bound, hi_bound);
    std::vector<float> x(1 + trial * 3);
    for (float& v : x) v = dist(rng);
    auto out = RunOp({.op = "DynamicQuantizeLinear", .opset = 11, .num_outputs = 3},
                     {MakeTensor<float>({static_cast<int64_t>(x.size())}, x)});
    double lo = 0, hi = 0;
    for (float v : x) lo = std::min<double>(lo, v), hi = std::max<double>(hi, v);
    // Float subtraction, then float division (double then float rounds each correctly).
    const float range = static_cast<float>(hi - lo);
    const float scale = static_cast<float>(static_cast<double>(range) / 255.0);
    const float izp = static_cast<float>(-lo / static_cast<double>(scale));
    const int zp = static_cast<int>(RoundHalfEven(std::clamp(izp, 0.0f, 255.0f)));
    ASSERT_EQ(out[1].data<float>()[0], scale);
    ASSERT_EQ(out[2].data<uint8_t>()[0], zp);
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(out[0].data<uint8_t>()[i], ExpectedQuantize(x[i], scale, zp, {0, 255}));
  }
}

TEST(DynamicQuantizeLinear, PinnedOrtCases) {
  struct Case {
    std::vector<float> x;
    std::vector<int> y;
    uint32_t scale_bits;
    int zp;
  };
  // ORT 1.31.1 outputs.
  const Case cases[] = {
      {{0.3f, -1.7f, 2.9f, 0.0f, 5.5f, -0.25f}, {71, 0, 163, 60, 255, 51}, 0x3ce74db4, 60},
      {{1e-45f, 0.0f}, {255, 0}, 0x00000000, 255},  // scale underflows to 0
      {{-INFINITY, 1.0f}, {0, 255}, 0x7f800000, 255},
      {{1e38f, -1e38f}, {254, 0}, 0x7b170da7, 127},
      {{0.0f, 0.0f}, {0, 0}, 0x3f800000, 0},  // max == min: scale 1
  };
  for (const Case& c : cases) {
    auto out = RunOp({.op = "DynamicQuantizeLinear", .opset = 11, .num_outputs = 3},
                     {MakeTensor<float>({static_cast<int64_t>(c.x.size())}, c.x)});
    EXPECT_EQ(std::bit_cast<uint32_t>(out[1].data<float>()[0]), c.scale_bits);
    EXPECT_EQ(out[2].data<uint8_t>()[0], c.zp);
    for (size_t i = 0; i < c.x.size(); ++i) EXPECT_EQ(out[0].data<uint8_t>()[i], c.y[i]) << i;
  }
  // NaN anywhere: scale NaN, zero point 255, every y 0 (ORT 1.31.1 for all-NaN
  // input; with a few NaNs ORT's SIMD min/max may drop them, see docs/int8.md).
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto out = RunOp({.op = "DynamicQuantizeLinear", .opset = 11, .num_outputs = 3},
                   {MakeTensor<float>({3}, {nan, nan, nan})});
  EXPECT_TRUE(std::isnan(out[1].data<float>()[0]));
  EXPECT_EQ(out[2].data<uint8_t>()[0], 255);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out[0].data<uint8_t>()[i], 0);
}

TEST(QuantizeOps, EmptyTensors) {
  Tensor y = RunOp({}, {Tensor(DType::kFloat32, {0, 3}), MakeTensor<float>({3}, {1, 2, 3}),
                        Typed(DType::kInt8, {3}, {0, 0, 0})})[0];
  EXPECT_EQ(y.shape(), (Shape{0, 3}));
  y = RunOp({.attributes = Attrs({{"axis", 0}, {"block_size", 4}})},
            {Tensor(DType::kFloat32, {0, 3}), Tensor(DType::kFloat32, {0, 3}), std::nullopt})[0];
  EXPECT_EQ(y.numel(), 0);
  y = RunOp({.op = "DequantizeLinear"},
            {Tensor(DType::kUInt8, {0}), Scalar(1.0f), std::nullopt})[0];
  EXPECT_EQ(y.shape(), (Shape{0}));
  auto out = RunOp({.op = "DynamicQuantizeLinear", .opset = 11, .num_outputs = 3},
                   {Tensor(DType::kFloat32, {0})});
  EXPECT_EQ(out[0].numel(), 0);
  EXPECT_EQ(out[1].data<float>()[0], 1.0f);  // ORT 1.31.1
  EXPECT_EQ(out[2].data<uint8_t>()[0], 0);
}

TEST(QuantizeOps, ThreadCountDoesNotChangeResults) {
  ThreadPool pool(2);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 50.0f);
  std::vector<float> x(3 * 40000);
  for (float& v : x) v = dist(rng);
  const std::vector<float> s = {0.3f, 0.7f, 1.1f};
  const std::vector<std::optional<Tensor>> inputs = {MakeTensor<float>({3, 40000}, x),
                                                     MakeTensor<float>({3}, s),
                                                     Typed(DType::kInt8, {3}, {-1, 0, 1})};
  Tensor serial = RunOp({.attributes = Attrs({{"axis", 0}})}, inputs)[0];
  Tensor parallel = RunOp({.attributes = Attrs({{"axis", 0}}), .pool = &pool}, inputs)[0];
  ASSERT_EQ(std::memcmp(serial.raw(), parallel.raw(), serial.nbytes()), 0);
}

TEST(QuantizeOps, ScalarScaleWithOneElementZeroPointAndTheReverse) {
  // ORT 1.31.1 and ONNX's backend tests (e.g. test_quantizelinear_e4m3fn) pair a
  // scalar with a [1] tensor; both are per-tensor.
  const std::vector<float> x = {-3.0f, 0.25f, 1.75f, 40.0f, -41.5f, 7.0f};
  const float s = 0.5f;
  const int zp = -5;
  for (const auto& [scale_shape, zp_shape] :
       {std::pair{Shape{}, Shape{1}}, std::pair{Shape{1}, Shape{}}}) {
    Tensor q = RunOp({}, {MakeTensor<float>({2, 3}, x), MakeTensor<float>(scale_shape, {s}),
                          Typed(DType::kInt8, zp_shape, {zp})})[0];
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(IntAt(q, i), ExpectedQuantize(x[i], s, zp, RangeOf(DType::kInt8))) << x[i];
    const std::vector<int> codes = {-128, -5, 0, 127, 3, -77};
    Tensor d = RunOp({.op = "DequantizeLinear"},
                     {Typed(DType::kInt8, {2, 3}, codes), MakeTensor<float>(scale_shape, {s}),
                      Typed(DType::kInt8, zp_shape, {zp})})[0];
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(d.data<float>()[i], static_cast<float>((codes[i] - zp) * 0.5)) << codes[i];
  }
}

void ExpectError(const OpCall& call, const std::vector<std::optional<Tensor>>& inputs,
                 const std::string& fragment) {
  try {
    RunOp(call, inputs);
    ADD_FAILURE() << "expected an error containing '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("uantizeLinear("), std::string::npos) << e.what();
  }
}

TEST(QuantizeOps, ErrorsNameTheNodeAndTheProblem) {
  const Tensor x = MakeTensor<float>({2, 4}, std::vector<float>(8, 1.0f));
  ExpectError({}, {x, MakeTensor<float>({4}, {1, 1, 1, 1}), Typed(DType::kUInt8, {2}, {0, 0})},
              "must be equal");
  // One element each, but not both per-tensor: still refused.
  ExpectError({}, {x, MakeTensor<float>({1, 1}, {1}), Typed(DType::kUInt8, {}, {0})},
              "must be equal");
  ExpectError({}, {x, Scalar(1.0f), Typed(DType::kUInt8, {1, 1}, {0})}, "must be equal");
  ExpectError(
      {.attributes = Attrs({{"axis", 0}, {"block_size", 1}})},
      {MakeTensor<float>({1}, {1.0f}), MakeTensor<float>({1}, {1}), Typed(DType::kUInt8, {}, {0})},
      "must be equal");
  ExpectError({}, {x, MakeTensor<float>({4}, {1, 1, 1, 1}), Typed(DType::kUInt8, {1}, {0})},
              "must be equal");
  ExpectError({}, {x, MakeTensor<float>({3}, {1, 1, 1}), std::nullopt}, "expected a scalar or [4]");
  ExpectError({.attributes = Attrs({{"axis", 2}})},
              {x, MakeTensor<float>({4}, {1, 1, 1, 1}), std::nullopt}, "axis 2 is out of range");
  ExpectError({.attributes = Attrs({{"axis", 1}, {"block_size", 3}})},
              {x, MakeTensor<float>({2, 1}, {1, 1}), std::nullopt}, "needs [2,2]");
  ExpectError({.attributes = Attrs({{"block_size", -1}})}, {x, Scalar(1.0f), std::nullopt},
              "block_size -1");
  ExpectError({.attributes = Attrs({{"output_dtype", 3}})},
              {x, Scalar(1.0f), Typed(DType::kUInt8, {}, {0})}, "does not match y_zero_point");
  ExpectError({.attributes = Attrs({{"output_dtype", 6}})}, {x, Scalar(1.0f), std::nullopt},
              "not a quantized type");
  ExpectError({.opset = 10}, {x, MakeTensor<float>({4}, {1, 1, 1, 1}), std::nullopt},
              "only allows a scalar");
  ExpectError({}, {x, Scalar(1.0f), Typed(DType::kFloat8E4M3FN, {}, {0x38})}, "must be zero");
  ExpectError(
      {.op = "DequantizeLinear", .opset = 19},
      {Typed(DType::kFloat8E5M2, {1}, {0}), Scalar(1.0f), Typed(DType::kFloat8E5M2, {}, {0x3C})},
      "must be zero");
  // Dtypes the opset does not allow: the registry names the operator and the types.
  ExpectError(
      {.opset = 13},
      {Halves(DType::kFloat16, {1}, {1.0f}), Halves(DType::kFloat16, {}, {1}), std::nullopt},
      "unsupported input types");
  ExpectError({.opset = 19}, {x, Scalar(1.0f), Typed(DType::kInt16, {}, {0})},
              "unsupported input types");
  ExpectError({.op = "DequantizeLinear"},
              {Typed(DType::kUInt8, {1}, {0}), Scalar(1.0f), Typed(DType::kInt8, {}, {0})},
              "unsupported input types");
}

TEST(QuantizeOps, EveryOpsetVersionIsRegistered) {
  for (int opset : {10, 11, 13, 18, 19, 20, 21, 22, 23, 24, 25, 26}) {
    Tensor y = RunOp({.opset = opset}, {MakeTensor<float>({1}, {2.5f}), Scalar(1.0f),
                                        Typed(DType::kInt8, {}, {0})})[0];
    EXPECT_EQ(IntAt(y, 0), 2) << opset;
    Tensor d = RunOp({.op = "DequantizeLinear", .opset = opset},
                     {Typed(DType::kUInt8, {1}, {5}), Scalar(0.5f), std::nullopt})[0];
    EXPECT_EQ(d.data<float>()[0], 2.5f) << opset;
  }
  EXPECT_TRUE(KernelRegistry::Global().HasOp(kOnnxDomain, "DynamicQuantizeLinear"));
  EXPECT_TRUE(KernelRegistry::Global().HasOp(kMsDomain, "QuantizeLinear"));
  EXPECT_TRUE(KernelRegistry::Global().HasOp(kMsDomain, "DequantizeLinear"));
}

}  // namespace
}  // namespace octet
