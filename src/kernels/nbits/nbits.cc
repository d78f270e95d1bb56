#include "kernels/nbits/nbits.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/float/sgemm.h"
#include "kernels/nbits/nbits_kernels.h"

namespace octet {

namespace {

// ONNX Runtime's (MLAS) quantization of one value of an A block.
int32_t QuantizeActivation(float a, float inverse_scale) {
  const float v = a * inverse_scale;
  if (!(v >= -127.f && v <= 127.f)) return v > 0 ? 127 : (v < 0 ? -127 : 0);
  return static_cast<int32_t>(std::nearbyint(v));
}

}  // namespace

namespace nbits {

namespace {

// The statement the vector paths are tested against: plain loops in the
// contract's order.
void FloatPanelScalar(const PackedNBits& w, int64_t panel, int panels, int rows, const float* a,
                      int64_t lda, float* acc) {
  for (int i = 0; i < panels; ++i) {
    const PanelOperands op = OperandsOf(w, panel + i);
    float* acc_i = acc + i * kNBitsPanel;
    for (int r = 0; r < rows; ++r) std::fill_n(acc_i + r * kNBitsAccRow, kNBitsPanel, 0.f);
    for (int64_t k = 0; k < w.K; ++k) {
      const int64_t b = k / w.block_size;
      const int shift = (k & 1) * 4;
      for (int j = 0; j < kNBitsPanel; ++j) {
        const int q = (op.data[(k / 2) * op.data_stride + j] >> shift) & 15;
        const int64_t at = b * op.stride + j;
        const float zero = op.zero_codes ? op.zero_codes[at] : op.zero_points[at];
        const float wv = (static_cast<float>(q) - zero) * op.scales[at];
        for (int r = 0; r < rows; ++r)
          acc_i[r * kNBitsAccRow + j] = std::fma(a[r * lda + k], wv, acc_i[r * kNBitsAccRow + j]);
      }
    }
  }
}

void DequantizePanelScalar(const PackedNBits& w, int64_t panel, float* b, int64_t ldb) {
  const PanelOperands op = OperandsOf(w, panel);
  for (int64_t k = 0; k < w.K; ++k) {
    for (int j = 0; j < kNBitsPanel; ++j) {
      const int q = (op.data[(k / 2) * op.data_stride + j] >> (k & 1) * 4) & 15;
      const int64_t at = k / w.block_size * op.stride + j;
      const float zero = op.zero_codes ? op.zero_codes[at] : op.zero_points[at];
      b[k * ldb + j] = (static_cast<float>(q) - zero) * op.scales[at];
    }
  }
}

void Int8PanelScalar(const PackedNBits& w, int64_t panel, int panels, int rows,
                     const QuantizedRows& a, float* acc) {
  for (int i = 0; i < panels; ++i) {
    const PanelOperands op = OperandsOf(w, panel + i);
    float* acc_i = acc + i * kNBitsPanel;
    for (int r = 0; r < rows; ++r) std::fill_n(acc_i + r * kNBitsAccRow, kNBitsPanel, 0.f);
    for (int64_t b = 0; b < w.k_blocks; ++b) {
      const int64_t k1 = std::min(w.K, (b + 1) * w.block_size);
      for (int r = 0; r < rows; ++r) {
        for (int j = 0; j < kNBitsPanel; ++j) {
          int32_t dot = 0;
          for (int64_t k = b * w.block_size; k < k1; ++k) {
            const uint8_t byte = op.data[(k / 8) * op.data_stride + 4 * j + k % 4];
            dot += a.values[r * a.row_length + k] * ((byte >> (k % 8 / 4 * 4)) & 15);
          }
          const int64_t at = b * op.stride + j;
          dot -= op.zero_codes[at] * a.sums[r * w.k_blocks + b];
          const float s = a.scales[r * w.k_blocks + b] * op.scales[at];
          float& c = acc_i[r * kNBitsAccRow + j];
          c = std::fma(static_cast<float>(dot), s, c);
        }
      }
    }
  }
}

// Below this many multiply-adds the pool's hand-off costs more than it saves.
constexpr int64_t kParallelMinMacs = int64_t{1} << 18;

// From this many rows the kFloat product dequantizes each group of panels once
// and runs the float GEMM on it (the same fma chains), instead of unpacking the
// weights again for every kNBitsRows rows.
constexpr int64_t kGemmMinRows = 8;
// Work items per thread the float GEMM path aims for (rows are split to reach it).
constexpr int64_t kItemsPerThread = 4;

const PanelKernels& KernelsFor(Isa isa) {
#if defined(__x86_64__) || defined(_M_X64)
  // PickKernel also refuses a path this CPU cannot run.
  const PanelKernels& vector_class =
      *PickKernel(isa, "4-bit matmul", &kScalarPanels, &kAvx2Panels, &kAvx512Panels);
  if (isa == Isa::kAvx512Vnni) return kAvx512VnniPanels;
  if (isa == Isa::kAvxVnni) return kAvxVnniPanels;
  return vector_class;
#else
  return *PickKernel(isa, "4-bit matmul", &kScalarPanels, &kScalarPanels, &kScalarPanels);
#endif
}

}  // namespace

void QuantizeBlockScalar(const float* a, int64_t count, int8_t* q, int32_t* sum, float* scale) {
  float amax = 0.f;
  for (int64_t k = 0; k < count; ++k) amax = std::max(amax, std::fabs(a[k]));
  const float inverse = amax != 0.f ? 127.f / amax : 0.f;
  int32_t total = 0;
  for (int64_t k = 0; k < count; ++k) {
    const int32_t v = QuantizeActivation(a[k], inverse);
    q[k] = static_cast<int8_t>(v);
    total += v;
  }
  *sum = total;
  *scale = amax / 127.f;
}

constinit const PanelKernels kScalarPanels = {FloatPanelScalar, Int8PanelScalar,
                                              QuantizeBlockScalar, DequantizePanelScalar};

}  // namespace nbits

namespace {

struct QuantizedA {
  std::vector<int8_t> values;
  std::vector<int32_t> sums;
  std::vector<float> scales;
};

QuantizedA QuantizeRows(nbits::QuantizeBlockFn quantize_block, const float* a, int64_t M,
                        int64_t lda, int64_t K, int64_t block_size, int64_t k_blocks,
                        int64_t row_length) {
  QuantizedA q;
  q.values.assign(M * row_length, 0);
  q.sums.resize(M * k_blocks);
  q.scales.resize(M * k_blocks);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t b = 0; b < k_blocks; ++b) {
      const int64_t k0 = b * block_size;
      quantize_block(a + m * lda + k0, std::min(K - k0, block_size),
                     q.values.data() + m * row_length + k0, &q.sums[m * k_blocks + b],
                     &q.scales[m * k_blocks + b]);
    }
  }
  return q;
}

