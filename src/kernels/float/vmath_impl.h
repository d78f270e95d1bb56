// The algorithms of kernels/float/vmath.h, written once over a vector type V
// and instantiated by vmath.cc (scalar), vmath_avx2.cc and vmath_avx512.cc.
// An including file must switch floating-point contraction off before its
// first include, so that every path rounds after each Add and Mul.
//
// V provides, with F a vector of V::kWidth floats, I one of int32, M a lane mask:
//   Load(p), LoadPartial(p, count, fill) (lanes >= count hold fill), Store(p, v),
//   StorePartial(p, v, count), Set(float), Add, Sub, Mul, Div, Fma (one rounding),
//   Min/Max with the x86 semantics (a < b ? a : b, so the second operand wins
//   when either is NaN), Abs, SignBit, Or, Less (false on NaN), Select(m, a, b),
//   Bits/FromBits (reinterpret), AddI, SubI, SetI, ShiftRight1 (arithmetic),
//   ShiftLeft23.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/float/vmath_kernels.h"
#include "kernels/for_count.h"

namespace octet::vmath {
// Internal linkage: each including file compiles these for its own instruction
// set, so the linker must never pick one file's copy for another.
namespace {

// Row reductions keep 16 lanes (lane j takes the elements at j mod 16) on
// every path, then combine them as one fixed tree.
constexpr int kLanes = 16;

template <class V>
struct Math {
  using F = typename V::F;
  static F C(float v) { return V::Set(v); }

  static F Exp(F x) {
    // exp rounds to 0 below -104 and overflows above 89; NaN passes both
    // bounds as the second operand.
    x = V::Max(C(-104.f), V::Min(C(89.f), x));
    // At the lower bound the result is 0 (exp(-104) < 2^-150, and the steps
    // below round it to 0). Such lanes are evaluated at 0 and replaced, since
    // their last multiply would underflow, which costs a microcode assist per
    // instruction: a softmax row of masked attention scores took 1.5x as long.
    const auto at_floor = V::Less(x, C(-103.99999237060546875f));  // x == -104
    if (V::AnyLane(at_floor))
      return V::Select(at_floor, C(0.f), ExpAbove(V::Select(at_floor, C(0.f), x)));
    return ExpAbove(x);
  }

  // Exp for x in (-104, 89] (or NaN).
  static F ExpAbove(F x) {
    // n = round(x / ln2) by adding 1.5 * 2^23, which leaves n in t's low bits.
    const F magic = C(12582912.f);
    const F t = V::Add(V::Mul(x, C(1.44269504088896341f)), magic);
    const F n = V::Sub(t, magic);
    // r = x - n * ln2; ln2_hi has 16 significant bits, so n * ln2_hi is exact.
    F r = V::Fma(n, C(-0.693145751953125f), x);
    r = V::Fma(n, C(-1.428606765330187e-6f), r);
    // exp(r) = 1 + r + r^2 * P(r) on |r| <= ln2 / 2 (Cephes expf's minimax P).
    F p = C(1.9875691500e-4f);
    p = V::Fma(p, r, C(1.3981999507e-3f));
    p = V::Fma(p, r, C(8.3334519073e-3f));
    p = V::Fma(p, r, C(4.1665795894e-2f));
    p = V::Fma(p, r, C(1.6666665459e-1f));
    p = V::Fma(p, r, C(5.0000001201e-1f));
    p = V::Add(V::Fma(p, V::Mul(r, r), r), C(1.f));
    // 2^n as 2^(n >> 1) * 2^(n - (n >> 1)): both factors stay normal for n in
    // [-150, 129], so huge results overflow to inf and subnormal ones round once.
    const auto ni = V::SubI(V::Bits(t), V::Bits(magic));
    const auto n_half = V::ShiftRight1(ni);
    const auto bias = V::SetI(127);
    const F s1 = V::FromBits(V::ShiftLeft23(V::AddI(n_half, bias)));
    const F s2 = V::FromBits(V::ShiftLeft23(V::AddI(V::SubI(ni, n_half), bias)));
    return V::Mul(V::Mul(p, s1), s2);
  }

