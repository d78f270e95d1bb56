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
//
// gemm_i16s8_12x32c2_pairb_avx512, the matmuls' and convolutions' kernel: the
// same tile on paired B (gemm_kernels.h, gemm_avx2.cc): one load and one
// vpsraw per group give the words of columns q (+ 128, low) and q + 16 (high)
// and the high column alone.
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
template <int R>
void AccumulatePaired(__m512i (&acc)[R][2], const uint8_t* a, const int8_t* b, int64_t groups);

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
// B of one group into zmm28-29: widened (plain), or raw and shifted (paired).
#define OCTET_AVX512_LOAD_PLAIN "vpmovsxbw (%[b]), %%zmm28\n\tvpmovsxbw 32(%[b]), %%zmm29\n\t"
#define OCTET_AVX512_LOAD_PAIRED "vmovdqu64 (%[b]), %%zmm28\n\tvpsraw $8, %%zmm28, %%zmm29\n\t"
#define OCTET_AVX512_ACCUMULATE_AS(NAME, LOAD, R, ZERO, ROWS, STORE, ...)            \
  template <>                                                                        \
  [[gnu::always_inline]] inline void NAME<R>(__m512i(&acc)[R][2], const uint8_t* a,  \
                                             const int8_t* b, int64_t groups) {      \
    asm volatile(ZERO                                                                \
                 ".p2align 4\n"                                                      \
                 "1:\n\t" LOAD ROWS                                                  \
                 "add $64, %[b]\n\t"                                                 \
                 "add $" #R                                                          \
                 "*4, %[a]\n\t"                                                      \
                 "dec %[n]\n\t"                                                      \
                 "jnz 1b\n\t" STORE                                                  \
                 : [a] "+r"(a), [b] "+r"(b), [n] "+r"(groups)                        \
                 : [acc] "r"(&acc[0][0])                                             \
                 : __VA_ARGS__, "xmm28", "xmm29", "xmm30", "xmm31", "cc", "memory"); \
  }
#define OCTET_AVX512_ACCUMULATE(R, ZERO, ROWS, STORE, ...)                                     \
  OCTET_AVX512_ACCUMULATE_AS(Accumulate, OCTET_AVX512_LOAD_PLAIN, R, ZERO, ROWS, STORE,        \
                             __VA_ARGS__)                                                      \
  OCTET_AVX512_ACCUMULATE_AS(AccumulatePaired, OCTET_AVX512_LOAD_PAIRED, R, ZERO, ROWS, STORE, \
                             __VA_ARGS__)
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

// A GEMV on paired B, as gemm_avx2.cc's: four groups (256 bytes) per
// iteration into two pairs of accumulators, each group's B loaded an iteration
// ahead; the last groups % 4 one at a time.
#define OCTET_AVX512_GEMV_GROUP(a_offset, w, x, p, c0, c1, NEXT) \
  "vpbroadcastd " #a_offset "(%[a]), %%zmm" #x                   \
  "\n\t"                                                         \
  "vpmaddwd %%zmm" #w ", %%zmm" #x ", %%zmm" #p                  \
  "\n\t"                                                         \
  "vpsraw $8, %%zmm" #w ", %%zmm" #w                             \
  "\n\t"                                                         \
  "vpaddd %%zmm" #p ", %[" #c0 "], %[" #c0                       \
  "]\n\t"                                                        \
  "vpmaddwd %%zmm" #w ", %%zmm" #x ", %%zmm" #x                  \
  "\n\t"                                                         \
  "vpaddd %%zmm" #x ", %[" #c1 "], %[" #c1 "]\n\t" NEXT
#define OCTET_AVX512_GEMV_LOAD(b_offset, w) "vmovdqu64 " #b_offset "(%[b]), %%zmm" #w "\n\t"
// Four groups, B in zmm20-23; N0-N3 load the next four (or nothing).
#define OCTET_AVX512_GEMV_QUAD(N0, N1, N2, N3)        \
  OCTET_AVX512_GEMV_GROUP(0, 20, 24, 25, c0, c1, N0)  \
  OCTET_AVX512_GEMV_GROUP(4, 21, 26, 27, d0, d1, N1)  \
  OCTET_AVX512_GEMV_GROUP(8, 22, 28, 29, c0, c1, N2)  \
  OCTET_AVX512_GEMV_GROUP(12, 23, 30, 31, d0, d1, N3) \
  "add $256, %[b]\n\tadd $16, %[a]\n\t"
