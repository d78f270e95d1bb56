// Conversions between float32 and the narrow floating-point storage types:
// float16 (IEEE binary16), bfloat16 and the four ONNX float8 types. Values are
// handled as their bit patterns (the way octet tensors store them).
//
// float -> narrow rounds to nearest, ties to even, independent of the FP
// environment. Narrow -> float is exact.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace octet {

// float16: overflow gives +-inf; NaN keeps its sign and the top payload bits,
// with the quiet bit set (what the F16C instructions do).
uint16_t FloatToFloat16Bits(float value);
float Float16BitsToFloat(uint16_t bits);

// bfloat16: same rules as float16 (overflow -> +-inf, NaN quiet with sign).
uint16_t FloatToBFloat16Bits(float value);
float BFloat16BitsToFloat(uint16_t bits);

// float8, ONNX semantics (onnx.ai "Float stored in 8 bits"). `type` must be one
// of kFloat8E4M3FN, kFloat8E4M3FNUZ, kFloat8E5M2, kFloat8E5M2FNUZ.
//
// With saturate, a finite value beyond the largest finite one and +-inf become
// +-max finite. Without saturate they become inf for E5M2 and NaN for the others.
// NaN becomes 0x7F|sign for E4M3FN and E5M2, and 0x80 for the FNUZ types, which
// also have no negative zero (-0 and negative values rounding to 0 give 0x00).
uint8_t FloatToFloat8Bits(float value, DType type, bool saturate);
// NaN codes widen to a quiet NaN with the code's sign; the FNUZ NaN (0x80) is
// negative, as in ONNX Runtime.
float Float8BitsToFloat(uint8_t bits, DType type);

}  // namespace octet