  static F Erf(F x) {
    const F a = V::Abs(x);
    // |x| <= 0.921875: x + x * x^2 * P(x^2).
    const F s = V::Mul(x, x);
    F small = C(-5.99104969e-4f);
    small = V::Fma(small, s, C(4.99339588e-3f));
    small = V::Fma(small, s, C(-2.67667342e-2f));
    small = V::Fma(small, s, C(1.12818025e-1f));
    small = V::Fma(small, s, C(-3.76124859e-1f));
    small = V::Fma(small, s, C(1.28379151e-1f));
    small = V::Fma(small, x, x);
    // Beyond: 1 - exp(-(t + t * Q(t))), t = min(|x|, 3.925) (erf rounds to 1 past it).
    // Both polynomials are N. Juffa's faithfully rounded erff, also used by MLAS.
    const F t = V::Min(C(3.925f), a);
    F q = C(1.72948930e-5f);
    q = V::Fma(q, t, C(-3.83208680e-4f));
    q = V::Fma(q, t, C(3.88393435e-3f));
    q = V::Fma(q, t, C(-2.42545605e-2f));
    q = V::Fma(q, t, C(1.06777847e-1f));
    q = V::Fma(q, t, C(6.34846687e-1f));
    q = V::Fma(q, t, C(1.28717512e-1f));
    q = V::Fma(q, t, t);
    // -q is in [-18, 0]: Exp's clamps and its floor never act (NaN passes them as it is).
    const F big = V::Or(V::Sub(C(1.f), ExpAbove(V::Sub(C(0.f), q))), V::SignBit(x));
    return V::Select(V::Less(C(0.921875f), a), big, small);  // NaN takes `small`: NaN
  }

  static F Logistic(F x) {
    // e = exp(-|x|) never overflows: 1 / (1 + e) for x >= 0, e / (1 + e) below.
    const F e = Exp(V::Sub(C(0.f), V::Abs(x)));
    return V::Div(V::Select(V::Less(x, C(0.f)), e, C(1.f)), V::Add(C(1.f), e));
  }

  static F Tanh(F x) {
    const F a = V::Abs(x);
    // |x| < 0.625: a + a^3 * P(a^2) (Cephes tanhf), where 1 - 2 / (e + 1)
    // would cancel; beyond, 1 - 2 / (exp(2a) + 1). The sign is x's.
    const F z = V::Mul(a, a);
    F p = C(-5.70498872745e-3f);
    p = V::Fma(p, z, C(2.06390887954e-2f));
    p = V::Fma(p, z, C(-5.37397155531e-2f));
    p = V::Fma(p, z, C(1.33314422036e-1f));
    p = V::Fma(p, z, C(-3.33332819422e-1f));
    const F small = V::Fma(V::Mul(p, z), a, a);
    const F big = V::Sub(C(1.f), V::Div(C(2.f), V::Add(Exp(V::Add(a, a)), C(1.f))));
    return V::Or(V::Select(V::Less(a, C(0.625f)), small, big), V::SignBit(x));
  }

  static F GeluErf(F x) {
    const F e = Erf(V::Mul(x, C(0.70710678118654752f)));
    return V::Mul(V::Mul(C(0.5f), x), V::Add(C(1.f), e));
  }

  static F GeluTanh(F x) {
    const F cube = V::Mul(V::Mul(V::Mul(C(0.044715f), x), x), x);
    const F th = Tanh(V::Mul(C(0.7978845608028654f), V::Add(x, cube)));
    return V::Mul(V::Mul(C(0.5f), x), V::Add(C(1.f), th));
  }
};

template <class V, typename V::F (*Fn)(typename V::F)>
void Map(const float* x, float* y, int64_t n) {
  constexpr int64_t W = V::kWidth;
  int64_t i = 0;
  for (; i + W <= n; i += W) V::Store(y + i, Fn(V::Load(x + i)));
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    V::StorePartial(y + i, Fn(V::LoadPartial(x + i, rest, 0.f)), rest);
  }
}

template <class V, BinaryOp op>
typename V::F Apply(typename V::F a, typename V::F b) {
  if constexpr (op == BinaryOp::kAdd) return V::Add(a, b);
  if constexpr (op == BinaryOp::kSub) return V::Sub(a, b);
  if constexpr (op == BinaryOp::kMul) return V::Mul(a, b);
  if constexpr (op == BinaryOp::kDiv) return V::Div(a, b);
}

template <class V, BinaryOp op, bool a_is_array, bool b_is_array>
void BinaryLoop(const float* a, const float* b, float* y, int64_t n) {
  using F = typename V::F;
  constexpr int64_t W = V::kWidth;
  const F a_value = V::Set(*a), b_value = V::Set(*b);
  int64_t i = 0;
  for (; i + W <= n; i += W)
    V::Store(y + i, Apply<V, op>(a_is_array ? V::Load(a + i) : a_value,
                                 b_is_array ? V::Load(b + i) : b_value));
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    V::StorePartial(y + i,
                    Apply<V, op>(a_is_array ? V::LoadPartial(a + i, rest, 1.f) : a_value,
                                 b_is_array ? V::LoadPartial(b + i, rest, 1.f) : b_value),
                    rest);
  }
}