void GemvPaired(__m512i (&acc)[1][2], const uint8_t* a, const int8_t* b, int64_t groups) {
  __m512i c0 = _mm512_setzero_si512(), c1 = c0;
  if (int64_t ahead = groups / 4 - 1; ahead >= 0) {  // quads with a next one to load
    __m512i d0 = c0, d1 = c0;
    asm volatile(
        // clang-format off
        OCTET_AVX512_GEMV_LOAD(0, 20) OCTET_AVX512_GEMV_LOAD(64, 21)
        OCTET_AVX512_GEMV_LOAD(128, 22) OCTET_AVX512_GEMV_LOAD(192, 23)
        "test %[n], %[n]\n\t"
        "jz 2f\n\t"
        ".p2align 4\n"
        "1:\n\t"
        OCTET_AVX512_GEMV_QUAD(OCTET_AVX512_GEMV_LOAD(256, 20), OCTET_AVX512_GEMV_LOAD(320, 21),
                               OCTET_AVX512_GEMV_LOAD(384, 22), OCTET_AVX512_GEMV_LOAD(448, 23))
        "dec %[n]\n\t"
        "jnz 1b\n"
        "2:\n\t"
        OCTET_AVX512_GEMV_QUAD("", "", "", "")
        // clang-format on
        : [c0] "+v"(c0), [c1] "+v"(c1), [d0] "+v"(d0), [d1] "+v"(d1), [a] "+r"(a), [b] "+r"(b),
          [n] "+r"(ahead)
        :
        : "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28",
          "xmm29", "xmm30", "xmm31", "cc", "memory");
    c0 = _mm512_add_epi32(c0, d0);
    c1 = _mm512_add_epi32(c1, d1);
  }
  if (groups % 4 != 0) {
    alignas(64) __m512i tail[1][2];
    AccumulatePaired<1>(tail, a, b, groups % 4);
    c0 = _mm512_add_epi32(c0, tail[0][0]);
    c1 = _mm512_add_epi32(c1, tail[0][1]);
  }
  acc[0][0] = c0;
  acc[0][1] = c1;
}
#undef OCTET_AVX512_GEMV_QUAD
#undef OCTET_AVX512_GEMV_LOAD
#undef OCTET_AVX512_GEMV_GROUP
#undef OCTET_AVX512_ACCUMULATE
#undef OCTET_AVX512_ACCUMULATE_AS
#undef OCTET_AVX512_LOAD_PAIRED
#undef OCTET_AVX512_LOAD_PLAIN
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

// Paired B: the raw sums split into the two columns of each word, and on the
// last block the low columns' 128 per k removed (128 x the row sum of A).
template <int R>
void TilePaired(const TileArgs& t) {
  alignas(64) __m512i acc[R][2];
  if (t.k_groups == 0) {
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
  } else if constexpr (R == 1) {
    GemvPaired(acc, t.a, t.b, t.k_groups);
  } else {
    AccumulatePaired<R>(acc, t.a, t.b, t.k_groups);
  }
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    acc[r][0] = _mm512_sub_epi32(acc[r][0], _mm512_slli_epi32(acc[r][1], 8));
    if (t.last) {
      const auto neg_sum = static_cast<uint32_t>(t.row_neg_sum[r]);
      acc[r][0] =
          _mm512_add_epi32(acc[r][0], _mm512_set1_epi32(static_cast<int32_t>(neg_sum << 7)));
    }
  }
  FinishTile<simd::Avx512, R, 2>(t, acc);
}

}  // namespace

void TileAvx512(int rows, const TileArgs& t) {
  ForCount<12>(rows, [&]<int R>() { Tile<R>(t); });
}

void TileAvx512PairedB(int rows, const TileArgs& t) {
  ForCount<12>(rows, [&]<int R>() { TilePaired<R>(t); });
}

}  // namespace octet::gemm
