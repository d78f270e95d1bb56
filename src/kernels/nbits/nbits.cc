#include "kernels/nbits/nbits.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/thread_pool.h"
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
void FloatPanelScalar(const PackedNBits& w, int64_t panel, int panels, int rows,
                      const SummedRows& a, bool /*fetch*/, float* acc) {
  const int64_t block_octets = w.block_size / kNBitsStepK;
  for (int i = 0; i < panels; ++i) {
    const PanelOperands op = OperandsOf(w, panel + i);
    float* acc_i = acc + i * kNBitsPanel;
    for (int r = 0; r < rows; ++r) std::fill_n(acc_i + r * kNBitsAccRow, kNBitsPanel, 0.f);
    for (int64_t b = 0; b < w.k_blocks; ++b) {
      const int64_t o1 = std::min(w.k_steps, (b + 1) * block_octets);
      for (int r = 0; r < rows; ++r) {
        for (int j = 0; j < kNBitsPanel; ++j) {
          float low = 0.f, high = 0.f;
          for (int64_t o = b * block_octets; o < o1; ++o) {
            const float* ar = a.values + r * a.row_length + o * kNBitsStepK;
            for (int t = 0; t < 4; ++t) {
              const uint8_t byte = op.data[o * op.data_stride + 4 * j + t];
              low = std::fma(ar[t], static_cast<float>(byte & 15), low);
              high = std::fma(ar[4 + t], static_cast<float>(byte >> 4), high);
            }
          }
          const int64_t at = b * op.stride + j;
          const float zero = op.zero_codes ? op.zero_codes[at] : op.zero_points[at];
          const float u = std::fma(-zero, a.sums[r * w.k_blocks + b], low + high);
          float& c = acc_i[r * kNBitsAccRow + j];
          c = std::fma(u, op.scales[at], c);
        }
      }
    }
  }
}

void Int8PanelScalar(const PackedNBits& w, int64_t panel, int panels, int rows,
                     const QuantizedRows& a, bool /*fetch*/, float* acc) {
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
            const uint8_t byte = op.data[(k / kNBitsStepK) * op.data_stride + 4 * j + k % 4];
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
// Below this many codes packing on one thread is quicker than the hand-off.
constexpr int64_t kParallelMinCodes = int64_t{1} << 18;

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
                                              QuantizeBlockScalar, false};

}  // namespace nbits

namespace {

// A's rows for the kFloat kernels: read in place when K is whole octets, else
// copied with zeros up to the last octet; each block's sum in increasing k; and,
// for kernels that read them, the rows scaled for codes masked in place.
struct FloatA {
  const float* a;
  int64_t lda, k_blocks;
  std::vector<float> padded;  // empty: A in place
  int64_t padded_ld;
  std::vector<float> sums;
  std::vector<float> scaled;  // empty: none
  // Rows r0 on, as the kernels take them.
  nbits::SummedRows From(int64_t r0) const {
    const float* sums_r0 = sums.data() + r0 * k_blocks;
    const int64_t ld = padded.empty() ? lda : padded_ld;
    const float* scaled_r0 = scaled.empty() ? nullptr : scaled.data() + r0 * ld;
    return {padded.empty() ? a + r0 * lda : padded.data() + r0 * padded_ld, ld, sums_r0, scaled_r0};
  }
};

// A's rows times 2^-kMaskedCodeExponent[k % 8] (a multiplication by a power of
// two: exact while the product is a normal float), row_length apart as the rows
// the kernels read beside them, or nothing when a value would not scale exactly.
std::vector<float> ScaledRows(const float* a, int64_t M, int64_t lda, int64_t K,
                              int64_t row_length) {
  float factors[kNBitsStepK];
  for (int j = 0; j < kNBitsStepK; ++j)
    factors[j] = std::ldexp(1.f, -nbits::kMaskedCodeExponent[j]);
  std::vector<float> scaled(M * row_length, 0.f);
  bool exact = true;
  for (int64_t m = 0; m < M; ++m) {
    const float* row = a + m * lda;
    float* out = scaled.data() + m * row_length;
    for (int64_t k = 0; k < K; ++k) {
      const float v = row[k];
      exact &= std::fabs(v) >= nbits::kMinScaledExactly || v == 0.f || std::isnan(v);
      out[k] = v * factors[k % kNBitsStepK];
    }
  }
  if (!exact) scaled.clear();
  return scaled;
}

FloatA PrepareFloatRows(const float* a, int64_t M, int64_t lda, int64_t K, int64_t block_size,
                        int64_t k_blocks, int64_t row_length, bool scaled) {
  FloatA f{a, lda, k_blocks, {}, row_length, {}, {}};
  if (row_length != K) {
    f.padded.assign(M * row_length, 0.f);
    for (int64_t m = 0; m < M; ++m) std::copy_n(a + m * lda, K, f.padded.begin() + m * row_length);
  }
  if (scaled && M <= nbits::kScaledRowsMax)
    f.scaled = ScaledRows(a, M, lda, K, f.padded.empty() ? lda : row_length);
  f.sums.resize(M * k_blocks);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t b = 0; b < k_blocks; ++b) {
      float sum = 0.f;
      for (int64_t k = b * block_size; k < std::min(K, (b + 1) * block_size); ++k)
        sum += a[m * lda + k];
      f.sums[m * k_blocks + b] = sum;
    }
  }
  return f;
}

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