void CheckShape(int64_t K, int64_t N, int64_t block_size) {
  OCTET_CHECK(K >= 0 && N >= 0, "4-bit matmul: K ", K, " and N ", N, " must not be negative");
  OCTET_CHECK(block_size >= 16 && (block_size & (block_size - 1)) == 0 && block_size <= (1 << 20),
              "4-bit matmul: block_size ", block_size, " must be a power of two from 16 to 2^20");
}

}  // namespace

PackedNBits PackNBits(const uint8_t* q, const float* scales, const float* zero_points, int64_t K,
                      int64_t N, int64_t block_size, NBitsArithmetic arithmetic,
                      WeightArena* arena) {
  CheckShape(K, N, block_size);
  PackedNBits w;
  w.K = K;
  w.N = N;
  w.block_size = block_size;
  w.k_blocks = (K + block_size - 1) / block_size;
  w.panels = (N + kNBitsPanel - 1) / kNBitsPanel;
  w.arithmetic = arithmetic;
  const bool int8 = arithmetic == NBitsArithmetic::kInt8;
  w.step_k = int8 ? 8 : 2;
  w.step_bytes = kNBitsPanel * w.step_k / 2;
  w.k_steps = (K + w.step_k - 1) / w.step_k;
  bool codes = true;
  for (int64_t i = 0; zero_points && codes && i < N * w.k_blocks; ++i) {
    const float zero = zero_points[i];
    codes = zero == std::floor(zero) && zero >= 0.f && zero <= 15.f;
    OCTET_CHECK(codes || arithmetic == NBitsArithmetic::kFloat,
                "4-bit matmul: the int8 arithmetic needs zero points that are integers in "
                "[0, 15], got ",
                zero);
  }
  w.exact_sixteenth_scales =
      std::all_of(scales, scales + N * w.k_blocks, [](float s) { return s / 16.f * 16.f == s; });
  const WeightAllocator<uint8_t> bytes(arena);
  const WeightAllocator<float> floats(arena);
  w.data = WeightVector<uint8_t>(w.panels * w.k_steps * w.step_bytes, 0, bytes);
  const int64_t params = w.panels * w.k_blocks * kNBitsPanel;
  w.scales = WeightVector<float>(params, 0.f, floats);
  if (codes)
    w.zero_codes = WeightVector<uint8_t>(params, 8, bytes);
  else
    w.zero_points = WeightVector<float>(params, 8.f, floats);
  for (int64_t n = 0; n < N; ++n) {
    const nbits::PanelOperands op = nbits::OperandsOf(w, n / kNBitsPanel);
    const int64_t j = n % kNBitsPanel;
    const int64_t data_at = op.data - w.data.data();
    const int64_t params_at = op.scales - w.scales.data() + j;
    for (int64_t k = 0; k < K; ++k) {
      const uint8_t v = q[n * K + k];
      OCTET_CHECK(v < 16, "4-bit matmul: weight value ", int{v}, " is not a 4-bit value");
      // kFloat: byte j of pair k / 2; kInt8: byte 4 j + k % 4 of octet k / 8.
      const int64_t at =
          int8 ? (k / 8) * op.data_stride + 4 * j + k % 4 : (k / 2) * op.data_stride + j;
      const int shift = int8 ? k % 8 / 4 * 4 : k % 2 * 4;
      w.data[data_at + at] |= static_cast<uint8_t>(v << shift);
    }
    for (int64_t b = 0; b < w.k_blocks; ++b) {
      const int64_t at = params_at + b * op.stride;
      w.scales[at] = scales[n * w.k_blocks + b];
      if (!zero_points) continue;
      const float zero = zero_points[n * w.k_blocks + b];
      if (codes)
        w.zero_codes[at] = static_cast<uint8_t>(zero);
      else
        w.zero_points[at] = zero;
    }
  }
  return w;
}

