#include "core/float_types.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "core/error.h"

namespace octet {

namespace {

constexpr uint32_t kFloatSignBit = 0x80000000u;
constexpr uint32_t kFloatInfBits = 0x7F800000u;

// Layout of a narrow binary format: `mantissa_bits` stored fraction bits and
// the exponent bias. Its smallest normal exponent is 1 - bias.
struct NarrowFormat {
  int mantissa_bits;
  int bias;
};

// Rounds a finite, non-negative float (given as bits) to the narrow format with
// ties to even and returns its magnitude code (exponent field << mantissa_bits
// | fraction). The code may exceed the format's largest finite code; the
// caller decides what overflow means.
uint32_t RoundMagnitude(uint32_t abs_bits, NarrowFormat f) {
  const int exponent_field = static_cast<int>(abs_bits >> 23);
  uint32_t significand = abs_bits & 0x7FFFFFu;
  int exponent = -126;  // float subnormals: value = significand * 2^(-126 - 23)
  if (exponent_field != 0) {
    significand |= 0x800000u;
    exponent = exponent_field - 127;
  }
  // Count quanta of the target binade (subnormal values use the smallest
  // normal binade's quantum): value / 2^(target - M).
  const int min_exponent = 1 - f.bias;
  const int target = std::max(exponent, min_exponent);
  const int shift = target - exponent + 23 - f.mantissa_bits;  // >= 0 for every format here
  uint32_t quanta = 0;
  if (shift == 0) {
    quanta = significand;
  } else if (shift < 32) {
    quanta = significand >> shift;
    const uint32_t remainder = significand & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (remainder > half || (remainder == half && (quanta & 1))) ++quanta;
  }
  // quanta counts from the bottom of the binade `target`, so adding the
  // binades below it gives the code; a carry to 2^(M+1) moves up a binade.
  return (static_cast<uint32_t>(target - min_exponent) << f.mantissa_bits) + quanta;
}

// The value of a finite magnitude code (exponent field and fraction).
float DecodeMagnitude(uint32_t code, NarrowFormat f) {
  const uint32_t fraction = code & ((1u << f.mantissa_bits) - 1);
  const int exponent_field = static_cast<int>(code >> f.mantissa_bits);
  if (exponent_field == 0)
    return std::ldexp(static_cast<float>(fraction), 1 - f.bias - f.mantissa_bits);
  return std::ldexp(static_cast<float>(fraction | (1u << f.mantissa_bits)),
                    exponent_field - f.bias - f.mantissa_bits);
}

float WithSign(float magnitude, bool negative) { return negative ? -magnitude : magnitude; }

float QuietNaN(bool negative) {
  return std::bit_cast<float>(0x7FC00000u | (negative ? kFloatSignBit : 0u));
}

// IEEE-style 16-bit formats (float16, bfloat16): overflow to inf, NaN kept.
uint16_t FloatToIeee16(float value, NarrowFormat f) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (bits & kFloatSignBit) >> 16;
  const uint32_t abs_bits = bits & ~kFloatSignBit;
  const uint32_t inf_code = 0x7FFFu >> f.mantissa_bits << f.mantissa_bits;
  if (abs_bits > kFloatInfBits) {
    const uint32_t quiet = 1u << (f.mantissa_bits - 1);
    return static_cast<uint16_t>(sign | inf_code | quiet |
                                 ((abs_bits & 0x7FFFFFu) >> (23 - f.mantissa_bits)));
  }
  if (abs_bits == kFloatInfBits) return static_cast<uint16_t>(sign | inf_code);
  return static_cast<uint16_t>(sign | std::min(RoundMagnitude(abs_bits, f), inf_code));
}

constexpr NarrowFormat kFloat16Format{10, 15};
constexpr NarrowFormat kBFloat16Format{7, 127};

// The four float8 types: layout, largest finite code, and whether the type is
// "FNUZ" (single NaN 0x80, no infinity, no negative zero).
struct Float8Format {
  NarrowFormat layout;
  uint32_t max_code;
  bool fnuz;
};

Float8Format Float8FormatOf(DType type) {
  switch (type) {
    case DType::kFloat8E4M3FN:
      return {{3, 7}, 0x7E, false};
    case DType::kFloat8E4M3FNUZ:
      return {{3, 8}, 0x7F, true};
    case DType::kFloat8E5M2:
      return {{2, 15}, 0x7B, false};
    case DType::kFloat8E5M2FNUZ:
      return {{2, 16}, 0x7F, true};
    default:
      FailInternal(DTypeName(type), " is not a float8 type");
  }
}

}  // namespace

uint16_t FloatToFloat16Bits(float value) { return FloatToIeee16(value, kFloat16Format); }

float Float16BitsToFloat(uint16_t bits) {
  const bool negative = bits & 0x8000;
  const uint32_t magnitude = bits & 0x7FFFu;
  if (magnitude >= 0x7C00u)  // inf or NaN: widen the payload like the hardware does
    return std::bit_cast<float>((negative ? kFloatSignBit : 0u) | kFloatInfBits |
                                ((magnitude & 0x3FFu) << 13));
  return WithSign(DecodeMagnitude(magnitude, kFloat16Format), negative);
}

uint16_t FloatToBFloat16Bits(float value) { return FloatToIeee16(value, kBFloat16Format); }

float BFloat16BitsToFloat(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

uint8_t FloatToFloat8Bits(float value, DType type, bool saturate) {
  const Float8Format f = Float8FormatOf(type);
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint8_t sign = (bits & kFloatSignBit) ? 0x80 : 0x00;
  const uint32_t abs_bits = bits & ~kFloatSignBit;
  if (abs_bits > kFloatInfBits) return f.fnuz ? 0x80 : (sign | 0x7F);
  const uint32_t code =
      abs_bits == kFloatInfBits ? f.max_code + 1 : RoundMagnitude(abs_bits, f.layout);
  if (code > f.max_code) {
    if (saturate) return static_cast<uint8_t>(sign | f.max_code);
    if (f.fnuz) return 0x80;
    return type == DType::kFloat8E5M2 ? (sign | 0x7C) : (sign | 0x7F);  // inf : NaN
  }
  if (f.fnuz && code == 0) return 0x00;
  return static_cast<uint8_t>(sign | code);
}

float Float8BitsToFloat(uint8_t bits, DType type) {
  const Float8Format f = Float8FormatOf(type);
  const bool negative = bits & 0x80;
  const uint32_t magnitude = bits & 0x7Fu;
  if (f.fnuz) {
    if (bits == 0x80) return QuietNaN(true);
  } else if (type == DType::kFloat8E5M2) {
    if (magnitude == 0x7C) return WithSign(INFINITY, negative);
    if (magnitude > 0x7C) return QuietNaN(negative);
  } else if (magnitude == 0x7F) {
    return QuietNaN(negative);
  }
  return WithSign(DecodeMagnitude(magnitude, f.layout), negative);
}

}  // namespace octet