PackedNBits PackNBits(const NBitsColumnReader& column, const float* scales,
                      const float* zero_points, int64_t K, int64_t N, int64_t block_size,
                      NBitsArithmetic arithmetic, WeightArena* arena, ThreadPool* pool) {
  CheckShape(K, N, block_size);
  PackedNBits w;
  w.K = K;
  w.N = N;
  w.block_size = block_size;
  w.k_blocks = (K + block_size - 1) / block_size;
  w.panels = (N + kNBitsPanel - 1) / kNBitsPanel;
  w.arithmetic = arithmetic;
  w.k_steps = (K + kNBitsStepK - 1) / kNBitsStepK;
  bool codes = true;
  for (int64_t i = 0; zero_points && codes && i < N * w.k_blocks; ++i) {
    const float zero = zero_points[i];
    codes = zero == std::floor(zero) && zero >= 0.f && zero <= 15.f;
    OCTET_CHECK(codes || arithmetic == NBitsArithmetic::kFloat,
                "4-bit matmul: the int8 arithmetic needs zero points that are integers in "
                "[0, 15], got ",
                zero);
  }
  const WeightAllocator<uint8_t> bytes(arena);
  const WeightAllocator<float> floats(arena);
  w.data = WeightVector<uint8_t>(w.panels * w.k_steps * kNBitsStepBytes, 0, bytes);
  const int64_t params = w.panels * w.k_blocks * kNBitsPanel;
  w.scales = WeightVector<float>(params, 0.f, floats);
  if (codes)
    w.zero_codes = WeightVector<uint8_t>(params, 8, bytes);
  else
    w.zero_points = WeightVector<float>(params, 8.f, floats);
  // Whole groups per thread; each with its own reader and codes, K rounded up to
  // whole octets with zeros.
  const int64_t groups = (w.panels + kNBitsGroup - 1) / kNBitsGroup;
  const int64_t group_columns = kNBitsGroup * kNBitsPanel;
  auto pack = [&](int64_t g0, int64_t g1) {
    NBitsColumnReader read = column;
    std::vector<uint8_t> column_codes(w.k_steps * kNBitsStepK, 0);
    for (int64_t n = g0 * group_columns; n < std::min(N, g1 * group_columns); ++n) {
      const nbits::PanelOperands op = nbits::OperandsOf(w, n / kNBitsPanel);
      const int64_t j = n % kNBitsPanel;
      const int64_t params_at = op.scales - w.scales.data() + j;
      read(n, column_codes.data());
      uint8_t any = 0;
      for (int64_t k = 0; k < K; ++k) any |= column_codes[k];
      if (any >= 16) {
        const uint8_t v = *std::find_if(column_codes.begin(), column_codes.end(),
                                        [](uint8_t c) { return c >= 16; });
        Fail("4-bit matmul: weight value ", int{v}, " is not a 4-bit value");
      }
      // Octet o's bytes 4 j .. 4 j + 3: codes 8 o + t (low nibble) and 8 o + 4 + t (high).
      // Locals, as a byte store may alias what the references reach.
      uint8_t* out = w.data.data() + (op.data - w.data.data()) + 4 * j;
      const uint8_t* c = column_codes.data();
      const int64_t octets = w.k_steps, stride = op.data_stride;
      for (int64_t o = 0; o < octets; ++o, out += stride, c += kNBitsStepK)
        for (int t = 0; t < 4; ++t) out[t] = c[t] | (c[t + 4] << 4);
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
  };
  if (K * N >= nbits::kParallelMinCodes)
    ParallelFor(pool, groups, pack);
  else
    pack(0, groups);
  return w;
}

PackedNBits PackNBits(const uint8_t* q, const float* scales, const float* zero_points, int64_t K,
                      int64_t N, int64_t block_size, NBitsArithmetic arithmetic,
                      WeightArena* arena) {
  const NBitsColumnReader rows = [q, K](int64_t n, uint8_t* codes) {
    std::copy_n(q + n * K, K, codes);
  };
  return PackNBits(rows, scales, zero_points, K, N, block_size, arithmetic, arena);
}

void NBitsMatMul(const PackedNBits& w, int64_t M, const float* a, int64_t lda, const float* bias,
                 const OutputColumns& y, ThreadPool* pool, Isa isa) {
  OCTET_CHECK(M >= 0 && lda >= w.K, "4-bit matmul: M ", M, ", lda ", lda, " invalid for K ", w.K);
  CheckOutputColumns(y, w.N, "4-bit matmul");
  if (M == 0 || w.N == 0) return;
  const nbits::PanelKernels& kernels = nbits::KernelsFor(isa);
  const bool int8 = w.arithmetic == NBitsArithmetic::kInt8;
  const bool parallel = pool != nullptr && M * w.K * w.N >= nbits::kParallelMinMacs;
  const int64_t row_length = w.k_steps * kNBitsStepK;
  const QuantizedA qa = int8 ? QuantizeRows(kernels.quantize_block, a, M, lda, w.K, w.block_size,
                                            w.k_blocks, row_length)
                             : QuantizedA{};
  const FloatA fa = int8 ? FloatA{}
                         : PrepareFloatRows(a, M, lda, w.K, w.block_size, w.k_blocks, row_length,
                                            kernels.reads_scaled_rows);
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
          kernels.int8_panel(w, p, panels, rows, rows_q, r0 == 0, acc);
        } else {
          kernels.float_panel(w, p, panels, rows, fa.From(r0), r0 == 0, acc);
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
        for (int64_t b = 0; b < k_blocks; ++b) {
          const int64_t k0 = b * block_size, k1 = std::min(K, k0 + block_size);
          float low = 0.f, high = 0.f, sum = 0.f;
          for (int64_t k = k0; k < k1; ++k) {
            float& chain = k % 8 < 4 ? low : high;
            chain = std::fma(am[k], static_cast<float>(q[n * K + k]), chain);
            sum += am[k];
          }
          const float u = std::fma(-zero(n, b), sum, low + high);
          c = std::fma(u, scales[n * k_blocks + b], c);
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
