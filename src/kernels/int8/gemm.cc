#include "kernels/int8/gemm.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/int8/gemm_pack.h"

namespace octet {

namespace {

using gemm::TileArgs;
using gemm::TileFn;
using gemm::TileFnFor;
using gemm::TileShape;

// Fixed blocking (Goto / van de Geijn), constants of the kernel so the work
// split never depends on the thread count. A k block of 4096: one B micro-panel
// (<= 32 columns x 4096 bytes = 128 KiB) is reused by every row panel of the
// block from L2 (128 B of B per 16 vpdpbusd is far below L2's bandwidth), and a
// product with K <= 4096 finishes each tile in one pass, in registers
// (FinishesInTile). Against 1024 that is 2-4% faster at K = 1536 and 4096 and
// the same at K <= 1024; 512 was 1-3% slower than 1024 (docs/gemm.md).
constexpr int64_t kKcGroups = 4096 / gemm::kGroup;
constexpr int64_t kMcRows = 128;
constexpr int64_t kNcCols = 256;
constexpr int64_t kCacheLine = 64;

// Per-calling-thread buffers reused across products (workers only write into
// the caller's buffers, at disjoint offsets).
struct Scratch {
  std::vector<uint8_t> packed_a;
  std::vector<int32_t> row_neg_za, row_neg_sum, col_term, col_zb, row_offset, col_offset;
};
Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

int32_t* AlignToCacheLine(int32_t* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  return reinterpret_cast<int32_t*>((address + kCacheLine - 1) / kCacheLine * kCacheLine);
}

// The AVX-512 VNNI tile that reads A in place, for A's signedness.
TileFn TileInPlaceA(bool a_signed) {
#if defined(__x86_64__) || defined(_M_X64)
  return a_signed ? gemm::TileAvx512VnniRowMajorSignedA : gemm::TileAvx512VnniRowMajorA;
#else
  (void)a_signed;
  Fail("internal: the AVX-512 VNNI tiles are not built into this binary");
#endif
}

// With whole k groups the AVX-512 tile reads A in place instead of packing it:
// a small product (one attention head, 128 x 32 x 128) spent as long packing A
// as multiplying, and a large one with an A beyond L2 (4096 x 1536 x 384)
// spent 8% of its time packing A through memory.
bool ReadsAInPlace(int64_t K, Isa isa) {
  return isa == Isa::kAvx512Vnni && K > 0 && K % gemm::kGroup == 0;
}

// A product whose AVX-512 VNNI tiles finish it in registers (GemmS32Requantized,
// GemmS32ToFloat): K in one k block, so each tile holds its finished sums. No
// int32 block is written and read back (3% of a 512 x 1024 x 1024 product's time).
bool FinishesInTile(int64_t K, Isa isa) {
  return isa == Isa::kAvx512Vnni && K > 0 && K <= kKcGroups * gemm::kGroup;
}

// The whole product's TileFinish (row 0, column 0), for requantize.h's two
// epilogues: the fields they share, then each one's own.
gemm::TileFinish FinishFor(void* out, int64_t ld_out, const int32_t* acc_bias,
                           bool acc_bias_per_column, const float* multiplier,
                           bool multiplier_per_column) {
  gemm::TileFinish f{};
  f.out = out;
  f.ld_out = ld_out;
  f.acc_bias = acc_bias;
  f.acc_bias_per_column = acc_bias_per_column;
  f.multiplier = multiplier;
  f.multiplier_per_column = multiplier_per_column;
  return f;
}
gemm::TileFinish FinishFor(const RequantizeParams& p, void* out, int64_t ld_out) {
  gemm::TileFinish f =
      FinishFor(out, ld_out, p.bias, p.bias_per_column, p.multiplier, p.multiplier_per_column);
  std::tie(f.lo, f.hi) = RequantizeFloatClamp(p);
  f.zero_point = p.zero_point;
  return f;
}
gemm::TileFinish FinishFor(const FloatOutputParams& p, float* out, int64_t ld_out) {
  gemm::TileFinish f =
      FinishFor(out, ld_out, p.acc_bias, p.acc_bias_per_column, p.scale, p.scale_per_column);
  f.to_float = true;
  f.bias = p.bias;
  f.bias_per_column = p.bias_per_column;
  return f;
}

// `f` for the tile at (m0, n0).
gemm::TileFinish FinishAt(const gemm::TileFinish& f, int64_t m0, int64_t n0, int64_t cols) {
  gemm::TileFinish t = f;
  const int64_t element = f.to_float ? sizeof(float) : 1;
  t.out = static_cast<uint8_t*>(f.out) + (m0 * f.ld_out + n0) * element;
  t.cols = static_cast<int>(cols);
  if (f.multiplier_per_column) t.multiplier += n0;
  if (f.acc_bias && f.acc_bias_per_column) t.acc_bias += n0;
  if (f.bias && f.bias_per_column) t.bias += n0;
  return t;
}

// The row sums of an A read in place (AVX-512 VNNI only).
void RowSumsInPlaceA(const Int8Operand& A, int64_t row_begin, int64_t row_end, int64_t K,
                     int32_t* row_sums) {
#if defined(__x86_64__) || defined(_M_X64)
  gemm::RowSumsAvx512Vnni(A, row_begin, row_end, K, row_sums);
#else
  (void)A, (void)row_begin, (void)row_end, (void)K, (void)row_sums;
  Fail("internal: the AVX-512 VNNI kernels are not built into this binary");
#endif
}

// One product: C (leading dimension ldc) is written when `epilogue` and
// `finish` are null; else each work item's block goes to `epilogue` from a
// per-thread buffer, or (FinishesInTile) each tile finishes its part of `finish`.
void Gemm(int64_t M, const Int8Operand& A, const int32_t* a_zero, bool a_zero_per_row,
          const PackedB& b, const int32_t* b_zero, bool b_zero_per_col, int32_t* C, int64_t ldc,
          ThreadPool* pool, const GemmBlockFn* epilogue, const gemm::TileFinish* finish = nullptr) {
  const int64_t K = b.K, N = b.N;
  OCTET_CHECK(M >= 0, "int8 GEMM: negative M=", M);
  OCTET_CHECK(K <= kGemmMaxK, "int8 GEMM: K=", K, " exceeds ", kGemmMaxK,
              ", the largest K whose int32 accumulation is exact for all 8-bit inputs");
  OCTET_CHECK(A.ld >= K, "int8 GEMM: A leading dimension ", A.ld, " < K=", K);
  const bool to_c = epilogue == nullptr && finish == nullptr;
  OCTET_CHECK(!to_c || ldc >= N, "int8 GEMM: C leading dimension ", ldc, " < N=", N);
  if (M == 0 || N == 0) return;
  OCTET_CHECK(!to_c || C != nullptr, "int8 GEMM: C is null");
  if (K == 0) {
    if (epilogue) {
      const std::vector<int32_t> zeros(N, 0);
      (*epilogue)(0, M, 0, N, zeros.data(), 0);  // every row reads the same zeros
      return;
    }
    for (int64_t m = 0; m < M; ++m) std::fill_n(C + m * ldc, N, 0);
    return;
  }
  OCTET_CHECK(A.data != nullptr, "int8 GEMM: A data is null");
  OCTET_CHECK(IsaSupported(b.isa), "int8 GEMM: instruction set ", IsaName(b.isa),
              " cannot run here: ", IsaUnsupportedReason(b.isa));
  const TileShape s = gemm::TileShapeFor(b.isa);
  OCTET_CHECK(s.nr == b.nr, "internal: PackedB panel width ", b.nr, " does not match ",
              IsaName(b.isa));
  const int64_t kg = b.k_groups;
  const int64_t m_panels = (M + s.mr - 1) / s.mr, n_panels = (N + s.nr - 1) / s.nr;
  if (M * K * N < kGemmMinParallelMacs) pool = nullptr;
  // int8 A read in place stays vpdpbusd's signed operand and the tile flips B
  // into the unsigned domain (B'' = B' + 128).
  const bool a_in_place = ReadsAInPlace(K, b.isa);
  OCTET_CHECK(finish == nullptr || FinishesInTile(K, b.isa),
              "internal: int8 GEMM finishes in the tile only with K in one k block");
  const bool b_unsigned = a_in_place && A.is_signed;
  const TileFn tile = a_in_place ? TileInPlaceA(A.is_signed) : TileFnFor(b.isa);

  Scratch& sc = ThreadScratch();
  if (!a_in_place) sc.packed_a.resize(M * kg * gemm::kGroup);
  sc.row_neg_za.resize(M);
  sc.row_neg_sum.resize(M);
  const int64_t padded_n = n_panels * s.nr;  // b.col_sums is 0 past N
  sc.col_term.resize(padded_n);
  sc.col_zb.resize(padded_n);

  // Column terms in the stored B domain (uint8 B is stored as B - 128), in plain
  // loops the compiler vectorizes (a GEMV has little else to do per column); a
  // multiply per column only for per-column zero points (SSE2 has no 32-bit one).
  // Unsigned arithmetic: wraps like the kernels, never undefined.
  const int32_t b_shift = (b.b_signed ? 0 : 128) - (b_unsigned ? 128 : 0);
  const auto k32 = static_cast<uint32_t>(K);
  const uint32_t col_sum_shift = b_unsigned ? k32 * 128u : 0u;  // colsum'' = colsum' + 128 K
  const int32_t* col_sums = b.col_sums.data();
  int32_t *col_zb = sc.col_zb.data(), *col_term = sc.col_term.data();
  bool b_zero_uniform = true;  // one zero point for all of B
  if (b_zero && b_zero_per_col) {
    int32_t differences = 0;
    for (int64_t n = 0; n < N; ++n) {
      col_zb[n] = b_zero[n] - b_shift;
      col_term[n] = static_cast<int32_t>(static_cast<uint32_t>(col_sums[n]) + col_sum_shift -
                                         k32 * static_cast<uint32_t>(col_zb[n]));
      differences |= b_zero[n] ^ b_zero[0];
    }
    b_zero_uniform = differences == 0;
  } else {
    const int32_t zb = (b_zero ? b_zero[0] : 0) - b_shift;
    const uint32_t k_zb = k32 * static_cast<uint32_t>(zb);
    std::fill_n(col_zb, N, zb);
    for (int64_t n = 0; n < N; ++n)
      col_term[n] = static_cast<int32_t>(static_cast<uint32_t>(col_sums[n]) + col_sum_shift - k_zb);
  }
  std::fill(col_zb + N, col_zb + padded_n, 0);
  std::fill(col_term + N, col_term + padded_n, 0);

  // Zero points in the A domain. With one for all of A and one for all of B (per-column
  // ones that are all equal count, e.g. all 0 for symmetric int8 weights) and several
  // row panels (each column's term is reused), the tiles add the correction as
  // col_offset[n] + row_offset[m], which saves two multiplies per output vector.
  const int32_t a_shift =
      !a_in_place && A.is_signed == s.a_unsigned ? (A.is_signed ? 128 : -128) : 0;
  const uint32_t neg_za_tensor = 0u - static_cast<uint32_t>((a_zero ? a_zero[0] : 0) + a_shift);
  const bool per_tensor = !(a_zero && a_zero_per_row) && b_zero_uniform && m_panels > 1;
  if (per_tensor) {
    sc.row_offset.resize(M);
    sc.col_offset.resize(padded_n);
    for (int64_t n = 0; n < padded_n; ++n)
      sc.col_offset[n] =
          static_cast<int32_t>(neg_za_tensor * static_cast<uint32_t>(sc.col_term[n]));
  }

  // The row sums only meet B's zero point: with zB' = 0 for every column (uint8
  // A against symmetric int8 weights) an A read in place needs no pass for them.
  const bool row_sums_needed = !(b_zero_uniform && col_zb[0] == 0);
  // Pack A (parallel over row panels) with its row sums and the row terms.
  ParallelFor(pool, m_panels, [&](int64_t p0, int64_t p1) {
    const int64_t r0 = p0 * s.mr, r1 = std::min(p1 * s.mr, M);
    if (a_in_place && !row_sums_needed) {
      std::fill(sc.row_neg_sum.data() + r0, sc.row_neg_sum.data() + r1, 0);
    } else if (a_in_place) {
      RowSumsInPlaceA(A, r0, r1, K, sc.row_neg_sum.data());
    } else {
      gemm::PackA(A, r0, r1, K, s, sc.packed_a.data(), sc.row_neg_sum.data());
    }
    for (int64_t m = r0; m < r1; ++m) {
      const int32_t za = (a_zero ? a_zero[a_zero_per_row ? m : 0] : 0) + a_shift;
      sc.row_neg_za[m] = static_cast<int32_t>(0u - static_cast<uint32_t>(za));
      sc.row_neg_sum[m] = static_cast<int32_t>(0u - static_cast<uint32_t>(sc.row_neg_sum[m]));
      if (per_tensor) {
        sc.row_offset[m] = static_cast<int32_t>(static_cast<uint32_t>(sc.row_neg_sum[m]) *
                                                static_cast<uint32_t>(sc.col_zb[0]));
      }
    }
  });

  // One row panel reuses nothing across k blocks, so it takes K in one pass.
  const int64_t kc = m_panels == 1 ? kg : kKcGroups;
  const int64_t mc = std::max<int64_t>(1, kMcRows / s.mr);  // panels per block
  const int64_t m_blocks = (m_panels + mc - 1) / mc;
  // Column panels per block: kNcCols wide, narrower when that leaves too few blocks to
  // share out evenly (N=384 would split 8 + 4 panels over two threads). Integer sums are
  // exact, so the blocking never changes a result.
  int64_t nc = std::max<int64_t>(1, kNcCols / s.nr);
  if (const int threads = pool ? pool->num_threads() : 1; threads > 1) {
    const int64_t wanted_n_blocks = (4 * threads + m_blocks - 1) / m_blocks;
    nc = std::clamp<int64_t>((n_panels + wanted_n_blocks - 1) / wanted_n_blocks, 1, nc);
  } else if (m_panels == 1 && epilogue) {
    // One row panel reuses no B panel, so one thread takes every column in one
    // work item: one epilogue call per product instead of one per 256 columns.
    nc = n_panels;
  }
  const int64_t n_blocks = (n_panels + nc - 1) / nc;
  const int8_t* packed_b = b.data.data<int8_t>();
  // The epilogue's block buffer: whole panels (so right-edge tiles write into it
  // directly), rows a cache line longer than the block to spread them over L1 sets.
  const int64_t block_ld = nc * s.nr + kCacheLine / static_cast<int64_t>(sizeof(int32_t));

  ParallelFor(pool, m_blocks * n_blocks, [&](int64_t t0, int64_t t1) {
    alignas(64) int32_t edge[gemm::kMaxRows * gemm::kMaxCols];
    int32_t* block = nullptr;
    if (epilogue) {
      thread_local std::vector<int32_t> block_storage;
      block_storage.resize(std::min(mc * s.mr, M) * block_ld + kCacheLine / sizeof(int32_t));
      block = AlignToCacheLine(block_storage.data());
    }
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t mp0 = (t / n_blocks) * mc, mp1 = std::min(mp0 + mc, m_panels);
      const int64_t np0 = (t % n_blocks) * nc, np1 = std::min(np0 + nc, n_panels);
      const int64_t row0 = mp0 * s.mr, col0 = np0 * s.nr;
      for (int64_t g0 = 0; g0 < kg; g0 += kc) {
        const int64_t groups = std::min(kc, kg - g0);
        const bool first = g0 == 0, last = g0 + groups == kg;
        for (int64_t np = np0; np < np1; ++np) {
          const int64_t n0 = np * s.nr, cols = std::min<int64_t>(s.nr, N - n0);
          for (int64_t mp = mp0; mp < mp1; ++mp) {
            const int64_t m0 = mp * s.mr;
            const int rows = static_cast<int>(std::min<int64_t>(s.mr, M - m0));
            TileArgs args;
            if (a_in_place) {
              args.a = static_cast<const uint8_t*>(A.data) + m0 * A.ld + g0 * gemm::kGroup;
              args.a_ld = A.ld;
            } else {
              args.a = sc.packed_a.data() + (m0 * kg + g0 * rows) * gemm::kGroup;
            }
            args.b = packed_b + (np * kg + g0) * s.nr * gemm::kGroup;
            args.k_groups = groups;
            args.accumulate = !first;
            args.row_neg_za = last && !per_tensor ? sc.row_neg_za.data() + m0 : nullptr;
            args.row_neg_sum = sc.row_neg_sum.data() + m0;
            args.col_term = sc.col_term.data() + n0;
            args.col_zb = sc.col_zb.data() + n0;
            if (last && per_tensor) {
              args.col_offset = sc.col_offset.data() + n0;
              args.row_offset = sc.row_offset.data() + m0;
            }
            if (finish != nullptr) {
              const gemm::TileFinish tile_finish = FinishAt(*finish, m0, n0, cols);
              args.finish = &tile_finish;
              tile(rows, args);
              continue;
            }
            if (block != nullptr || cols == s.nr) {
              args.c = block ? block + (m0 - row0) * block_ld + (n0 - col0) : C + m0 * ldc + n0;
              args.ldc = block ? block_ld : ldc;
              tile(rows, args);
              continue;
            }
            // Right edge of C: the kernel writes whole panels, so go through a buffer.
            int32_t* c = C + m0 * ldc + n0;
            args.c = edge;
            args.ldc = s.nr;
            if (!first) {
              for (int r = 0; r < rows; ++r) std::copy_n(c + r * ldc, cols, edge + r * s.nr);
            }
            tile(rows, args);
            for (int r = 0; r < rows; ++r) std::copy_n(edge + r * s.nr, cols, c + r * ldc);
          }
        }
      }
      if (block != nullptr) {
        (*epilogue)(row0, std::min(mp1 * s.mr, M) - row0, col0, std::min(np1 * s.nr, N) - col0,
                    block, block_ld);
      }
    }
  });
}

}  // namespace