void NBitsMatMul(const PackedNBits& w, int64_t M, const float* a, int64_t lda, const float* bias,
                 const OutputColumns& y, ThreadPool* pool, Isa isa) {
  OCTET_CHECK(M >= 0 && lda >= w.K, "4-bit matmul: M ", M, ", lda ", lda, " invalid for K ", w.K);
  CheckOutputColumns(y, w.N, "4-bit matmul");
  if (M == 0 || w.N == 0) return;
  const nbits::PanelKernels& kernels = nbits::KernelsFor(isa);
  const bool int8 = w.arithmetic == NBitsArithmetic::kInt8;
  const bool parallel = pool != nullptr && M * w.K * w.N >= nbits::kParallelMinMacs;
  if (!int8 && M >= nbits::kGemmMinRows) {
    const int64_t groups = (w.panels + kNBitsGroup - 1) / kNBitsGroup;
    const SgemmPacked a_packed = SgemmPackA(a, M, w.K, lda, SgemmPathFor(isa));
    // Work items are (group, block of rows): the rows are split too, in whole panels of
    // the packed A, until every thread has about kItemsPerThread items and the same
    // number of them (the pool gives each thread one contiguous share of the items).
    const int64_t panel_rows = a_packed.panel, row_panels = (M + panel_rows - 1) / panel_rows;
    const int64_t threads = parallel ? pool->num_threads() : 1;
    int64_t row_blocks = 1;
    while (row_blocks < row_panels && (groups * row_blocks < nbits::kItemsPerThread * threads ||
                                       groups * row_blocks % threads != 0))
      ++row_blocks;
    const int64_t panels_per_block = (row_panels + row_blocks - 1) / row_blocks;
    auto run_items = [&](int64_t item0, int64_t item1) {
      // A group's weights, dequantized straight into the GEMM's packed B when its
      // panels are whole panels of ours (else row-major, which the GEMM packs).
      SgemmPacked b = SgemmAllocatePackedB(w.K, nbits::kNBitsAccRow, a_packed.path);
      const bool b_packed = b.panel % kNBitsPanel == 0;
      int64_t dequantized = -1;  // the group b holds
      for (int64_t item = item0; item < item1; ++item) {
        const int64_t g = item / row_blocks, first_panel = item % row_blocks * panels_per_block;
        const int64_t r0 = first_panel * panel_rows;
        if (r0 >= M) continue;
        const int64_t rows = std::min(M, r0 + panels_per_block * panel_rows) - r0;
        const int64_t p0 = g * kNBitsGroup;
        const int64_t width = std::min<int64_t>(kNBitsGroup, w.panels - p0) * kNBitsPanel;
        const int64_t ldb = b_packed ? b.panel : width;
        if (g != dequantized) {
          for (int64_t i = 0; i * kNBitsPanel < width; ++i) {
            const int64_t col = i * kNBitsPanel;
            float* at =
                b_packed ? b.data.get() + col / ldb * ldb * w.K + col % ldb : b.data.get() + col;
            kernels.dequantize_panel(w, p0 + i, at, ldb);
          }
        }
        dequantized = g;
        // The block's rows of the packed A: its panels, in place.
        SgemmPacked a_rows = a_packed;
        a_rows.rows = rows;
        a_rows.data = std::shared_ptr<float>(a_packed.data, a_packed.data.get() + r0 * w.K);
        const int64_t n0 = p0 * kNBitsPanel, cols = std::min(width, w.N - n0);
        SgemmPacked b_cols = b;
        b_cols.rows = cols;
        float* out = static_cast<float*>(y.At(r0, n0, sizeof(float)));
        const int64_t ldy = y.Holding(n0).ld;
        Sgemm(rows, cols, w.K, SgemmOperand::Packed(a_rows),
              b_packed ? SgemmOperand::Packed(b_cols) : SgemmOperand::RowMajor(b.data.get(), ldb),
              out, ldy, nullptr, SgemmPathFor(isa));
        if (bias)
          for (int64_t m = 0; m < rows; ++m)
            for (int64_t j = 0; j < cols; ++j) out[m * ldy + j] += bias[n0 + j];
      }
    };
    if (parallel)
      ParallelFor(pool, groups * row_blocks, run_items);
    else
      run_items(0, groups * row_blocks);
    return;
  }
  const int64_t row_length = w.k_steps * w.step_k;
  const QuantizedA qa = int8 ? QuantizeRows(kernels.quantize_block, a, M, lda, w.K, w.block_size,
                                            w.k_blocks, row_length)
                             : QuantizedA{};
  auto run = [&](int64_t p0, int64_t p1) {
    float acc[nbits::kNBitsRows * nbits::kNBitsAccRow];
    for (int64_t p = p0; p < p1;) {
      // Up to the end of p's group: the kernels run the panels of one group.
      const int panels = static_cast<int>(std::min<int64_t>(p1 - p, kNBitsGroup - p % kNBitsGroup));
      for (int64_t r0 = 0; r0 < M; r0 += nbits::kNBitsRows) {
        const int rows = static_cast<int>(std::min<int64_t>(nbits::kNBitsRows, M - r0));
        if (int8) {
          const nbits::QuantizedRows rows_q{qa.values.data() + r0 * row_length, row_length,
                                            qa.sums.data() + r0 * w.k_blocks,
                                            qa.scales.data() + r0 * w.k_blocks};
          kernels.int8_panel(w, p, panels, rows, rows_q, acc);
        } else {
          kernels.float_panel(w, p, panels, rows, a + r0 * lda, lda, acc);
        }
        const int64_t n0 = p * kNBitsPanel;
        const int64_t cols = std::min<int64_t>(panels * kNBitsPanel, w.N - n0);
        for (int r = 0; r < rows; ++r) {
          float* out = static_cast<float*>(y.At(r0 + r, n0, sizeof(float)));
          const float* in = acc + r * nbits::kNBitsAccRow;
          for (int64_t j = 0; j < cols; ++j) out[j] = bias ? in[j] + bias[n0 + j] : in[j];
        }
      }
      p += panels;
    }
  };
  if (parallel)
    ParallelFor(pool, w.panels, run);
  else
    run(0, w.panels);
}

