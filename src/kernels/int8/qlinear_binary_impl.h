// The quantized binary spans of kernels/int8/qlinear_binary.h written once
// over a vector type V (kernels/simd_avx2.h, kernels/simd_avx512.h) and
// instantiated by qlinear_binary_avx2.cc and qlinear_binary_avx512.cc: whole
// vectors, then one partial vector, so nothing past the span is read or
// written. Same bytes as the scalar code (qlinear_binary.cc): Fma is
// std::fma, RoundToInt rounds half to even and gives INT32_MIN for NaN and
// out-of-range values as the scalar conversion does, Div is the scalar
// division, Max/Min return the bound for NaN as the scalar clamp does, and
// nothing else is fused (the including file switches contraction off).
#pragma once

#include <cstdint>

#include "kernels/int8/qlinear_binary.h"

namespace octet::qbinary {
// Internal linkage: each including file compiles these for its own instruction set.
namespace {

template <class V>
struct QBinaryKernels {
  using F = typename V::F;
  using I = typename V::I;
  static constexpr int W = V::kWidth;

  static void Span(const QBinaryProgram& p, const uint8_t* a, int64_t a_step, const uint8_t* b,
                   int64_t b_step, uint8_t* c, int64_t n) {
    switch (p.arithmetic) {
      case QBinaryArithmetic::kQLinearAdd:
        return p.a_inner ? Run<Kind::kAddAInner>(p, a, a_step, b, b_step, c, n)
                         : Run<Kind::kAddAOuter>(p, a, a_step, b, b_step, c, n);
      case QBinaryArithmetic::kQLinearMul:
        return Run<Kind::kQLinearMul>(p, a, a_step, b, b_step, c, n);
      case QBinaryArithmetic::kFloatAdd:
        return Run<Kind::kFloatAdd>(p, a, a_step, b, b_step, c, n);
      case QBinaryArithmetic::kFloatMul:
        return Run<Kind::kFloatMul>(p, a, a_step, b, b_step, c, n);
    }
  }

  // The float steps with operand B already dequantized (QBinaryFloatOperandSpan).
  static void FloatOperandSpan(const QBinaryProgram& p, const uint8_t* a, int64_t a_step,
                               const float* b, int64_t b_step, uint8_t* c, int64_t n) {
    if (p.arithmetic == QBinaryArithmetic::kFloatAdd)
      RunFloatB<Kind::kFloatAdd>(p, a, a_step, b, b_step, c, n);
    else
      RunFloatB<Kind::kFloatMul>(p, a, a_step, b, b_step, c, n);
  }

 private:
  // The arithmetic, with QLinearAdd's two operand orders apart so that the
  // loop does not test a_inner.
  enum class Kind { kAddAOuter, kAddAInner, kQLinearMul, kFloatAdd, kFloatMul };

  // Reads 8-bit operands as int32 values: an int8 byte is its uint8 bits with
  // the top bit flipped, less 128.
  struct OperandReader {
    OperandReader(bool is_signed, int32_t offset)
        : flip(V::SetI(is_signed ? 0x80 : 0)), bias(V::SetI(offset - (is_signed ? 128 : 0))) {}
    I operator()(const uint8_t* p, int count) const {
      const I bytes = count == W ? V::LoadWiden(p) : V::LoadWidenPartial(p, count);
      return V::AddI(V::XorI(bytes, flip), bias);
    }
    I flip, bias;
  };

  static int32_t ReadOne(uint8_t byte, bool is_signed, int32_t offset) {
    return (is_signed ? int32_t{static_cast<int8_t>(byte)} : int32_t{byte}) + offset;
  }

  struct Constants {
    explicit Constants(const QBinaryProgram& p)
        : ratio_a(V::Set(p.ratio_a)),
          ratio_b(V::Set(p.ratio_b)),
          fixed(V::Set(p.fixed)),
          ratio(V::Set(p.ratio)),
          a_scale(V::Set(p.a_scale)),
          b_scale(V::Set(p.b_scale)),
          c_scale(V::Set(p.c_scale)),
          c_zero_float(V::Set(static_cast<float>(p.c_zero))),
          lo(V::Set(static_cast<float>(p.c_min - p.c_zero))),
          hi(V::Set(static_cast<float>(p.c_max - p.c_zero))),
          a_zero(V::SetI(p.a_zero)),
          b_zero(V::SetI(p.b_zero)),
          c_zero(V::SetI(p.c_zero)),
          c_min(V::SetI(p.c_min)),
          c_max(V::SetI(p.c_max)),
          c_offset(V::SetI(p.c_offset)),
          c_zero_stored(V::SetI(p.c_zero - p.c_offset)) {}
    F ratio_a, ratio_b, fixed, ratio, a_scale, b_scale, c_scale, c_zero_float, lo, hi;
    I a_zero, b_zero, c_zero, c_min, c_max, c_offset, c_zero_stored;
  };

