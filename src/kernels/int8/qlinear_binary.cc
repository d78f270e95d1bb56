#include "kernels/int8/qlinear_binary.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "kernels/int8/quantize.h"

namespace octet {

namespace {

// cvtps2dq: round half to even; NaN and values outside int32 give INT32_MIN.
int32_t ConvertLikeCvtps2dq(float v) {
  if (!(v >= -2147483648.f && v < 2147483648.f)) return std::numeric_limits<int32_t>::min();
  return static_cast<int32_t>(std::nearbyint(v));
}

int32_t ReadValue(uint8_t byte, bool is_signed, int32_t offset) {
  return (is_signed ? int32_t{static_cast<int8_t>(byte)} : int32_t{byte}) + offset;
}

// The float steps on dequantized operands: QuantizeLinear of x (op) y.
int32_t FloatResult(const QBinaryProgram& p, float x, float y) {
  const float r = p.arithmetic == QBinaryArithmetic::kFloatAdd ? x + y : x * y;
  return QuantizeScaledValue(r / p.c_scale, p.c_zero, p.c_min, p.c_max);
}

// The value of one element before saturation (a and b already read).
int32_t Compute(const QBinaryProgram& p, int32_t a, int32_t b) {
  switch (p.arithmetic) {
    case QBinaryArithmetic::kQLinearAdd: {
      const float fa = static_cast<float>(a);
      const float fb = static_cast<float>(b);
      return ConvertLikeCvtps2dq(p.a_inner
                                     ? std::fma(fb, p.ratio_b, std::fma(fa, p.ratio_a, p.fixed))
                                     : std::fma(fa, p.ratio_a, std::fma(fb, p.ratio_b, p.fixed)));
    }
    case QBinaryArithmetic::kQLinearMul: {
      // Separate statements: ORT's SSE2 kernel multiplies, then adds (no FMA).
      const float product = static_cast<float>((a - p.a_zero) * (b - p.b_zero)) * p.ratio;
      return ConvertLikeCvtps2dq(product + static_cast<float>(p.c_zero));
    }
    default:
      return FloatResult(p, static_cast<float>(a - p.a_zero) * p.a_scale,
                         static_cast<float>(b - p.b_zero) * p.b_scale);
  }
}

}  // namespace

QBinaryProgram QLinearAddProgram(const QLinearBinaryParams& p, bool scalar_a) {
  QBinaryProgram q;
  q.arithmetic = QBinaryArithmetic::kQLinearAdd;
  q.c_min = QMin(p.type);
  q.c_max = QMax(p.type);
  q.ratio_a = p.a_scale / p.c_scale;
  q.ratio_b = p.b_scale / p.c_scale;
  const float za = static_cast<float>(p.a_zero);
  const float zb = static_cast<float>(p.b_zero);
  const float zc = static_cast<float>(p.c_zero);
  q.a_inner = scalar_a;
  q.fixed = scalar_a ? zc - std::fma(q.ratio_b, zb, q.ratio_a * za)
                     : zc - std::fma(q.ratio_a, za, q.ratio_b * zb);
  return q;
}

QBinaryProgram QLinearMulProgram(const QLinearBinaryParams& p) {
  QBinaryProgram q;
  q.arithmetic = QBinaryArithmetic::kQLinearMul;
  q.c_min = QMin(p.type);
  q.c_max = QMax(p.type);
  q.a_zero = p.a_zero;
  q.b_zero = p.b_zero;
  q.c_zero = p.c_zero;
  q.ratio = (p.a_scale * p.b_scale) / p.c_scale;
  return q;
}

QBinaryProgram QdqFloatBinaryProgram(const ScalarQParams& a, const ScalarQParams& b,
                                     const ScalarQParams& c, bool is_add) {
  QBinaryProgram q;
  q.arithmetic = is_add ? QBinaryArithmetic::kFloatAdd : QBinaryArithmetic::kFloatMul;
  q.a_signed = a.type == DType::kInt8;
  q.b_signed = b.type == DType::kInt8;
  q.c_min = QMin(c.type);
  q.c_max = QMax(c.type);
  q.a_zero = a.zero;
  q.b_zero = b.zero;
  q.c_zero = c.zero;
  q.a_scale = a.scale;
  q.b_scale = b.scale;
  q.c_scale = c.scale;
  return q;
}

namespace qbinary {

void SpanScalar(const QBinaryProgram& p, const uint8_t* a, int64_t a_step, const uint8_t* b,
                int64_t b_step, uint8_t* c, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const int32_t v = Compute(p, ReadValue(a[i * a_step], p.a_signed, p.a_offset),
                              ReadValue(b[i * b_step], p.b_signed, p.b_offset));
    c[i] = static_cast<uint8_t>(std::clamp(v, p.c_min, p.c_max) - p.c_offset);
  }
}

void FloatOperandSpanScalar(const QBinaryProgram& p, const uint8_t* a, int64_t a_step,
                            const float* b, int64_t b_step, uint8_t* c, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const int32_t x = ReadValue(a[i * a_step], p.a_signed, p.a_offset);
    const int32_t v = FloatResult(p, static_cast<float>(x - p.a_zero) * p.a_scale, b[i * b_step]);
    c[i] = static_cast<uint8_t>(std::clamp(v, p.c_min, p.c_max) - p.c_offset);
  }
}

}  // namespace qbinary

void QBinarySpan(const QBinaryProgram& p, const uint8_t* a, int64_t a_step, const uint8_t* b,
                 int64_t b_step, uint8_t* c, int64_t n, Isa isa) {
  OCTET_CHECK((a_step == 0 || a_step == 1) && (b_step == 0 || b_step == 1),
              "internal: quantized binary span steps must be 0 or 1");
  if (n <= 0) return;
#if defined(__x86_64__) || defined(_M_X64)
  const qbinary::SpanFn fn = PickKernel<qbinary::SpanFn>(
      isa, "quantized binary kernels", qbinary::SpanScalar, qbinary::SpanAvx2, qbinary::SpanAvx512);
#else
  const qbinary::SpanFn fn =
      PickKernel<qbinary::SpanFn>(isa, "quantized binary kernels", qbinary::SpanScalar,
                                  qbinary::SpanScalar, qbinary::SpanScalar);
#endif
  fn(p, a, a_step, b, b_step, c, n);
}

void QBinaryFloatOperandSpan(const QBinaryProgram& p, const uint8_t* a, int64_t a_step,
                             const float* b, int64_t b_step, uint8_t* c, int64_t n, Isa isa) {
  OCTET_CHECK((a_step == 0 || a_step == 1) && (b_step == 0 || b_step == 1),
              "internal: quantized binary span steps must be 0 or 1");
  OCTET_CHECK(
      p.arithmetic == QBinaryArithmetic::kFloatAdd || p.arithmetic == QBinaryArithmetic::kFloatMul,
      "internal: a dequantized operand needs the float steps");
  if (n <= 0) return;
#if defined(__x86_64__) || defined(_M_X64)
  const qbinary::FloatOperandSpanFn fn = PickKernel<qbinary::FloatOperandSpanFn>(
      isa, "quantized binary kernels", qbinary::FloatOperandSpanScalar,
      qbinary::FloatOperandSpanAvx2, qbinary::FloatOperandSpanAvx512);
#else
  const qbinary::FloatOperandSpanFn fn = PickKernel<qbinary::FloatOperandSpanFn>(
      isa, "quantized binary kernels", qbinary::FloatOperandSpanScalar,
      qbinary::FloatOperandSpanScalar, qbinary::FloatOperandSpanScalar);
#endif
  fn(p, a, a_step, b, b_step, c, n);
}

}  // namespace octet
