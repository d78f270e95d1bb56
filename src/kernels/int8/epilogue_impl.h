// epilogue.h's steps on one vector of int32 sums, written once over a vector type
// V (kernels/simd_scalar.h, simd_avx2.h, simd_avx512.h): the block epilogue's
// rows (epilogue.cc, epilogue_avx2.cc, epilogue_avx512.cc) and the micro-tiles
// that finish in registers (gemm_finish_impl.h, the convolution tiles) use these
// and nothing else, so the formula exists once. Same bits on every V:
// cvtdq2ps / cvtps2dq round half to even (the default MXCSR), max / min return
// their second operand for NaN (Max(v, lo) is lo for NaN v), and no
// multiply-add is fused (the kernels layer compiles with -ffp-contract=off).
// Templates over V: instantiate them in a file that includes V's header (and
// is compiled for its instruction set); internal linkage.
#pragma once

#include <cstdint>
#include <utility>

#include "kernels/int8/epilogue.h"

namespace octet::epilogue {
namespace {

// An 8-bit epilogue's clamp and zero point, broadcast.
template <typename V>
struct Requant {
  typename V::F lo, hi;
  typename V::I zero_point;

  Requant(float l, float h, int32_t zp) : lo(V::Set(l)), hi(V::Set(h)), zero_point(V::SetI(zp)) {}
  explicit Requant(const Epilogue& e) : Requant(EpilogueFloatClamp(e), e.zero_point) {}

 private:
  Requant(std::pair<float, float> clamp, int32_t zp) : Requant(clamp.first, clamp.second, zp) {}
};

// float(sum) * multiplier, clamped to [lo, hi] (NaN -> lo), rounded half to
// even, + zero point: an int32 within the output type's range.
template <typename V>
[[gnu::always_inline]] inline typename V::I Requantize(typename V::I sum, typename V::F multiplier,
                                                       const Requant<V>& r) {
  typename V::F f = V::Mul(V::ToFloat(sum), multiplier);
  f = V::Min(V::Max(f, r.lo), r.hi);
  return V::AddI(V::RoundToInt(f), r.zero_point);
}

// float(sum) * scale, then + bias when there is one.
template <typename V>
[[gnu::always_inline]] inline typename V::F Scale(typename V::I sum, typename V::F scale,
                                                  const typename V::F* bias) {
  const typename V::F f = V::Mul(V::ToFloat(sum), scale);
  return bias ? V::Add(f, *bias) : f;
}

// `count` lanes of an operand row starting at column `col` (one value broadcast
// when it is not per column).
template <typename V>
[[gnu::always_inline]] inline typename V::I LoadOperand(const int32_t* row, bool per_column,
                                                        int64_t col, int count) {
  if (!per_column) return V::SetI(row[0]);
  return count >= V::kWidth ? V::LoadI(row + col) : V::LoadIPartial(row + col, count);
}
template <typename V>
[[gnu::always_inline]] inline typename V::F LoadOperand(const float* row, bool per_column,
                                                        int64_t col, int count) {
  if (!per_column) return V::Set(row[0]);
  return count >= V::kWidth ? V::Load(row + col) : V::LoadPartial(row + col, count, 0.f);
}

// Stores `count` finished lanes: int32 values (int32 and 8-bit outputs) or float ones.
template <typename V>
[[gnu::always_inline]] inline void StoreInt(EpilogueOutput output, void* out, typename V::I q,
                                            int count) {
  const bool full = count >= V::kWidth;
  switch (output) {
    case EpilogueOutput::kUInt8:
      return full ? V::template StoreLow<uint8_t>(static_cast<uint8_t*>(out), q)
                  : V::template StoreLowPartial<uint8_t>(static_cast<uint8_t*>(out), q, count);
    case EpilogueOutput::kInt8:
      return full ? V::template StoreLow<int8_t>(static_cast<int8_t*>(out), q)
                  : V::template StoreLowPartial<int8_t>(static_cast<int8_t*>(out), q, count);
    default:
      return full ? V::StoreI(static_cast<int32_t*>(out), q)
                  : V::StoreIPartial(static_cast<int32_t*>(out), q, count);
  }
}
template <typename V>
[[gnu::always_inline]] inline void StoreFloat(float* out, typename V::F f, int count) {
  return count >= V::kWidth ? V::Store(out, f) : V::StorePartial(out, f, count);
}

// Columns [col0, col0 + cols) of product row `row`: acc[c] -> out (element c).
template <typename V>
void Row(const Epilogue& e, const int32_t* acc, int64_t row, int64_t col0, int64_t cols,
         void* out) {
  const int32_t* bias = e.bias.present() ? e.bias.Row(row) : nullptr;
  const float* multiplier = e.multiplier.present() ? e.multiplier.Row(row) : nullptr;
  const float* float_bias = e.float_bias.present() ? e.float_bias.Row(row) : nullptr;
  const int64_t size = e.element_size();
  auto* bytes = static_cast<uint8_t*>(out);
  if (e.output == EpilogueOutput::kFloat) {
    for (int64_t c = 0; c < cols; c += V::kWidth) {
      const int count = static_cast<int>(cols - c < V::kWidth ? cols - c : V::kWidth);
      typename V::I s = count >= V::kWidth ? V::LoadI(acc + c) : V::LoadIPartial(acc + c, count);
      if (bias) s = V::AddI(s, LoadOperand<V>(bias, e.bias.per_column, col0 + c, count));
      typename V::F fb{};
      if (float_bias) fb = LoadOperand<V>(float_bias, e.float_bias.per_column, col0 + c, count);
      const typename V::F y =
          Scale<V>(s, LoadOperand<V>(multiplier, e.multiplier.per_column, col0 + c, count),
                   float_bias ? &fb : nullptr);
      StoreFloat<V>(reinterpret_cast<float*>(bytes + c * size), y, count);
    }
    return;
  }
  const Requant<V> rq(e);
  for (int64_t c = 0; c < cols; c += V::kWidth) {
    const int count = static_cast<int>(cols - c < V::kWidth ? cols - c : V::kWidth);
    typename V::I s = count >= V::kWidth ? V::LoadI(acc + c) : V::LoadIPartial(acc + c, count);
    if (bias) s = V::AddI(s, LoadOperand<V>(bias, e.bias.per_column, col0 + c, count));
    if (e.is_8bit())
      s = Requantize<V>(s, LoadOperand<V>(multiplier, e.multiplier.per_column, col0 + c, count),
                        rq);
    StoreInt<V>(e.output, bytes + c * size, s, count);
  }
}

}  // namespace
}  // namespace octet::epilogue
