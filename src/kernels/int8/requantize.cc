#include "kernels/int8/requantize.h"

#include <limits>

#include "core/error.h"

namespace octet {

namespace {

template <typename T>
void RequantizeTyped(const int32_t* acc, int64_t ld_acc, int64_t rows, int64_t cols,
                     const RequantizeParams& p, T* out, int64_t ld_out) {
  const float lo = static_cast<float>(std::numeric_limits<T>::min() - p.zero_point);
  const float hi = static_cast<float>(std::numeric_limits<T>::max() - p.zero_point);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      uint32_t sum = static_cast<uint32_t>(acc[r * ld_acc + c]);
      if (p.bias) sum += static_cast<uint32_t>(p.bias[p.bias_per_column ? c : 0]);
      const float m = p.multiplier[p.multiplier_per_column ? c : 0];
      out[r * ld_out + c] =
          static_cast<T>(RequantizeValue(static_cast<int32_t>(sum), m, lo, hi, p.zero_point));
    }
  }
}

}  // namespace

void RequantizeS32(const int32_t* acc, int64_t ld_acc, int64_t rows, int64_t cols,
                   const RequantizeParams& params, void* out, int64_t ld_out) {
  switch (params.output_type) {
    case DType::kUInt8:
      RequantizeTyped(acc, ld_acc, rows, cols, params, static_cast<uint8_t*>(out), ld_out);
      return;
    case DType::kInt8:
      RequantizeTyped(acc, ld_acc, rows, cols, params, static_cast<int8_t*>(out), ld_out);
      return;
    default:
      Fail("RequantizeS32: output type ", DTypeName(params.output_type), " is not uint8 or int8");
  }
}

}  // namespace octet
