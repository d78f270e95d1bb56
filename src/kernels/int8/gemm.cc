#include "kernels/int8/gemm.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"

namespace octet {

namespace {

using gemm::BDomain;
using gemm::MicroKernel;
using gemm::TileArgs;

// Fixed blocking (Goto / van de Geijn), constants of the kernel so the work
// split never depends on the thread count. The k block is the kernel's
// (kc_groups). A work item is at most kMcRows rows x kNcCols columns.
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

// The smallest block size that still covers `count` panels with the fewest
// blocks of at most `largest`, so the last block is no sliver (22 panels in
// blocks of at most 21: 11 + 11).
int64_t EvenBlock(int64_t count, int64_t largest) {
  const int64_t blocks = (count + largest - 1) / largest;
  return (count + blocks - 1) / blocks;
}

bool SameLayout(const MicroKernel& a, const MicroKernel& b) {
  return a.nr == b.nr && a.k_group == b.k_group && a.b_domain == b.b_domain &&
         a.b_paired == b.b_paired;
}

}  // namespace

const gemm::MicroKernel& GemmPlan::KernelFor(int64_t K) const {
  if (in_place != nullptr && K > 0 && K % in_place->k_group == 0) return *in_place;
  return *packed;
}

GemmPlan PlanGemm(Isa isa, bool a_signed) {
  OCTET_CHECK(IsaSupported(isa), "int8 GEMM: instruction set ", IsaName(isa),
              " cannot run here: ", IsaUnsupportedReason(isa));
  GemmPlan plan;
  plan.a_signed = a_signed;
  for (const MicroKernel& k : gemm::MicroKernels()) {
    if (k.isa != isa || k.b_domain != BDomain::kSigned8) continue;
    if (!k.a_row_major && plan.packed == nullptr) plan.packed = &k;
    if (k.a_row_major && k.a_signed == a_signed && plan.in_place == nullptr) plan.in_place = &k;
  }
  OCTET_CHECK(plan.packed != nullptr, "int8 GEMM: no micro-kernel for instruction set ",
              IsaName(isa), " in this binary");
  return plan;
}

void Gemm(const GemmPlan& plan, int64_t M, const Int8Operand& A, const GemmZeroPoints& zero,
          const PackedB& b, const Epilogue& epilogue, const OutputColumns& out, ThreadPool* pool) {
  const int64_t K = b.K, N = b.N;
  OCTET_CHECK(M >= 0, "int8 GEMM: negative M=", M);
  OCTET_CHECK(K <= kGemmMaxK, "int8 GEMM: K=", K, " exceeds ", kGemmMaxK,
              ", the largest K whose int32 accumulation is exact for all 8-bit inputs");
  OCTET_CHECK(A.ld >= K, "int8 GEMM: A leading dimension ", A.ld, " < K=", K);
  CheckOutputColumns(out, N, "int8 GEMM");
  OCTET_CHECK(A.is_signed == plan.a_signed, "internal: int8 GEMM planned for ",
              plan.a_signed ? "int8" : "uint8", " A, given ", A.is_signed ? "int8" : "uint8");
  OCTET_CHECK(b.kernel != nullptr && SameLayout(*b.kernel, *plan.packed),
              "internal: int8 GEMM: B was packed for another plan");
  if (M == 0 || N == 0) return;
  CheckEpilogue(epilogue, "int8 GEMM");
  for (int64_t i = 0; i < out.count; ++i)
    OCTET_CHECK(out.ranges[i].data != nullptr, "int8 GEMM: the output is null");
  const Isa isa = plan.packed->isa;
  if (K == 0) {  // every sum is empty: 0
    const std::vector<int32_t> zeros(N, 0);
    for (int64_t i = 0; i < out.count; ++i) {
      const ColumnRange& r = out.ranges[i];
      const int64_t end = i + 1 < out.count ? out.ranges[i + 1].first : N;
      ApplyEpilogueBlock(epilogue, zeros.data(), 0, 0, M, r.first, end - r.first, r.data, r.ld,
                         isa);
    }
    return;
  }
  OCTET_CHECK(A.data != nullptr, "int8 GEMM: A data is null");
  const MicroKernel& kernel = plan.KernelFor(K);
  const int mr = kernel.mr, nr = kernel.nr, group = kernel.k_group;
  OCTET_CHECK(out.count == 1 || kOutputColumnsAlign % nr == 0, "internal: int8 GEMM: ", nr,
              "-column panels would cross output column ranges");
  const int64_t kg = b.k_groups;
  const int64_t m_panels = (M + mr - 1) / mr, n_panels = (N + nr - 1) / nr;
  if (M * K * N < kGemmMinParallelMacs) pool = nullptr;
  const bool a_in_place = kernel.a_row_major;
  const int64_t a_bytes = gemm::ADomainBytes(kernel.a_domain);

  Scratch& sc = ThreadScratch();
  if (!a_in_place) sc.packed_a.resize(M * kg * group * a_bytes);
  sc.row_neg_za.resize(M);
  sc.row_neg_sum.resize(M);
  const int64_t padded_n = n_panels * nr;  // b.col_sums is 0 past N
  sc.col_term.resize(padded_n);
  sc.col_zb.resize(padded_n);

  // The zero-point algebra, once: with A' = A + sa and B' = B + sb the domains
  // the kernel multiplies,
  //   sum (A - zA)(B - zB) = S - zA' (colsum B' - K zB') - zB' rowsum A'
  // (zA' = zA + sa, zB' = zB + sb). Column terms first, in plain loops the
  // compiler vectorizes; unsigned arithmetic wraps like the kernels.
  const int32_t sb = gemm::BShift(kernel, b.b_signed);
  const auto k32 = static_cast<uint32_t>(K);
  // b.col_sums are of the stored bytes; a kernel that flips them adds 128 per k.
  const uint32_t col_sum_shift = kernel.b_flip ? k32 * 128u : 0u;
  const int32_t* col_sums = b.col_sums.data();
  int32_t *col_zb = sc.col_zb.data(), *col_term = sc.col_term.data();
  bool b_zero_uniform = true;  // one zero point for all of B
  if (zero.b && zero.b_per_column) {
    int32_t differences = 0;
    for (int64_t n = 0; n < N; ++n) {
      col_zb[n] = zero.b[n] + sb;
      col_term[n] = static_cast<int32_t>(static_cast<uint32_t>(col_sums[n]) + col_sum_shift -
                                         k32 * static_cast<uint32_t>(col_zb[n]));
      differences |= zero.b[n] ^ zero.b[0];
    }
    b_zero_uniform = differences == 0;
  } else {
    const int32_t zb = (zero.b ? zero.b[0] : 0) + sb;
    const uint32_t k_zb = k32 * static_cast<uint32_t>(zb);
    std::fill_n(col_zb, N, zb);
    for (int64_t n = 0; n < N; ++n)
      col_term[n] = static_cast<int32_t>(static_cast<uint32_t>(col_sums[n]) + col_sum_shift - k_zb);
  }
  std::fill(col_zb + N, col_zb + padded_n, 0);
  std::fill(col_term + N, col_term + padded_n, 0);

  // With one zero point for all of A and one for all of B (per-column ones that
  // are all equal count, e.g. all 0 for symmetric int8 weights) and several row
  // panels (each column's term is reused), the tiles add the correction as
  // col_offset[n] + row_offset[m], two multiplies fewer per output vector.
  const int32_t sa = gemm::AShift(kernel, A.is_signed);
  const uint32_t neg_za_tensor = 0u - static_cast<uint32_t>((zero.a ? zero.a[0] : 0) + sa);
  const bool per_tensor = !(zero.a && zero.a_per_row) && b_zero_uniform && m_panels > 1;
  if (per_tensor) {
    sc.row_offset.resize(M);
    sc.col_offset.resize(padded_n);
    for (int64_t n = 0; n < padded_n; ++n)
      sc.col_offset[n] = static_cast<int32_t>(neg_za_tensor * static_cast<uint32_t>(col_term[n]));
  }

  // The row sums only meet B's zero point: with zB' = 0 for every column (uint8
  // A against symmetric int8 weights) an A read in place needs no pass for them.
  const bool row_sums_needed = !(b_zero_uniform && col_zb[0] == 0);
  ParallelFor(pool, m_panels, [&](int64_t p0, int64_t p1) {
    const int64_t r0 = p0 * mr, r1 = std::min(p1 * mr, M);
    if (a_in_place && !row_sums_needed) {
      std::fill(sc.row_neg_sum.data() + r0, sc.row_neg_sum.data() + r1, 0);
    } else if (a_in_place) {
      kernel.row_sums(A.data, A.is_signed, A.ld, r0, r1, K, sc.row_neg_sum.data());
    } else {
      gemm::PackA(kernel, A.data, A.is_signed, A.ld, r0, r1, K, sc.packed_a.data(),
                  sc.row_neg_sum.data());
    }
    for (int64_t m = r0; m < r1; ++m) {
      const int32_t za = (zero.a ? zero.a[zero.a_per_row ? m : 0] : 0) + sa;
      sc.row_neg_za[m] = static_cast<int32_t>(0u - static_cast<uint32_t>(za));
      sc.row_neg_sum[m] = static_cast<int32_t>(0u - static_cast<uint32_t>(sc.row_neg_sum[m]));
      if (per_tensor) {
        sc.row_offset[m] = static_cast<int32_t>(static_cast<uint32_t>(sc.row_neg_sum[m]) *
                                                static_cast<uint32_t>(sc.col_zb[0]));
      }
    }
  });

  // One row panel reuses nothing across k blocks, so it takes K in one pass.
  const int64_t kc = m_panels == 1 ? kg : kernel.kc_groups;
  const bool k_blocks = kc < kg;  // the tiles keep partial sums between k blocks
  // Row panels per block: at most kMcRows rows, the panels shared evenly by the
  // blocks (128 rows of 6-row panels: 11 + 11 panels, not 21 + 1, which would
  // leave work items of two rows beside ones of 126).
  const int64_t mc = EvenBlock(m_panels, std::max<int64_t>(1, kMcRows / mr));
  const int64_t m_blocks = (m_panels + mc - 1) / mc;
  // Column panels per block: kNcCols wide, narrower when that leaves too few blocks to
  // share out evenly (N=384 would split 8 + 4 panels over two threads), the panels
  // shared evenly too.
  int64_t nc = std::max<int64_t>(1, kNcCols / nr);
  if (const int threads = pool ? pool->num_threads() : 1; threads > 1) {
    const int64_t wanted_n_blocks = (4 * threads + m_blocks - 1) / m_blocks;
    nc = std::clamp<int64_t>((n_panels + wanted_n_blocks - 1) / wanted_n_blocks, 1, nc);
  } else if (m_panels == 1) {
    nc = n_panels;  // one row panel reuses no B panel: one work item
  }
  nc = EvenBlock(n_panels, nc);
  const int64_t n_blocks = (n_panels + nc - 1) / nc;
  const int8_t* packed_b = b.data.data<int8_t>();
  // The partial sums' block: whole panels, rows a cache line longer than the
  // block to spread them over L1 sets.
  const int64_t block_ld = nc * nr + kCacheLine / static_cast<int64_t>(sizeof(int32_t));
  const int64_t out_size = epilogue.element_size();

  ParallelFor(pool, m_blocks * n_blocks, [&](int64_t t0, int64_t t1) {
    int32_t* block = nullptr;
    if (k_blocks) {
      thread_local std::vector<int32_t> block_storage;
      block_storage.resize(std::min(mc * mr, M) * block_ld + kCacheLine / sizeof(int32_t));
      block = AlignToCacheLine(block_storage.data());
    }
    for (int64_t t = t0; t < t1; ++t) {
      // Row blocks vary fastest: a thread's contiguous share of the items then
      // holds whole columns of blocks, so a short last row block is shared too.
      const int64_t mp0 = (t % m_blocks) * mc, mp1 = std::min(mp0 + mc, m_panels);
      const int64_t np0 = (t / m_blocks) * nc, np1 = std::min(np0 + nc, n_panels);
      const int64_t row0 = mp0 * mr, col0 = np0 * nr;
      for (int64_t g0 = 0; g0 < kg; g0 += kc) {
        const int64_t groups = std::min(kc, kg - g0);
        const bool first = g0 == 0, last = g0 + groups == kg;
        // One TileArgs for the k block, its per-tile fields set per tile.
        TileArgs args;
        args.a_ld = a_in_place ? A.ld : 0;
        args.k_groups = groups;
        args.accumulate = !first;
        args.last = last;
        if (k_blocks) args.partial_ld = block_ld;
        if (last) args.epilogue = &epilogue;
        for (int64_t np = np0; np < np1; ++np) {
          const int64_t n0 = np * nr;
          for (int64_t mp = mp0; mp < mp1; ++mp) {
            const int64_t m0 = mp * mr;
            const int rows = static_cast<int>(std::min<int64_t>(mr, M - m0));
            args.a = a_in_place ? static_cast<const uint8_t*>(A.data) + m0 * A.ld + g0 * group
                                : sc.packed_a.data() + (m0 * kg + g0 * rows) * group * a_bytes;
            args.b = packed_b + (np * kg + g0) * nr * group;
            if (k_blocks) args.partial = block + (m0 - row0) * block_ld + (n0 - col0);
            if (last) {
              args.row_neg_sum = sc.row_neg_sum.data() + m0;
              if (per_tensor) {
                args.col_offset = sc.col_offset.data() + n0;
                args.row_offset = sc.row_offset.data() + m0;
              } else {
                args.row_neg_za = sc.row_neg_za.data() + m0;
                args.col_term = col_term + n0;
                args.col_zb = col_zb + n0;
              }
              args.row0 = m0;
              args.col0 = n0;
              args.out = out.At(m0, n0, out_size);
              args.ld_out = out.Holding(n0).ld;
              args.cols = static_cast<int>(std::min<int64_t>(nr, N - n0));
            }
            kernel.tile(rows, args);
          }
        }
      }
    }
  });
}

}  // namespace octet
