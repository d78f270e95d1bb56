// The quantized binary spans (qlinear_binary.h) with AVX-512, 16 elements per
// step; the last partial step uses masked loads and stores, so nothing past
// the span is read or written. Same bytes as the scalar code: vfmadd is
// std::fma, cvtps2dq rounds half to even (default MXCSR) and gives INT32_MIN
// for NaN and out-of-range values as the scalar conversion does, divps is the
// scalar division, maxps/minps return the bound for NaN as the scalar clamp
// does, and products are kept rounded where the scalar code adds them.
// GCC 12.2 warns falsely about the _mm512_undefined_* pass-through operand of
// max/min/cvt intrinsics (GCC bug 105593, fixed in 12.3).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include "kernels/int8/qlinear_binary.h"

namespace octet::qbinary {

namespace {

// The arithmetic, with QLinearAdd's two operand orders apart so that the
// loop does not test a_inner.
enum class Kind { kAddAOuter, kAddAInner, kQLinearMul, kFloatAdd, kFloatMul };

__mmask16 TailMask(int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << count) - 1);
}

// Reads 8-bit operands as int32 values: an int8 byte is its uint8 bits with the
// top bit flipped, less 128.
struct OperandReader {
  OperandReader(bool is_signed, int32_t offset)
      : flip(_mm_set1_epi8(is_signed ? static_cast<char>(0x80) : 0)),
        bias(_mm512_set1_epi32(offset - (is_signed ? 128 : 0))) {}
  __m512i operator()(__m128i bytes) const {
    return _mm512_add_epi32(_mm512_cvtepu8_epi32(_mm_xor_si128(bytes, flip)), bias);
  }
  __m128i flip;
  __m512i bias;
};

struct Constants {
  explicit Constants(const QBinaryProgram& p)
      : ratio_a(_mm512_set1_ps(p.ratio_a)),
        ratio_b(_mm512_set1_ps(p.ratio_b)),
        fixed(_mm512_set1_ps(p.fixed)),
        ratio(_mm512_set1_ps(p.ratio)),
        a_scale(_mm512_set1_ps(p.a_scale)),
        b_scale(_mm512_set1_ps(p.b_scale)),
        c_scale(_mm512_set1_ps(p.c_scale)),
        c_zero_float(_mm512_set1_ps(static_cast<float>(p.c_zero))),
        lo(_mm512_set1_ps(static_cast<float>(p.c_min - p.c_zero))),
        hi(_mm512_set1_ps(static_cast<float>(p.c_max - p.c_zero))),
        a_zero(_mm512_set1_epi32(p.a_zero)),
        b_zero(_mm512_set1_epi32(p.b_zero)),
        c_zero(_mm512_set1_epi32(p.c_zero)),
        c_min(_mm512_set1_epi32(p.c_min)),
        c_max(_mm512_set1_epi32(p.c_max)),
        c_offset(_mm512_set1_epi32(p.c_offset)) {}
  __m512 ratio_a, ratio_b, fixed, ratio, a_scale, b_scale, c_scale, c_zero_float, lo, hi;
  __m512i a_zero, b_zero, c_zero, c_min, c_max, c_offset;
};

// The stored values (clamped, less c_offset) of 16 elements.
template <Kind kKind>
__m512i Compute(const Constants& k, __m512i a, __m512i b) {
  __m512i q;
  if constexpr (kKind == Kind::kAddAOuter || kKind == Kind::kAddAInner) {
    const __m512 fa = _mm512_cvtepi32_ps(a), fb = _mm512_cvtepi32_ps(b);
    const __m512 v = kKind == Kind::kAddAInner
                         ? _mm512_fmadd_ps(fb, k.ratio_b, _mm512_fmadd_ps(fa, k.ratio_a, k.fixed))
                         : _mm512_fmadd_ps(fa, k.ratio_a, _mm512_fmadd_ps(fb, k.ratio_b, k.fixed));
    q = _mm512_cvtps_epi32(v);
  } else if constexpr (kKind == Kind::kQLinearMul) {
    const __m512i product =
        _mm512_mullo_epi32(_mm512_sub_epi32(a, k.a_zero), _mm512_sub_epi32(b, k.b_zero));
    __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(product), k.ratio);
    asm("" : "+v"(v));  // keeps the product rounded: no fused multiply-add
    q = _mm512_cvtps_epi32(_mm512_add_ps(v, k.c_zero_float));
  } else {
    __m512 x = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(a, k.a_zero)), k.a_scale);
    __m512 y = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(b, k.b_zero)), k.b_scale);
    asm("" : "+v"(x), "+v"(y));  // keeps the products rounded: no fused multiply-add
    __m512 v = _mm512_div_ps(kKind == Kind::kFloatAdd ? _mm512_add_ps(x, y) : _mm512_mul_ps(x, y),
                             k.c_scale);
    v = _mm512_max_ps(v, k.lo);  // NaN -> lo
    v = _mm512_min_ps(v, k.hi);
    q = _mm512_add_epi32(_mm512_cvtps_epi32(v), k.c_zero);
  }
  q = _mm512_min_epi32(_mm512_max_epi32(q, k.c_min), k.c_max);
  return _mm512_sub_epi32(q, k.c_offset);
}

template <Kind kKind>
void Span(const QBinaryProgram& p, const uint8_t* a, int64_t a_step, const uint8_t* b,
          int64_t b_step, uint8_t* c, int64_t n) {
  const Constants k(p);
  const OperandReader read_a(p.a_signed, p.a_offset), read_b(p.b_signed, p.b_offset);
  // A value used for the whole span is read once, by the same code.
  const __m512i a_splat = read_a(_mm_set1_epi8(static_cast<char>(a[0])));
  const __m512i b_splat = read_b(_mm_set1_epi8(static_cast<char>(b[0])));
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {  // whole steps: plain loads and stores (faster than masked)
    const __m512i va =
        a_step != 0 ? read_a(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i))) : a_splat;
    const __m512i vb =
        b_step != 0 ? read_b(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i))) : b_splat;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(c + i),
                     _mm512_cvtepi32_epi8(Compute<kKind>(k, va, vb)));
  }
  if (i < n) {
    const __mmask16 mask = TailMask(n - i);
    const __m512i va = a_step != 0 ? read_a(_mm_maskz_loadu_epi8(mask, a + i)) : a_splat;
    const __m512i vb = b_step != 0 ? read_b(_mm_maskz_loadu_epi8(mask, b + i)) : b_splat;
    _mm512_mask_cvtepi32_storeu_epi8(c + i, mask, Compute<kKind>(k, va, vb));
  }
}

}  // namespace

void SpanAvx512(const QBinaryProgram& p, const uint8_t* a, int64_t a_step, const uint8_t* b,
                int64_t b_step, uint8_t* c, int64_t n) {
  switch (p.arithmetic) {
    case QBinaryArithmetic::kQLinearAdd:
      return p.a_inner ? Span<Kind::kAddAInner>(p, a, a_step, b, b_step, c, n)
                       : Span<Kind::kAddAOuter>(p, a, a_step, b, b_step, c, n);
    case QBinaryArithmetic::kQLinearMul:
      return Span<Kind::kQLinearMul>(p, a, a_step, b, b_step, c, n);
    case QBinaryArithmetic::kFloatAdd:
      return Span<Kind::kFloatAdd>(p, a, a_step, b, b_step, c, n);
    case QBinaryArithmetic::kFloatMul:
      return Span<Kind::kFloatMul>(p, a, a_step, b, b_step, c, n);
  }
}

}  // namespace octet::qbinary
