#include "kernels/int8/requantize.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

// No fused multiply-add anywhere in the epilogues: ONNX Runtime rounds the
// product and the bias addition separately.
#pragma GCC optimize("fp-contract=off")

namespace octet {

std::pair<int32_t, int32_t> RequantizeOutputRange(const RequantizeParams& params) {
  const int32_t type_min = params.output_type == DType::kInt8 ? -128 : 0;
  return {std::max(params.y_min, type_min), std::min(params.y_max, type_min + 255)};
}

std::pair<float, float> RequantizeFloatClamp(const RequantizeParams& params) {
  const auto [y_lo, y_hi] = RequantizeOutputRange(params);
  return {static_cast<float>(y_lo - params.zero_point),
          static_cast<float>(y_hi - params.zero_point)};
}

RequantizeParams ColumnsFrom(const RequantizeParams& params, int64_t col0) {
  RequantizeParams p = params;
  if (p.multiplier_per_column) p.multiplier += col0;
  if (p.bias && p.bias_per_column) p.bias += col0;
  return p;
}

FloatOutputParams ColumnsFrom(const FloatOutputParams& params, int64_t col0) {
  FloatOutputParams p = params;
  if (p.scale_per_column) p.scale += col0;
  if (p.acc_bias && p.acc_bias_per_column) p.acc_bias += col0;
  if (p.bias && p.bias_per_column) p.bias += col0;
  return p;
}

namespace requant {

namespace {

template <typename T>
void RequantizeRowTyped(const int32_t* acc, int64_t c0, int64_t c1, const RequantizeParams& p,
                        T* out) {
  const auto [lo, hi] = RequantizeFloatClamp(p);
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

requant::RequantizeRowFn requant::RequantizeRowFnFor(Isa isa) {
  return PickKernel<RequantizeRowFn>(isa, "int8 epilogue", RequantizeRowScalar,
#if defined(__x86_64__) || defined(_M_X64)
                                     RequantizeRowAvx2, RequantizeRowAvx512
#else
                                     RequantizeRowScalar, RequantizeRowScalar
#endif
  );
}

void CheckRequantizeParams(const RequantizeParams& params, const char* who) {
  OCTET_CHECK(params.output_type == DType::kUInt8 || params.output_type == DType::kInt8, who,
              ": output type ", DTypeName(params.output_type), " is not uint8 or int8");
  const auto [lo, hi] = RequantizeOutputRange(params);
  OCTET_CHECK(lo <= hi, who, ": output clamp [", params.y_min, ", ", params.y_max, "] is empty in ",
              DTypeName(params.output_type));
}

void RequantizeS32(const int32_t* acc, int64_t ld_acc, int64_t rows, int64_t cols,
                   const RequantizeParams& params, void* out, int64_t ld_out, Isa isa) {
  CheckRequantizeParams(params, "RequantizeS32");
  if (rows <= 0 || cols <= 0) return;
  const requant::RequantizeRowFn row_fn = requant::RequantizeRowFnFor(isa);
  auto* bytes = static_cast<uint8_t*>(out);
  for (int64_t r = 0; r < rows; ++r) row_fn(acc + r * ld_acc, 0, cols, params, bytes + r * ld_out);
}

void ScaleS32ToFloat(const int32_t* acc, int64_t ld_acc, int64_t rows, int64_t cols,
                     const FloatOutputParams& params, float* out, int64_t ld_out, Isa isa) {
  if (rows <= 0 || cols <= 0) return;
  const requant::FloatRowFn row_fn =
      PickKernel<requant::FloatRowFn>(isa, "int8 epilogue", requant::FloatRowScalar,
#if defined(__x86_64__) || defined(_M_X64)
                                      requant::FloatRowAvx2, requant::FloatRowAvx512
#else
                                      requant::FloatRowScalar, requant::FloatRowScalar
#endif
      );
  for (int64_t r = 0; r < rows; ++r) row_fn(acc + r * ld_acc, 0, cols, params, out + r * ld_out);
}

}  // namespace octet
