#include "kernels/float/matmul_float.h"

#include <cmath>

namespace octet {

void MatMulFloat32(const float* a, const float* b, float* c, int64_t rows, int64_t k, int64_t n) {
  for (int64_t i = 0; i < rows; ++i) {
    float* c_row = c + i * n;
    for (int64_t j = 0; j < n; ++j) c_row[j] = 0.f;
    // i-p-j order streams rows of b and keeps the c row in cache.
    for (int64_t p = 0; p < k; ++p) {
      const float a_ip = a[i * k + p];
      const float* b_row = b + p * n;
      for (int64_t j = 0; j < n; ++j) c_row[j] = std::fma(a_ip, b_row[j], c_row[j]);
    }
  }
}

}  // namespace octet
