// float16 / bfloat16 / float8 conversions against references written here from
// the format definitions (and, for float16, the compiler's _Float16).
#include "core/float_types.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace octet {
namespace {

struct Float8Spec {
  DType type;
  int exponent_bits, mantissa_bits, bias;
  bool fnuz;
  double max_finite;
};

const Float8Spec kFloat8Specs[] = {
    {DType::kFloat8E4M3FN, 4, 3, 7, false, 448.0},
    {DType::kFloat8E4M3FNUZ, 4, 3, 8, true, 240.0},
    {DType::kFloat8E5M2, 5, 2, 15, false, 57344.0},
    {DType::kFloat8E5M2FNUZ, 5, 2, 16, true, 57344.0},
};

enum class Kind { kFinite, kInf, kNaN };

// The value of a float8 bit pattern from the ONNX format definition.
Kind Float8Value(const Float8Spec& f, uint8_t bits, double* value) {
  const bool negative = bits & 0x80;
  const int e = (bits >> f.mantissa_bits) & ((1 << f.exponent_bits) - 1);
  const int m = bits & ((1 << f.mantissa_bits) - 1);
  if (f.fnuz && bits == 0x80) return Kind::kNaN;
  if (f.type == DType::kFloat8E4M3FN && (bits & 0x7F) == 0x7F) return Kind::kNaN;
  if (f.type == DType::kFloat8E5M2 && e == 31) return m == 0 ? Kind::kInf : Kind::kNaN;
  const double magnitude = e == 0 ? std::ldexp(m, 1 - f.bias - f.mantissa_bits)
                                  : std::ldexp(1.0 + std::ldexp(m, -f.mantissa_bits), e - f.bias);
  *value = negative ? -magnitude : magnitude;
  return Kind::kFinite;
}

TEST(Float8, DecodesAll256PatternsOfEachType) {
  for (const Float8Spec& f : kFloat8Specs) {
    int nans = 0;
    for (int b = 0; b < 256; ++b) {
      double expected = 0;
      const Kind kind = Float8Value(f, static_cast<uint8_t>(b), &expected);
      const float got = Float8BitsToFloat(static_cast<uint8_t>(b), f.type);
      if (kind == Kind::kNaN) {
        ++nans;
        EXPECT_TRUE(std::isnan(got)) << DTypeName(f.type) << " " << b;
        // Quiet NaN with the pattern's sign; the FNUZ NaN is negative.
        EXPECT_EQ(std::bit_cast<uint32_t>(got), (b & 0x80) ? 0xFFC00000u : 0x7FC00000u);
      } else if (kind == Kind::kInf) {
        EXPECT_EQ(got, (b & 0x80) ? -INFINITY : INFINITY);
      } else {
        EXPECT_EQ(static_cast<double>(got), expected) << DTypeName(f.type) << " " << b;
        EXPECT_EQ(std::signbit(got), (b & 0x80) != 0) << DTypeName(f.type) << " " << b;
      }
    }
    EXPECT_EQ(nans, f.fnuz ? 1 : (f.type == DType::kFloat8E5M2 ? 6 : 2)) << DTypeName(f.type);
  }
}

TEST(Float8, EncodesEveryFiniteValueBackToItsPattern) {
  for (const Float8Spec& f : kFloat8Specs)
    for (int saturate = 0; saturate < 2; ++saturate)
      for (int b = 0; b < 256; ++b) {
        double v = 0;
        const Kind kind = Float8Value(f, static_cast<uint8_t>(b), &v);
        if (kind == Kind::kNaN) continue;
        if (kind == Kind::kInf) v = b & 0x80 ? -INFINITY : INFINITY;
        const uint8_t expected = kind == Kind::kInf && saturate ? (b & 0x80) | 0x7B : b;
        EXPECT_EQ(FloatToFloat8Bits(static_cast<float>(v), f.type, saturate), expected)
            << DTypeName(f.type) << " " << b << " saturate " << saturate;
      }
}

// The sorted non-negative finite values of a float8 type with their codes.
std::vector<std::pair<double, uint8_t>> NonNegativeValues(const Float8Spec& f) {
  std::vector<std::pair<double, uint8_t>> out;
  for (int b = 0; b < 128; ++b) {
    double v = 0;
    if (Float8Value(f, static_cast<uint8_t>(b), &v) == Kind::kFinite) out.push_back({v, b});
  }
  return out;  // codes 0..127 are already in increasing value order
}

TEST(Float8, RoundsToNearestEvenBetweenNeighbours) {
  for (const Float8Spec& f : kFloat8Specs) {
    const auto values = NonNegativeValues(f);
    for (size_t k = 0; k + 1 < values.size(); ++k) {
      const auto [lo, lo_code] = values[k];
      const auto [hi, hi_code] = values[k + 1];
      const float mid = static_cast<float>((lo + hi) / 2);  // exact in float
      const uint8_t even = (lo_code & 1) == 0 ? lo_code : hi_code;
      // Negative values mirror the positive ones (the FNUZ types have no -0).
      auto negated = [&](uint8_t c) {
        return f.fnuz && c == 0 ? c : static_cast<uint8_t>(c | 0x80);
      };
      for (bool negative : {false, true}) {
        auto code = [&](float v) { return FloatToFloat8Bits(negative ? -v : v, f.type, true); };
        auto expect = [&](uint8_t c) { return negative ? negated(c) : c; };
        EXPECT_EQ(code(mid), expect(even)) << DTypeName(f.type) << " " << mid;
        EXPECT_EQ(code(std::nextafter(mid, 0.0f)), expect(lo_code))
            << DTypeName(f.type) << " " << mid;
        EXPECT_EQ(code(std::nextafter(mid, INFINITY)), expect(hi_code))
            << DTypeName(f.type) << " " << mid;
      }
    }
  }
}

TEST(Float8, OverflowAndSpecialValuesFollowTheOnnxTable) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const Float8Spec& f : kFloat8Specs) {
    const auto values = NonNegativeValues(f);
    const uint8_t max_code = values.back().second;
    EXPECT_EQ(values.back().first, f.max_finite);
    // The rounding boundary above the largest finite value: half an ulp above.
    const double ulp = values.back().first - values[values.size() - 2].first;
    const float boundary = static_cast<float>(f.max_finite + ulp / 2);
    const bool max_is_even = (max_code & 1) == 0;  // then the tie rounds down to max
    for (int saturate = 0; saturate < 2; ++saturate) {
      uint8_t overflow = 0;
      if (saturate)
        overflow = max_code;
      else if (f.fnuz)
        overflow = 0x80;
      else if (f.type == DType::kFloat8E5M2)
        overflow = 0x7C;
      else
        overflow = 0x7F;
      const uint8_t neg = f.fnuz && overflow == 0x80 ? 0 : 0x80;
      EXPECT_EQ(FloatToFloat8Bits(boundary, f.type, saturate), max_is_even ? max_code : overflow)
          << DTypeName(f.type);
      EXPECT_EQ(FloatToFloat8Bits(std::nextafter(boundary, INFINITY), f.type, saturate), overflow);
      EXPECT_EQ(FloatToFloat8Bits(std::nextafter(boundary, 0.0f), f.type, saturate), max_code);
      EXPECT_EQ(FloatToFloat8Bits(INFINITY, f.type, saturate), overflow);
      EXPECT_EQ(FloatToFloat8Bits(-INFINITY, f.type, saturate), overflow | neg);
      EXPECT_EQ(FloatToFloat8Bits(1e30f, f.type, saturate), overflow);
      EXPECT_EQ(FloatToFloat8Bits(nan, f.type, saturate), f.fnuz ? 0x80 : 0x7F);
      EXPECT_EQ(FloatToFloat8Bits(-nan, f.type, saturate), f.fnuz ? 0x80 : 0xFF);
      EXPECT_EQ(FloatToFloat8Bits(-0.0f, f.type, saturate), f.fnuz ? 0x00 : 0x80);
      EXPECT_EQ(FloatToFloat8Bits(-1e-30f, f.type, saturate), f.fnuz ? 0x00 : 0x80);
    }
  }
}