template <class V, BinaryOp op>
void BinaryWithSteps(const float* a, int a_step, const float* b, int b_step, float* y, int64_t n) {
  if (a_step && b_step) return BinaryLoop<V, op, true, true>(a, b, y, n);
  if (a_step) return BinaryLoop<V, op, true, false>(a, b, y, n);
  if (b_step) return BinaryLoop<V, op, false, true>(a, b, y, n);
  BinaryLoop<V, op, false, false>(a, b, y, n);
}

template <class V>
void Binary(BinaryOp op, const float* a, int a_step, const float* b, int b_step, float* y,
            int64_t n) {
  if (n <= 0) return;
  switch (op) {
    case BinaryOp::kAdd:
      return BinaryWithSteps<V, BinaryOp::kAdd>(a, a_step, b, b_step, y, n);
    case BinaryOp::kSub:
      return BinaryWithSteps<V, BinaryOp::kSub>(a, a_step, b, b_step, y, n);
    case BinaryOp::kMul:
      return BinaryWithSteps<V, BinaryOp::kMul>(a, a_step, b, b_step, y, n);
    case BinaryOp::kDiv:
      return BinaryWithSteps<V, BinaryOp::kDiv>(a, a_step, b, b_step, y, n);
  }
}

// Calls step(r, group, v, offset, count) for the vectors of rows r < R of x
// (ld apart) in order, the rows interleaved, where group = the vector's lane
// group in the 16 reduction lanes and count its valid lanes (the rest hold
// `fill`, which each step must treat as neutral).
template <class V, int R, class Step>
void ForRowLaneGroups(const float* x, int64_t ld, int64_t n, float fill, Step step) {
  constexpr int W = V::kWidth, kGroups = kLanes / W;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int g = 0; g < kGroups; ++g)
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) step(r, g, V::Load(x + r * ld + i + g * W), i + g * W, W);
  for (int g = 0; g < kGroups && i + g * W < n; ++g) {
    const int64_t offset = i + g * W;
    const int count = static_cast<int>(std::min<int64_t>(W, n - offset));
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const float* row = x + r * ld + offset;
      step(r, g, count == W ? V::Load(row) : V::LoadPartial(row, count, fill), offset, count);
    }
  }
}

// The same for one row: step(group, v, offset, count).
template <class V, class Step>
void ForLaneGroups(const float* x, int64_t n, float fill, Step step) {
  ForRowLaneGroups<V, 1>(
      x, 0, n, fill,
      [&](int, int g, typename V::F v, int64_t offset, int count) { step(g, v, offset, count); });
}

// Combines the 16 lanes as ((l0 op l8) op (l4 op l12)) op ..., the same on every path.
template <class V, class Op>
float CombineLanes(const typename V::F (&groups)[kLanes / V::kWidth], Op op) {
  // The tree is unrolled whole: as a loop it keeps the lanes in memory, a chain of
  // stores and reloads that the row kernels wait on.
  alignas(64) float lanes[kLanes];
  for (int g = 0; g < kLanes / V::kWidth; ++g) V::Store(lanes + g * V::kWidth, groups[g]);
#pragma GCC unroll 4
  for (int width = kLanes / 2; width >= 1; width /= 2)
#pragma GCC unroll 8
    for (int j = 0; j < width; ++j) lanes[j] = op(lanes[j], lanes[j + width]);
  return lanes[0];
}

// y *= 1 / (the lanes of sums combined): softmax's last step.
template <class V>
void DivideBySum(const typename V::F (&sums)[kLanes / V::kWidth], float* y, int64_t n) {
  const float scale = 1.f / CombineLanes<V>(sums, [](float a, float b) { return a + b; });
  BinaryLoop<V, BinaryOp::kMul, true, false>(y, &scale, y, n);
}

// R rows' softmax, interleaved so that one row's reductions (max, sum, the
// reciprocal) wait while the others compute; each row takes exactly the
// operations it would take alone.
template <class V, int R>
void SoftmaxRowsOf(const float* x, float* y, int64_t n, int64_t ld) {
  using F = typename V::F;
  constexpr int kGroups = kLanes / V::kWidth;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  F maxima[R][kGroups], sums[R][kGroups], max[R];
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < kGroups; ++g) {
      maxima[r][g] = V::Set(kNegInf);
      sums[r][g] = V::Set(0.f);
    }
  ForRowLaneGroups<V, R>(x, ld, n, kNegInf, [&](int r, int g, F v, int64_t, int) {
    maxima[r][g] = V::Max(maxima[r][g], v);
  });
  for (int r = 0; r < R; ++r)
    max[r] = V::Set(CombineLanes<V>(maxima[r], [](float a, float b) { return a > b ? a : b; }));
  ForRowLaneGroups<V, R>(x, ld, n, kNegInf, [&](int r, int g, F v, int64_t offset, int count) {
    const F e = Math<V>::Exp(V::Sub(v, max[r]));
    float* out = y + r * ld + offset;
    if (count == V::kWidth) {
      V::Store(out, e);
    } else {
      V::StorePartial(out, e, count);
    }
    sums[r][g] = V::Add(sums[r][g], e);
  });
  for (int r = 0; r < R; ++r) DivideBySum<V>(sums[r], y + r * ld, n);
}

