// The naive integer GEMM every fast kernel is tested against:
//   C[m,n] = sum_k (A[m,k] - za[m]) * (B[k,n] - zb[n])
// accumulated in int64 and returned as int32 (wrapping, as int32 hardware
// accumulation would; callers keep K within the no-overflow range).
#pragma once

#include <cstdint>

namespace octet {

// One 8-bit operand: row-major with leading dimension ld (elements), int8 or uint8.
struct Int8Operand {
  const void* data = nullptr;
  bool is_signed = false;
  int64_t ld = 0;
  int32_t At(int64_t r, int64_t c) const {
    const uint8_t* p = static_cast<const uint8_t*>(data) + r * ld + c;
    return is_signed ? static_cast<int32_t>(static_cast<int8_t>(*p)) : static_cast<int32_t>(*p);
  }
};

// a_zero has M entries when a_zero_per_row, else 1; b_zero has N entries when
// b_zero_per_col, else 1. C has leading dimension ldc.
void GemmReferenceS32(int64_t M, int64_t N, int64_t K, const Int8Operand& A, const int32_t* a_zero,
                      bool a_zero_per_row, const Int8Operand& B, const int32_t* b_zero,
                      bool b_zero_per_col, int32_t* C, int64_t ldc);

}  // namespace octet