// Nearest of the two bfloat16 neighbours of v, ties to even, in double.
uint16_t ReferenceBFloat16(float v) {
  const uint32_t bits = std::bit_cast<uint32_t>(v);
  const uint16_t down = static_cast<uint16_t>(bits >> 16);  // truncation: toward zero
  const uint16_t up = down + 1;                             // next magnitude
  const double dv = std::fabs(static_cast<double>(v));
  const double d_down = std::fabs(static_cast<double>(BFloat16BitsToFloat(down)));
  const double d_up = std::fabs(static_cast<double>(BFloat16BitsToFloat(up)));
  if (dv - d_down < d_up - dv) return down;
  if (dv - d_down > d_up - dv) return up;
  return (down & 1) ? up : down;
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(FloatToBFloat16Bits(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBFloat16Bits(std::bit_cast<float>(0x3F808000u)), 0x3F80);  // tie, even down
  EXPECT_EQ(FloatToBFloat16Bits(std::bit_cast<float>(0x3F818000u)), 0x3F82);  // tie, even up
  EXPECT_EQ(FloatToBFloat16Bits(std::bit_cast<float>(0x3F808001u)), 0x3F81);
  EXPECT_EQ(FloatToBFloat16Bits(std::bit_cast<float>(0x7F7FFFFFu)), 0x7F80);  // overflow -> inf
  EXPECT_EQ(FloatToBFloat16Bits(-INFINITY), 0xFF80);
  EXPECT_EQ(FloatToBFloat16Bits(std::bit_cast<float>(0xFFC00000u)), 0xFFC0);
  EXPECT_EQ(FloatToBFloat16Bits(std::bit_cast<float>(0x7F800001u)), 0x7FC0);  // sNaN quieted
  // A stride over every float bit pattern (finite ones, below the overflow boundary).
  for (uint64_t b = 0; b < 0x7F7F8000u; b += 0x3F1Bu) {
    for (uint32_t sign : {0u, 0x80000000u}) {
      const float v = std::bit_cast<float>(static_cast<uint32_t>(b) | sign);
      ASSERT_EQ(FloatToBFloat16Bits(v), ReferenceBFloat16(v) | (sign >> 16)) << std::hex << b;
      ASSERT_EQ(BFloat16BitsToFloat(FloatToBFloat16Bits(v)),
                BFloat16BitsToFloat(ReferenceBFloat16(v) | (sign >> 16)));
    }
  }
}

TEST(Float16, RoundsToNearestEven) {
  EXPECT_EQ(FloatToFloat16Bits(1.0f), 0x3C00);
  EXPECT_EQ(FloatToFloat16Bits(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie, even down
  EXPECT_EQ(FloatToFloat16Bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie, even up
  EXPECT_EQ(FloatToFloat16Bits(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToFloat16Bits(65519.996f), 0x7BFF);
  EXPECT_EQ(FloatToFloat16Bits(65520.0f), 0x7C00);               // tie with the next binade: inf
  EXPECT_EQ(FloatToFloat16Bits(std::ldexp(1.0f, -25)), 0x0000);  // half the smallest subnormal
  EXPECT_EQ(FloatToFloat16Bits(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 subnormal quanta -> 2
  EXPECT_EQ(FloatToFloat16Bits(-0.0f), 0x8000);
  EXPECT_EQ(FloatToFloat16Bits(std::bit_cast<float>(0xFFC00000u)), 0xFE00);
  for (int b = 0; b < 0x10000; ++b) {  // every float16 widens exactly and narrows back
    const float f = Float16BitsToFloat(static_cast<uint16_t>(b));
    if (std::isnan(f)) {
      EXPECT_EQ(FloatToFloat16Bits(f), b | 0x200);
    } else {
      ASSERT_EQ(FloatToFloat16Bits(f), b);
    }
  }
#ifdef __FLT16_MAX__
  // Against the compiler's float -> _Float16 conversion over a stride of all floats.
  for (uint64_t b = 0; b < 0x7F800000u; b += 0x1F3Du) {
    for (uint32_t sign : {0u, 0x80000000u}) {
      const float v = std::bit_cast<float>(static_cast<uint32_t>(b) | sign);
      const _Float16 h = static_cast<_Float16>(v);
      ASSERT_EQ(FloatToFloat16Bits(v), std::bit_cast<uint16_t>(h)) << std::hex << b;
      ASSERT_EQ(Float16BitsToFloat(std::bit_cast<uint16_t>(h)), static_cast<float>(h));
    }
  }
#endif
}

}  // namespace
}  // namespace octet
