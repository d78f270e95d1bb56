#include "kernels/int8/epilogue.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "kernels/int8/epilogue_impl.h"
#include "kernels/simd_scalar.h"

namespace octet {

EpilogueOutput EightBitOutput(DType type) {
  OCTET_CHECK(type == DType::kUInt8 || type == DType::kInt8, "int8 epilogue: output type ",
              DTypeName(type), " is not uint8 or int8");
  return type == DType::kInt8 ? EpilogueOutput::kInt8 : EpilogueOutput::kUInt8;
}

namespace {
template <typename T>
EpilogueOperand<T> OperandFromRow(EpilogueOperand<T> o, int64_t row0) {
  if (!o.per_row) return o;
  if (o.row_index != nullptr) {
    o.row_index += row0;
  } else {
    o.data += o.row_stride * row0;
  }
  return o;
}
}  // namespace

Epilogue EpilogueFromRow(const Epilogue& e, int64_t row0) {
  Epilogue r = e;
  r.bias = OperandFromRow(e.bias, row0);
  r.multiplier = OperandFromRow(e.multiplier, row0);
  r.float_bias = OperandFromRow(e.float_bias, row0);
  return r;
}

void CheckEpilogue(const Epilogue& e, const char* who) {
  OCTET_CHECK(e.output == EpilogueOutput::kInt32 || e.multiplier.present(), who,
              ": the epilogue has no multiplier");
  if (!e.is_8bit()) return;
  const auto [lo, hi] = EpilogueOutputRange(e);
  OCTET_CHECK(lo <= hi, who, ": output clamp [", e.y_min, ", ", e.y_max, "] is empty in ",
              DTypeName(EpilogueOutputType(e)));
  OCTET_CHECK(e.zero_point >= (e.output == EpilogueOutput::kInt8 ? -128 : 0) &&
                  e.zero_point <= (e.output == EpilogueOutput::kInt8 ? 127 : 255),
              who, ": zero point ", e.zero_point, " is outside ", DTypeName(EpilogueOutputType(e)));
}

void ApplyEpilogue(const Epilogue& e, int32_t sum, int64_t row, int64_t col, void* out) {
  uint32_t s = static_cast<uint32_t>(sum);
  if (e.bias.present()) s += static_cast<uint32_t>(e.bias.At(row, col));
  const int32_t biased = static_cast<int32_t>(s);
  if (e.output == EpilogueOutput::kInt32) {
    std::memcpy(out, &biased, sizeof(biased));
    return;
  }
  const float product = static_cast<float>(biased) * e.multiplier.At(row, col);
  if (e.output == EpilogueOutput::kFloat) {
    const float y = e.float_bias.present() ? product + e.float_bias.At(row, col) : product;
    std::memcpy(out, &y, sizeof(y));
    return;
  }
  const auto [lo, hi] = EpilogueFloatClamp(e);
  float v = product > lo ? product : lo;  // NaN becomes lo, as maxps does
  v = v < hi ? v : hi;
  const int32_t q = static_cast<int32_t>(std::nearbyint(v)) + e.zero_point;
  if (e.output == EpilogueOutput::kInt8) {
    *static_cast<int8_t*>(out) = static_cast<int8_t>(q);
  } else {
    *static_cast<uint8_t*>(out) = static_cast<uint8_t>(q);
  }
}

namespace epilogue {

void RowScalar(const Epilogue& e, const int32_t* acc, int64_t row, int64_t col0, int64_t cols,
               void* out) {
  Row<simd::Scalar>(e, acc, row, col0, cols, out);
}

RowFn RowFnFor(Isa isa) {
  return PickKernel<RowFn>(isa, "int8 epilogue", RowScalar,
#if defined(__x86_64__) || defined(_M_X64)
                           RowAvx2, RowAvx512
#else
                           RowScalar, RowScalar
#endif
  );
}

}  // namespace epilogue

void ApplyEpilogueBlock(const Epilogue& e, const int32_t* acc, int64_t ld_acc, int64_t row0,
                        int64_t rows, int64_t col0, int64_t cols, void* out, int64_t ld_out,
                        Isa isa) {
  CheckEpilogue(e, "int8 epilogue");
  if (rows <= 0 || cols <= 0) return;
  const epilogue::RowFn row_fn = epilogue::RowFnFor(isa);
  auto* bytes = static_cast<uint8_t*>(out);
  const int64_t size = e.element_size();
  for (int64_t r = 0; r < rows; ++r)
    row_fn(e, acc + r * ld_acc, row0 + r, col0, cols, bytes + r * ld_out * size);
}

}  // namespace octet
