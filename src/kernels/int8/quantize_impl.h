// The quantize kernels of kernels/int8/quantize.h written once over a vector
// type V (kernels/simd_avx2.h, kernels/simd_avx512.h) and instantiated by
// quantize_avx2.cc and quantize_avx512.cc: whole vectors, then one partial
// vector, so nothing past the span is read or written. Same bits as the
// scalar code (quantize.cc): Div is the scalar division, Max/Min return the
// bound for NaN (and the scalar code keeps the value only when it compares >=
// the bound), RoundToInt rounds half to even, and a product is never fused
// with anything (the including file switches contraction off).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/int8/quantize.h"

namespace octet::quant {
// Internal linkage: each including file compiles these for its own instruction set.
namespace {

template <class V>
struct QuantizeKernels {
  using F = typename V::F;
  using I = typename V::I;
  static constexpr int W = V::kWidth;

  template <typename T, bool kPerElement>
  static void QuantizeTyped(const float* x, int64_t n, const QuantizeSpanParams& p, T* y) {
    const I qmin = V::SetI(std::numeric_limits<T>::min());
    const I qmax = V::SetI(std::numeric_limits<T>::max());
    const F tensor_scale = V::Set(p.scale[0]);
    const I tensor_zero = V::SetI(p.zero_point[0]);
    const F tensor_lo = V::ToFloat(V::SubI(qmin, tensor_zero));
    const F tensor_hi = V::ToFloat(V::SubI(qmax, tensor_zero));
    const auto step = [&](int64_t i, int count) {
      const bool whole = count == W;
      F scale = tensor_scale, lo = tensor_lo, hi = tensor_hi;
      I zero = tensor_zero;
      if constexpr (kPerElement) {
        scale = whole ? V::Load(p.scale + i) : V::LoadPartial(p.scale + i, count, 1.f);
        zero = whole ? V::LoadI(p.zero_point + i) : V::LoadIPartial(p.zero_point + i, count);
        lo = V::ToFloat(V::SubI(qmin, zero));
        hi = V::ToFloat(V::SubI(qmax, zero));
      }
      F v = V::Div(whole ? V::Load(x + i) : V::LoadPartial(x + i, count, 0.f), scale);
      v = V::Max(v, lo);  // NaN -> lo
      v = V::Min(v, hi);
      const I q = V::AddI(V::RoundToInt(v), zero);  // in T's range: storing the low bytes is exact
      if (whole)
        V::StoreLow(y + i, q);
      else
        V::StoreLowPartial(y + i, q, count);
    };
    ForEachVector(n, step);
  }

  template <typename T, bool kPerElement>
  static void DequantizeTyped(const T* x, int64_t n, const QuantizeSpanParams& p, float* y) {
    const F tensor_scale = V::Set(p.scale[0]);
    const I tensor_zero = V::SetI(p.zero_point[0]);
    const auto step = [&](int64_t i, int count) {
      const bool whole = count == W;
      F scale = tensor_scale;
      I zero = tensor_zero;
      if constexpr (kPerElement) {
        scale = whole ? V::Load(p.scale + i) : V::LoadPartial(p.scale + i, count, 1.f);
        zero = whole ? V::LoadI(p.zero_point + i) : V::LoadIPartial(p.zero_point + i, count);
      }
      const I q = whole ? V::LoadWiden(x + i) : V::LoadWidenPartial(x + i, count);
      const F v = V::Mul(V::ToFloat(V::SubI(q, zero)), scale);
      if (whole)
        V::Store(y + i, v);
      else
        V::StorePartial(y + i, v, count);
    };
    ForEachVector(n, step);
  }

  template <typename T>
  static void Quantize(const float* x, int64_t n, const QuantizeSpanParams& p, void* y) {
    if (p.per_element)
      QuantizeTyped<T, true>(x, n, p, static_cast<T*>(y));
    else
      QuantizeTyped<T, false>(x, n, p, static_cast<T*>(y));
  }

  template <typename T>
  static void Dequantize(const void* x, int64_t n, const QuantizeSpanParams& p, float* y) {
    if (p.per_element)
      DequantizeTyped<T, true>(static_cast<const T*>(x), n, p, y);
    else
      DequantizeTyped<T, false>(static_cast<const T*>(x), n, p, y);
  }

  static void QuantizeSpan(const float* x, int64_t n, const QuantizeSpanParams& p, void* y) {
    switch (p.type) {
      case DType::kUInt8:
        return Quantize<uint8_t>(x, n, p, y);
      case DType::kInt8:
        return Quantize<int8_t>(x, n, p, y);
      case DType::kUInt16:
        return Quantize<uint16_t>(x, n, p, y);
      default:
        return Quantize<int16_t>(x, n, p, y);
    }
  }

  static void DequantizeSpan(const void* x, int64_t n, const QuantizeSpanParams& p, float* y) {
    switch (p.type) {
      case DType::kUInt8:
        return Dequantize<uint8_t>(x, n, p, y);
      case DType::kInt8:
        return Dequantize<int8_t>(x, n, p, y);
      case DType::kUInt16:
        return Dequantize<uint16_t>(x, n, p, y);
      default:
        return Dequantize<int16_t>(x, n, p, y);
    }
  }

  static FloatRange Range(const float* x, int64_t n) {
    // Min(v, low) is `v < low ? v : low`, std::min(low, v) exactly: a NaN v
    // keeps low, and -0 never replaces +0. The lanes past a partial vector
    // read 0, which the fold from 0 already holds.
    F low = V::Set(0.f), high = V::Set(0.f);
    typename V::M nan = V::Unordered(low);
    ForEachVector(n, [&](int64_t i, int count) {
      const F v = count == W ? V::Load(x + i) : V::LoadPartial(x + i, count, 0.f);
      low = V::Min(v, low);
      high = V::Max(v, high);
      nan = V::OrMask(nan, V::Unordered(v));
    });
    // The lanes hold no NaN and no -0, so the order of the fold cannot matter.
    float lows[W], highs[W];
    V::Store(lows, low);
    V::Store(highs, high);
    FloatRange r;
    for (int lane = 0; lane < W; ++lane) {
      r.low = lows[lane] < r.low ? lows[lane] : r.low;
      r.high = highs[lane] > r.high ? highs[lane] : r.high;
    }
    r.has_nan = V::AnyLane(nan);
    return r;
  }

 private:
  // step(i, W) for every whole vector, then step(i, rest) for the partial one.
  template <class Step>
  static void ForEachVector(int64_t n, Step&& step) {
    int64_t i = 0;
    for (; i + W <= n; i += W) step(i, W);
    if (i < n) step(i, static_cast<int>(n - i));
  }
};

}  // namespace
}  // namespace octet::quant
