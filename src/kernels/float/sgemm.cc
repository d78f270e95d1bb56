#include "kernels/float/sgemm.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/float/sgemm_kernels.h"

namespace octet {

namespace {

struct PathShape {
  int mr, nr;
  const sgemm::MicroKernel* kernels;  // kernels[R - 1] computes R rows
  sgemm::PanelTransposer transpose;   // full B panels from B's transpose; null: element-wise
};

// Scalar fallback with the same fma chain as the vector kernels.
template <int kRows>
void MicroKernelScalar(int64_t kc, const float* a, int64_t a_row_step, int64_t a_k_step,
                       const float* b, int64_t b_k_step, float* c, int64_t ldc, bool accumulate) {
  constexpr int kCols = sgemm::kScalarCols;
  float acc[kRows][kCols];
  for (int i = 0; i < kRows; ++i)
    for (int j = 0; j < kCols; ++j) acc[i][j] = accumulate ? c[i * ldc + j] : 0.f;
  for (int64_t p = 0; p < kc; ++p, a += a_k_step, b += b_k_step)
    for (int i = 0; i < kRows; ++i)
      for (int j = 0; j < kCols; ++j) acc[i][j] = std::fma(a[i * a_row_step], b[j], acc[i][j]);
  for (int i = 0; i < kRows; ++i)
    for (int j = 0; j < kCols; ++j) c[i * ldc + j] = acc[i][j];
}

constexpr sgemm::MicroKernel kScalarKernels[sgemm::kScalarRows] = {
    MicroKernelScalar<1>, MicroKernelScalar<2>, MicroKernelScalar<3>, MicroKernelScalar<4>};

PathShape ShapeFor(SgemmPath path) {
  switch (path) {
#if defined(__x86_64__) || defined(_M_X64)
    case SgemmPath::kAvx512:
      return {sgemm::kAvx512Rows, sgemm::kAvx512Cols, sgemm::kAvx512Kernels,
              sgemm::TransposePanelAvx512};
    case SgemmPath::kAvx2:
      return {sgemm::kAvx2Rows, sgemm::kAvx2Cols, sgemm::kAvx2Kernels, sgemm::TransposePanelAvx2};
#endif
    default:
      return {sgemm::kScalarRows, sgemm::kScalarCols, kScalarKernels, nullptr};
  }
}

// The largest tile of any path (the edge-tile scratch).
constexpr int kMaxTile = sgemm::kAvx512Rows * sgemm::kAvx512Cols;
static_assert(kMaxTile >= sgemm::kAvx2Rows * sgemm::kAvx2Cols &&
              kMaxTile >= sgemm::kScalarRows * sgemm::kScalarCols);

// k steps per pass over a B panel: a 32-column panel of 256 k is 32 KiB (L1).
constexpr int64_t kBlockK = 256;
// Rows of A (in floats) one work item keeps hot in L2 per k block, and columns of B.
constexpr int64_t kBlockRows = 144, kBlockCols = 1024;
// Below this many multiply-adds the pool's hand-off costs more than it saves.
constexpr int64_t kParallelMinMacs = int64_t{1} << 17;

std::shared_ptr<float> AllocateFloats(int64_t count) {
  // One spare line so that the size is never 0 and is a multiple of 64 bytes.
  const size_t bytes = ((static_cast<size_t>(count) * sizeof(float) + 63) / 64) * 64 + 64;
  float* p = static_cast<float*>(std::aligned_alloc(64, bytes));
  OCTET_CHECK(p != nullptr, "out of memory allocating ", bytes, " bytes for a float GEMM");
  return std::shared_ptr<float>(p, [](float* q) { std::free(q); });
}

// Whether n work items of `work` multiply-adds in all go to the pool.
bool Splits(ThreadPool* pool, int64_t n, int64_t work) {
  return pool && pool->num_threads() > 1 && n > 1 && work >= kParallelMinMacs;
}

void ForRange(ThreadPool* pool, int64_t n, int64_t work,
              const std::function<void(int64_t, int64_t)>& fn) {
  if (Splits(pool, n, work)) {
    pool->ParallelFor(n, fn);
  } else if (n > 0) {
    fn(0, n);
  }
}

// One full panel of kLines rows (row stride `stride`) as K groups of kLines values: the
// row pointers stay in registers and the loop over the panel's rows unrolls.
template <int kLines>
void PackLines(const float* src, int64_t stride, int64_t K, float* out) {
  const float* rows[kLines];
  for (int r = 0; r < kLines; ++r) rows[r] = src + r * stride;
  for (int64_t p = 0; p < K; ++p, out += kLines)
    for (int r = 0; r < kLines; ++r) out[r] = rows[r][p];
}

// Packs `rows` lines of length K into panels of `panel` lines, each K x panel.
// Line r, element p is src[r * row_stride + p * elem_stride]: A's rows, B's
// columns, or B's columns read from B's transpose (elem_stride 1).
SgemmPacked Pack(const float* src, int64_t rows, int64_t K, int64_t row_stride, int64_t elem_stride,
                 SgemmPath path, bool is_a, ThreadPool* pool) {
  const PathShape shape = ShapeFor(path);
  SgemmPacked packed;
  packed.path = path;
  packed.rows = rows;
  packed.K = K;
  packed.panel = is_a ? shape.mr : shape.nr;
  const int64_t width = packed.panel, panels = (rows + width - 1) / width;
  packed.data = AllocateFloats(panels * K * width);
  float* dst = packed.data.get();
  ForRange(pool, panels, rows * K * 64, [&](int64_t begin, int64_t end) {
    for (int64_t q = begin; q < end; ++q) {
      float* out = dst + q * K * width;
      const int64_t first = q * width, valid = std::min(width, rows - first);
      if (elem_stride == 1) {  // A, or B from its transpose: gather one k across the lines
        const float* lines = src + first * row_stride;
        if (valid == width && !is_a && shape.transpose) {
          shape.transpose(lines, row_stride, K, out);
        } else if (valid == width && width == sgemm::kAvx512Rows) {
          PackLines<sgemm::kAvx512Rows>(lines, row_stride, K, out);
        } else if (valid == width && width == sgemm::kAvx2Rows) {
          PackLines<sgemm::kAvx2Rows>(lines, row_stride, K, out);
        } else {
          for (int64_t p = 0; p < K; ++p, out += width) {
            for (int64_t r = 0; r < valid; ++r) out[r] = src[(first + r) * row_stride + p];
            for (int64_t r = valid; r < width; ++r) out[r] = 0.f;
          }
        }
      } else {  // B: lines are columns, each k is a contiguous run
        for (int64_t p = 0; p < K; ++p, out += width) {
          std::memcpy(out, src + p * elem_stride + first, valid * sizeof(float));
          for (int64_t r = valid; r < width; ++r) out[r] = 0.f;
        }
      }
    }
  });
  return packed;
}

void CheckPacked(const SgemmPacked& p, int64_t rows, int64_t K, SgemmPath path, bool is_a) {
  const PathShape shape = ShapeFor(path);
  OCTET_CHECK(
      p.rows == rows && p.K == K && p.path == path && p.panel == (is_a ? shape.mr : shape.nr),
      "float GEMM: packed ", is_a ? "A" : "B", " is ", p.rows, "x", p.K, " for ",
      SgemmPathName(p.path), ", but the product needs ", rows, "x", K, " for ",
      SgemmPathName(path));
}

}  // namespace

SgemmPath SgemmPathFor(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
    case Isa::kAvx512Vnni:
      return SgemmPath::kAvx512;
    case Isa::kAvx2:
    case Isa::kAvxVnni:
      return SgemmPath::kAvx2;
    default:
      return SgemmPath::kScalar;
  }
}