void GemmS32(int64_t M, const Int8Operand& A, const int32_t* a_zero, bool a_zero_per_row,
             const PackedB& b, const int32_t* b_zero, bool b_zero_per_col, int32_t* C, int64_t ldc,
             ThreadPool* pool) {
  Gemm(M, A, a_zero, a_zero_per_row, b, b_zero, b_zero_per_col, C, ldc, pool, nullptr);
}

void GemmS32Blocks(int64_t M, const Int8Operand& A, const int32_t* a_zero, bool a_zero_per_row,
                   const PackedB& b, const int32_t* b_zero, bool b_zero_per_col, ThreadPool* pool,
                   const GemmBlockFn& epilogue) {
  Gemm(M, A, a_zero, a_zero_per_row, b, b_zero, b_zero_per_col, nullptr, 0, pool, &epilogue);
}

namespace {

// The product finished into `out` by requantize.h's epilogue for `Params`
// (RequantizeS32 or ScaleS32ToFloat): in the tiles' registers when
// FinishesInTile, else on each block from GemmS32Blocks.
template <typename Params, typename Out>
void GemmFinished(int64_t M, const Int8Operand& A, const int32_t* a_zero, bool a_zero_per_row,
                  const PackedB& b, const int32_t* b_zero, bool b_zero_per_col,
                  const Params& params, Out* out, int64_t ld_out, ThreadPool* pool) {
  OCTET_CHECK(ld_out >= b.N, "int8 GEMM: output leading dimension ", ld_out, " < N=", b.N);
  if (FinishesInTile(b.K, b.isa)) {
    const gemm::TileFinish finish = FinishFor(params, out, ld_out);
    Gemm(M, A, a_zero, a_zero_per_row, b, b_zero, b_zero_per_col, nullptr, 0, pool, nullptr,
         &finish);
    return;
  }
  const GemmBlockFn epilogue = [&](int64_t row0, int64_t rows, int64_t col0, int64_t cols,
                                   const int32_t* acc, int64_t ld_acc) {
    Out* block_out = out + row0 * ld_out + col0;
    if constexpr (std::is_same_v<Params, RequantizeParams>) {
      RequantizeS32(acc, ld_acc, rows, cols, ColumnsFrom(params, col0), block_out, ld_out, b.isa);
    } else {
      ScaleS32ToFloat(acc, ld_acc, rows, cols, ColumnsFrom(params, col0), block_out, ld_out, b.isa);
    }
  };
  Gemm(M, A, a_zero, a_zero_per_row, b, b_zero, b_zero_per_col, nullptr, 0, pool, &epilogue);
}

}  // namespace

