// The quantized binary spans (qlinear_binary.h) with AVX-512, 16 elements per
// step (qlinear_binary_impl.h).
// Rounding after every operation but the explicit fused multiply-adds; must
// precede the includes so that inlined intrinsics agree.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif
#include "kernels/int8/qlinear_binary_impl.h"
#include "kernels/simd_avx512.h"

namespace octet::qbinary {

void SpanAvx512(const QBinaryProgram& p, const uint8_t* a, int64_t a_step, const uint8_t* b,
                int64_t b_step, uint8_t* c, int64_t n) {
  QBinaryKernels<simd::Avx512>::Span(p, a, a_step, b, b_step, c, n);
}

void FloatOperandSpanAvx512(const QBinaryProgram& p, const uint8_t* a, int64_t a_step,
                            const float* b, int64_t b_step, uint8_t* c, int64_t n) {
  QBinaryKernels<simd::Avx512>::FloatOperandSpan(p, a, a_step, b, b_step, c, n);
}

}  // namespace octet::qbinary