const char* SgemmPathName(SgemmPath path) {
  switch (path) {
    case SgemmPath::kAvx512:
      return "avx512";
    case SgemmPath::kAvx2:
      return "avx2";
    default:
      return "scalar";
  }
}

SgemmPacked SgemmPackA(const float* a, int64_t M, int64_t K, int64_t lda, SgemmPath path) {
  OCTET_CHECK(M >= 0 && K >= 0 && lda >= K, "float GEMM: cannot pack A of ", M, "x", K,
              " with leading dimension ", lda);
  return Pack(a, M, K, lda, 1, path, true, nullptr);
}

SgemmPacked SgemmPackB(const float* b, int64_t K, int64_t N, int64_t ldb, SgemmPath path) {
  OCTET_CHECK(N >= 0 && K >= 0 && ldb >= N, "float GEMM: cannot pack B of ", K, "x", N,
              " with leading dimension ", ldb);
  return Pack(b, N, K, 1, ldb, path, false, nullptr);
}

SgemmPacked SgemmAllocatePackedB(int64_t K, int64_t N, SgemmPath path) {
  OCTET_CHECK(N >= 0 && K >= 0, "float GEMM: cannot make a packed B of ", K, "x", N);
  SgemmPacked packed;
  packed.path = path;
  packed.rows = N;
  packed.K = K;
  packed.panel = ShapeFor(path).nr;
  const int64_t count = (N + packed.panel - 1) / packed.panel * packed.panel * K;
  packed.data = AllocateFloats(count);
  std::fill_n(packed.data.get(), count, 0.f);
  return packed;
}

