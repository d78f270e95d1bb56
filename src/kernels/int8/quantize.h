// QuantizeLinear and DequantizeLinear between float32 and 8/16-bit integers,
// and the min/max scan of DynamicQuantizeLinear, in ONNX Runtime 1.31.1's
// float order (docs/int8.md, "Quantize and dequantize"):
//
//   quantize:    v = x / scale                       a division, not a
//   reciprocal product
//                v = clamp(v, qmin - zero, qmax - zero) in float; NaN -> qmin -
//                zero y = round_half_even(v) + zero
//   dequantize:  y = float(x - zero) * scale
//
// Each has a scalar, an AVX2 and an AVX-512 implementation chosen by the same
// dispatch as the GEMM (kernels/isa.h); they give the same bits (cvtps2dq
// rounds half to even under the default MXCSR, maxps returns the bound for
// NaN as the scalar comparison does, and nothing is fused).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/isa.h"

namespace octet {

// The saturating quantization of one value already divided by the scale;
// qmin/qmax are the output type's limits.
int32_t QuantizeScaledValue(float scaled, int32_t zero_point, int32_t qmin, int32_t qmax);

// Scale and zero point of a run of n elements: one pair for all of them, or
// n pairs (per_element) when a per-axis quantization's axis is the innermost.
struct QuantizeSpanParams {
  const float* scale = nullptr;
  const int32_t* zero_point = nullptr;  // within the integer type's range
  bool per_element = false;
  DType type = DType::kUInt8;  // kUInt8, kInt8, kUInt16 or kInt16
};

// True for the integer types QuantizeSpan / DequantizeSpan take.
bool IsSpanQuantizedType(DType t);

// y[0, n) = quantize(x[0, n)) into p.type's storage. `isa` picks the
// implementation (every one gives the same bytes); a path this CPU cannot
// run is an octet::Error.
void QuantizeSpan(const float* x, int64_t n, const QuantizeSpanParams& p, void* y,
                  Isa isa = ActiveIsa());

// y[0, n) = dequantize(x[0, n)), x stored as p.type.
void DequantizeSpan(const void* x, int64_t n, const QuantizeSpanParams& p, float* y,
                    Isa isa = ActiveIsa());

// min(0, min x) and max(0, max x) over x[0, n), as std::min / std::max fold
// them from 0 (so a zero result is +0), and whether x holds a NaN (which the
// fold skips).
struct FloatRange {
  float low = 0.f, high = 0.f;
  bool has_nan = false;
};
FloatRange RangeWithZero(const float* x, int64_t n, Isa isa = ActiveIsa());

// Internal: each implementation (quantize.cc, quantize_avx2.cc,
// quantize_avx512.cc). The ISA files call only these functions, never an
// inline helper of a header (an inline function compiled with AVX flags
// could be the copy the linker keeps).
namespace quant {
using QuantizeFn = void (*)(const float* x, int64_t n, const QuantizeSpanParams& p, void* y);
using DequantizeFn = void (*)(const void* x, int64_t n, const QuantizeSpanParams& p, float* y);
using RangeFn = FloatRange (*)(const float* x, int64_t n);
void QuantizeScalar(const float* x, int64_t n, const QuantizeSpanParams& p, void* y);
void DequantizeScalar(const void* x, int64_t n, const QuantizeSpanParams& p, float* y);
FloatRange RangeScalar(const float* x, int64_t n);
void QuantizeAvx2(const float* x, int64_t n, const QuantizeSpanParams& p, void* y);
void DequantizeAvx2(const void* x, int64_t n, const QuantizeSpanParams& p, float* y);
FloatRange RangeAvx2(const float* x, int64_t n);
void QuantizeAvx512(const float* x, int64_t n, const QuantizeSpanParams& p, void* y);
void DequantizeAvx512(const void* x, int64_t n, const QuantizeSpanParams& p, float* y);
FloatRange RangeAvx512(const float* x, int64_t n);
}  // namespace quant

}  // namespace octet
