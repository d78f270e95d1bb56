#include "kernels/int8/requantize.h"

#include <limits>

#include "core/error.h"

// No fused multiply-add anywhere in the epilogues: ONNX Runtime rounds the
// product and the bias addition separately.
#pragma GCC optimize("fp-contract=off")

namespace octet {

namespace requant {

namespace {

template <typename T>
void RequantizeRowTyped(const int32_t* acc, int64_t c0, int64_t c1, const RequantizeParams& p,
                        T* out) {
  const float lo = static_cast<float>(std::numeric_limits<T>::min() - p.zero_point);
  const float hi = static_cast<float>(std::numeric_limits<T>::max() - p.zero_point);
  for (int64_t c = c0; c < c1; ++c) {
    uint32_t sum = static_cast<uint32_t>(acc[c]);
    if (p.bias) sum += static_cast<uint32_t>(p.bias[p.bias_per_column ? c : 0]);
    const float m = p.multiplier[p.multiplier_per_column ? c : 0];
    out[c] = static_cast<T>(RequantizeValue(static_cast<int32_t>(sum), m, lo, hi, p.zero_point));
  }
}

}  // namespace

void RequantizeRowScalar(const int32_t* acc, int64_t c0, int64_t c1, const RequantizeParams& p,
                         void* out) {
  if (p.output_type == DType::kInt8) {
    RequantizeRowTyped(acc, c0, c1, p, static_cast<int8_t*>(out));
  } else {
    RequantizeRowTyped(acc, c0, c1, p, static_cast<uint8_t*>(out));
  }
}

void FloatRowScalar(const int32_t* acc, int64_t c0, int64_t c1, const FloatOutputParams& p,
                    float* out) {
  for (int64_t c = c0; c < c1; ++c) {
    uint32_t sum = static_cast<uint32_t>(acc[c]);
    if (p.acc_bias) sum += static_cast<uint32_t>(p.acc_bias[p.acc_bias_per_column ? c : 0]);
    float v = static_cast<float>(static_cast<int32_t>(sum)) * p.scale[p.scale_per_column ? c : 0];
    if (p.bias) v = v + p.bias[p.bias_per_column ? c : 0];
    out[c] = v;
  }
}

}  // namespace requant

namespace {

// The implementation for `isa`: AVX-512 with AVX-512 VNNI (which implies
// avx512f/bw/dq/vl), AVX2 with AVX2 or AVX-VNNI, else scalar.
template <typename Fn>
Fn PickRowFn(Isa isa, Fn scalar, [[maybe_unused]] Fn avx2, [[maybe_unused]] Fn avx512) {
  OCTET_CHECK(IsaSupported(isa), "int8 epilogue: instruction set ", IsaName(isa),
              " cannot run here: ", IsaUnsupportedReason(isa));
#if defined(__x86_64__) || defined(_M_X64)
  if (isa == Isa::kAvx512Vnni) return avx512;
  if (isa == Isa::kAvx2 || isa == Isa::kAvxVnni) return avx2;
#endif
  return scalar;
}

}  // namespace

void RequantizeS32(const int32_t* acc, int64_t ld_acc, int64_t rows, int64_t cols,
                   const RequantizeParams& params, void* out, int64_t ld_out, Isa isa) {
  OCTET_CHECK(params.output_type == DType::kUInt8 || params.output_type == DType::kInt8,
              "RequantizeS32: output type ", DTypeName(params.output_type),
              " is not uint8 or int8");
  if (rows <= 0 || cols <= 0) return;
  const requant::RequantizeRowFn row_fn =
      PickRowFn<requant::RequantizeRowFn>(isa, requant::RequantizeRowScalar,
#if defined(__x86_64__) || defined(_M_X64)
                                          requant::RequantizeRowAvx2, requant::RequantizeRowAvx512
#else
                                          nullptr, nullptr
#endif
      );
  auto* bytes = static_cast<uint8_t*>(out);
  for (int64_t r = 0; r < rows; ++r) row_fn(acc + r * ld_acc, 0, cols, params, bytes + r * ld_out);
}

void ScaleS32ToFloat(const int32_t* acc, int64_t ld_acc, int64_t rows, int64_t cols,
                     const FloatOutputParams& params, float* out, int64_t ld_out, Isa isa) {
  if (rows <= 0 || cols <= 0) return;
  const requant::FloatRowFn row_fn =
      PickRowFn<requant::FloatRowFn>(isa, requant::FloatRowScalar,
#if defined(__x86_64__) || defined(_M_X64)
                                     requant::FloatRowAvx2, requant::FloatRowAvx512
#else
                                     nullptr, nullptr
#endif
      );
  for (int64_t r = 0; r < rows; ++r) row_fn(acc + r * ld_acc, 0, cols, params, out + r * ld_out);
}

}  // namespace octet
