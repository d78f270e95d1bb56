// The quantized binary spans (qlinear_binary.h) with AVX2, 8 elements per
// step; the remaining elements go through the scalar code. Same bytes as the
// scalar code: vfmadd is std::fma, cvtps2dq rounds half to even (default
// MXCSR) and gives INT32_MIN for NaN and out-of-range values as the scalar
// conversion does, divps is the scalar division, maxps/minps return the bound
// for NaN as the scalar clamp does, and products are kept rounded where the
// scalar code adds them.
#include <immintrin.h>

#include "kernels/int8/qlinear_binary.h"

namespace octet::qbinary {

namespace {

// The arithmetic, with QLinearAdd's two operand orders apart so that the
// loop does not test a_inner.
enum class Kind { kAddAOuter, kAddAInner, kQLinearMul, kFloatAdd, kFloatMul };

// Reads 8-bit operands as int32 values: an int8 byte is its uint8 bits with the
// top bit flipped, less 128.
struct OperandReader {
  OperandReader(bool is_signed, int32_t offset)
      : flip(_mm_set1_epi8(is_signed ? static_cast<char>(0x80) : 0)),
        bias(_mm256_set1_epi32(offset - (is_signed ? 128 : 0))) {}
  __m256i operator()(__m128i bytes) const {
    return _mm256_add_epi32(_mm256_cvtepu8_epi32(_mm_xor_si128(bytes, flip)), bias);
  }
  __m128i flip;
  __m256i bias;
};

struct Constants {
  explicit Constants(const QBinaryProgram& p)
      : ratio_a(_mm256_set1_ps(p.ratio_a)),
        ratio_b(_mm256_set1_ps(p.ratio_b)),
        fixed(_mm256_set1_ps(p.fixed)),
        ratio(_mm256_set1_ps(p.ratio)),
        a_scale(_mm256_set1_ps(p.a_scale)),
        b_scale(_mm256_set1_ps(p.b_scale)),
        c_scale(_mm256_set1_ps(p.c_scale)),
        c_zero_float(_mm256_set1_ps(static_cast<float>(p.c_zero))),
        lo(_mm256_set1_ps(static_cast<float>(p.c_min - p.c_zero))),
        hi(_mm256_set1_ps(static_cast<float>(p.c_max - p.c_zero))),
        a_zero(_mm256_set1_epi32(p.a_zero)),
        b_zero(_mm256_set1_epi32(p.b_zero)),
        c_zero(_mm256_set1_epi32(p.c_zero)),
        c_min(_mm256_set1_epi32(p.c_min)),
        c_max(_mm256_set1_epi32(p.c_max)),
        c_offset(_mm256_set1_epi32(p.c_offset)) {}
  __m256 ratio_a, ratio_b, fixed, ratio, a_scale, b_scale, c_scale, c_zero_float, lo, hi;
  __m256i a_zero, b_zero, c_zero, c_min, c_max, c_offset;
};

// The stored values (clamped, less c_offset) of 8 elements.
template <Kind kKind>
__m256i Compute(const Constants& k, __m256i a, __m256i b) {
  __m256i q;
  if constexpr (kKind == Kind::kAddAOuter || kKind == Kind::kAddAInner) {
    const __m256 fa = _mm256_cvtepi32_ps(a), fb = _mm256_cvtepi32_ps(b);
    const __m256 v = kKind == Kind::kAddAInner
                         ? _mm256_fmadd_ps(fb, k.ratio_b, _mm256_fmadd_ps(fa, k.ratio_a, k.fixed))
                         : _mm256_fmadd_ps(fa, k.ratio_a, _mm256_fmadd_ps(fb, k.ratio_b, k.fixed));
    q = _mm256_cvtps_epi32(v);
  } else if constexpr (kKind == Kind::kQLinearMul) {
    const __m256i product =
        _mm256_mullo_epi32(_mm256_sub_epi32(a, k.a_zero), _mm256_sub_epi32(b, k.b_zero));
    __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(product), k.ratio);
    asm("" : "+x"(v));  // keeps the product rounded: no fused multiply-add
    q = _mm256_cvtps_epi32(_mm256_add_ps(v, k.c_zero_float));
  } else {
    __m256 x = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(a, k.a_zero)), k.a_scale);
    __m256 y = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(b, k.b_zero)), k.b_scale);
    asm("" : "+x"(x), "+x"(y));  // keeps the products rounded: no fused multiply-add
    __m256 v = _mm256_div_ps(kKind == Kind::kFloatAdd ? _mm256_add_ps(x, y) : _mm256_mul_ps(x, y),
                             k.c_scale);
    v = _mm256_max_ps(v, k.lo);  // NaN -> lo
    v = _mm256_min_ps(v, k.hi);
    q = _mm256_add_epi32(_mm256_cvtps_epi32(v), k.c_zero);
  }
  q = _mm256_min_epi32(_mm256_max_epi32(q, k.c_min), k.c_max);
  return _mm256_sub_epi32(q, k.c_offset);
}

// The low byte of each int32 lane, in order (a byte's value is in range, so
// truncation is exact).
void StoreLowBytes(uint8_t* out, __m256i v) {
  const __m256i pick =
      _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1,
                       -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m256i picked = _mm256_shuffle_epi8(v, pick);
  const __m128i bytes =
      _mm_unpacklo_epi32(_mm256_castsi256_si128(picked), _mm256_extracti128_si256(picked, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(out), bytes);
}

__m128i Load8Bytes(const uint8_t* p) {
  return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
}

template <Kind kKind>
void Span(const QBinaryProgram& p, const uint8_t* a, int64_t a_step, const uint8_t* b,
          int64_t b_step, uint8_t* c, int64_t n) {
  const Constants k(p);
  const OperandReader read_a(p.a_signed, p.a_offset), read_b(p.b_signed, p.b_offset);
  // A value used for the whole span is read once, by the same code.
  const __m256i a_splat = read_a(_mm_set1_epi8(static_cast<char>(a[0])));
  const __m256i b_splat = read_b(_mm_set1_epi8(static_cast<char>(b[0])));
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i va = a_step != 0 ? read_a(Load8Bytes(a + i)) : a_splat;
    const __m256i vb = b_step != 0 ? read_b(Load8Bytes(b + i)) : b_splat;
    StoreLowBytes(c + i, Compute<kKind>(k, va, vb));
  }
  SpanScalar(p, a + i * a_step, a_step, b + i * b_step, b_step, c + i, n - i);
}

}  // namespace

void SpanAvx2(const QBinaryProgram& p, const uint8_t* a, int64_t a_step, const uint8_t* b,
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