int SgemmPackedBPanel(SgemmPath path) { return ShapeFor(path).nr; }

SgemmPacked SgemmPackedBView(const float* panels, int64_t K, int64_t N, SgemmPath path,
                             int64_t panel_stride) {
  SgemmPacked packed;
  packed.path = path;
  packed.rows = N;
  packed.K = K;
  packed.panel = ShapeFor(path).nr;
  OCTET_CHECK(N >= 0 && K >= 0 && (panel_stride == 0 || panel_stride >= K * packed.panel),
              "float GEMM: cannot view a packed B of ", K, "x", N, " with panel stride ",
              panel_stride);
  packed.panel_stride = panel_stride;
  // Not owned: an empty owner aliasing the panels.
  packed.data = std::shared_ptr<float>(std::shared_ptr<float>(), const_cast<float*>(panels));
  return packed;
}

SgemmPacked SgemmPackBTransposed(const float* b_t, int64_t K, int64_t N, int64_t ld,
                                 SgemmPath path) {
  OCTET_CHECK(N >= 0 && K >= 0 && ld >= K, "float GEMM: cannot pack B of ", K, "x", N,
              " from its transpose with leading dimension ", ld);
  return Pack(b_t, N, K, ld, 1, path, false, nullptr);
}

void Sgemm(int64_t M, int64_t N, int64_t K, const SgemmOperand& a, const SgemmOperand& b, float* c,
           int64_t ldc, ThreadPool* pool, SgemmPath row_major_path) {
  OCTET_CHECK(M >= 0 && N >= 0 && K >= 0 && ldc >= N, "float GEMM: invalid sizes M=", M, " N=", N,
              " K=", K, " ldc=", ldc);
  OCTET_CHECK(a.packed || a.ld >= K, "float GEMM: A's leading dimension ", a.ld, " < K=", K);
  OCTET_CHECK(b.packed || b.ld >= N, "float GEMM: B's leading dimension ", b.ld, " < N=", N);
  const SgemmPath path = a.packed ? a.packed->path : b.packed ? b.packed->path : row_major_path;
  if (a.packed) CheckPacked(*a.packed, M, K, path, true);
  if (b.packed) CheckPacked(*b.packed, N, K, path, false);
  if (M == 0 || N == 0) return;
  if (K == 0) {
    for (int64_t i = 0; i < M; ++i) std::fill(c + i * ldc, c + i * ldc + N, 0.f);
    return;
  }
  const int64_t macs = M * N * K;
  const PathShape shape = ShapeFor(path);
  const int64_t mr = shape.mr, nr = shape.nr;
  const int64_t m_panels = (M + mr - 1) / mr, n_panels = (N + nr - 1) / nr;

  // Work items are blocks of row panels x column panels. Every C element's fma
  // chain is the same however the blocks fall, so the split may follow the
  // thread count freely: at least 4 items per thread when the shape allows.
  int64_t row_blocks = (m_panels * mr + kBlockRows - 1) / kBlockRows;
  int64_t col_blocks = (n_panels * nr + kBlockCols - 1) / kBlockCols;
  const int64_t threads = pool ? pool->num_threads() : 1;
  while (threads > 1 && row_blocks * col_blocks < 4 * threads &&
         (col_blocks < n_panels || row_blocks < m_panels)) {
    if (col_blocks < n_panels) {
      ++col_blocks;
    } else {
      ++row_blocks;
    }
  }
  const int64_t rows_per_block = (m_panels + row_blocks - 1) / row_blocks;
  const int64_t cols_per_block = (n_panels + col_blocks - 1) / col_blocks;
  row_blocks = (m_panels + rows_per_block - 1) / rows_per_block;
  col_blocks = (n_panels + cols_per_block - 1) / cols_per_block;
  const bool parallel = Splits(pool, row_blocks * col_blocks, macs);

  // K in equal passes of at most kBlockK (576 = 3 x 192, not 256 + 256 + 64: a short
  // last pass pays the tiles' loads and stores for few k).
  const int64_t k_passes = (K + kBlockK - 1) / kBlockK, k_step = (K + k_passes - 1) / k_passes;

  // Row-major operands are read in place, A up to mr rows and B nr columns at a
  // time (A: the kernel broadcasts each element, so packing would only copy it; a
  // last panel of fewer rows takes the kernel of that many rows; B: packing pays
  // only when a k block of a panel is reused by many row panels). A last partial
  // column panel is either packed, padded with zeros, or, on one thread with one
  // k block, shifted back to end at the matrix edge: it then recomputes a few
  // columns of the previous panel with the same chains, so the same bits are
  // stored twice, and nothing is copied.
  const bool single_pass = K <= kBlockK && !parallel;
  const bool b_in_place = !b.packed && (K <= kBlockK || M <= kBlockRows);
  const bool b_shift = b_in_place && single_pass && N > nr && N % nr != 0;
  const int64_t b_full = !b_in_place ? 0 : b_shift ? n_panels : N / nr;
  SgemmPacked b_local;
  if (b_full * nr < N && !b.packed)
    b_local = Pack(b.data + b_full * nr, N - b_full * nr, K, 1, b.ld, path, false,
                   b_full == 0 && macs >= kParallelMinMacs ? pool : nullptr);
  const float* b_data = b.packed ? b.packed->data.get() : b_local.data.get();
  const int64_t b_panel_stride =
      b.packed && b.packed->panel_stride ? b.packed->panel_stride : K * nr;

  auto run_items = [&](int64_t begin, int64_t end) {
    alignas(64) float edge[kMaxTile] = {};
    for (int64_t item = begin; item < end; ++item) {
      const int64_t i0 = item / col_blocks * rows_per_block,
                    j0 = item % col_blocks * cols_per_block;
      const int64_t i1 = std::min(m_panels, i0 + rows_per_block);
      const int64_t j1 = std::min(n_panels, j0 + cols_per_block);
      for (int64_t pc = 0; pc < K; pc += k_step) {
        const int64_t kc = std::min(k_step, K - pc);
        const bool accumulate = pc > 0;
        for (int64_t j = j0; j < j1; ++j) {
          const int64_t first_col = j < b_full ? std::min(j * nr, N - nr) : j * nr;
          const int64_t cols = std::min(nr, N - first_col);
          const float* b_panel = j < b_full ? b.data + pc * b.ld + first_col
                                 : b.packed ? b_data + j * b_panel_stride + pc * nr
                                            : b_data + pc * nr;
          const int64_t b_k_step = j < b_full ? b.ld : nr;
          for (int64_t i = i0; i < i1; ++i) {
            const int64_t first_row = i * mr, rows = std::min(mr, M - first_row);
            const float* a_panel = a.packed ? a.packed->data.get() + (i * K + pc) * mr
                                            : a.data + first_row * a.ld + pc;
            const int64_t a_row_step = a.packed ? 1 : a.ld, a_k_step = a.packed ? mr : 1;
            const sgemm::MicroKernel kernel = shape.kernels[rows - 1];
            float* tile = c + first_row * ldc + first_col;
            if (cols == nr) {
              kernel(kc, a_panel, a_row_step, a_k_step, b_panel, b_k_step, tile, ldc, accumulate);
              continue;
            }
            // An edge tile runs on a full-size copy; only its valid part is kept.
            if (accumulate)
              for (int64_t r = 0; r < rows; ++r)
                std::memcpy(edge + r * nr, tile + r * ldc, cols * sizeof(float));
            kernel(kc, a_panel, a_row_step, a_k_step, b_panel, b_k_step, edge, nr, accumulate);
            for (int64_t r = 0; r < rows; ++r)
              std::memcpy(tile + r * ldc, edge + r * nr, cols * sizeof(float));
          }
        }
      }
    }
  };
  if (parallel) {
    pool->ParallelFor(row_blocks * col_blocks, run_items);
  } else {
    run_items(0, row_blocks * col_blocks);
  }
}

}  // namespace octet