void NBitsMatMulReference(const uint8_t* q, const float* scales, const float* zero_points,
                          int64_t K, int64_t N, int64_t block_size, NBitsArithmetic arithmetic,
                          int64_t M, const float* a, const float* bias, float* y) {
  CheckShape(K, N, block_size);
  const int64_t k_blocks = (K + block_size - 1) / block_size;
  auto zero = [&](int64_t n, int64_t b) {
    return zero_points ? zero_points[n * k_blocks + b] : 8.f;
  };
  for (int64_t m = 0; m < M; ++m) {
    const float* am = a + m * K;
    for (int64_t n = 0; n < N; ++n) {
      float c = 0.f;
      if (arithmetic == NBitsArithmetic::kFloat) {
        for (int64_t k = 0; k < K; ++k) {
          const int64_t b = k / block_size;
          const float wv =
              (static_cast<float>(q[n * K + k]) - zero(n, b)) * scales[n * k_blocks + b];
          c = std::fma(am[k], wv, c);
        }
      } else {
        for (int64_t b = 0; b < k_blocks; ++b) {
          const int64_t k0 = b * block_size, k1 = std::min(K, k0 + block_size);
          float amax = 0.f;
          for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(am[k]));
          const float inverse = amax != 0.f ? 127.f / amax : 0.f;
          int64_t dot = 0;
          for (int64_t k = k0; k < k1; ++k)
            dot += int64_t{QuantizeActivation(am[k], inverse)} *
                   (int64_t{q[n * K + k]} - static_cast<int64_t>(zero(n, b)));
          c = std::fma(static_cast<float>(dot), (amax / 127.f) * scales[n * k_blocks + b], c);
        }
      }
      y[m * N + n] = bias ? c + bias[n] : c;
    }
  }
}

}  // namespace octet
