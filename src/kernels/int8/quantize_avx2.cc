// The quantize kernels (quantize.h) with AVX2, 8 elements per step
// (quantize_impl.h).
// Rounding after every operation; must precede the includes so that inlined
// intrinsics agree.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif
#include "kernels/int8/quantize_impl.h"
#include "kernels/simd_avx2.h"

namespace octet::quant {

using KernelsAvx2 = QuantizeKernels<simd::Avx2>;

void QuantizeAvx2(const float* x, int64_t n, const QuantizeSpanParams& p, void* y) {
  KernelsAvx2::QuantizeSpan(x, n, p, y);
}

void DequantizeAvx2(const void* x, int64_t n, const QuantizeSpanParams& p, float* y) {
  KernelsAvx2::DequantizeSpan(x, n, p, y);
}

FloatRange RangeAvx2(const float* x, int64_t n) { return KernelsAvx2::Range(x, n); }

}  // namespace octet::quant
