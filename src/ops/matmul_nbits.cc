// The 4-bit weight operators: com.microsoft MatMulNBits and GatherBlockQuantized
// (opset 1), octet.BlockedDqMatMul, the folded DequantizeLinear(int4 / uint4) ->
// MatMul, and octet.NBitsSiblings, products of one input run as one (graph/octet_ops.h).
// The products run on kernels/nbits/nbits.h, with the weights packed once, here, at
// kernel creation.
// ONNX Runtime 1.31.1's behaviour, as tests/python/test_matmul_nbits.py checks it:
// zero points absent mean 8 (4-bit codes) for MatMulNBits and packed uint8
// GatherBlockQuantized data, 0 for int4 / uint4 tensors; accuracy_level 4 with
// uint8 zero points (or none) is the int8 arithmetic, every other level and
// float zero points the float one (ORT computes float zero points in float at
// level 4 too).
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "core/weight_arena.h"
#include "graph/octet_ops.h"
#include "kernels/nbits/nbits.h"
#include "ops/registry.h"

namespace octet {

namespace {

DType InputOr(const std::vector<DType>& t, size_t i) {
  return i < t.size() ? t[i] : DType::kUndefined;
}

bool Omitted(DType t) { return t == DType::kUndefined; }

const Tensor& ConstantInput(const KernelInit& init, size_t i, const char* name) {
  const Tensor* t = i < init.constant_inputs.size() ? init.constant_inputs[i] : nullptr;
  OCTET_CHECK(t != nullptr, init.node.Describe(), ": ", name,
              " must be a constant initializer (it is packed once, at session creation)");
  return *t;
}

uint8_t Nibble(const uint8_t* packed, int64_t i) { return (packed[i / 2] >> ((i & 1) * 4)) & 15; }

// What turns a 4-bit tensor's element into its code: int4 values move by 8 (so q - zp
// is unchanged when both move), uint4 ones stay. In packed nibbles (Tensor::PackedNibbles)
// an int4 value v is v & 15, and (v & 15) ^ 8 = v + 8.
uint8_t CodeOffset(const Tensor& t) { return t.dtype() == DType::kInt4 ? 8 : 0; }

// The codes of elements first .. first + count - 1 of a 4-bit tensor, in either form.
void CodesOf(const Tensor& t, int64_t first, int64_t count, uint8_t* out) {
  const uint8_t offset = CodeOffset(t);
  if (t.packed_nibbles()) {
    const uint8_t* bytes = t.nibbles();
    const int64_t odd = std::min<int64_t>(first % 2, count);  // an element in a high nibble
    if (odd) out[0] = Nibble(bytes, first);
    Unpack4Bit(bytes + (first + odd) / 2, count - odd, /*is_signed=*/false, out + odd);
    for (int64_t i = 0; i < count; ++i) out[i] ^= offset;
  } else {
    const uint8_t* bytes = static_cast<const uint8_t*>(t.raw()) + first;
    for (int64_t i = 0; i < count; ++i) out[i] = static_cast<uint8_t>(bytes[i] + offset);
  }
}

uint8_t Code(const Tensor& t, int64_t i) {
  uint8_t code;
  CodesOf(t, i, 1, &code);
  return code;
}

// A = [..., K] -> y = [..., N], through the packed weights.
void RunProduct(KernelContext& ctx, const PackedNBits& w, const Tensor& a, const float* bias) {
  const Node& node = ctx.node();
  OCTET_CHECK(a.dtype() == DType::kFloat32 && a.rank() >= 1 && a.shape().back() == w.K,
              node.Describe(), ": A has shape ", ShapeToString(a.shape()),
              "; its last dimension must be K = ", w.K);
  Shape out = a.shape();
  out.back() = w.N;
  Tensor& y = ctx.AllocateUninitializedOutput(0, DType::kFloat32, out);
  const int64_t M = w.K == 0 ? NumElements(out) / std::max<int64_t>(w.N, 1) : a.numel() / w.K;
  if (w.K == 0) {  // an empty sum: the bias alone
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < w.N; ++n) y.data<float>()[m * w.N + n] = bias ? 0.f + bias[n] : 0.f;
    return;
  }
  NBitsMatMul(w, M, a.data<float>(), w.K, bias, y.data<float>(), w.N, ctx.pool());
}

// One 4-bit product's weights as PackNBits takes them: the codes are read from the
// constant inputs column by column as they are packed (those tensors outlive the packing).
struct NBitsOperands {
  int64_t K = 0, N = 0, block_size = 0;
  NBitsColumnReader column;
  std::vector<float> scales, zero;  // N rows of k_blocks; zero empty: 8
  bool int8 = false;                // the arithmetic the product asks for
};

PackedNBits Pack(const NBitsOperands& w, const KernelInit& init) {
  return PackNBits(w.column, w.scales.data(), w.zero.empty() ? nullptr : w.zero.data(), w.K, w.N,
                   w.block_size, w.int8 ? NBitsArithmetic::kInt8 : NBitsArithmetic::kFloat,
                   init.weights, init.pool);
}

// MatMulNBits' B, scales and zero_points at inputs first .. first + 2, with N columns and
// the node's attributes K, bits, block_size and accuracy_level; `what` names the product.
NBitsOperands MatMulNBitsOperands(const KernelInit& init, size_t first, int64_t N,
                                  const std::string& what) {
  const Node& node = init.node;
  const int64_t K = node.GetInt("K", -1);
  const int64_t bits = node.GetInt("bits", 4), bs = node.GetInt("block_size", -1);
  OCTET_CHECK(bits == 4, what, ": bits ", bits,
              " is not supported (octet runs 4-bit MatMulNBits only)");
  OCTET_CHECK(K >= 1 && N >= 0, what, ": attributes K ", K, " and N ", N, " must be set (K >= 1)");
  OCTET_CHECK(bs >= 16 && (bs & (bs - 1)) == 0, what, ": block_size ", bs,
              " must be a power of two >= 16");
  const int64_t k_blocks = (K + bs - 1) / bs, blob = bs / 2;
  const Tensor& b = ConstantInput(init, first, "B");
  OCTET_CHECK(b.shape() == (Shape{N, k_blocks, blob}), what, ": B has shape ",
              ShapeToString(b.shape()), "; expected [N, k_blocks, blob_size] = [", N, ", ",
              k_blocks, ", ", blob, "]");
  const Tensor& scales = ConstantInput(init, first + 1, "scales");
  OCTET_CHECK(scales.dtype() == DType::kFloat32 && scales.numel() == N * k_blocks, what,
              ": scales has ", scales.numel(), " values; expected N * k_blocks = ", N * k_blocks);
  NBitsOperands w;
  w.K = K, w.N = N, w.block_size = bs;
  w.column = [packed = b.data<uint8_t>(), row = k_blocks * blob, K](int64_t n, uint8_t* codes) {
    Unpack4Bit(packed + n * row, K, /*is_signed=*/false, codes);
  };
  w.scales.assign(scales.data<float>(), scales.data<float>() + N * k_blocks);
  bool float_zero = false;
  if (!Omitted(InputOr(init.input_types, first + 2))) {
    const Tensor& z = ConstantInput(init, first + 2, "zero_points");
    w.zero.resize(N * k_blocks);
    float_zero = z.dtype() == DType::kFloat32;
    if (float_zero) {
      OCTET_CHECK(z.numel() == N * k_blocks, what, ": float zero_points has ", z.numel(),
                  " values; expected N * k_blocks = ", N * k_blocks);
      std::memcpy(w.zero.data(), z.data<float>(), w.zero.size() * sizeof(float));
    } else {
      const int64_t row = (k_blocks + 1) / 2;
      OCTET_CHECK(z.numel() == N * row, what, ": uint8 zero_points has ", z.numel(),
                  " bytes; expected N * ceil(k_blocks / 2) = ", N * row);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t blk = 0; blk < k_blocks; ++blk)
          w.zero[n * k_blocks + blk] = Nibble(z.data<uint8_t>() + n * row, blk);
    }
  }
  w.int8 = node.GetInt("accuracy_level", 0) == 4 && !float_zero;
  return w;
}

