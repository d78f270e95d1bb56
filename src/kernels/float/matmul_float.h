// Float32 matrix multiplication, one fixed accumulation order.
#pragma once

#include <cstdint>

namespace octet {

// c[i, j] = sum over p in 0..k-1, in increasing p, of a[i, p] * b[p, j], each
// step one fused multiply-add (so results are the same on every machine and
// do not depend on how rows are split across threads). Row-major, contiguous:
// a is rows x k, b is k x n, c is rows x n (overwritten).
void MatMulFloat32(const float* a, const float* b, float* c, int64_t rows, int64_t k, int64_t n);

}  // namespace octet
