// The 4-bit weight product (ONNX Runtime's com.microsoft MatMulNBits, and the
// folded DequantizeLinear(int4 / uint4, blocked along K) -> MatMul):
//
//   y[m, n] = sum_k a[m, k] * w[k, n] (+ bias[n]),   w[k, n] = (q[k, n] - zp[b, n]) * s[b, n]
//
// for blocks b = k / block_size along K. Two arithmetics, fixed at packing:
//
// - kFloat (accuracy_level 1): per block b, a float dot product of A with the
//   codes, the zero point and the scale applied once: t = low + high, where low
//   and high are fma chains from +0 of a[m, k] * float(q[k, n]) in increasing k
//   over the block's k with k % 8 < 4 (low) and k % 8 >= 4 (high); then
//   u = fma(-zp[b, n], sum_b, t) with sum_b the sum of the block's a[m, k] in
//   increasing k from +0, and acc = fma(u, s[b, n], acc) from +0 in increasing b;
//   then + bias[n]. Two chains and the zero point out of the inner loop leave the
//   kernels an unpack and an fma per weight (docs/int8.md, "4-bit weights").
// - kInt8 (accuracy_level 4): each row's block of A is quantized as ONNX
//   Runtime's MLAS does (amax = max |a|, s_a = amax / 127, q_a = rint(a * (127 /
//   amax)), 0 when amax = 0), the block's dot product sum q_a * (q - zp) is
//   exact in int32, and the blocks are added in float in increasing b:
//   acc = fma(float(dot_b), s_a[b] * s[b, n], acc) from +0, then + bias[n].
//   docs/int8.md ("4-bit weights") compares this order with ONNX Runtime's.
//
// The weights are packed once (PackNBits) into panels of kNBitsPanel columns;
// threads split the panels only, so every path and thread count gives the same
// bytes (the tests check both against NBitsMatMulReference).
#pragma once

#include <cstdint>
#include <functional>

#include "core/weight_arena.h"
#include "kernels/isa.h"
#include "kernels/output_columns.h"

namespace octet {

class ThreadPool;

enum class NBitsArithmetic { kFloat, kInt8 };

inline constexpr int kNBitsPanel = 16;
// k per packed step (an octet) and bytes per panel and step.
inline constexpr int kNBitsStepK = 8;
inline constexpr int kNBitsStepBytes = kNBitsPanel * kNBitsStepK / 2;
// Consecutive panels stored interleaved, so that a kernel running several
// panels at once (independent fma chains at M = 1) reads one stream.
inline constexpr int kNBitsGroup = 4;
static_assert(kOutputColumnsAlign % (kNBitsGroup * kNBitsPanel) == 0,
              "a group of panels writes its columns to one output matrix");

// 4-bit weights of a K x N product, laid out for the panel kernels.
//
// Panels 4g..4g+3 form group g (the last group may hold fewer; its width is its
// panel count). Within a group the panels sit side by side: data holds per k
// octet a row of width x 64 bytes, and scales and zero codes per block a row of
// width x 16 values (column 16 i + j of panel i at i x 16 + j). In a panel's 64
// bytes of octet o, byte 4 j + t holds column j's q[8o + t] (low nibble) and
// q[8o + 4 + t] (high nibble): each int32 lane holds one column's 8 codes, 4
// consecutive k in the low nibbles and 4 in the high, what a u8 x s8 dot
// product of 4 takes, and a shift by 4 p brings code p to the lane's low bits.
//
// Padding (K past its last octet, columns past N) is 0. Group g starts at
// 4 g x k_steps x 64 bytes of data and 4 g x k_blocks x 16 values of the block
// parameters.
struct PackedNBits {
  int64_t K = 0, N = 0, block_size = 0, k_blocks = 0;
  // ceil(N / kNBitsPanel); ceil(K / kNBitsStepK) octets of k.
  int64_t panels = 0, k_steps = 0;
  NBitsArithmetic arithmetic = NBitsArithmetic::kFloat;
  WeightVector<uint8_t> data;
  WeightVector<float> scales;
  // The zero point of each block and column: zero_codes when every zero point
  // is an integer in [0, 15] (always so for kInt8), else zero_points (kFloat).
  WeightVector<uint8_t> zero_codes;
  WeightVector<float> zero_points;
};

// Writes the K codes of column n (each in [0, 15]) to codes. PackNBits asks a copy
// of the reader per thread for the columns of that thread's part in increasing n,
// one at a time, so that no unpacked copy of all the weights exists at once; copies
// must not share state that a call changes.
using NBitsColumnReader = std::function<void(int64_t n, uint8_t* codes)>;

// column: the codes of the product's N columns; scales, zero_points: N rows of
// k_blocks = ceil(K / block_size) values; zero_points null means 8. kInt8 needs
// integral zero points. block_size is a power of two >= 16. The packed operands
// live in `arena` (the heap when null); pool (may be null) splits the columns
// among its threads. Throws octet::Error on bad sizes.
PackedNBits PackNBits(const NBitsColumnReader& column, const float* scales,
                      const float* zero_points, int64_t K, int64_t N, int64_t block_size,
                      NBitsArithmetic arithmetic, WeightArena* arena = nullptr,
                      ThreadPool* pool = nullptr);
// The same with q: N rows of K codes (row n is column n of the product).
PackedNBits PackNBits(const uint8_t* q, const float* scales, const float* zero_points, int64_t K,
                      int64_t N, int64_t block_size, NBitsArithmetic arithmetic,
                      WeightArena* arena = nullptr);

// y (M x N) = a (M x K, leading dimension lda) times the packed weights, + bias (N
// values, or null), written to y's matrices. pool may be null.
void NBitsMatMul(const PackedNBits& w, int64_t M, const float* a, int64_t lda, const float* bias,
                 const OutputColumns& y, ThreadPool* pool, Isa isa = ActiveIsa());
// The same into one matrix of leading dimension ldy.
inline void NBitsMatMul(const PackedNBits& w, int64_t M, const float* a, int64_t lda,
                        const float* bias, float* y, int64_t ldy, ThreadPool* pool,
                        Isa isa = ActiveIsa()) {
  const ColumnRange all{0, y, ldy};
  NBitsMatMul(w, M, a, lda, bias, OutputColumns{&all, 1}, pool, isa);
}

// The naive statement of both arithmetics (int64 dot products for kInt8), on
// the unpacked operands PackNBits takes; for tests.
void NBitsMatMulReference(const uint8_t* q, const float* scales, const float* zero_points,
                          int64_t K, int64_t N, int64_t block_size, NBitsArithmetic arithmetic,
                          int64_t M, const float* a, const float* bias, float* y);

}  // namespace octet
