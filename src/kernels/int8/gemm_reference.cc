#include "kernels/int8/gemm_reference.h"

namespace octet {

void GemmReferenceS32(int64_t M, int64_t N, int64_t K, const Int8Operand& A, const int32_t* a_zero,
                      bool a_zero_per_row, const Int8Operand& B, const int32_t* b_zero,
                      bool b_zero_per_col, int32_t* C, int64_t ldc) {
  for (int64_t m = 0; m < M; ++m) {
    int64_t za = a_zero ? a_zero[a_zero_per_row ? m : 0] : 0;
    for (int64_t n = 0; n < N; ++n) {
      int64_t zb = b_zero ? b_zero[b_zero_per_col ? n : 0] : 0;
      int64_t acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += (A.At(m, k) - za) * (B.At(k, n) - zb);
      C[m * ldc + n] = static_cast<int32_t>(static_cast<uint32_t>(acc));
    }
  }
}

}  // namespace octet
