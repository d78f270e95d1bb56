// The quantize kernels (kernels/int8/quantize.h) on every instruction-set
// path against the documented formulas written out independently here:
// random values over many magnitudes, exact .5 ties, saturation at both ends
// with zero points on the type limits, NaN, infinities and -0, per-tensor and
// per-element scales, lengths around the vector widths and misaligned starts.
// Every span ends right before an inaccessible page, so an over-read or
// over-write faults.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "guarded_buffer.h"
#include "int_op_test_util.h"
#include "kernels/int8/quantize.h"

namespace octet {
namespace {

using int_test::RoundHalfEven;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct TypeInfo {
  DType type;
  int64_t min, max;
  size_t size;
};

const TypeInfo kTypes[] = {{DType::kUInt8, 0, 255, 1},
                           {DType::kInt8, -128, 127, 1},
                           {DType::kUInt16, 0, 65535, 2},
                           {DType::kInt16, -32768, 32767, 2}};

const int64_t kLengths[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 1000};

// docs/int8.md: x / scale in float32 (double division of two floats rounded
// once is the float division), clamp to [min - zero, max - zero] with NaN ->
// the low end, round half to even (by comparison with the floor), + zero.
int64_t ExpectedQuantized(float x, float scale, int64_t zero, const TypeInfo& t) {
  const float scaled = static_cast<float>(static_cast<double>(x) / static_cast<double>(scale));
  const double lo = static_cast<double>(t.min - zero), hi = static_cast<double>(t.max - zero);
  const double v = std::isnan(scaled) ? lo : std::min(std::max<double>(scaled, lo), hi);
  return static_cast<int64_t>(RoundHalfEven(v)) + zero;
}

// float(x - zero) * scale, the product rounded once to float32.
float ExpectedDequantized(int64_t x, float scale, int64_t zero) {
  return static_cast<float>(static_cast<double>(static_cast<float>(x - zero)) * scale);
}

uint32_t Bits(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return bits;
}

// Stores / loads an integer in the type's storage (little-endian two's complement).
void StoreInt(void* base, size_t i, int64_t v, const TypeInfo& t) {
  if (t.size == 1)
    static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v);
  else
    static_cast<uint16_t*>(base)[i] = static_cast<uint16_t>(v);
}

int64_t LoadInt(const void* base, size_t i, const TypeInfo& t) {
  if (t.size == 1) {
    const uint8_t b = static_cast<const uint8_t*>(base)[i];
    return t.min < 0 ? int64_t{static_cast<int8_t>(b)} : int64_t{b};
  }
  const uint16_t w = static_cast<const uint16_t*>(base)[i];
  return t.min < 0 ? int64_t{static_cast<int16_t>(w)} : int64_t{w};
}

// Zero points that exercise the type: both limits, the middle, random.
int64_t InterestingZero(const TypeInfo& t, std::mt19937& rng) {
  switch (rng() % 4) {
    case 0:
      return t.min;
    case 1:
      return t.max;
    case 2:
      return (t.min + t.max + 1) / 2;
    default:
      return t.min + static_cast<int64_t>(rng() % static_cast<uint32_t>(t.max - t.min + 1));
  }
}

float InterestingScale(std::mt19937& rng) {
  static const float kSpecial[] = {0.5f, 0.25f, 1.f, 2.f, 1.5f, 0.1f, 3e-3f, 1e-30f, 1e30f};
  if (rng() % 3 == 0) return kSpecial[rng() % (sizeof(kSpecial) / sizeof(kSpecial[0]))];
  return std::ldexp(0.5f + static_cast<float>(rng() % 100000) / 200000.f,
                    static_cast<int>(rng() % 24) - 16);
}

// Values around the quantized grid of `scale`: exact .5 ties (scale a power of
// two divides exactly), values far outside the range, specials, random.
float InterestingValue(float scale, std::mt19937& rng) {
  const int64_t k = static_cast<int64_t>(rng() % 140000) - 70000;
  switch (rng() % 8) {
    case 0:
      return (static_cast<float>(k) + 0.5f) * scale;
    case 1:
      return static_cast<float>(k % 300) * scale;
    case 2: {
      static const float kSpecial[] = {kNaN, kInf, -kInf, -0.f, 0.f, 1e38f, -1e38f, 0.5f, -0.5f};
      return kSpecial[rng() % (sizeof(kSpecial) / sizeof(kSpecial[0]))];
    }
    case 3:
      return std::ldexp(static_cast<float>(k), static_cast<int>(rng() % 40) - 20);
    default:
      return (static_cast<float>(k) / 997.f) * scale;
  }
}

TEST(QuantizeKernels, EveryPathMatchesTheFormula) {
  std::mt19937 rng(41);
  for (const TypeInfo& t : kTypes) {
    for (int64_t n : kLengths) {
      for (bool per_element : {false, true}) {
        for (int64_t misalign : {0, 1, 3}) {
          const int64_t params = per_element ? n : 1;
          GuardedBuffer<float> x(n + misalign), scales(params + misalign);
          GuardedBuffer<int32_t> zeros(params + misalign);
          for (int64_t i = 0; i < params; ++i) {
            // Power-of-two scales in half the cases, so ties are exact.
            const float s = InterestingScale(rng);
            scales[misalign + i] = rng() % 2 ? std::exp2(std::round(std::log2(s))) : s;
            zeros[misalign + i] = static_cast<int32_t>(InterestingZero(t, rng));
          }
          std::vector<int64_t> expected(n);
          for (int64_t i = 0; i < n; ++i) {
            const int64_t s = per_element ? i : 0;
            x[misalign + i] = InterestingValue(scales[misalign + s], rng);
            expected[i] =
                ExpectedQuantized(x[misalign + i], scales[misalign + s], zeros[misalign + s], t);
          }
          QuantizeSpanParams p{scales.data() + misalign, zeros.data() + misalign, per_element,
                               t.type};
          for (Isa isa : SupportedIsas()) {
            SCOPED_TRACE(std::string(IsaName(isa)) + " " + DTypeName(t.type) + " n " +
                         std::to_string(n) + (per_element ? " per-element" : " per-tensor") +
                         " misalign " + std::to_string(misalign));
            GuardedBuffer<uint8_t> y((n + misalign) * t.size);
            std::memset(y.data(), 0xA5, (n + misalign) * t.size);
            uint8_t* out = y.data() + misalign * t.size;
            QuantizeSpan(x.data() + misalign, n, p, out, isa);
            for (int64_t i = 0; i < n; ++i)
              ASSERT_EQ(LoadInt(out, i, t), expected[i])
                  << "at " << i << " x " << x[misalign + i] << " scale "
                  << scales[misalign + (per_element ? i : 0)] << " zero "
                  << zeros[misalign + (per_element ? i : 0)];
            for (int64_t i = 0; i < misalign * static_cast<int64_t>(t.size); ++i)
              ASSERT_EQ(y[i], 0xA5) << "wrote before the span";
          }
        }
      }
    }
  }
}

TEST(QuantizeKernels, TiesRoundToEvenOnEveryPath) {
  // x / 1 = k + 0.5 for k around 0 and the range ends: even neighbours only.
  for (const TypeInfo& t : kTypes) {
    std::vector<float> x;
    for (int k = -6; k <= 6; ++k) x.push_back(static_cast<float>(k) + 0.5f);
    const int32_t zero = static_cast<int32_t>(t.min < 0 ? 0 : t.min + 10);
    const float scale = 1.f;
    for (Isa isa : SupportedIsas()) {
      std::vector<uint8_t> y(x.size() * t.size);
      QuantizeSpan(x.data(), static_cast<int64_t>(x.size()), {&scale, &zero, false, t.type},
                   y.data(), isa);
      for (size_t i = 0; i < x.size(); ++i) {
        const int64_t rounded = static_cast<int64_t>(std::floor(x[i]));
        const int64_t even = rounded % 2 == 0 ? rounded : rounded + 1;
        EXPECT_EQ(LoadInt(y.data(), i, t), even + zero) << IsaName(isa) << " x " << x[i];
      }
    }
  }
}

TEST(DequantizeKernels, EveryPathMatchesTheFormulaBitForBit) {
  std::mt19937 rng(43);
  for (const TypeInfo& t : kTypes) {
    for (int64_t n : kLengths) {
      for (bool per_element : {false, true}) {
        for (int64_t misalign : {0, 1, 3}) {
          const int64_t params = per_element ? n : 1;
          GuardedBuffer<uint8_t> x((n + misalign) * t.size);
          GuardedBuffer<float> scales(params + misalign);
          GuardedBuffer<int32_t> zeros(params + misalign);
          for (int64_t i = 0; i < params; ++i) {
            scales[misalign + i] = rng() % 16 == 0 ? kInf : InterestingScale(rng);
            zeros[misalign + i] = static_cast<int32_t>(InterestingZero(t, rng));
          }
          const uint8_t* in = x.data() + misalign * t.size;
          std::vector<uint32_t> expected(n);
          for (int64_t i = 0; i < n; ++i) {
            const int64_t s = per_element ? i : 0;
            const int64_t v = rng() % 4 == 0
                                  ? (rng() % 2 ? t.min : t.max)
                                  : t.min + static_cast<int64_t>(rng() % (t.max - t.min + 1));
            StoreInt(x.data() + misalign * t.size, i, v, t);
            expected[i] = Bits(
                ExpectedDequantized(LoadInt(in, i, t), scales[misalign + s], zeros[misalign + s]));
          }
          QuantizeSpanParams p{scales.data() + misalign, zeros.data() + misalign, per_element,
                               t.type};
          for (Isa isa : SupportedIsas()) {
            SCOPED_TRACE(std::string(IsaName(isa)) + " " + DTypeName(t.type) + " n " +
                         std::to_string(n) + (per_element ? " per-element" : " per-tensor") +
                         " misalign " + std::to_string(misalign));
            GuardedBuffer<float> y(n + misalign);
            DequantizeSpan(in, n, p, y.data() + misalign, isa);
            for (int64_t i = 0; i < n; ++i)
              ASSERT_EQ(Bits(y[misalign + i]), expected[i]) << "at " << i;
          }
        }
      }
    }
  }
}

TEST(QuantizeKernels, RangeWithZeroOnEveryPath) {
  std::mt19937 rng(47);
  for (int64_t n : kLengths) {
    for (int variant = 0; variant < 4; ++variant) {
      GuardedBuffer<float> x(n + 1);
      float* values = x.data() + 1;  // misaligned
      for (int64_t i = 0; i < n; ++i) {
        switch (variant) {
          case 0:  // mixed signs
            values[i] = static_cast<float>(static_cast<int>(rng() % 20001) - 10000) / 7.f;
            break;
          case 1:  // all positive: low stays +0
            values[i] = 1.f + static_cast<float>(rng() % 1000);
            break;
          case 2:  // -0 and +0 only: both bounds stay +0
            values[i] = rng() % 2 ? -0.f : 0.f;
            break;
          default:  // a NaN somewhere, infinities elsewhere
            values[i] = rng() % 5 == 0 ? -kInf : static_cast<float>(rng() % 100) - 50.f;
            break;
        }
      }
      if (variant == 3 && n > 0) values[rng() % n] = kNaN;
      // Independent: the bounds over the non-NaN values and 0; a zero is +0.
      double low = 0, high = 0;
      bool has_nan = false;
      for (int64_t i = 0; i < n; ++i) {
        if (std::isnan(values[i])) {
          has_nan = true;
          continue;
        }
        low = std::min<double>(low, values[i]);
        high = std::max<double>(high, values[i]);
      }
      for (Isa isa : SupportedIsas()) {
        SCOPED_TRACE(std::string(IsaName(isa)) + " n " + std::to_string(n) + " variant " +
                     std::to_string(variant));
        const FloatRange r = RangeWithZero(values, n, isa);
        EXPECT_EQ(r.has_nan, has_nan);
        EXPECT_EQ(Bits(r.low), Bits(low == 0 ? 0.f : static_cast<float>(low)));
        EXPECT_EQ(Bits(r.high), Bits(high == 0 ? 0.f : static_cast<float>(high)));
      }
    }
  }
}

TEST(QuantizeKernels, RejectsOtherTypes) {
  const float x = 1.f, scale = 1.f;
  const int32_t zero = 0;
  uint8_t y[4];
  EXPECT_THROW(QuantizeSpan(&x, 1, {&scale, &zero, false, DType::kInt32}, y), Error);
  EXPECT_THROW(DequantizeSpan(y, 1, {&scale, &zero, false, DType::kUInt4}, nullptr), Error);
}

}  // namespace
}  // namespace octet