  // The stored values (clamped, less c_offset) of one vector of elements.
  template <Kind kKind>
  static I Compute(const Constants& k, I a, I b) {
    I q;
    if constexpr (kKind == Kind::kAddAOuter || kKind == Kind::kAddAInner) {
      const F fa = V::ToFloat(a), fb = V::ToFloat(b);
      q = V::RoundToInt(kKind == Kind::kAddAInner
                            ? V::Fma(fb, k.ratio_b, V::Fma(fa, k.ratio_a, k.fixed))
                            : V::Fma(fa, k.ratio_a, V::Fma(fb, k.ratio_b, k.fixed)));
    } else if constexpr (kKind == Kind::kQLinearMul) {
      const I product = V::MulI(V::SubI(a, k.a_zero), V::SubI(b, k.b_zero));
      q = V::RoundToInt(V::Add(V::Mul(V::ToFloat(product), k.ratio), k.c_zero_float));
    } else {
      return FloatResult<kKind>(k, Dequantize(a, k.a_zero, k.a_scale),
                                Dequantize(b, k.b_zero, k.b_scale));
    }
    return Saturate(k, q);
  }

  static F Dequantize(I v, I zero, F scale) { return V::Mul(V::ToFloat(V::SubI(v, zero)), scale); }

  // The float steps on dequantized operands x and y: QuantizeLinear of x (op) y.
  // The float clamp to [c_min - c_zero, c_max - c_zero] already keeps the rounded
  // value + c_zero within [c_min, c_max], so only c_offset is taken off (stored).
  template <Kind kKind>
  static I FloatResult(const Constants& k, F x, F y) {
    F v = V::Div(kKind == Kind::kFloatAdd ? V::Add(x, y) : V::Mul(x, y), k.c_scale);
    v = V::Max(v, k.lo);  // NaN -> lo
    v = V::Min(v, k.hi);
    return V::AddI(V::RoundToInt(v), k.c_zero_stored);
  }

  // Saturates a value to [c_min, c_max] and takes off c_offset.
  static I Saturate(const Constants& k, I q) {
    return V::SubI(V::MinI(V::MaxI(q, k.c_min), k.c_max), k.c_offset);
  }

  // c[i] = the low byte of values(i, count)'s lanes for the n elements, W at a
  // time and a last partial vector (each value is a byte's: the store is exact).
  template <typename Values>
  static void StoreSpan(uint8_t* c, int64_t n, const Values& values) {
    int64_t i = 0;
    for (; i + W <= n; i += W) V::StoreLow(c + i, values(i, W));
    if (i < n)
      V::StoreLowPartial(c + i, values(i, static_cast<int>(n - i)), static_cast<int>(n - i));
  }

  template <Kind kKind>
  static void Run(const QBinaryProgram& p, const uint8_t* a, int64_t a_step, const uint8_t* b,
                  int64_t b_step, uint8_t* c, int64_t n) {
    const Constants k(p);
    const OperandReader read_a(p.a_signed, p.a_offset), read_b(p.b_signed, p.b_offset);
    // A value used for the whole span is read once.
    const I a_splat = V::SetI(ReadOne(a[0], p.a_signed, p.a_offset));
    const I b_splat = V::SetI(ReadOne(b[0], p.b_signed, p.b_offset));
    StoreSpan(c, n, [&](int64_t i, int count) {
      const I va = a_step != 0 ? read_a(a + i, count) : a_splat;
      const I vb = b_step != 0 ? read_b(b + i, count) : b_splat;
      return Compute<kKind>(k, va, vb);
    });
  }

  // Run's loop with B read as floats: its widen, subtract, convert and multiply skipped.
  template <Kind kKind>
  static void RunFloatB(const QBinaryProgram& p, const uint8_t* a, int64_t a_step, const float* b,
                        int64_t b_step, uint8_t* c, int64_t n) {
    const Constants k(p);
    // A's values less its zero point straight from the reader (one add, not two).
    const OperandReader read_a(p.a_signed, p.a_offset - p.a_zero);
    const I a_splat = V::SetI(ReadOne(a[0], p.a_signed, p.a_offset - p.a_zero));
    const F b_splat = V::Set(b[0]);
    StoreSpan(c, n, [&](int64_t i, int count) {
      const I va = a_step != 0 ? read_a(a + i, count) : a_splat;
      const F vb = b_step == 0  ? b_splat
                   : count == W ? V::Load(b + i)
                                : V::LoadPartial(b + i, count, 0.f);
      return FloatResult<kKind>(k, V::Mul(V::ToFloat(va), k.a_scale), vb);
    });
  }
};

}  // namespace
}  // namespace octet::qbinary
