// One lane of kernels/simd_avx2.h's interface, in portable C++: kernels written
// once over a vector type V (the vector math, the integer epilogues) run with it
// on any CPU, as the reference of their vector forms: the same operations, one
// value at a time.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace octet::simd {
namespace {

struct Scalar {
  static constexpr int kWidth = 1;
  using F = float;
  using I = int32_t;
  using M = bool;

  static F Load(const float* p) { return *p; }
  static F LoadPartial(const float* p, int count, float fill) { return count > 0 ? *p : fill; }
  static void Store(float* p, F v) { *p = v; }
  static void StorePartial(float* p, F v, int count) {
    if (count > 0) *p = v;
  }
  static F Set(float v) { return v; }
  static F Add(F a, F b) { return a + b; }
  static F Sub(F a, F b) { return a - b; }
  static F Mul(F a, F b) { return a * b; }
  static F Div(F a, F b) { return a / b; }
  static F Fma(F a, F b, F c) { return std::fma(a, b, c); }
  // x86 semantics: the second operand when either is NaN.
  static F Min(F a, F b) { return a < b ? a : b; }
  static F Max(F a, F b) { return a > b ? a : b; }
  static F Abs(F a) { return FromBits(Bits(a) & 0x7fffffff); }
  static F SignBit(F a) { return FromBits(static_cast<I>(Bits(a) & 0x80000000u)); }
  static F Or(F a, F b) { return FromBits(Bits(a) | Bits(b)); }
  static M Less(F a, F b) { return a < b; }
  static bool AnyLane(M m) { return m; }
  static F Select(M m, F a, F b) { return m ? a : b; }
  static I Bits(F a) { return std::bit_cast<I>(a); }
  static F FromBits(I a) { return std::bit_cast<F>(a); }
  static F ToFloat(I a) { return static_cast<float>(a); }
  // cvtps2dq: round half to even (the default rounding mode), INT32_MIN for NaN
  // and values outside int32.
  static I RoundToInt(F a) {
    if (!(a >= -2147483648.0f && a < 2147483648.0f)) return INT32_MIN;
    return static_cast<int32_t>(std::nearbyint(a));
  }

  // int32 lanes, wrap-around arithmetic.
  static I LoadI(const int32_t* p) { return *p; }
  static I LoadIPartial(const int32_t* p, int count) { return count > 0 ? *p : 0; }
  static void StoreI(int32_t* p, I v) { *p = v; }
  static void StoreIPartial(int32_t* p, I v, int count) {
    if (count > 0) *p = v;
  }
  static I AddI(I a, I b) {
    return static_cast<I>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
  }
  static I SubI(I a, I b) {
    return static_cast<I>(static_cast<uint32_t>(a) - static_cast<uint32_t>(b));
  }
  static I MulI(I a, I b) {
    return static_cast<I>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
  }
  static I SetI(int32_t v) { return v; }
  static I ShiftRight1(I a) { return a >> 1; }
  static I ShiftLeft23(I a) { return static_cast<I>(static_cast<uint32_t>(a) << 23); }

  // int32 lanes stored as their low sizeof(T) bytes.
  template <typename T>
  static void StoreLow(T* p, I v) {
    *p = static_cast<T>(v);
  }
  // Two int32 values within 8-bit T's range, stored as 2 T: a, then b.
  template <typename T>
  static void StoreNarrowPair(T* p, I a, I b) {
    static_assert(sizeof(T) == 1);
    p[0] = static_cast<T>(a);
    p[1] = static_cast<T>(b);
  }
  template <typename T>
  static void StoreLowPartial(T* p, I v, int count) {
    if (count > 0) *p = static_cast<T>(v);
  }
};

}  // namespace
}  // namespace octet::simd
