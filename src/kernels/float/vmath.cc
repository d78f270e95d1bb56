// Rounding after every Add and Mul on every path (see vmath_impl.h); must
// precede the includes so that inlined functions agree.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif
#include "kernels/float/vmath.h"

#include <bit>
#include <cmath>

#include "core/thread_pool.h"
#include "kernels/float/vmath_impl.h"

namespace octet::vmath {

namespace {

// One float at a time, with the same operations as the vector paths.
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
  static I AddI(I a, I b) {
    return static_cast<I>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
  }
  static I SubI(I a, I b) {
    return static_cast<I>(static_cast<uint32_t>(a) - static_cast<uint32_t>(b));
  }
  static I SetI(int32_t v) { return v; }
  static I ShiftRight1(I a) { return a >> 1; }
  static I ShiftLeft23(I a) { return static_cast<I>(static_cast<uint32_t>(a) << 23); }
};

// Below this much work (about one unit per simple float operation) the pool's
// hand-off costs more than it saves.
constexpr int64_t kParallelMinWork = int64_t{1} << 15;

const Kernels& KernelsFor(Isa isa) {
#if defined(__x86_64__) || defined(_M_X64)
  return *PickKernel(isa, "float vector math", &kScalarKernels, &kAvx2Kernels, &kAvx512Kernels);
#else
  return *PickKernel(isa, "float vector math", &kScalarKernels, &kScalarKernels, &kScalarKernels);
#endif
}

}  // namespace

constinit const Kernels kScalarKernels = MakeKernels<Scalar>();

void Exp(const float* x, float* y, int64_t n, Isa isa) { KernelsFor(isa).exp(x, y, n); }
void Erf(const float* x, float* y, int64_t n, Isa isa) { KernelsFor(isa).erf(x, y, n); }
void Logistic(const float* x, float* y, int64_t n, Isa isa) { KernelsFor(isa).logistic(x, y, n); }
void Tanh(const float* x, float* y, int64_t n, Isa isa) { KernelsFor(isa).tanh(x, y, n); }
void GeluErf(const float* x, float* y, int64_t n, Isa isa) { KernelsFor(isa).gelu_erf(x, y, n); }
void GeluTanh(const float* x, float* y, int64_t n, Isa isa) { KernelsFor(isa).gelu_tanh(x, y, n); }

void Binary(BinaryOp op, const float* a, int a_step, const float* b, int b_step, float* y,
            int64_t n, Isa isa) {
  KernelsFor(isa).binary(op, a, a_step, b, b_step, y, n);
}

void SoftmaxRow(const float* x, float* y, int64_t n, Isa isa) {
  KernelsFor(isa).softmax_row(x, y, n);
}

void NormalizeRow(float* y, int64_t n, Isa isa) { KernelsFor(isa).normalize_row(y, n); }

void LayerNormRow(const float* x, const float* scale, const float* bias, float epsilon, float* y,
                  int64_t n, float* mean, float* inv_std, Isa isa) {
  KernelsFor(isa).layer_norm_row(x, scale, bias, epsilon, y, n, mean, inv_std);
}

void ParallelForWork(ThreadPool* pool, int64_t items, int64_t work,
                     const std::function<void(int64_t, int64_t)>& fn) {
  if (items <= 0) return;
  if (pool && pool->num_threads() > 1 && items > 1 && work >= kParallelMinWork) {
    pool->ParallelFor(items, fn);
  } else {
    fn(0, items);
  }
}

}  // namespace octet::vmath
