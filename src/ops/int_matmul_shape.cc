#include "ops/int_matmul_shape.h"

#include <algorithm>
#include <optional>
#include <span>

#include "core/thread_pool.h"
#include "kernels/float/broadcast.h"
#include "ops/int_params.h"

namespace octet {

MatMulShape ComputeMatMulShape(const Node& node, const Shape& a, const Shape& b) {
  OCTET_CHECK(!a.empty() && !b.empty(), node.Describe(), ": inputs must have rank >= 1, got A ",
              ShapeToString(a), " and B ", ShapeToString(b));
  Shape a2 = a, b2 = b;
  if (a.size() == 1) a2.insert(a2.begin(), 1);
  if (b.size() == 1) b2.push_back(1);
  MatMulShape s;
  s.m = a2[a2.size() - 2];
  s.k = a2.back();
  s.n = b2.back();
  OCTET_CHECK(b2[b2.size() - 2] == s.k, node.Describe(), ": inner dimensions differ, A has shape ",
              ShapeToString(a), " and B has shape ", ShapeToString(b));
  const Shape a_batch(a2.begin(), a2.end() - 2), b_batch(b2.begin(), b2.end() - 2);
  const std::optional<Shape> batch = BroadcastShapes(a_batch, b_batch);
  OCTET_CHECK(batch.has_value(), node.Describe(), ": batch dimensions of A ", ShapeToString(a),
              " and B ", ShapeToString(b), " do not broadcast");

  s.output = *batch;
  if (a.size() > 1) s.output.push_back(s.m);
  if (b.size() > 1) s.output.push_back(s.n);

  const int64_t count = NumElements(*batch);
  s.a_matrix.assign(count, 0);
  s.b_matrix.assign(count, 0);
  const std::vector<int64_t> a_strides = BroadcastStrides(a_batch, *batch);
  const std::vector<int64_t> b_strides = BroadcastStrides(b_batch, *batch);
  for (int64_t i = 0; i < count; ++i) {
    int64_t rest = i;
    for (size_t d = batch->size(); d-- > 0;) {
      const int64_t index = rest % (*batch)[d];
      rest /= (*batch)[d];
      s.a_matrix[i] += index * a_strides[d];
      s.b_matrix[i] += index * b_strides[d];
    }
  }
  return s;
}

namespace {

// True when shape equals operand with dim `axis_from_end` (1 = last) set to 1.
bool IsOperandShapeWithDimOne(const Shape& shape, const Shape& operand, size_t axis_from_end) {
  if (operand.size() < 2 || shape.size() != operand.size()) return false;
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t want = d == operand.size() - axis_from_end ? 1 : operand[d];
    if (shape[d] != want) return false;
  }
  return true;
}

}  // namespace

ParamLayout RowParamLayout(const Node& node, const Tensor& param, const Shape& a,
                           const char* name) {
  if (param.numel() == 1) return {};
  const int64_t m = a.size() >= 2 ? a[a.size() - 2] : 1;
  if (a.size() == 2 && param.shape() == Shape{m}) return {0, 1};
  if (IsOperandShapeWithDimOne(param.shape(), a, 1)) return {m, 1};
  Fail(node.Describe(), ": ", name, " has shape ", ShapeToString(param.shape()),
       "; for A of shape ", ShapeToString(a),
       " it must hold one value, [M] (2-D A) or A's shape with the last dim 1");
}

ParamLayout ColumnParamLayout(const Node& node, const Tensor& param, const Shape& b,
                              const char* name) {
  if (param.numel() == 1) return {};
  const int64_t n = b.size() >= 2 ? b.back() : 1;
  if (b.size() == 2 && param.shape() == Shape{n}) return {0, 1};
  if (IsOperandShapeWithDimOne(param.shape(), b, 2)) return {n, 1};
  Fail(node.Describe(), ": ", name, " has shape ", ShapeToString(param.shape()),
       "; for B of shape ", ShapeToString(b),
       " it must hold one value, [N] (2-D B) or B's shape with the second-to-last dim 1");
}

}  // namespace octet

