// The AVX-512 path of kernels/float/vmath.h: 16 floats per vector, tails
// through masked loads and stores.
// Rounding after every Add and Mul (see vmath_impl.h); must precede the
// includes so that inlined intrinsics agree.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif
#include <immintrin.h>

#include "kernels/float/vmath_impl.h"
#include "kernels/simd_avx512.h"

namespace octet::vmath {

constinit const Kernels kAvx512Kernels = MakeKernels<simd::Avx512>();

}  // namespace octet::vmath