// Columns of a [K, N] weight that the DQ fold transposes at once for the packer.
constexpr int64_t kTransposedColumns = 64;

// octet.BlockedDqMatMul's w, scale and zero_point at inputs first .. first + 2, with the
// node's attributes block_size and accuracy_level; `what` names the product.
NBitsOperands BlockedDqOperands(const KernelInit& init, size_t first, const std::string& what) {
  const Node& node = init.node;
  const Tensor& w = ConstantInput(init, first, "w");
  const Tensor& scale = ConstantInput(init, first + 1, "scale");
  const int64_t bs = node.GetInt("block_size", 0);
  OCTET_CHECK(w.rank() == 2, what, ": w must be 2-D");
  const int64_t K = w.dim(0), N = w.dim(1), k_blocks = bs > 0 ? (K + bs - 1) / bs : 0;
  OCTET_CHECK(scale.dtype() == DType::kFloat32 && scale.shape() == (Shape{k_blocks, N}), what,
              ": scale has shape ", ShapeToString(scale.shape()), "; expected [", k_blocks, ", ", N,
              "]");
  const Tensor* zero = nullptr;
  if (InputOr(init.input_types, first + 2) != DType::kUndefined)
    zero = &ConstantInput(init, first + 2, "zero_point");
  // The kernel's operands are column-major (N rows of K).
  NBitsOperands out;
  out.K = K, out.N = N, out.block_size = bs;
  // w is read a row of a run of columns at a time rather than one element per row.
  out.column = [&w, K, N, run = std::vector<uint8_t>(), first = int64_t{-1}](
                   int64_t n, uint8_t* codes) mutable {
    if (first < 0 || n < first || n >= first + kTransposedColumns) {
      first = n;
      const int64_t width = std::min(kTransposedColumns, N - n);
      run.resize(K * width);
      // The codes, kTransposedColumns rows of w at a time through a tile in L1: run's
      // rows lie K bytes apart, and a store to each of them per k would keep evicting
      // the others when K is a multiple of the cache's set stride.
      uint8_t* out = run.data();
      uint8_t tile[kTransposedColumns][kTransposedColumns];
      for (int64_t k0 = 0; k0 < K; k0 += kTransposedColumns) {
        const int64_t rows = std::min(kTransposedColumns, K - k0);
        for (int64_t r = 0; r < rows; ++r) CodesOf(w, (k0 + r) * N + n, width, tile[r]);
        for (int64_t j = 0; j < width; ++j) {
          uint8_t* column = out + j * K + k0;
          const uint8_t* codes = &tile[0][j];
          for (int64_t r = 0; r < rows; ++r) column[r] = codes[r * kTransposedColumns];
        }
      }
    }
    std::copy_n(run.data() + (n - first) * K, K, codes);
  };
  out.scales.resize(N * k_blocks);
  out.zero.resize(N * k_blocks);
  const float absent = w.dtype() == DType::kInt4 ? 8.f : 0.f;  // DequantizeLinear's 0
  for (int64_t b = 0; b < k_blocks; ++b) {
    for (int64_t n = 0; n < N; ++n) {
      out.scales[n * k_blocks + b] = scale.data<float>()[b * N + n];
      out.zero[n * k_blocks + b] = zero ? static_cast<float>(Code(*zero, b * N + n)) : absent;
    }
  }
  // accuracy_level 4 (the forward route, rewrite/float_matmul_int8.h): the integer
  // zero points allow MatMulNBits' int8 arithmetic.
  out.int8 = node.GetInt("accuracy_level", 0) == 4;
  return out;
}

