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
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "rewrite/qdq_util.h"

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

// The constants of one operator, formed once per run in ORT's order.
class QLinearAddArithmetic {
 public:
  explicit QLinearAddArithmetic(const QLinearBinaryParams& p);
  // One output value (before saturation) from the 8-bit inputs a, b.
  // scalar_a: A is the broadcast single value of this span (ORT's swapped call).
  int32_t operator()(int32_t a, int32_t b, bool scalar_a) const;

 private:
  float ratio_a_, ratio_b_;
  float fixed_ab_;  // F with A first (vectors, or B scalar)
  float fixed_ba_;  // F with B first (A scalar)
};

class QLinearMulArithmetic {
 public:
  explicit QLinearMulArithmetic(const QLinearBinaryParams& p);
  int32_t operator()(int32_t a, int32_t b) const;

 private:
  int32_t a_zero_, b_zero_;
  float ratio_, c_zero_;
};

// DequantizeLinear(a), DequantizeLinear(b) -> Add | Mul -> QuantizeLinear as ONNX Runtime
// runs the three nodes when it does not fuse them: float(q - zero) * scale for each input,
// one float32 add or multiply, then QuantizeLinear (divide, clamp, round half to even,
// + zero). a, b and the result are 8-bit values of the types in the parameters.
class QdqFloatBinaryArithmetic {
 public:
  QdqFloatBinaryArithmetic(const ScalarQParams& a, const ScalarQParams& b, const ScalarQParams& c,
                           bool is_add);
  int32_t operator()(int32_t a, int32_t b) const;

 private:
  ScalarQParams a_, b_, c_;
  bool is_add_;
};

// cvtps2dq: round half to even; NaN and values outside int32 give INT32_MIN.
int32_t ConvertLikeCvtps2dq(float v);

}  // namespace octet
