// The block epilogue's rows (epilogue.h) with AVX-512, 16 columns per step.
#include "kernels/int8/epilogue_impl.h"
#include "kernels/simd_avx512.h"

namespace octet::epilogue {

void RowAvx512(const Epilogue& e, const int32_t* acc, int64_t row, int64_t col0, int64_t cols,
               void* out) {
  Row<simd::Avx512>(e, acc, row, col0, cols, out);
}

}  // namespace octet::epilogue
