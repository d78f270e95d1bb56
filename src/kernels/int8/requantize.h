// The epilogues of every int8 product (QLinearMatMul, QLinearConv, fused QDQ
// groups, MatMulIntegerToFloat / DynamicQuantizeMatMul): int32 accumulators ->
// uint8/int8, or -> float32, in ONNX Runtime 1.31.1's exact float order
// (docs/int8.md, "Integer matmul and convolution"; tools/probe_ort_requant.py
// shows each step of the requantization):
//
//   multiplier = (a_scale * b_scale) / y_scale           float32, in this order
//   v = float(acc + bias) * multiplier                   bias added in int32 first
//   v = clamp(v, qmin - y_zero, qmax - y_zero)           in float; NaN -> qmin - y_zero
//   y = round_half_even(v) + y_zero
//
// Float output (com.microsoft MatMulIntegerToFloat, DynamicQuantizeMatMul):
//
//   y = float(acc) * (a_scale * b_scale[n]) + bias[n]    float32 multiply, then float32 add
//
// Each has a scalar, an AVX2 and an AVX-512 implementation chosen by the same
// dispatch as the GEMM (kernels/isa.h); they give the same bits (cvtps2dq
// rounds half to even under the default MXCSR, max/min keep the clamp bound
// for NaN as the scalar code does, and no multiply-add is fused).
#pragma once

#include <cmath>
#include <cstdint>
#include <utility>

#include "core/dtype.h"
#include "kernels/isa.h"

namespace octet {

// The one float32 multiplier, formed in ONNX Runtime's order.
inline float RequantizeMultiplier(float a_scale, float b_scale, float y_scale) {
  return (a_scale * b_scale) / y_scale;
}

// One output value; lo/hi are float(qmin - zero_point) and float(qmax - zero_point).
inline int32_t RequantizeValue(int32_t acc, float multiplier, float lo, float hi,
                               int32_t zero_point) {
  float v = static_cast<float>(acc) * multiplier;
  v = v > lo ? v : lo;  // written so that NaN becomes lo, as maxps does
  v = v < hi ? v : hi;
  return static_cast<int32_t>(std::nearbyint(v)) + zero_point;
}

struct RequantizeParams {
  const float* multiplier = nullptr;  // cols entries when multiplier_per_column, else one
  bool multiplier_per_column = false;
  const int32_t* bias = nullptr;  // optional; cols entries when bias_per_column, else one
  bool bias_per_column = false;
  int32_t zero_point = 0;             // within the output type's range
  DType output_type = DType::kUInt8;  // kUInt8 or kInt8
  // Integer clamp of the outputs (an absorbed Relu / Clip), applied with the
  // type's: y = clamp(y, y_min, y_max). It is folded into the float clamp
  // (bounds max(qmin, y_min) - zero_point, min(qmax, y_max) - zero_point),
  // which gives the same value because rounding is monotone and keeps
  // integers. The defaults leave the type's range; the range must not be empty.
  int32_t y_min = INT32_MIN;
  int32_t y_max = INT32_MAX;
};

// Fails (octet::Error naming `who`) unless params' output type is uint8 or int8
// and its clamp leaves a value of that type.
void CheckRequantizeParams(const RequantizeParams& params, const char* who);

// out[r * ld_out + c] = requantized acc[r * ld_acc + c] (+ bias) for a rows x cols block.
// The bias is added with int32 wrap-around, as ONNX Runtime's int32 addition does.
// `isa` picks the implementation (every one gives the same bytes); a path
// this CPU cannot run is an octet::Error.
void RequantizeS32(const int32_t* acc, int64_t ld_acc, int64_t rows, int64_t cols,
                   const RequantizeParams& params, void* out, int64_t ld_out,
                   Isa isa = ActiveIsa());

struct FloatOutputParams {
  const float* scale = nullptr;  // cols entries when scale_per_column, else one
  bool scale_per_column = false;
  const int32_t* acc_bias = nullptr;  // optional int32 bias, added (wrapping) before conversion
  bool acc_bias_per_column = false;
  const float* bias = nullptr;  // optional float bias, added after the multiply
  bool bias_per_column = false;
};

// out[r * ld_out + c] = float(acc[r * ld_acc + c] (+ acc_bias)) * scale (+ bias).
void ScaleS32ToFloat(const int32_t* acc, int64_t ld_acc, int64_t rows, int64_t cols,
                     const FloatOutputParams& params, float* out, int64_t ld_out,
                     Isa isa = ActiveIsa());

// The parameters of the columns from col0 on: per-column arrays advanced by
// col0 (for an epilogue that gets its product in column blocks).
RequantizeParams ColumnsFrom(const RequantizeParams& params, int64_t col0);
FloatOutputParams ColumnsFrom(const FloatOutputParams& params, int64_t col0);

// The output bounds of `params`: [max(qmin, y_min), min(qmax, y_max)] of its
// output type (may be empty: first > second).
std::pair<int32_t, int32_t> RequantizeOutputRange(const RequantizeParams& params);

// RequantizeValue's float clamp for `params`: float(lo - zero_point) and
// float(hi - zero_point) of RequantizeOutputRange.
std::pair<float, float> RequantizeFloatClamp(const RequantizeParams& params);

// Internal: one row, columns [c0, c1), of each implementation
// (requantize.cc, requantize_avx2.cc, requantize_avx512.cc). The ISA files
// call only the scalar row functions, never an inline helper of this header
// (an inline function compiled with AVX flags could be the copy the linker keeps).
namespace requant {
using RequantizeRowFn = void (*)(const int32_t* acc, int64_t c0, int64_t c1,
                                 const RequantizeParams& p, void* out);
using FloatRowFn = void (*)(const int32_t* acc, int64_t c0, int64_t c1, const FloatOutputParams& p,
                            float* out);
void RequantizeRowScalar(const int32_t* acc, int64_t c0, int64_t c1, const RequantizeParams& p,
                         void* out);
void FloatRowScalar(const int32_t* acc, int64_t c0, int64_t c1, const FloatOutputParams& p,
                    float* out);
void RequantizeRowAvx2(const int32_t* acc, int64_t c0, int64_t c1, const RequantizeParams& p,
                       void* out);
void FloatRowAvx2(const int32_t* acc, int64_t c0, int64_t c1, const FloatOutputParams& p,
                  float* out);
void RequantizeRowAvx512(const int32_t* acc, int64_t c0, int64_t c1, const RequantizeParams& p,
                         void* out);
void FloatRowAvx512(const int32_t* acc, int64_t c0, int64_t c1, const FloatOutputParams& p,
                    float* out);
// The row function RequantizeS32 uses for `isa` (for callers that requantize
// many single rows with changing parameters, e.g. the convolution's output
// channels); throws octet::Error when `isa` cannot run here. The params'
// output type and clamp are the caller's to check (RequantizeS32 checks them).
RequantizeRowFn RequantizeRowFnFor(Isa isa);

}  // namespace requant

}  // namespace octet