namespace octet {

namespace {

// K rows per packed chunk: a multiple of the GEMM's k group, within its exact range.
constexpr int64_t kKChunk = kGemmMaxK / 4 * 4;
constexpr int64_t kPackedABytes = 4 << 20;  // ProductBlockRows
constexpr int64_t kMinBlockRows = 128;
// With several K chunks the chunks' int32 products are summed in a scratch of
// about 1 MiB (rows x N); its epilogue is split over rows from this many outputs.
constexpr int64_t kScratchValues = 256 * 1024;
constexpr int64_t kMinParallelOutputs = 32 * 1024;
// Batches of products smaller than this (attention heads) are shared out whole
// over the pool instead of splitting each one.
constexpr int64_t kMinSplitMacs = int64_t{2} << 20;

// All m rows, or the largest multiple of kMinBlockRows within `budget` (at least one).
int64_t BlockRows(int64_t m, int64_t budget) {
  return std::min(m, std::max(kMinBlockRows, budget / kMinBlockRows * kMinBlockRows));
}

}  // namespace

int64_t ProductBlockRows(int64_t m, int64_t k) {
  return BlockRows(m, kPackedABytes / std::max<int64_t>(k, 1));
}

namespace {

// This thread's buffer for packing a per-run B, kept between runs (no
// allocation per product). A function, not a thread_local named inside a
// lambda run by pool workers: a worker never passes the declaration, so its
// copy would never be constructed or destroyed (LeakSanitizer caught that).
PackedB& ThreadPerRunB() {
  thread_local PackedB storage;
  return storage;
}

// The matrix shape and type of a B of shape `b`, nothing packed yet.
PackedMatMulB MatMulBHeader(const Shape& b, DType dtype, const GemmPlan& plan) {
  PackedMatMulB packed;
  packed.plan = plan;
  packed.k = b.size() == 1 ? b[0] : b[b.size() - 2];
  packed.n = b.size() == 1 ? 1 : b.back();
  packed.is_signed = dtype == DType::kInt8;
  return packed;
}

// Logical matrix `matrix` (rows x cols) of a tensor stored under `layout`,
// copied row-major into dst.
void GatherHeadMatrix(const uint8_t* stored, const MatMulHeadLayout& layout, int64_t matrix,
                      int64_t rows, int64_t cols, uint8_t* dst) {
  const uint8_t* src = stored + layout.MatrixOffset(matrix);
  const int64_t ld = layout.ld();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      dst[r * cols + c] = layout.columns ? src[c * ld + r] : src[r * ld + c];
}

}  // namespace

MatMulHeadLayout HeadLayoutFromPerm(const Node& node, const std::vector<int64_t>& perm,
                                    const Shape& stored, bool allow_columns, const char* name,
                                    Shape& transposed) {
  const std::vector<int64_t> heads_swap = {0, 2, 1, 3}, keys_transposed = {0, 2, 3, 1};
  const bool columns = allow_columns && perm == keys_transposed;
  OCTET_CHECK(columns || perm == heads_swap, node.Describe(), ": octet_", name,
              "_perm must be [0, 2, 1, 3]", allow_columns ? " or [0, 2, 3, 1]" : "");
  OCTET_CHECK(stored.size() == 4, node.Describe(), ": input ", name,
              " read through a head Transpose must be 4-D, got ", ShapeToString(stored));
  transposed = columns ? Shape{stored[0], stored[2], stored[3], stored[1]}
                       : Shape{stored[0], stored[2], stored[1], stored[3]};
  return {stored[2], stored[1], stored[3], columns};
}

PackedMatMulB PackMatMulB(const Tensor& b, const GemmPlan& plan, WeightArena* arena) {
  PackedMatMulB packed = MatMulBHeader(b.shape(), b.dtype(), plan);
  const int64_t matrix_size = packed.k * packed.n;
  const int64_t count =
      matrix_size == 0
          ? NumElements(Shape(b.shape().begin(), b.shape().end() - std::min<size_t>(2, b.rank())))
          : b.numel() / matrix_size;
  const auto* bytes = static_cast<const uint8_t*>(b.raw());
  packed.matrices.resize(count);
  for (int64_t i = 0; i < count; ++i) {
    int64_t k0 = 0;
    do {
      const int64_t rows = std::min(kKChunk, packed.k - k0);
      packed.matrices[i].push_back(PackB(plan, bytes + i * matrix_size + k0 * packed.n,
                                         packed.is_signed, rows, packed.n, packed.n, arena));
      k0 += rows;
    } while (k0 < packed.k);
  }
  return packed;
}

void RunIntMatMul(const MatMulShape& s, const Tensor& a, const MatMulZeroPoints& a_zero,
                  const PackedMatMulB& b, const MatMulZeroPoints& b_zero, const MatMulEpilogue& e,
                  void* y, ThreadPool* pool, const MatMulHeadLayouts& heads) {
  if (s.batch_count() == 0 || s.m == 0 || s.n == 0) return;
  // Where A's matrix and the output's entry start, and their leading dimensions.
  const int64_t lda = heads.a.heads ? heads.a.ld() : s.k;
  auto a_offset = [&](int64_t matrix) {
    return heads.a.heads ? heads.a.MatrixOffset(matrix) : matrix * s.m * s.k;
  };
  const int64_t ldy = heads.y.heads ? heads.y.ld() : s.n;
  auto y_offset = [&](int64_t entry) {
    return heads.y.heads ? heads.y.MatrixOffset(entry) : entry * s.m * s.n;
  };
  const int64_t y_element = e.epilogue.element_size();
  auto y_row = [&](int64_t entry, int64_t row) {
    return static_cast<uint8_t*>(y) + (y_offset(entry) + row * ldy) * y_element;
  };
  // The epilogue of one batch entry's rows from row0 on.
  auto entry_epilogue = [&](int64_t entry, int64_t row0) {
    Epilogue ep = EpilogueFromRow(e.epilogue, row0);
    if (ep.multiplier.present())
      ep.multiplier.data += e.multiplier_matrix_stride * s.b_matrix[entry];
    return ep;
  };
  const bool a_signed = a.dtype() == DType::kInt8;
  OCTET_CHECK(a_signed == b.plan.a_signed, "internal: integer matmul planned for ",
              b.plan.a_signed ? "int8" : "uint8", " A, given ", DTypeName(a.dtype()));
  const auto* a_bytes = static_cast<const uint8_t*>(a.raw());
  const size_t chunks = b.unpacked ? 1 : b.matrices.empty() ? 0 : b.matrices[0].size();
  // With several K chunks the epilogue reads their int32 sum from a scratch.
  const int64_t block_rows =
      chunks > 1 ? BlockRows(s.m, kScratchValues / s.n) : ProductBlockRows(s.m, s.k);

  // A per-run B's matrices are packed by the thread that multiplies them, into
  // its own buffer, kept while consecutive entries share the matrix.
  struct PerRunB {
    PackedB& packed;
    int64_t matrix = -1;  // the matrix `packed` holds
  };
  auto b_matrix_chunks = [&](int64_t matrix, PerRunB& per_run) -> std::span<const PackedB> {
    if (b.unpacked == nullptr) return b.matrices[matrix];
    if (per_run.matrix != matrix) {
      const auto* stored = static_cast<const uint8_t*>(b.unpacked->raw());
      const MatMulHeadLayout& layout = b.unpacked_layout;
      if (layout.heads == 0) {
        PackBInto(b.plan, per_run.packed, stored + matrix * s.k * s.n, b.is_signed, s.k, s.n, s.n);
      } else if (!layout.columns) {
        PackBInto(b.plan, per_run.packed, stored + layout.MatrixOffset(matrix), b.is_signed, s.k,
                  s.n, layout.ld());
      } else {
        thread_local std::vector<uint8_t> gathered;  // kept between runs
        gathered.resize(static_cast<size_t>(s.k * s.n));
        GatherHeadMatrix(stored, layout, matrix, s.k, s.n, gathered.data());
        PackBInto(b.plan, per_run.packed, gathered.data(), b.is_signed, s.k, s.n, s.n);
      }
      per_run.matrix = matrix;
    }
    return {&per_run.packed, 1};
  };

  // One matrix of the batch on `entry_pool` (null: the calling thread).
  auto run_entry = [&](int64_t entry, ThreadPool* entry_pool, PerRunB& per_run) {
    const std::span<const PackedB> b_chunks = b_matrix_chunks(s.b_matrix[entry], per_run);
    const int64_t a_matrix = s.a_matrix[entry];
    GemmZeroPoints zero;
    zero.b =
        b_zero.values ? b_zero.values + b_zero.layout.MatrixOffset(s.b_matrix[entry]) : nullptr;
    zero.b_per_column = b_zero.layout.per_vector();
    zero.a_per_row = a_zero.layout.per_vector();
    for (int64_t row0 = 0; row0 < s.m; row0 += block_rows) {
      const int64_t rows = std::min(block_rows, s.m - row0);
      zero.a = a_zero.values ? a_zero.values + a_zero.layout.MatrixOffset(a_matrix) +
                                   (a_zero.layout.per_vector() ? row0 : 0)
                             : nullptr;
      auto a_block = [&](int64_t k0) {
        return Int8Operand{a_bytes + a_offset(a_matrix) + row0 * lda + k0, a_signed, lda};
      };
      const Epilogue ep = entry_epilogue(entry, row0);
      if (chunks == 1) {
        Gemm(b.plan, rows, a_block(0), zero, b_chunks[0], ep, y_row(entry, row0), ldy, entry_pool);
        continue;
      }
      // Per thread and kept between runs: the block's product and one chunk's product.
      thread_local std::vector<int32_t> scratch, chunk_scratch;
      scratch.resize(static_cast<size_t>(rows * s.n));
      chunk_scratch.resize(static_cast<size_t>(rows * s.n));
      int64_t k0 = 0;
      const Epilogue sums;  // int32, nothing else
      for (size_t chunk = 0; chunk < b_chunks.size(); ++chunk) {
        const PackedB& packed = b_chunks[chunk];
        int32_t* target = chunk == 0 ? scratch.data() : chunk_scratch.data();
        Gemm(b.plan, rows, a_block(k0), zero, packed, sums, target, s.n, entry_pool);
        if (chunk > 0) {
          // Wrapping int32 sum of the chunks, as ONNX Runtime's int32 accumulation.
          for (int64_t i = 0; i < rows * s.n; ++i)
            scratch[i] = static_cast<int32_t>(static_cast<uint32_t>(scratch[i]) +
                                              static_cast<uint32_t>(target[i]));
        }
        k0 += packed.K;
      }
      ParallelFor(rows * s.n >= kMinParallelOutputs ? entry_pool : nullptr, rows,
                  [&](int64_t r0, int64_t r1) {
                    ApplyEpilogueBlock(ep, scratch.data() + r0 * s.n, s.n, r0, r1 - r0, 0, s.n,
                                       y_row(entry, row0 + r0), ldy, b.plan.packed->isa);
                  });
    }
  };

  // Many small products (attention heads) are shared out whole; large ones are split.
  if (pool != nullptr && s.batch_count() > 1 && s.m * s.k * s.n < kMinSplitMacs) {
    ParallelFor(pool, s.batch_count(), [&](int64_t e0, int64_t e1) {
      PerRunB per_run{ThreadPerRunB()};
      for (int64_t entry = e0; entry < e1; ++entry) run_entry(entry, nullptr, per_run);
    });
  } else {
    PerRunB per_run{ThreadPerRunB()};
    for (int64_t entry = 0; entry < s.batch_count(); ++entry) run_entry(entry, pool, per_run);
  }
}

void CheckInt8Operand(const Node& node, const Tensor& t, const char* name) {
  OCTET_CHECK(Is8Bit(t.dtype()), node.Describe(), ": input ", name, " has dtype ",
              DTypeName(t.dtype()), "; expected uint8 or int8");
}

namespace {

const Tensor* ConstantInput(const KernelInit& init, size_t i) {
  return i < init.constant_inputs.size() ? init.constant_inputs[i] : nullptr;
}

}  // namespace

MatMulBInput::MatMulBInput(const KernelInit& init, size_t index, bool a_signed)
    : index_(index), plan_(PlanGemm(ActiveIsa(), a_signed)) {
  if (const Tensor* b = ConstantInput(init, index)) {
    CheckInt8Operand(init.node, *b, "B");
    OCTET_CHECK(b->rank() >= 1, init.node.Describe(), ": input B must have rank >= 1, got ",
                ShapeToString(b->shape()));
    constant_ = PackMatMulB(*b, plan_, init.weights);
  }
}

const PackedMatMulB& MatMulBInput::Get(const Node& node, const Tensor& b,
                                       PackedMatMulB& storage) const {
  if (constant_) return *constant_;
  CheckInt8Operand(node, b, "B");
  storage = MatMulBHeader(b.shape(), b.dtype(), plan_);
  if (storage.k <= kKChunk) {
    storage.unpacked = &b;  // RunIntMatMul packs each matrix where it is used
  } else {
    storage = PackMatMulB(b, plan_);
  }
  return storage;
}

const PackedMatMulB& MatMulBInput::Get(const Node& node, const Tensor& b, const Shape& shape,
                                       const MatMulHeadLayout& layout,
                                       PackedMatMulB& storage) const {
  OCTET_CHECK(!constant_, node.Describe(), ": a constant B cannot be read through a Transpose");
  CheckInt8Operand(node, b, "B");
  storage = MatMulBHeader(shape, b.dtype(), plan_);
  if (storage.k <= kKChunk) {
    storage.unpacked = &b;
    storage.unpacked_layout = layout;
    return storage;
  }
  // Too deep for one chunk: the transposed tensor is written out and packed as usual.
  Tensor dense(b.dtype(), shape);
  const int64_t matrix_size = storage.k * storage.n;
  for (int64_t i = 0; i < (matrix_size ? dense.numel() / matrix_size : 0); ++i)
    GatherHeadMatrix(static_cast<const uint8_t*>(b.raw()), layout, i, storage.k, storage.n,
                     static_cast<uint8_t*>(dense.raw()) + i * matrix_size);
  storage = PackMatMulB(dense, plan_);
  return storage;
}

ZeroPointInput::ZeroPointInput(const KernelInit& init, size_t index, size_t operand_index,
                               const char* name)
    : index_(index), name_(name) {
  const Tensor* zero = ConstantInput(init, index);
  if (zero && operand_index < init.input_types.size())
    constant_ = ReadZeroPoints(init.node, *zero, init.input_types[operand_index], name);
}

MatMulZeroPoints ZeroPointInput::Get(const KernelContext& ctx, const Tensor& operand, bool is_a,
                                     std::vector<int32_t>& storage) const {
  if (!ctx.has_input(index_)) return {};
  const Tensor& zero = ctx.input(index_);
  const Node& node = ctx.node();
  MatMulZeroPoints z;
  z.layout = is_a ? RowParamLayout(node, zero, operand.shape(), name_)
                  : ColumnParamLayout(node, zero, operand.shape(), name_);
  if (!constant_) storage = ReadZeroPoints(node, zero, operand.dtype(), name_);
  z.values = constant_ ? constant_->data() : storage.data();
  return z;
}

}  // namespace octet
