// The quantize kernels (quantize.h) with AVX-512, 16 elements per step
// (quantize_impl.h).
// Rounding after every operation; must precede the includes so that inlined
// intrinsics agree.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif
#include "kernels/int8/quantize_impl.h"
#include "kernels/simd_avx512.h"

namespace octet::quant {

using KernelsAvx512 = QuantizeKernels<simd::Avx512>;

void QuantizeAvx512(const float* x, int64_t n, const QuantizeSpanParams& p, void* y) {
  KernelsAvx512::QuantizeSpan(x, n, p, y);
}

void DequantizeAvx512(const void* x, int64_t n, const QuantizeSpanParams& p, float* y) {
  KernelsAvx512::DequantizeSpan(x, n, p, y);
}

FloatRange RangeAvx512(const float* x, int64_t n) { return KernelsAvx512::Range(x, n); }

}  // namespace octet::quant