// Inputs: A, B, scales, zero_points?, g_idx?, bias?
class MatMulNBitsKernel : public OpKernel {
 public:
  explicit MatMulNBitsKernel(const KernelInit& init) {
    const Node& node = init.node;
    OCTET_CHECK(Omitted(InputOr(init.input_types, 4)), node.Describe(),
                ": g_idx (act-order) is not supported");
    w_ = Pack(MatMulNBitsOperands(init, 1, node.GetInt("N", -1), node.Describe()), init);
  }

  // B, scales and zero points live on packed in w_.
  bool ReadsConstantInRun(size_t input) const override { return input == 0 || input == 5; }

  void Run(KernelContext& ctx) override {
    const float* bias = nullptr;
    if (ctx.has_input(5)) {
      const Tensor& b = ctx.input(5);
      OCTET_CHECK(b.dtype() == DType::kFloat32 && b.numel() == w_.N, ctx.node().Describe(),
                  ": bias has shape ", ShapeToString(b.shape()), "; expected [N] = [", w_.N, "]");
      bias = b.data<float>();
    }
    RunProduct(ctx, w_, ctx.input(0), bias);
  }

 private:
  PackedNBits w_;
};

// octet.BlockedDqMatMul(x, w, scale, zero_point?) (graph/octet_ops.h).
class BlockedDqMatMulKernel : public OpKernel {
 public:
  explicit BlockedDqMatMulKernel(const KernelInit& init)
      : w_(Pack(BlockedDqOperands(init, kBlockedDqW, init.node.Describe()), init)) {}

