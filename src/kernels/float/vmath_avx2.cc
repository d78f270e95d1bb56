// The AVX2 path of kernels/float/vmath.h: 8 floats per vector, tails
// through maskload/maskstore.
// Rounding after every Add and Mul (see vmath_impl.h); must precede the
// includes so that inlined intrinsics agree.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif
#include <immintrin.h>

#include "kernels/float/vmath_impl.h"
#include "kernels/simd_avx2.h"

namespace octet::vmath {

constinit const Kernels kAvx2Kernels = MakeKernels<simd::Avx2>();

}  // namespace octet::vmath
