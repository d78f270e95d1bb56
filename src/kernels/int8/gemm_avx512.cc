// gemm_i16s8_12x32c2_avx512: the exact AVX-512 micro-kernel for CPUs with
// AVX-512BW but no VNNI (Skylake-SP/X): the AVX2 kernel's arithmetic
// (gemm_avx2.cc) on zmm registers. A is packed as int16, B as int8 pairs of k
// widened to int16 in registers; vpmaddwd adds each int16 pair into an int32
// lane without saturation. Up to 12 rows x 32 columns: 24 accumulators, 2 B,
// 1 A and 1 product of the 32 zmm registers.
//
// Per group (2 k): B's 64 bytes are columns 0-31 x k0, k1; each 32-byte half
// widens to [c0k0 c0k1 .. c15k0 c15k1] and the row's int16 pair is broadcast,
// so lane j of vpmaddwd is a0 b(j, k0) + a1 b(j, k1): columns in order.
#include <immintrin.h>

#include "kernels/int8/gemm_finish_impl.h"
#include "kernels/simd_avx512.h"

namespace octet::gemm {

namespace {

// The accumulation loop, in assembly for the reason gemm_avx2.cc gives. An asm
// statement takes at most 30 operands, too few for 24 accumulators, so they
// live in zmm0-23 for the whole loop (row r in zmm 2r and 2r + 1) and are
// stored to `acc` at its end; B in zmm28-29, A's broadcast in zmm30 and each
// product in zmm31. One k group per iteration; groups >= 1.
template <int R>
void Accumulate(__m512i (&acc)[R][2], const uint8_t* a, const int8_t* b, int64_t groups);

#define OCTET_AVX512_ZERO(z) "vpxord %%zmm" #z ", %%zmm" #z ", %%zmm" #z "\n\t"
// Row r of a group: its int16 pair of A broadcast, times both halves of B.
#define OCTET_AVX512_ROW(r, z0, z1)         \
  "vpbroadcastd " #r                        \
  "*4(%[a]), %%zmm30\n\t"                   \
  "vpmaddwd %%zmm28, %%zmm30, %%zmm31\n\t"  \
  "vpaddd %%zmm31, %%zmm" #z0 ", %%zmm" #z0 \
  "\n\t"                                    \
  "vpmaddwd %%zmm29, %%zmm30, %%zmm31\n\t"  \
  "vpaddd %%zmm31, %%zmm" #z1 ", %%zmm" #z1 "\n\t"
#define OCTET_AVX512_STORE(z, offset) "vmovdqu64 %%zmm" #z ", " #offset "(%[acc])\n\t"
#define OCTET_AVX512_ACCUMULATE(R, ZERO, ROWS, STORE, ...)                                \
  template <>                                                                             \
  [[gnu::always_inline]] inline void Accumulate<R>(__m512i(&acc)[R][2], const uint8_t* a, \
                                                   const int8_t* b, int64_t groups) {     \
    asm volatile(ZERO                                                                     \
                 ".p2align 4\n"                                                           \
                 "1:\n\t"                                                                 \
                 "vpmovsxbw (%[b]), %%zmm28\n\t"                                          \
                 "vpmovsxbw 32(%[b]), %%zmm29\n\t" ROWS                                   \
                 "add $64, %[b]\n\t"                                                      \
                 "add $" #R                                                               \
                 "*4, %[a]\n\t"                                                           \
                 "dec %[n]\n\t"                                                           \
                 "jnz 1b\n\t" STORE                                                       \
                 : [a] "+r"(a), [b] "+r"(b), [n] "+r"(groups)                             \
                 : [acc] "r"(&acc[0][0])                                                  \
                 : __VA_ARGS__, "xmm28", "xmm29", "xmm30", "xmm31", "cc", "memory");      \
  }
OCTET_AVX512_ACCUMULATE(1, OCTET_AVX512_ZERO(0) OCTET_AVX512_ZERO(1), OCTET_AVX512_ROW(0, 0, 1),
                        OCTET_AVX512_STORE(0, 0) OCTET_AVX512_STORE(1, 64), "xmm0", "xmm1")
OCTET_AVX512_ACCUMULATE(2,
                        OCTET_AVX512_ZERO(0) OCTET_AVX512_ZERO(1) OCTET_AVX512_ZERO(2)
                            OCTET_AVX512_ZERO(3),
                        OCTET_AVX512_ROW(0, 0, 1) OCTET_AVX512_ROW(1, 2, 3),
                        OCTET_AVX512_STORE(0, 0) OCTET_AVX512_STORE(1, 64)
                            OCTET_AVX512_STORE(2, 128) OCTET_AVX512_STORE(3, 192),
                        "xmm0", "xmm1", "xmm2", "xmm3")
OCTET_AVX512_ACCUMULATE(3,
                        OCTET_AVX512_ZERO(0) OCTET_AVX512_ZERO(1) OCTET_AVX512_ZERO(2)
                            OCTET_AVX512_ZERO(3) OCTET_AVX512_ZERO(4) OCTET_AVX512_ZERO(5),
                        OCTET_AVX512_ROW(0, 0, 1) OCTET_AVX512_ROW(1, 2, 3)
                            OCTET_AVX512_ROW(2, 4, 5),
                        OCTET_AVX512_STORE(0, 0) OCTET_AVX512_STORE(1, 64)
                            OCTET_AVX512_STORE(2, 128) OCTET_AVX512_STORE(3, 192)
                                OCTET_AVX512_STORE(4, 256) OCTET_AVX512_STORE(5, 320),
                        "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5")
OCTET_AVX512_ACCUMULATE(4,
                        OCTET_AVX512_ZERO(0) OCTET_AVX512_ZERO(1) OCTET_AVX512_ZERO(2)
                            OCTET_AVX512_ZERO(3) OCTET_AVX512_ZERO(4) OCTET_AVX512_ZERO(5)
                                OCTET_AVX512_ZERO(6) OCTET_AVX512_ZERO(7),
                        OCTET_AVX512_ROW(0, 0, 1) OCTET_AVX512_ROW(1, 2, 3)
                            OCTET_AVX512_ROW(2, 4, 5) OCTET_AVX512_ROW(3, 6, 7),
                        OCTET_AVX512_STORE(0, 0) OCTET_AVX512_STORE(1, 64)
                            OCTET_AVX512_STORE(2, 128) OCTET_AVX512_STORE(3, 192)
                                OCTET_AVX512_STORE(4, 256) OCTET_AVX512_STORE(5, 320)
                                    OCTET_AVX512_STORE(6, 384) OCTET_AVX512_STORE(7, 448),
                        "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7")
OCTET_AVX512_ACCUMULATE(
    5,
    OCTET_AVX512_ZERO(0) OCTET_AVX512_ZERO(1) OCTET_AVX512_ZERO(2) OCTET_AVX512_ZERO(3)
        OCTET_AVX512_ZERO(4) OCTET_AVX512_ZERO(5) OCTET_AVX512_ZERO(6) OCTET_AVX512_ZERO(7)
            OCTET_AVX512_ZERO(8) OCTET_AVX512_ZERO(9),
    OCTET_AVX512_ROW(0, 0, 1) OCTET_AVX512_ROW(1, 2, 3) OCTET_AVX512_ROW(2, 4, 5)
        OCTET_AVX512_ROW(3, 6, 7) OCTET_AVX512_ROW(4, 8, 9),
    OCTET_AVX512_STORE(0, 0) OCTET_AVX512_STORE(1, 64) OCTET_AVX512_STORE(2, 128)
        OCTET_AVX512_STORE(3, 192) OCTET_AVX512_STORE(4, 256) OCTET_AVX512_STORE(5, 320)
            OCTET_AVX512_STORE(6, 384) OCTET_AVX512_STORE(7, 448) OCTET_AVX512_STORE(8, 512)
                OCTET_AVX512_STORE(9, 576),
    "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9")
OCTET_AVX512_ACCUMULATE(
    6,
    OCTET_AVX512_ZERO(0) OCTET_AVX512_ZERO(1) OCTET_AVX512_ZERO(2) OCTET_AVX512_ZERO(3)
        OCTET_AVX512_ZERO(4) OCTET_AVX512_ZERO(5) OCTET_AVX512_ZERO(6) OCTET_AVX512_ZERO(7)
            OCTET_AVX512_ZERO(8) OCTET_AVX512_ZERO(9) OCTET_AVX512_ZERO(10) OCTET_AVX512_ZERO(11),
    OCTET_AVX512_ROW(0, 0, 1) OCTET_AVX512_ROW(1, 2, 3) OCTET_AVX512_ROW(2, 4, 5)
        OCTET_AVX512_ROW(3, 6, 7) OCTET_AVX512_ROW(4, 8, 9) OCTET_AVX512_ROW(5, 10, 11),
    OCTET_AVX512_STORE(0, 0) OCTET_AVX512_STORE(1, 64) OCTET_AVX512_STORE(2, 128)
        OCTET_AVX512_STORE(3, 192) OCTET_AVX512_STORE(4, 256) OCTET_AVX512_STORE(5, 320)
            OCTET_AVX512_STORE(6, 384) OCTET_AVX512_STORE(7, 448) OCTET_AVX512_STORE(8, 512)
                OCTET_AVX512_STORE(9, 576) OCTET_AVX512_STORE(10, 640) OCTET_AVX512_STORE(11, 704),
    "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
    "xmm11")
OCTET_AVX512_ACCUMULATE(
    7,
    OCTET_AVX512_ZERO(0) OCTET_AVX512_ZERO(1) OCTET_AVX512_ZERO(2) OCTET_AVX512_ZERO(3)
        OCTET_AVX512_ZERO(4) OCTET_AVX512_ZERO(5) OCTET_AVX512_ZERO(6) OCTET_AVX512_ZERO(7)
            OCTET_AVX512_ZERO(8) OCTET_AVX512_ZERO(9) OCTET_AVX512_ZERO(10) OCTET_AVX512_ZERO(11)
                OCTET_AVX512_ZERO(12) OCTET_AVX512_ZERO(13),
    OCTET_AVX512_ROW(0, 0, 1) OCTET_AVX512_ROW(1, 2, 3) OCTET_AVX512_ROW(2, 4, 5)
        OCTET_AVX512_ROW(3, 6, 7) OCTET_AVX512_ROW(4, 8, 9) OCTET_AVX512_ROW(5, 10, 11)
            OCTET_AVX512_ROW(6, 12, 13),
    OCTET_AVX512_STORE(0, 0) OCTET_AVX512_STORE(1, 64) OCTET_AVX512_STORE(2, 128)
        OCTET_AVX512_STORE(3, 192) OCTET_AVX512_STORE(4, 256) OCTET_AVX512_STORE(5, 320)
            OCTET_AVX512_STORE(6, 384) OCTET_AVX512_STORE(7, 448) OCTET_AVX512_STORE(8, 512)
                OCTET_AVX512_STORE(9, 576) OCTET_AVX512_STORE(10, 640) OCTET_AVX512_STORE(11, 704)
                    OCTET_AVX512_STORE(12, 768) OCTET_AVX512_STORE(13, 832),
    "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
    "xmm11", "xmm12", "xmm13")
OCTET_AVX512_ACCUMULATE(
    8,
    OCTET_AVX512_ZERO(0) OCTET_AVX512_ZERO(1) OCTET_AVX512_ZERO(2) OCTET_AVX512_ZERO(3)
        OCTET_AVX512_ZERO(4) OCTET_AVX512_ZERO(5) OCTET_AVX512_ZERO(6) OCTET_AVX512_ZERO(7)
            OCTET_AVX512_ZERO(8) OCTET_AVX512_ZERO(9) OCTET_AVX512_ZERO(10) OCTET_AVX512_ZERO(11)
                OCTET_AVX512_ZERO(12) OCTET_AVX512_ZERO(13) OCTET_AVX512_ZERO(14)
                    OCTET_AVX512_ZERO(15),
    OCTET_AVX512_ROW(0, 0, 1) OCTET_AVX512_ROW(1, 2, 3) OCTET_AVX512_ROW(2, 4, 5)
        OCTET_AVX512_ROW(3, 6, 7) OCTET_AVX512_ROW(4, 8, 9) OCTET_AVX512_ROW(5, 10, 11)
            OCTET_AVX512_ROW(6, 12, 13) OCTET_AVX512_ROW(7, 14, 15),
    OCTET_AVX512_STORE(0, 0) OCTET_AVX512_STORE(1, 64) OCTET_AVX512_STORE(2, 128)
        OCTET_AVX512_STORE(3, 192) OCTET_AVX512_STORE(4, 256) OCTET_AVX512_STORE(5, 320)
            OCTET_AVX512_STORE(6, 384) OCTET_AVX512_STORE(7, 448) OCTET_AVX512_STORE(8, 512)
                OCTET_AVX512_STORE(9, 576) OCTET_AVX512_STORE(10, 640) OCTET_AVX512_STORE(11, 704)
                    OCTET_AVX512_STORE(12, 768) OCTET_AVX512_STORE(13, 832)
                        OCTET_AVX512_STORE(14, 896) OCTET_AVX512_STORE(15, 960),
    "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
    "xmm11", "xmm12", "xmm13", "xmm14", "xmm15")
OCTET_AVX512_ACCUMULATE(
    9,
    OCTET_AVX512_ZERO(0) OCTET_AVX512_ZERO(1) OCTET_AVX512_ZERO(2) OCTET_AVX512_ZERO(3)
        OCTET_AVX512_ZERO(4) OCTET_AVX512_ZERO(5) OCTET_AVX512_ZERO(6) OCTET_AVX512_ZERO(7)
            OCTET_AVX512_ZERO(8) OCTET_AVX512_ZERO(9) OCTET_AVX512_ZERO(10) OCTET_AVX512_ZERO(11)
                OCTET_AVX512_ZERO(12) OCTET_AVX512_ZERO(13) OCTET_AVX512_ZERO(14)
                    OCTET_AVX512_ZERO(15) OCTET_AVX512_ZERO(16) OCTET_AVX512_ZERO(17),
    OCTET_AVX512_ROW(0, 0, 1) OCTET_AVX512_ROW(1, 2, 3) OCTET_AVX512_ROW(2, 4, 5)
        OCTET_AVX512_ROW(3, 6, 7) OCTET_AVX512_ROW(4, 8, 9) OCTET_AVX512_ROW(5, 10, 11)
            OCTET_AVX512_ROW(6, 12, 13) OCTET_AVX512_ROW(7, 14, 15) OCTET_AVX512_ROW(8, 16, 17),
    OCTET_AVX512_STORE(0, 0) OCTET_AVX512_STORE(1, 64) OCTET_AVX512_STORE(2, 128)
        OCTET_AVX512_STORE(3, 192) OCTET_AVX512_STORE(4, 256) OCTET_AVX512_STORE(5, 320)
            OCTET_AVX512_STORE(6, 384) OCTET_AVX512_STORE(7, 448) OCTET_AVX512_STORE(8, 512)
                OCTET_AVX512_STORE(9, 576) OCTET_AVX512_STORE(10, 640) OCTET_AVX512_STORE(11, 704)
                    OCTET_AVX512_STORE(12, 768) OCTET_AVX512_STORE(13, 832)
                        OCTET_AVX512_STORE(14, 896) OCTET_AVX512_STORE(15, 960)
                            OCTET_AVX512_STORE(16, 1024) OCTET_AVX512_STORE(17, 1088),
    "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
    "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17")
OCTET_AVX512_ACCUMULATE(
    10,
    OCTET_AVX512_ZERO(0) OCTET_AVX512_ZERO(1) OCTET_AVX512_ZERO(2) OCTET_AVX512_ZERO(3)
        OCTET_AVX512_ZERO(4) OCTET_AVX512_ZERO(5) OCTET_AVX512_ZERO(6) OCTET_AVX512_ZERO(7)
            OCTET_AVX512_ZERO(8) OCTET_AVX512_ZERO(9) OCTET_AVX512_ZERO(10) OCTET_AVX512_ZERO(11)
                OCTET_AVX512_ZERO(12) OCTET_AVX512_ZERO(13) OCTET_AVX512_ZERO(14)
                    OCTET_AVX512_ZERO(15) OCTET_AVX512_ZERO(16) OCTET_AVX512_ZERO(17)
                        OCTET_AVX512_ZERO(18) OCTET_AVX512_ZERO(19),
    OCTET_AVX512_ROW(0, 0, 1) OCTET_AVX512_ROW(1, 2, 3) OCTET_AVX512_ROW(2, 4, 5)
        OCTET_AVX512_ROW(3, 6, 7) OCTET_AVX512_ROW(4, 8, 9) OCTET_AVX512_ROW(5, 10, 11)
            OCTET_AVX512_ROW(6, 12, 13) OCTET_AVX512_ROW(7, 14, 15) OCTET_AVX512_ROW(8, 16, 17)
                OCTET_AVX512_ROW(9, 18, 19),
    OCTET_AVX512_STORE(0, 0) OCTET_AVX512_STORE(1, 64) OCTET_AVX512_STORE(2, 128)
        OCTET_AVX512_STORE(3, 192) OCTET_AVX512_STORE(4, 256) OCTET_AVX512_STORE(5, 320)
            OCTET_AVX512_STORE(6, 384) OCTET_AVX512_STORE(7, 448) OCTET_AVX512_STORE(8, 512)
                OCTET_AVX512_STORE(9, 576) OCTET_AVX512_STORE(10, 640) OCTET_AVX512_STORE(11, 704)
                    OCTET_AVX512_STORE(12, 768) OCTET_AVX512_STORE(13, 832)
                        OCTET_AVX512_STORE(14, 896) OCTET_AVX512_STORE(15, 960)
                            OCTET_AVX512_STORE(16, 1024) OCTET_AVX512_STORE(17, 1088)
                                OCTET_AVX512_STORE(18, 1152) OCTET_AVX512_STORE(19, 1216),
    "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
    "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19")
OCTET_AVX512_ACCUMULATE(
    11,
    OCTET_AVX512_ZERO(0) OCTET_AVX512_ZERO(1) OCTET_AVX512_ZERO(2) OCTET_AVX512_ZERO(3)
        OCTET_AVX512_ZERO(4) OCTET_AVX512_ZERO(5) OCTET_AVX512_ZERO(6) OCTET_AVX512_ZERO(7)
            OCTET_AVX512_ZERO(8) OCTET_AVX512_ZERO(9) OCTET_AVX512_ZERO(10) OCTET_AVX512_ZERO(11)
                OCTET_AVX512_ZERO(12) OCTET_AVX512_ZERO(13) OCTET_AVX512_ZERO(14)
                    OCTET_AVX512_ZERO(15) OCTET_AVX512_ZERO(16) OCTET_AVX512_ZERO(17)
                        OCTET_AVX512_ZERO(18) OCTET_AVX512_ZERO(19) OCTET_AVX512_ZERO(20)
                            OCTET_AVX512_ZERO(21),
    OCTET_AVX512_ROW(0, 0, 1) OCTET_AVX512_ROW(1, 2, 3) OCTET_AVX512_ROW(2, 4, 5)
        OCTET_AVX512_ROW(3, 6, 7) OCTET_AVX512_ROW(4, 8, 9) OCTET_AVX512_ROW(5, 10, 11)
            OCTET_AVX512_ROW(6, 12, 13) OCTET_AVX512_ROW(7, 14, 15) OCTET_AVX512_ROW(8, 16, 17)
                OCTET_AVX512_ROW(9, 18, 19) OCTET_AVX512_ROW(10, 20, 21),
    OCTET_AVX512_STORE(0, 0) OCTET_AVX512_STORE(1, 64) OCTET_AVX512_STORE(2, 128)
        OCTET_AVX512_STORE(3, 192) OCTET_AVX512_STORE(4, 256) OCTET_AVX512_STORE(5, 320)
            OCTET_AVX512_STORE(6, 384) OCTET_AVX512_STORE(7, 448) OCTET_AVX512_STORE(8, 512)
                OCTET_AVX512_STORE(9, 576) OCTET_AVX512_STORE(10, 640) OCTET_AVX512_STORE(11, 704)
                    OCTET_AVX512_STORE(12, 768) OCTET_AVX512_STORE(13, 832)
                        OCTET_AVX512_STORE(14, 896) OCTET_AVX512_STORE(15, 960)
                            OCTET_AVX512_STORE(16, 1024) OCTET_AVX512_STORE(17, 1088)
                                OCTET_AVX512_STORE(18, 1152) OCTET_AVX512_STORE(19, 1216)
                                    OCTET_AVX512_STORE(20, 1280) OCTET_AVX512_STORE(21, 1344),
    "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
    "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20",
    "xmm21")
OCTET_AVX512_ACCUMULATE(
    12,
    OCTET_AVX512_ZERO(0) OCTET_AVX512_ZERO(1) OCTET_AVX512_ZERO(2) OCTET_AVX512_ZERO(3)
        OCTET_AVX512_ZERO(4) OCTET_AVX512_ZERO(5) OCTET_AVX512_ZERO(6) OCTET_AVX512_ZERO(7)
            OCTET_AVX512_ZERO(8) OCTET_AVX512_ZERO(9) OCTET_AVX512_ZERO(10) OCTET_AVX512_ZERO(11)
                OCTET_AVX512_ZERO(12) OCTET_AVX512_ZERO(13) OCTET_AVX512_ZERO(14)
                    OCTET_AVX512_ZERO(15) OCTET_AVX512_ZERO(16) OCTET_AVX512_ZERO(17)
                        OCTET_AVX512_ZERO(18) OCTET_AVX512_ZERO(19) OCTET_AVX512_ZERO(20)
                            OCTET_AVX512_ZERO(21) OCTET_AVX512_ZERO(22) OCTET_AVX512_ZERO(23),
    OCTET_AVX512_ROW(0, 0, 1) OCTET_AVX512_ROW(1, 2, 3) OCTET_AVX512_ROW(2, 4, 5)
        OCTET_AVX512_ROW(3, 6, 7) OCTET_AVX512_ROW(4, 8, 9) OCTET_AVX512_ROW(5, 10, 11)
            OCTET_AVX512_ROW(6, 12, 13) OCTET_AVX512_ROW(7, 14, 15) OCTET_AVX512_ROW(8, 16, 17)
                OCTET_AVX512_ROW(9, 18, 19) OCTET_AVX512_ROW(10, 20, 21)
                    OCTET_AVX512_ROW(11, 22, 23),
    OCTET_AVX512_STORE(0, 0) OCTET_AVX512_STORE(1, 64) OCTET_AVX512_STORE(2, 128)
        OCTET_AVX512_STORE(3, 192) OCTET_AVX512_STORE(4, 256) OCTET_AVX512_STORE(5, 320)
            OCTET_AVX512_STORE(6, 384) OCTET_AVX512_STORE(7, 448) OCTET_AVX512_STORE(8, 512)
                OCTET_AVX512_STORE(9, 576) OCTET_AVX512_STORE(10, 640) OCTET_AVX512_STORE(11, 704)
                    OCTET_AVX512_STORE(12, 768) OCTET_AVX512_STORE(13, 832)
                        OCTET_AVX512_STORE(14, 896) OCTET_AVX512_STORE(15, 960)
                            OCTET_AVX512_STORE(16, 1024) OCTET_AVX512_STORE(17, 1088)
                                OCTET_AVX512_STORE(18, 1152) OCTET_AVX512_STORE(19, 1216)
                                    OCTET_AVX512_STORE(20, 1280) OCTET_AVX512_STORE(21, 1344)
                                        OCTET_AVX512_STORE(22, 1408) OCTET_AVX512_STORE(23, 1472),
    "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
    "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20",
    "xmm21", "xmm22", "xmm23")
#undef OCTET_AVX512_ACCUMULATE
#undef OCTET_AVX512_STORE
#undef OCTET_AVX512_ROW
#undef OCTET_AVX512_ZERO

template <int R>
void Tile(const TileArgs& t) {
  alignas(64) __m512i acc[R][2];
  if (t.k_groups > 0) {
    Accumulate<R>(acc, t.a, t.b, t.k_groups);
  } else {
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
  }
  FinishTile<simd::Avx512, R, 2>(t, acc);
}

}  // namespace

void TileAvx512(int rows, const TileArgs& t) {
  ForCount<12>(rows, [&]<int R>() { Tile<R>(t); });
}

}  // namespace octet::gemm