  bool ReadsConstantInRun(size_t input) const override { return input == kBlockedDqX; }

  void Run(KernelContext& ctx) override { RunProduct(ctx, w_, ctx.input(kBlockedDqX), nullptr); }

 private:
  PackedNBits w_;
};

constexpr const char* kSiblingsOfMatMulNBits = "com.microsoft.MatMulNBits";

// octet.NBitsSiblings(x, w_1, scale_1, zero_1, ...) (graph/octet_ops.h): the products'
// columns packed side by side, so one NBitsMatMul computes them all (each column's bits
// are its own), each product's columns written to its output.
class NBitsSiblingsKernel : public OpKernel {
 public:
  explicit NBitsSiblingsKernel(const KernelInit& init) {
    const Node& node = init.node;
    const bool nbits = node.GetString("of", "") == kSiblingsOfMatMulNBits;
    const size_t count = node.outputs.size();
    const std::vector<int64_t> n = node.GetInts("n");
    OCTET_CHECK(count >= 1 && node.inputs.size() == 1 + 3 * count && (!nbits || n.size() == count),
                node.Describe(), ": expects x, then w, scale and zero point per output");
    NBitsOperands all;
    std::vector<NBitsColumnReader> columns;  // product i's columns from starts[i] on
    std::vector<int64_t> starts;
    for (size_t i = 0; i < count; ++i) {
      const std::string what = node.Describe() + ", product " + std::to_string(i + 1);
      NBitsOperands w = nbits ? MatMulNBitsOperands(init, 1 + 3 * i, n[i], what)
                              : BlockedDqOperands(init, 1 + 3 * i, what);
      if (w.zero.empty()) w.zero.assign(w.N * ((w.K + w.block_size - 1) / w.block_size), 8.f);
      if (i == 0) {
        all.K = w.K, all.block_size = w.block_size, all.int8 = w.int8;
      } else {
        OCTET_CHECK(w.K == all.K && w.block_size == all.block_size && w.int8 == all.int8, what,
                    ": K, block size and arithmetic must be those of product 1");
      }
      widths_.push_back(w.N);
      starts.push_back(all.N);
      columns.push_back(std::move(w.column));
      all.N += w.N;
      all.scales.insert(all.scales.end(), w.scales.begin(), w.scales.end());
      all.zero.insert(all.zero.end(), w.zero.begin(), w.zero.end());
    }
    // The products' readers by value: each packing thread's copy has its own.
    all.column = [columns = std::move(columns), starts = std::move(starts)](int64_t n,
                                                                            uint8_t* codes) {
      const size_t i = std::upper_bound(starts.begin(), starts.end(), n) - starts.begin() - 1;
      columns[i](n - starts[i], codes);
    };
    w_ = Pack(all, init);
  }

  bool ReadsConstantInRun(size_t input) const override { return input == 0; }

  void Run(KernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    OCTET_CHECK(a.dtype() == DType::kFloat32 && a.rank() >= 1 && a.shape().back() == w_.K,
                ctx.node().Describe(), ": x has shape ", ShapeToString(a.shape()),
                "; its last dimension must be K = ", w_.K);
    const int64_t M = a.numel() / w_.K;
    const std::vector<ColumnRange> y =
        ctx.AllocateColumnOutputs(DType::kFloat32, a.shape(), widths_);
    NBitsMatMul(w_, M, a.data<float>(), w_.K, nullptr,
                OutputColumns{y.data(), static_cast<int64_t>(y.size())}, ctx.pool());
  }

 private:
  PackedNBits w_;
  std::vector<int64_t> widths_;
};