void GemmS32Requantized(int64_t M, const Int8Operand& A, const int32_t* a_zero, bool a_zero_per_row,
                        const PackedB& b, const int32_t* b_zero, bool b_zero_per_col,
                        const RequantizeParams& params, void* out, int64_t ld_out,
                        ThreadPool* pool) {
  CheckRequantizeParams(params, "int8 GEMM");
  GemmFinished(M, A, a_zero, a_zero_per_row, b, b_zero, b_zero_per_col, params,
               static_cast<uint8_t*>(out), ld_out, pool);
}

void GemmS32ToFloat(int64_t M, const Int8Operand& A, const int32_t* a_zero, bool a_zero_per_row,
                    const PackedB& b, const int32_t* b_zero, bool b_zero_per_col,
                    const FloatOutputParams& params, float* out, int64_t ld_out, ThreadPool* pool) {
  GemmFinished(M, A, a_zero, a_zero_per_row, b, b_zero, b_zero_per_col, params, out, ld_out, pool);
}

namespace gemm {

TileFn TileFnFor(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return gemm::TileScalar;
#if defined(__x86_64__) || defined(_M_X64)
    case Isa::kAvx2:
      return gemm::TileAvx2;
    case Isa::kAvxVnni:
      return gemm::TileAvxVnni;
    case Isa::kAvx512Vnni:
      return gemm::TileAvx512Vnni;
#endif
#if defined(__aarch64__)
    case Isa::kNeonDot:
      return gemm::TileNeonDot;
#endif
    default:
      break;
  }
  Fail("int8 kernels: instruction set ", IsaName(isa), " is not built into this binary");
}

}  // namespace gemm

}  // namespace octet
