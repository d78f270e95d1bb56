#include "kernels/int8/qlinear_binary.h"

#include <cmath>
#include <limits>

namespace octet {

int32_t ConvertLikeCvtps2dq(float v) {
  if (!(v >= -2147483648.f && v < 2147483648.f)) return std::numeric_limits<int32_t>::min();
  return static_cast<int32_t>(std::nearbyint(v));
}

QLinearAddArithmetic::QLinearAddArithmetic(const QLinearBinaryParams& p)
    : ratio_a_(p.a_scale / p.c_scale), ratio_b_(p.b_scale / p.c_scale) {
  const float za = static_cast<float>(p.a_zero);
  const float zb = static_cast<float>(p.b_zero);
  const float zc = static_cast<float>(p.c_zero);
  fixed_ab_ = zc - std::fma(ratio_a_, za, ratio_b_ * zb);
  fixed_ba_ = zc - std::fma(ratio_b_, zb, ratio_a_ * za);
}

int32_t QLinearAddArithmetic::operator()(int32_t a, int32_t b, bool scalar_a) const {
  const float fa = static_cast<float>(a);
  const float fb = static_cast<float>(b);
  const float v = scalar_a ? std::fma(fb, ratio_b_, std::fma(fa, ratio_a_, fixed_ba_))
                           : std::fma(fa, ratio_a_, std::fma(fb, ratio_b_, fixed_ab_));
  return ConvertLikeCvtps2dq(v);
}

QLinearMulArithmetic::QLinearMulArithmetic(const QLinearBinaryParams& p)
    : a_zero_(p.a_zero),
      b_zero_(p.b_zero),
      ratio_((p.a_scale * p.b_scale) / p.c_scale),
      c_zero_(static_cast<float>(p.c_zero)) {}

int32_t QLinearMulArithmetic::operator()(int32_t a, int32_t b) const {
  // Separate statements: ORT's SSE2 kernel multiplies, then adds (no FMA).
  const float product = static_cast<float>((a - a_zero_) * (b - b_zero_)) * ratio_;
  return ConvertLikeCvtps2dq(product + c_zero_);
}

QdqFloatBinaryArithmetic::QdqFloatBinaryArithmetic(const ScalarQParams& a, const ScalarQParams& b,
                                                   const ScalarQParams& c, bool is_add)
    : a_(a), b_(b), c_(c), is_add_(is_add) {}

int32_t QdqFloatBinaryArithmetic::operator()(int32_t a, int32_t b) const {
  const float x = DequantizeValue(a, a_);
  const float y = DequantizeValue(b, b_);
  return QuantizeValue(is_add_ ? x + y : x * y, c_);
}

}  // namespace octet