// Inputs: data, indices, scales, zero_points?; gather_axis 0, quantize_axis the last.
class GatherBlockQuantizedKernel : public OpKernel {
 public:
  explicit GatherBlockQuantizedKernel(const KernelInit& init) {
    const Node& node = init.node;
    OCTET_CHECK(node.GetInt("bits", 4) == 4, node.Describe(), ": bits ", node.GetInt("bits", 4),
                " is not supported (4 only)");
    block_size_ = node.GetInt("block_size", 128);
    OCTET_CHECK(block_size_ >= 16 && (block_size_ & (block_size_ - 1)) == 0, node.Describe(),
                ": block_size ", block_size_, " must be a power of two >= 16");
    const Tensor* data = init.constant_inputs.empty() ? nullptr : init.constant_inputs[0];
    // Packed nibbles (a mapped table) are read in place: a run touches its rows only.
    if (data && !data->packed_nibbles() &&
        (data->dtype() == DType::kInt4 || data->dtype() == DType::kUInt4)) {
      codes_ =
          WeightVector<uint8_t>((data->numel() + 1) / 2, 0, WeightAllocator<uint8_t>(init.weights));
      for (int64_t i = 0; i < data->numel(); ++i)
        codes_[i / 2] |= static_cast<uint8_t>(Code(*data, i) << ((i & 1) * 4));
    }
  }

  // Constant unpacked 4-bit data lives on as codes_.
  bool ReadsConstantInRun(size_t input) const override { return input != 0 || codes_.empty(); }

  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& data = ctx.input(0);
    const Tensor& indices = ctx.input(1);
    const Tensor& scales = ctx.input(2);
    const int64_t rank = data.rank();
    OCTET_CHECK(rank >= 2, node.Describe(), ": data must have rank >= 2");
    OCTET_CHECK(node.Axis(node.GetInt("gather_axis", 0), rank) == 0 &&
                    node.Axis(node.GetInt("quantize_axis", 1), rank) == rank - 1,
                node.Describe(), ": only gather_axis 0 and quantize_axis the last axis are "
                "supported");
    const bool packed = data.dtype() == DType::kUInt8;
    const int64_t rows = data.dim(0);
    const int64_t row_len = data.numel() / std::max<int64_t>(rows, 1) * (packed ? 2 : 1);
    const int64_t last = data.shape().back() * (packed ? 2 : 1);
    const int64_t blocks_last = (last + block_size_ - 1) / block_size_;
    const int64_t row_blocks = row_len / last * blocks_last;
    OCTET_CHECK(scales.dtype() == DType::kFloat32 && scales.numel() == rows * row_blocks,
                node.Describe(), ": scales has ", scales.numel(), " values; expected ",
                rows * row_blocks);
    const Tensor* zero = ctx.has_input(3) ? &ctx.input(3) : nullptr;
    if (zero)
      OCTET_CHECK(zero->dtype() == data.dtype() &&
                      zero->numel() * (packed ? 2 : 1) >= rows * row_blocks,
                  node.Describe(), ": zero_points must have data's type and one value per block");
    Shape out = indices.shape();
    for (int64_t d = 1; d < rank; ++d) out.push_back(data.dim(d));
    out.back() = last;
    Tensor& y = ctx.AllocateUninitializedOutput(0, DType::kFloat32, out);
    // Zero point 0 of int4 is code 8 (Code); packed codes default to 8 too.
    const int absent = data.dtype() == DType::kUInt4 ? 0 : 8;
    // Nibbles to read in place, else (data an int4 / uint4 tensor) null.
    const uint8_t* bytes = packed ? data.data<uint8_t>() : codes_.empty() ? nullptr : codes_.data();
    std::vector<uint8_t> codes(row_len);
    std::vector<int> zeros(row_blocks);
    for (int64_t i = 0; i < indices.numel(); ++i) {
      int64_t r = indices.dtype() == DType::kInt64 ? indices.data<int64_t>()[i]
                                                   : indices.data<int32_t>()[i];
      OCTET_CHECK(r >= -rows && r < rows, node.Describe(), ": index ", r,
                  " is out of range for ", rows, " rows");
      if (r < 0) r += rows;
      // Row r's codes and its blocks' zero points, then the values.
      if (bytes) {
        for (int64_t e = 0; e < row_len; ++e) codes[e] = Nibble(bytes, r * row_len + e);
      } else {
        CodesOf(data, r * row_len, row_len, codes.data());
      }
      for (int64_t b = 0; b < row_blocks; ++b) {
        const int64_t at = r * row_blocks + b;
        zeros[b] = zero ? (packed ? Nibble(zero->data<uint8_t>(), at) : Code(*zero, at)) : absent;
      }
      const float* row_scales = scales.data<float>() + r * row_blocks;
      float* dst = y.data<float>() + i * row_len;
      for (int64_t e = 0; e < row_len; ++e) {
        const int64_t b = (e / last) * blocks_last + (e % last) / block_size_;
        dst[e] = static_cast<float>(codes[e] - zeros[b]) * row_scales[b];
      }
    }
  }

 private:
  int64_t block_size_ = 128;
  // Constant int4 / uint4 data as Code's values, two to a byte (low nibble first), so
  // that the initializer, unpacked by the loader, is not held at a byte per code.
  WeightVector<uint8_t> codes_;
};