// Rows at once: enough to overlap the reductions' latency.
constexpr int kSoftmaxRowsAtOnce = 4;

template <class V>
void SoftmaxRows(const float* x, float* y, int64_t n, int64_t rows, int64_t ld) {
  if (n <= 0) return;
  for (int64_t r = 0; r < rows;) {
    const int block = static_cast<int>(std::min<int64_t>(kSoftmaxRowsAtOnce, rows - r));
    ForCount<kSoftmaxRowsAtOnce>(
        block, [&]<int R>() { SoftmaxRowsOf<V, R>(x + r * ld, y + r * ld, n, ld); });
    r += block;
  }
}

template <class V>
void NormalizeRow(float* y, int64_t n) {
  using F = typename V::F;
  constexpr int kGroups = kLanes / V::kWidth;
  if (n <= 0) return;
  F sums[kGroups];
  for (int g = 0; g < kGroups; ++g) sums[g] = V::Set(0.f);
  ForLaneGroups<V>(y, n, 0.f, [&](int g, F v, int64_t, int) { sums[g] = V::Add(sums[g], v); });
  DivideBySum<V>(sums, y, n);
}

template <class V>
void LayerNormRow(const float* x, const float* scale, const float* bias, float epsilon, float* y,
                  int64_t n, float* mean_out, float* inv_std_out) {
  using F = typename V::F;
  constexpr int kGroups = kLanes / V::kWidth;
  auto plus = [](float a, float b) { return a + b; };
  F sums[kGroups], deviations[kGroups], squares[kGroups];
  for (int g = 0; g < kGroups; ++g) sums[g] = deviations[g] = squares[g] = V::Set(0.f);
  ForLaneGroups<V>(x, n, 0.f, [&](int g, F v, int64_t, int) { sums[g] = V::Add(sums[g], v); });
  const float rough_mean = CombineLanes<V>(sums, plus) / static_cast<float>(n);
  // Deviations from the rough mean: their squares give the variance, and
  // their sum corrects the rough mean's rounding (corrected two-pass).
  const F rough = V::Set(rough_mean);
  ForLaneGroups<V>(x, n, rough_mean, [&](int g, F v, int64_t, int) {
    const F d = V::Sub(v, rough);
    deviations[g] = V::Add(deviations[g], d);
    squares[g] = V::Fma(d, d, squares[g]);
  });
  const double deviation_sum = CombineLanes<V>(deviations, plus);
  const double square_sum = CombineLanes<V>(squares, plus);
  const double count = static_cast<double>(n);
  const double variance =
      std::max(0.0, (square_sum - deviation_sum * deviation_sum / count) / count);
  const float mean = static_cast<float>(rough_mean + deviation_sum / count);
  const float inv_std = static_cast<float>(1.0 / std::sqrt(variance + epsilon));
  *mean_out = mean;
  *inv_std_out = inv_std;

  const F mean_v = V::Set(mean), inv_std_v = V::Set(inv_std);
  auto normalize = [&](F v, F s, F b) {
    const F scaled = V::Mul(V::Mul(V::Sub(v, mean_v), inv_std_v), s);
    return bias ? V::Add(scaled, b) : scaled;
  };
  constexpr int64_t W = V::kWidth;
  const F zero = V::Set(0.f);
  int64_t i = 0;
  for (; i + W <= n; i += W)
    V::Store(y + i, normalize(V::Load(x + i), V::Load(scale + i), bias ? V::Load(bias + i) : zero));
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    V::StorePartial(
        y + i,
        normalize(V::LoadPartial(x + i, rest, 0.f), V::LoadPartial(scale + i, rest, 0.f),
                  bias ? V::LoadPartial(bias + i, rest, 0.f) : zero),
        rest);
  }
}

template <class V>
constexpr Kernels MakeKernels() {
  return Kernels{
      Map<V, Math<V>::Exp>,
      Map<V, Math<V>::Erf>,
      Map<V, Math<V>::Logistic>,
      Map<V, Math<V>::Tanh>,
      Map<V, Math<V>::GeluErf>,
      Map<V, Math<V>::GeluTanh>,
      Binary<V>,
      SoftmaxRows<V>,
      NormalizeRow<V>,
      LayerNormRow<V>,
  };
}

}  // namespace
}  // namespace octet::vmath
