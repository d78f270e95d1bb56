// Element arithmetic of com.microsoft QLinearAdd / QLinearMul in ONNX Runtime
// 1.31.1's float order (MLAS qladd / qlmul on x86; docs/qdq.md, "Binary ops"):
//
//   Add: rA = sA / sC, rB = sB / sC, F = float(zC) - fma(rA, float(zA), rB * float(zB))
//        y = cvt(fma(a, rA, fma(b, rB, F)))
//        When A is the single value of a broadcast span, ORT calls the kernel with
//        the inputs swapped, so A and B trade places in every formula above.
//   Mul: r = (sA * sB) / sC, y = cvt(float((a - zA) * (b - zB)) * r + float(zC))
//        (multiply, then add: no fused multiply-add)
//
// cvt is cvtps2dq (round half to even; NaN and values outside int32 give
// INT32_MIN) followed by saturation to the 8-bit type.
//
// And DequantizeLinear(a), DequantizeLinear(b) -> Add | Mul -> QuantizeLinear as
// ONNX Runtime runs the three nodes when it does not fuse them (octet.QdqAdd /
// QdqMul, arithmetic="float"): float(q - zero) * scale for each input, one float32
// add or multiply, then QuantizeLinear (divide, clamp in float, round half to
// even, + zero).
//
// Each has a scalar, an AVX2 and an AVX-512 implementation over spans of
// elements, chosen by the same dispatch as the GEMM (kernels/isa.h); they give
// the same bytes (cvtps2dq rounds half to even under the default MXCSR and
// gives INT32_MIN as the scalar conversion does, fused multiply-adds only
// where ORT fuses them, products kept rounded elsewhere).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/quant.h"
#include "kernels/isa.h"

namespace octet {

struct QLinearBinaryParams {
  float a_scale = 1.f;
  int32_t a_zero = 0;
  float b_scale = 1.f;
  int32_t b_zero = 0;
  float c_scale = 1.f;
  int32_t c_zero = 0;
  DType type = DType::kUInt8;  // of A, B and C: kUInt8 or kInt8
};

enum class QBinaryArithmetic { kQLinearAdd, kQLinearMul, kFloatAdd, kFloatMul };

// What one operator does to each pair of stored bytes, with every constant
// formed once per run in ORT's order. Made by the functions below; the
// reading and writing of bytes is the caller's to set.
struct QBinaryProgram {
  QBinaryArithmetic arithmetic = QBinaryArithmetic::kQLinearAdd;
  // Reading an operand: its byte as int8 (signed) or uint8, plus offset.
  bool a_signed = false, b_signed = false;
  int32_t a_offset = 0, b_offset = 0;
  // Writing the result: clamp(value, c_min, c_max) - c_offset, stored as a byte.
  int32_t c_min = 0, c_max = 255, c_offset = 0;
  // kQLinearAdd: fma(a, ratio_a, fma(b, ratio_b, fixed)), or with A and B
  // trading places when a_inner (ORT's swapped call for a scalar A).
  float ratio_a = 0.f, ratio_b = 0.f, fixed = 0.f;
  bool a_inner = false;
  // kQLinearMul: float((a - a_zero) * (b - b_zero)) * ratio + float(c_zero).
  // kFloat*: float(a - a_zero) * a_scale (op) float(b - b_zero) * b_scale,
  // quantized with c_scale and c_zero into [c_min, c_max].
  float ratio = 0.f;
  int32_t a_zero = 0, b_zero = 0, c_zero = 0;
  float a_scale = 1.f, b_scale = 1.f, c_scale = 1.f;
};

// QLinearAdd; scalar_a: A is the broadcast single value of each span (ORT's
// swapped call). c_min/c_max are p.type's range.
QBinaryProgram QLinearAddProgram(const QLinearBinaryParams& p, bool scalar_a);
QBinaryProgram QLinearMulProgram(const QLinearBinaryParams& p);
// The float steps; a, b and c are 8-bit with the types in the parameters
// (c_min/c_max are c.type's range, and the operands' signedness is set).
QBinaryProgram QdqFloatBinaryProgram(const ScalarQParams& a, const ScalarQParams& b,
                                     const ScalarQParams& c, bool is_add);

// c[i] = program(a[i * a_step], b[i * b_step]) for i in [0, n), where a_step
// and b_step are 1 (a contiguous run) or 0 (one value for the whole span).
// `isa` picks the implementation (every one gives the same bytes); a path
// this CPU cannot run is an octet::Error.
void QBinarySpan(const QBinaryProgram& p, const uint8_t* a, int64_t a_step, const uint8_t* b,
                 int64_t b_step, uint8_t* c, int64_t n, Isa isa = ActiveIsa());

// The float steps (kFloatAdd / kFloatMul programs) with operand B given already
// dequantized: b[i * b_step] is float(b - b_zero) * b_scale, formed as the span
// would form it (a constant operand, dequantized once). Same bytes as QBinarySpan
// on the stored operand. A constant A goes here as B: float add and multiply
// commute exactly.
void QBinaryFloatOperandSpan(const QBinaryProgram& p, const uint8_t* a, int64_t a_step,
                             const float* b, int64_t b_step, uint8_t* c, int64_t n,
                             Isa isa = ActiveIsa());

// Internal: each implementation (qlinear_binary.cc, qlinear_binary_avx2.cc,
// qlinear_binary_avx512.cc). The ISA files call only these functions, never
// an inline helper of a header.
namespace qbinary {
using SpanFn = void (*)(const QBinaryProgram& p, const uint8_t* a, int64_t a_step, const uint8_t* b,
                        int64_t b_step, uint8_t* c, int64_t n);
void SpanScalar(const QBinaryProgram& p, const uint8_t* a, int64_t a_step, const uint8_t* b,
                int64_t b_step, uint8_t* c, int64_t n);
void SpanAvx2(const QBinaryProgram& p, const uint8_t* a, int64_t a_step, const uint8_t* b,
              int64_t b_step, uint8_t* c, int64_t n);
void SpanAvx512(const QBinaryProgram& p, const uint8_t* a, int64_t a_step, const uint8_t* b,
                int64_t b_step, uint8_t* c, int64_t n);
using FloatOperandSpanFn = void (*)(const QBinaryProgram& p, const uint8_t* a, int64_t a_step,
                                    const float* b, int64_t b_step, uint8_t* c, int64_t n);
void FloatOperandSpanScalar(const QBinaryProgram& p, const uint8_t* a, int64_t a_step,
                            const float* b, int64_t b_step, uint8_t* c, int64_t n);
void FloatOperandSpanAvx2(const QBinaryProgram& p, const uint8_t* a, int64_t a_step, const float* b,
                          int64_t b_step, uint8_t* c, int64_t n);
void FloatOperandSpanAvx512(const QBinaryProgram& p, const uint8_t* a, int64_t a_step,
                            const float* b, int64_t b_step, uint8_t* c, int64_t n);
}  // namespace qbinary

}  // namespace octet