bool AcceptsMatMulNBits(const Node&, const std::vector<DType>& t) {
  const DType zp = InputOr(t, 3);
  return t.size() >= 3 && t.size() <= 6 && t[0] == DType::kFloat32 && t[1] == DType::kUInt8 &&
         t[2] == DType::kFloat32 &&
         OneOf(zp, {DType::kUndefined, DType::kUInt8, DType::kFloat32}) &&
         OneOf(InputOr(t, 4), {DType::kUndefined, DType::kInt32}) &&
         OneOf(InputOr(t, 5), {DType::kUndefined, DType::kFloat32});
}

bool AcceptsBlockedDqMatMul(const Node&, const std::vector<DType>& t) {
  return t.size() >= 3 && t[kBlockedDqX] == DType::kFloat32 &&
         OneOf(t[kBlockedDqW], {DType::kInt4, DType::kUInt4}) &&
         t[kBlockedDqScale] == DType::kFloat32 &&
         (Omitted(InputOr(t, kBlockedDqZero)) || InputOr(t, kBlockedDqZero) == t[kBlockedDqW]);
}

bool AcceptsGatherBlockQuantized(const Node&, const std::vector<DType>& t) {
  return t.size() >= 3 && t.size() <= 4 &&
         OneOf(t[0], {DType::kUInt8, DType::kInt4, DType::kUInt4}) &&
         OneOf(t[1], {DType::kInt32, DType::kInt64}) && t[2] == DType::kFloat32 &&
         (Omitted(InputOr(t, 3)) || InputOr(t, 3) == t[0]);
}

bool AcceptsNBitsSiblings(const Node& node, const std::vector<DType>& t) {
  if (t.empty() || t[0] != DType::kFloat32 || t.size() % 3 != 1) return false;
  const bool nbits = node.GetString("of", "") == kSiblingsOfMatMulNBits;
  for (size_t i = 1; i < t.size(); i += 3) {
    const std::vector<DType> one = {t[0], t[i], t[i + 1], t[i + 2]};
    if (nbits ? !AcceptsMatMulNBits(node, one) : !AcceptsBlockedDqMatMul(node, one)) return false;
  }
  return true;
}

}  // namespace

void RegisterNBitsOps(KernelRegistry& r) {
  // The kernels with int4 / uint4 inputs read them through CodesOf, in either form.
  constexpr bool kReadsPackedNibbles = true;
  r.Register({kMsDomain, "MatMulNBits", 1, 1 << 30, AcceptsMatMulNBits, FloatOutput,
              [](const KernelInit& init) { return std::make_unique<MatMulNBitsKernel>(init); }});
  r.Register(
      {kMsDomain, "GatherBlockQuantized", 1, 1 << 30, AcceptsGatherBlockQuantized, FloatOutput,
       [](const KernelInit& init) { return std::make_unique<GatherBlockQuantizedKernel>(init); },
       kReadsPackedNibbles});
  r.Register({kOctetDomain, kBlockedDqMatMulOp, 1, 1 << 30, AcceptsBlockedDqMatMul, FloatOutput,
              [](const KernelInit& init) { return std::make_unique<BlockedDqMatMulKernel>(init); },
              kReadsPackedNibbles});
  r.Register({kOctetDomain, kNBitsSiblingsOp, 1, 1 << 30, AcceptsNBitsSiblings, FloatOutputs,
              [](const KernelInit& init) { return std::make_unique<NBitsSiblingsKernel>(init); },
              kReadsPackedNibbles});
}

}  // namespace octet
