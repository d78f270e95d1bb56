// The epilogue of every int8 product (QLinearMatMul, QLinearConv, the fused QDQ
// groups, MatMulInteger, MatMulIntegerToFloat, DynamicQuantizeMatMul, QGemm,
// the quantized pools): what happens to each exact int32 sum S[r][c], its zero
// points already corrected. One value, in ONNX Runtime 1.31.1's float order
// (docs/epilogue.md; tools/probe_ort_requant.py shows each step):
//
//   s = S + bias[r, c]                               int32, wrapping
//   int32 output:  y = s
//   float output:  y = float(s) * multiplier[r, c] + float_bias[r, c]
//                                                    float32 multiply, then add (never fused)
//   8-bit output:  v = float(s) * multiplier[r, c]   multiplier = (a_scale * b_scale) / y_scale
//                  v = clamp(v, lo, hi)              in float; NaN -> lo
//                  y = round_half_even(v) + zero_point
//
// with lo = max(qmin, y_min) - zero_point and hi = min(qmax, y_max) - zero_point
// (an absorbed Relu / Clip is the integer clamp [y_min, y_max]; folding it into
// the float clamp gives the same value, because rounding is monotone and keeps
// integers). ApplyEpilogue below is the scalar statement of this; every vector
// form (epilogue_impl.h, the micro-tiles that finish in registers) is tested
// against it bit for bit.
#pragma once

#include <cstdint>
#include <utility>

#include "core/dtype.h"
#include "kernels/isa.h"

namespace octet {

enum class EpilogueOutput : uint8_t { kInt32, kFloat, kUInt8, kInt8 };

// One operand of the epilogue: absent (data null), one value, or one per row
// and/or per column of the product. Row r's values start at
// data + row_stride * (row_index ? row_index[r] : r) when per_row, else at data;
// within them column c is at + c when per_column.
template <typename T>
struct EpilogueOperand {
  const T* data = nullptr;
  bool per_row = false;
  bool per_column = false;
  int64_t row_stride = 1;
  const int32_t* row_index = nullptr;  // per_row only: the data row each product row reads

  bool present() const { return data != nullptr; }
  // The values of product row `row`, at column 0.
  const T* Row(int64_t row) const {
    return per_row ? data + row_stride * (row_index ? row_index[row] : row) : data;
  }
  T At(int64_t row, int64_t col) const { return Row(row)[per_column ? col : 0]; }
};

struct Epilogue {
  EpilogueOutput output = EpilogueOutput::kInt32;
  EpilogueOperand<int32_t> bias;
  EpilogueOperand<float> multiplier;  // float and 8-bit outputs
  EpilogueOperand<float> float_bias;  // float output only
  int32_t zero_point = 0;             // 8-bit outputs, within the type's range
  int32_t y_min = INT32_MIN, y_max = INT32_MAX;

  bool is_8bit() const {
    return output == EpilogueOutput::kUInt8 || output == EpilogueOutput::kInt8;
  }
  // Bytes per output element.
  int64_t element_size() const { return is_8bit() ? 1 : 4; }
};

// The one float32 multiplier, formed in ONNX Runtime's order.
inline float RequantizeMultiplier(float a_scale, float b_scale, float y_scale) {
  return (a_scale * b_scale) / y_scale;
}

// The 8-bit output type of an 8-bit epilogue.
inline DType EpilogueOutputType(const Epilogue& e) {
  return e.output == EpilogueOutput::kInt8 ? DType::kInt8 : DType::kUInt8;
}
// The 8-bit epilogue for a uint8 / int8 output type.
EpilogueOutput EightBitOutput(DType type);

// An 8-bit epilogue's output bounds, [max(qmin, y_min), min(qmax, y_max)]
// (empty when first > second), and its float clamp: those minus the zero point.
// Inline, for the micro-tiles' finish; internal linkage, because files compiled
// for different instruction sets include this header and the linker must never
// pick one file's copy for another.
namespace {
inline std::pair<int32_t, int32_t> EpilogueOutputRange(const Epilogue& e) {
  const int32_t type_min = e.output == EpilogueOutput::kInt8 ? -128 : 0;
  return {e.y_min > type_min ? e.y_min : type_min,
          e.y_max < type_min + 255 ? e.y_max : type_min + 255};
}
inline std::pair<float, float> EpilogueFloatClamp(const Epilogue& e) {
  const auto [lo, hi] = EpilogueOutputRange(e);
  return {static_cast<float>(lo - e.zero_point), static_cast<float>(hi - e.zero_point)};
}
}  // namespace

// The epilogue of a product's rows from row0 on, as a product of its own: the
// per-row operands advanced by row0.
Epilogue EpilogueFromRow(const Epilogue& e, int64_t row0);

// Fails (octet::Error naming `who`) unless the epilogue is complete: a
// multiplier for float and 8-bit outputs, a non-empty clamp for 8-bit ones.
void CheckEpilogue(const Epilogue& e, const char* who);

// The reference: the epilogue of one sum at (row, col), stored to `out` as
// the output type (int32, float, uint8 or int8).
void ApplyEpilogue(const Epilogue& e, int32_t sum, int64_t row, int64_t col, void* out);

// out[r * ld_out + c] = the epilogue of acc[r * ld_acc + c] for a rows x cols
// block whose element (0, 0) is the product's (row0, col0), on `isa`'s vector
// path (every one gives ApplyEpilogue's bytes). `out` is the block's first
// element; ld_out counts output elements.
void ApplyEpilogueBlock(const Epilogue& e, const int32_t* acc, int64_t ld_acc, int64_t row0,
                        int64_t rows, int64_t col0, int64_t cols, void* out, int64_t ld_out,
                        Isa isa);

// Internal: one row of ApplyEpilogueBlock per vector width (epilogue.cc,
// epilogue_avx2.cc, epilogue_avx512.cc, all from epilogue_impl.h).
namespace epilogue {
using RowFn = void (*)(const Epilogue& e, const int32_t* acc, int64_t row, int64_t col0,
                       int64_t cols, void* out);
void RowScalar(const Epilogue& e, const int32_t* acc, int64_t row, int64_t col0, int64_t cols,
               void* out);
void RowAvx2(const Epilogue& e, const int32_t* acc, int64_t row, int64_t col0, int64_t cols,
             void* out);
void RowAvx512(const Epilogue& e, const int32_t* acc, int64_t row, int64_t col0, int64_t cols,
               void* out);
RowFn RowFnFor(Isa isa);
}  // namespace epilogue

}  // namespace octet
