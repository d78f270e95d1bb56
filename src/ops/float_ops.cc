// Float32 operators that whole quantized models need around their integer
// parts: MatMul, Add, Sub, Mul, Div, Relu (ONNX semantics, numpy broadcasting),
// the fused attention steps octet.FloatAttention and octet.MaskedSoftmax,
// octet.Rotary and octet.GatedSilu.
// Add/Sub/Mul/Div also take int32/int64 for exported shape arithmetic.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <vector>

#include "core/thread_pool.h"
#include "graph/octet_ops.h"
#include "kernels/float/broadcast.h"
#include "kernels/float/elementwise_float.h"
#include "kernels/float/sgemm.h"
#include "kernels/float/vmath.h"
#include "kernels/int8/lookup.h"
#include "kernels/int8/quantize.h"
#include "kernels/strided_copy.h"
#include "ops/kv_cache.h"
#include "ops/registry.h"

namespace octet {

namespace {

bool AllFloat32(const Node&, const std::vector<DType>& types) {
  return std::all_of(types.begin(), types.end(), [](DType t) { return t == DType::kFloat32; });
}

std::vector<DType> Float32Output(const Node&, const std::vector<DType>&) {
  return {DType::kFloat32};
}

// Numpy matmul of float tensors a and b into allocate(output shape): 1-D
// operands are promoted to matrices and the added dim is dropped from the
// result; the leading (batch) dims broadcast. packed_b, when not null, is b
// packed once (2-D b only).
void RunMatMul(const Tensor& a, const Tensor& b, const SgemmPacked* packed_b, const Node& node,
               ThreadPool* pool, const std::function<Tensor&(const Shape&)>& allocate) {
  OCTET_CHECK(a.rank() >= 1 && b.rank() >= 1, node.Describe(),
              ": inputs must have rank >= 1, got shapes ", ShapeToString(a.shape()), " and ",
              ShapeToString(b.shape()));
  Shape a_shape = a.shape(), b_shape = b.shape();
  const bool a_is_vector = a_shape.size() == 1, b_is_vector = b_shape.size() == 1;
  if (a_is_vector) a_shape.insert(a_shape.begin(), 1);
  if (b_is_vector) b_shape.push_back(1);
  const int64_t m = a_shape[a_shape.size() - 2], k = a_shape.back();
  const int64_t n = b_shape.back();
  OCTET_CHECK(b_shape[b_shape.size() - 2] == k, node.Describe(),
              ": inner dimensions differ, A has shape ", ShapeToString(a.shape()),
              " and B has shape ", ShapeToString(b.shape()));
  const Shape a_batch(a_shape.begin(), a_shape.end() - 2);
  const Shape b_batch(b_shape.begin(), b_shape.end() - 2);
  std::optional<Shape> batch = BroadcastShapes(a_batch, b_batch);
  OCTET_CHECK(batch.has_value(), node.Describe(), ": batch dimensions of A ",
              ShapeToString(a.shape()), " and B ", ShapeToString(b.shape()), " do not broadcast");

  Shape out_shape = *batch;
  if (!a_is_vector) out_shape.push_back(m);
  if (!b_is_vector) out_shape.push_back(n);
  Tensor& out = allocate(out_shape);

  // Offsets (in matrices) of every batch entry of A and B.
  const int64_t batch_count = NumElements(*batch);
  std::vector<int64_t> a_offset(batch_count), b_offset(batch_count);
  const std::vector<int64_t> a_strides = BroadcastStrides(a_batch, *batch);
  const std::vector<int64_t> b_strides = BroadcastStrides(b_batch, *batch);
  for (int64_t i = 0; i < batch_count; ++i) {
    int64_t rest = i;
    for (size_t d = batch->size(); d-- > 0;) {
      const int64_t index = rest % (*batch)[d];
      rest /= (*batch)[d];
      a_offset[i] += index * a_strides[d];
      b_offset[i] += index * b_strides[d];
    }
  }

  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* pc = out.data<float>();
  const bool b_packed =
      packed_b && packed_b->data && b_shape.size() == 2 && packed_b->K == k && packed_b->rows == n;
  const SgemmOperand b_matrix =
      b_packed ? SgemmOperand::Packed(*packed_b) : SgemmOperand::RowMajor(pb, n);
  // A 2-D B shared by unbroadcast batches of A: one GEMM over all their rows.
  if (b_batch.empty() && a_batch == *batch) {
    Sgemm(batch_count * m, n, k, SgemmOperand::RowMajor(pa, k), b_matrix, pc, n, pool);
    return;
  }
  // Each product's bits do not depend on the pool, so many small products
  // run one per thread and few large ones share the pool.
  const bool per_batch = pool && batch_count >= pool->num_threads();
  auto products = [&](int64_t begin, int64_t end) {
    for (int64_t bi = begin; bi < end; ++bi) {
      const SgemmOperand b_entry =
          b_packed ? b_matrix : SgemmOperand::RowMajor(pb + b_offset[bi] * k * n, n);
      Sgemm(m, n, k, SgemmOperand::RowMajor(pa + a_offset[bi] * m * k, k), b_entry, pc + bi * m * n,
            n, per_batch ? nullptr : pool);
    }
  };
  if (per_batch) {
    pool->ParallelFor(batch_count, products);
  } else {
    products(0, batch_count);
  }
}

class MatMulKernel : public OpKernel {
 public:
  // A constant 2-D B (the usual weight) is packed once here; Run then reads
  // only its shape.
  explicit MatMulKernel(const KernelInit& init) {
    const Tensor* b = init.constant_inputs.size() > 1 ? init.constant_inputs[1] : nullptr;
    if (b && b->rank() == 2 && b->dtype() == DType::kFloat32)
      packed_b_ = SgemmPackB(b->data<float>(), b->dim(0), b->dim(1), b->dim(1));
  }
  bool ReadsConstantInRun(size_t input) const override { return input != 1 || !packed_b_.data; }
  void Run(KernelContext& ctx) override {
    // Every element is written.
    RunMatMul(ctx.input(0), ctx.input(1), &packed_b_, ctx.node(), ctx.pool(),
              [&](const Shape& shape) -> Tensor& {
                return ctx.AllocateUninitializedOutput(0, DType::kFloat32, shape);
              });
  }

 private:
  SgemmPacked packed_b_;
};

// Softmax over the last axis, row by row (the rows are independent).
void SoftmaxLastAxis(const Tensor& x, Tensor& y, ThreadPool* pool) {
  const int64_t length = x.rank() == 0 ? 1 : x.shape().back();
  if (x.numel() == 0) return;
  vmath::ParallelSoftmaxRows(pool, x.data<float>(), y.data<float>(), length, x.numel() / length);
}

// x with its axes permuted (ONNX Transpose), as a new dense tensor.
Tensor Permuted(const Tensor& x, const std::vector<int64_t>& perm, ThreadPool* pool) {
  std::vector<int64_t> strides(x.rank()), in_strides(x.rank());
  Shape shape(x.rank());
  for (int64_t d = static_cast<int64_t>(x.rank()) - 1, stride = 1; d >= 0; --d) {
    in_strides[d] = stride;
    stride *= x.dim(d);
  }
  for (size_t d = 0; d < perm.size(); ++d) {
    shape[d] = x.dim(perm[d]);
    strides[d] = in_strides[perm[d]];
  }
  Tensor y = Tensor::Uninitialized(x.dtype(), shape);
  StridedCopy(x.raw(), y.raw(), sizeof(float), shape, strides, pool);
  return y;
}

// octet.Rotary(x, cos, sin) (graph/octet_ops.h): per row of x's last axis (length L)
// the rotated row [-x[a, a + b), x[0, a)], a = min(half, L), b = max(min(end, L) - a, 0)
// (the two Slices as they clamp), then x * cos + rotated * sin with the separate nodes'
// broadcasting: the same two multiplies and add per element as the nodes.
class RotaryKernel : public OpKernel {
 public:
  explicit RotaryKernel(const KernelInit& init)
      : half_(init.node.GetInt("half", 0)), end_(init.node.GetInt("end", 0)) {}
  void Run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.input(0);
    const Tensor& cos = ctx.input(1);
    const Tensor& sin = ctx.input(2);
    OCTET_CHECK(x.rank() >= 1, node.Describe(), ": x must have an axis to rotate, got a scalar");
    const int64_t length = x.shape().back();
    const int64_t low = std::min(half_, length);
    const int64_t high = std::max<int64_t>(std::min(end_, length) - low, 0);
    Shape rotated_shape = x.shape();
    rotated_shape.back() = low + high;
    auto who = [&] { return node.Describe(); };
    const Shape out_shape = BroadcastOrFail(BroadcastOrFail(x.shape(), cos.shape(), who),
                                            BroadcastOrFail(rotated_shape, sin.shape(), who), who);
    Tensor& out = ctx.AllocateUninitializedOutput(0, DType::kFloat32, out_shape);
    if (out.numel() == 0) return;
    // Rows are the shapes with their last dim set to 1; along a row an operand of
    // last dim 1 repeats its one element.
    auto rows_of = [](const Shape& s) {
      Shape rows = s.empty() ? Shape{1} : s;
      rows.back() = 1;
      return rows;
    };
    const Shape out_rows = rows_of(out_shape);
    const std::vector<int64_t> x_strides = BroadcastStrides(rows_of(x.shape()), out_rows);
    const std::vector<int64_t> cos_strides = BroadcastStrides(rows_of(cos.shape()), out_rows);
    const std::vector<int64_t> sin_strides = BroadcastStrides(rows_of(sin.shape()), out_rows);
    auto last = [](const Tensor& t) { return t.rank() == 0 ? int64_t{1} : t.shape().back(); };
    const int64_t width = out_shape.back(), rotated_length = low + high;
    const int64_t cos_length = last(cos), sin_length = last(sin);
    const int64_t x_step = length == 1 ? 0 : 1, rotated_step = rotated_length == 1 ? 0 : 1;
    const int64_t cos_step = cos_length == 1 ? 0 : 1, sin_step = sin_length == 1 ? 0 : 1;
    const float* px = x.data<float>();
    const float* pc = cos.data<float>();
    const float* ps = sin.data<float>();
    float* po = out.data<float>();
    const int64_t rows = out.numel() / width;
    vmath::ParallelForWork(ctx.pool(), rows, out.numel() * 4, [&](int64_t begin, int64_t end) {
      std::vector<float> rotated(rotated_length);
      // The operands' rows of output row `begin`, then an odometer over the row dims.
      const int64_t dims = static_cast<int64_t>(out_rows.size());
      std::vector<int64_t> index(dims);
      int64_t x_row = 0, cos_row = 0, sin_row = 0;
      for (int64_t d = dims - 1, rest = begin; d >= 0; --d) {
        index[d] = rest % out_rows[d];
        rest /= out_rows[d];
        x_row += index[d] * x_strides[d], cos_row += index[d] * cos_strides[d];
        sin_row += index[d] * sin_strides[d];
      }
      for (int64_t row = begin; row < end; ++row) {
        if (row > begin) {
          for (int64_t d = dims - 1; d >= 0; --d) {
            x_row += x_strides[d], cos_row += cos_strides[d], sin_row += sin_strides[d];
            if (++index[d] < out_rows[d]) break;
            x_row -= x_strides[d] * out_rows[d], cos_row -= cos_strides[d] * out_rows[d];
            sin_row -= sin_strides[d] * out_rows[d];
            index[d] = 0;
          }
        }
        const float* xr = px + x_row * length;
        for (int64_t j = 0; j < high; ++j) rotated[j] = -xr[low + j];
        for (int64_t j = 0; j < low; ++j) rotated[high + j] = xr[j];
        const float* cr = pc + cos_row * cos_length;
        const float* sr = ps + sin_row * sin_length;
        float* yr = po + row * width;
        if (x_step && rotated_step && cos_step && sin_step) {  // the decoders' case: one loop
          const float* rr = rotated.data();
          for (int64_t j = 0; j < width; ++j) yr[j] = xr[j] * cr[j] + rr[j] * sr[j];
          continue;
        }
        for (int64_t j = 0; j < width; ++j) {
          const float a = xr[j * x_step] * cr[j * cos_step];
          const float b = rotated[j * rotated_step] * sr[j * sin_step];
          yr[j] = a + b;
        }
      }
    });
  }

 private:
  int64_t half_, end_;
};

// octet.GatedSilu(gate, up) (graph/octet_ops.h) = Mul(Mul(gate, Sigmoid(gate)), up):
// the Sigmoid node's vmath::Logistic and the Muls' correctly rounded products, a piece
// of the tensor at a time when gate and up have one shape, else as the three nodes.
class GatedSiluKernel : public OpKernel {
 public:
  explicit GatedSiluKernel(const KernelInit&) {}
  void Run(KernelContext& ctx) override {
    const Tensor& gate = ctx.input(0);
    const Tensor& up = ctx.input(1);
    const float* pg = gate.data<float>();
    if (gate.shape() != up.shape()) {
      Tensor silu = Tensor::Uninitialized(DType::kFloat32, gate.shape());
      vmath::Logistic(pg, silu.data<float>(), gate.numel());
      vmath::Binary(BinaryOp::kMul, pg, 1, silu.data<float>(), 1, silu.data<float>(), gate.numel());
      const Shape shape =
          BroadcastOrFail(gate.shape(), up.shape(), [&] { return ctx.node().Describe(); });
      BinaryFloat32(BinaryOp::kMul, silu, up,
                    ctx.AllocateUninitializedOutput(0, DType::kFloat32, shape), ctx.pool());
      return;
    }
    Tensor& out = ctx.AllocateUninitializedOutput(0, DType::kFloat32, gate.shape());
    const float* pu = up.data<float>();
    float* po = out.data<float>();
    constexpr int64_t kPiece = 4096;  // floats: the piece stays in L1 between the steps
    const int64_t pieces = (out.numel() + kPiece - 1) / kPiece;
    vmath::ParallelForWork(ctx.pool(), pieces, out.numel() * 8, [&](int64_t begin, int64_t end) {
      for (int64_t piece = begin; piece < end; ++piece) {
        const int64_t at = piece * kPiece, n = std::min(kPiece, out.numel() - at);
        vmath::Logistic(pg + at, po + at, n);
        vmath::Binary(BinaryOp::kMul, pg + at, 1, po + at, 1, po + at, n);
        vmath::Binary(BinaryOp::kMul, po + at, 1, pu + at, 1, po + at, n);
      }
    });
  }
};

// octet.FloatAttention(q, k_t, divisor, mask, v) =
//   MatMul(Softmax(Add(Div(MatMul(q, k_t), divisor), mask), axis=-1), v),
// the float attention of exported encoders, made by rewrite/float_attention.h.
// Attribute mask_first=1 spells Add(mask, scores). Attribute heads_inner=1
// takes the heads' transposes in too: q, v and the result are [batch,
// sequence, heads, head size] (each Transpose(perm=[0,2,1,3]) of the plain
// form) and k is k_t before its Transpose(perm=[0,2,3,1]), so each head is
// read and written in place with a row stride of heads x head size.
// Attribute scale_mul=1 multiplies by the third input instead of dividing.
// Attribute keys_rows=1 (decoders): k is [batch, kv heads, keys, head size],
// k_t before its Transpose(perm=[0,1,3,2]); with kv_repeat=g (kv_heads,
// kv_size, v_size: the repeat_kv Reshape's constants) k and v come before
// grouped-query attention's repeat_kv, and query head h reads their head h / g.
//
// When q, k_t and v share their batch dims, the divisor is one value and the
// mask broadcasts to the scores, each batch entry (one head of one sequence)
// runs start to end on one thread with its scores in cache; otherwise the
// steps run one after another on whole tensors. Both ways every element takes
// the same operations as the separate nodes (the same GEMM chains, IEEE
// divide and add, softmax rows), so the bits are the graph's.
// Query rows per head from which the decoder form packs the keys once per query head
// rather than once per key head: a row panel of the float GEMM's widest path.
constexpr int64_t kQueryRowsPerKeyPacking = 12;

class FloatAttentionKernel : public OpKernel {
 public:
  explicit FloatAttentionKernel(const KernelInit& init)
      : mask_first_(init.node.GetInt("mask_first", 0) != 0),
        heads_inner_(init.node.GetInt("heads_inner", 0) != 0),
        keys_rows_(init.node.GetInt("keys_rows", 0) != 0),
        scale_op_(init.node.GetInt("scale_mul", 0) != 0 ? BinaryOp::kMul : BinaryOp::kDiv),
        kv_repeat_(init.node.GetInt("kv_repeat", 0)),
        kv_heads_(init.node.GetInt("kv_heads", 0)),
        kv_size_(init.node.GetInt("kv_size", 0)),
        v_size_(init.node.GetInt("v_size", 0)),
        appends_kv_(init.node.GetInt("appends_kv", 0) != 0),
        cache_slot_(init.node.GetInt("cache_slot", -1)) {}
  // The past keys and values of appends_kv are copied row by row (or not read at all).
  bool ReadsOnlyInputBytes(size_t input) const override {
    return appends_kv_ && (input == 1 || input == 4);
  }
  void Run(KernelContext& ctx) override {
    if (appends_kv_) return RunAppending(ctx);
    if (keys_rows_) return RunKeysRows(ctx, HeadRows::Of(ctx.input(1)), HeadRows::Of(ctx.input(4)));
    const Tensor& q_in = ctx.input(0);
    const Tensor& k_in = ctx.input(1);
    const Tensor& divisor = ctx.input(2);
    const Tensor& mask = ctx.input(3);
    const Tensor& v_in = ctx.input(4);
    const Node& node = ctx.node();
    ThreadPool* pool = ctx.pool();
    if (heads_inner_)
      OCTET_CHECK(q_in.rank() == 4 && k_in.rank() == 4 && v_in.rank() == 4, node.Describe(),
                  ": q, k and v must be [batch, sequence, heads, head size], got shapes ",
                  ShapeToString(q_in.shape()), ", ", ShapeToString(k_in.shape()), " and ",
                  ShapeToString(v_in.shape()));
    // The shapes of the plain form (q, k_t and v as the first MatMuls see them).
    auto plain = [&](const Tensor& t, bool is_k) {
      if (!heads_inner_) return t.shape();
      return is_k ? Shape{t.dim(0), t.dim(2), t.dim(3), t.dim(1)}
                  : Shape{t.dim(0), t.dim(2), t.dim(1), t.dim(3)};
    };
    const Shape q_shape = plain(q_in, false), k_shape = plain(k_in, true),
                v_shape = plain(v_in, false);
    if (!InCache(q_shape, k_shape, divisor, mask, v_shape)) {
      const std::vector<int64_t> heads_out = {0, 2, 1, 3}, keys_out = {0, 2, 3, 1};
      Tensor out = Steps(heads_inner_ ? Permuted(q_in, heads_out, pool) : q_in,
                         heads_inner_ ? Permuted(k_in, keys_out, pool) : k_in, divisor, mask,
                         heads_inner_ ? Permuted(v_in, heads_out, pool) : v_in, node, pool);
      ctx.SetOutput(0, heads_inner_ ? Permuted(out, heads_out, pool) : std::move(out));
      return;
    }
    const int64_t rank = static_cast<int64_t>(q_shape.size());
    const int64_t m = q_shape[rank - 2], d = q_shape[rank - 1], n = k_shape[rank - 1];
    const int64_t dv = v_shape[rank - 1];
    const int64_t heads = heads_inner_ ? q_shape[1] : 1;
    Shape scores_shape = q_shape;
    scores_shape.back() = n;
    Shape out_shape = heads_inner_ ? q_in.shape() : q_shape;
    out_shape.back() = dv;
    Tensor& out = ctx.AllocateUninitializedOutput(0, DType::kFloat32, out_shape);
    const std::vector<int64_t> mask_strides = BroadcastStrides(mask.shape(), scores_shape);
    const int64_t batch_count = NumElements(q_shape) / std::max<int64_t>(m * d, 1);
    const float* pq = q_in.data<float>();
    const float* pk = k_in.data<float>();
    const float* pv = v_in.data<float>();
    const float* pm = mask.data<float>();
    const float* divisor_value = divisor.data<float>();
    const int mask_step = mask_strides.back() == 0 ? 0 : 1;
    float* po = out.data<float>();
    // Row strides of q, v and the result, and where entry bi starts in each.
    const int64_t q_ld = heads * d, v_ld = heads * dv;
    auto start = [&](int64_t bi, int64_t rows, int64_t cols) {
      return heads_inner_ ? bi / heads * rows * heads * cols + bi % heads * cols : bi * rows * cols;
    };
    auto entries = [&](int64_t begin, int64_t end) {
      std::vector<float> scores(m * n);  // one entry's scores, then its probabilities
      for (int64_t bi = begin; bi < end; ++bi) {
        // k_t of the entry: in place, or (heads inner) packed from its transpose.
        SgemmPacked k_packed;
        if (heads_inner_) k_packed = SgemmPackBTransposed(pk + start(bi, n, d), d, n, q_ld);
        Sgemm(m, n, d, SgemmOperand::RowMajor(pq + start(bi, m, d), q_ld),
              heads_inner_ ? SgemmOperand::Packed(k_packed)
                           : SgemmOperand::RowMajor(pk + bi * d * n, n),
              scores.data(), n, nullptr);
        int64_t mask_offset = 0;
        for (int64_t dim = rank - 3, rest = bi; dim >= 0; --dim) {
          mask_offset += rest % scores_shape[dim] * mask_strides[dim];
          rest /= scores_shape[dim];
        }
        for (int64_t i = 0; i < m; ++i)
          ScaleMask(scores.data() + i * n, n, divisor_value,
                    pm + mask_offset + i * mask_strides[rank - 2], mask_step);
        vmath::SoftmaxRows(scores.data(), scores.data(), n, m, n);
        Sgemm(m, dv, n, SgemmOperand::RowMajor(scores.data(), n),
              SgemmOperand::RowMajor(pv + start(bi, n, dv), v_ld), po + start(bi, m, dv), v_ld,
              nullptr);
      }
    };
    if (pool && batch_count > 1) {
      pool->ParallelFor(batch_count, entries);
    } else {
      entries(0, batch_count);
    }
  }

 private:
  // One row of scores through the scale and the mask (mask_step 0: one value), each the
  // separate node's operation; the softmax follows (vmath::SoftmaxRows).
  void ScaleMask(float* row, int64_t n, const float* scale, const float* mask_row,
                 int mask_step) const {
    vmath::Binary(scale_op_, row, 1, scale, 0, row, n);
    if (mask_first_) {
      vmath::Binary(BinaryOp::kAdd, mask_row, mask_step, row, 1, row, n);
    } else {
      vmath::Binary(BinaryOp::kAdd, row, 1, mask_row, mask_step, row, n);
    }
  }

  // How keys or values [batch, kv heads, rows, size] lie: rows (head_stride elements
  // from one head to the next), or as a KV cache keeps them, as the float GEMM's packed B
  // on `path` in panels of `panel` (ops/kv_cache.h): the keys' K^T (panels of rows), the
  // values' V (panels of columns, each `capacity` rows long).
  enum class Layout { kRows, kPackedKeys, kPackedValues };
  struct HeadRows {
    const Tensor* tensor = nullptr;  // the rows as a tensor (of any rank), when they are one
    const float* data = nullptr;
    Shape shape;
    int64_t head_stride = 0;
    Layout layout = Layout::kRows;
    int64_t panel = 0, capacity = 0;
    SgemmPath path = SgemmPath::kScalar;

    static HeadRows Of(const Tensor& t) {
      return {&t, t.data<float>(), t.shape(), t.rank() == 4 ? t.dim(2) * t.dim(3) : 0};
    }
    int64_t dim(size_t i) const { return shape[i]; }
    size_t rank() const { return shape.size(); }
    // The elements from a head's start that hold its rows (a packed head's whole panels).
    int64_t HeadSpan() const {
      if (layout == Layout::kPackedKeys) return PanelRows(shape[2], panel) * shape[3];
      return layout == Layout::kPackedValues ? head_stride : shape[2] * shape[3];
    }
    // Head h's keys as the scores' B (K^T), packed here or now.
    SgemmPacked KeysTransposed(int64_t h) const {
      const float* head = data + h * head_stride;
      return layout == Layout::kPackedKeys
                 ? SgemmPackedBView(head, shape[3], shape[2], path)
                 : SgemmPackBTransposed(head, shape[3], shape[2], shape[3]);
    }
    // Head h's first `rows` values as the probabilities' packed B (kPackedValues).
    SgemmPacked PackedValues(int64_t h, int64_t rows) const {
      return SgemmPackedBView(data + h * head_stride, rows, shape[3], path, capacity * panel);
    }
    // Element (head h, row j, column p).
    float At(int64_t h, int64_t j, int64_t p) const {
      const float* head = data + h * head_stride;
      switch (layout) {
        case Layout::kPackedKeys:
          return head[j / panel * shape[3] * panel + p * panel + j % panel];
        case Layout::kPackedValues:
          return head[p / panel * capacity * panel + j * panel + p % panel];
        default:
          return head[j * shape[3] + p];
      }
    }
    // The rows as a tensor: rows are one already (Of), a cache's packed heads are unpacked.
    Tensor ToTensor() const {
      if (tensor) return *tensor;
      const int64_t heads = shape[0] * shape[1], rows = shape[2], size = shape[3];
      Tensor dense = Tensor::Uninitialized(DType::kFloat32, shape);
      float* out = dense.data<float>();
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t j = 0; j < rows; ++j)
          for (int64_t p = 0; p < size; ++p) out[(h * rows + j) * size + p] = At(h, j, p);
      return dense;
    }
  };

  // rows rounded up to whole panels (panel 0: rows).
  static int64_t PanelRows(int64_t rows, int64_t panel) {
    return panel ? (rows + panel - 1) / panel * panel : rows;
  }

  // appends_kv (decoders with a KV cache): inputs 1 and 4 are the past keys and values,
  // 5 and 6 the step's new ones, and outputs 1 and 2 the graph's presents, Concat(past,
  // new) along the rows, which the attention reads. When the caller holds a KV cache the
  // past is there instead: the new rows are appended to it in place, and the presents
  // are written only when the caller asks for them.
  void RunAppending(KernelContext& ctx) const {
    const Tensor& new_k = ctx.input(5);
    const Tensor& new_v = ctx.input(6);
    KvCacheState* cache = ctx.kv_cache();
    if (!cache) {
      Tensor present_k = ConcatRows(ctx.input(1), new_k, ctx);
      Tensor present_v = ConcatRows(ctx.input(4), new_v, ctx);
      RunKeysRows(ctx, HeadRows::Of(present_k), HeadRows::Of(present_v));
      ctx.SetOutput(1, std::move(present_k));
      ctx.SetOutput(2, std::move(present_v));
      return;
    }
    OCTET_CHECK(cache_slot_ >= 0 && cache_slot_ < static_cast<int64_t>(cache->nodes.size()),
                "internal: ", ctx.node().Describe(), " has cache slot ", cache_slot_, " of ",
                cache->nodes.size());
    KvCacheRows& rows = cache->nodes[cache_slot_];
    if (!rows.keys.defined()) rows.path = SgemmPathFor(ActiveIsa());
    const HeadRows k = Append(rows.keys, new_k, *cache, Layout::kPackedKeys, rows.path, ctx);
    const HeadRows v = Append(rows.values, new_v, *cache, Layout::kPackedValues, rows.path, ctx);
    RunKeysRows(ctx, k, v);
    if (cache->presents_wanted) {
      if (ctx.output_wanted(1)) ctx.SetOutput(1, k.ToTensor());
      if (ctx.output_wanted(2)) ctx.SetOutput(2, v.ToTensor());
    }
  }

  static void CheckRows(const Tensor& rows, const char* what, const Node& node) {
    OCTET_CHECK(rows.rank() == 4, node.Describe(), ": the ", what,
                " must be [batch, kv heads, rows, head size], got shape ",
                ShapeToString(rows.shape()));
  }

  // Concat(past, rows) along the rows, as the graph's node.
  static Tensor ConcatRows(const Tensor& past, const Tensor& rows, KernelContext& ctx) {
    const Node& node = ctx.node();
    CheckRows(past, "past keys and values", node);
    CheckRows(rows, "new keys and values", node);
    OCTET_CHECK(
        past.dim(0) == rows.dim(0) && past.dim(1) == rows.dim(1) && past.dim(3) == rows.dim(3),
        node.Describe(), ": the past keys or values have shape ", ShapeToString(past.shape()),
        ", which does not match the new ones' ", ShapeToString(rows.shape()), " outside axis 2");
    Tensor out = Tensor::Uninitialized(
        DType::kFloat32, {past.dim(0), past.dim(1), past.dim(2) + rows.dim(2), past.dim(3)});
    ConcatCopy({&past, &rows}, 2, out, ctx.pool());
    return out;
  }

  // Appends rows [batch, kv heads, rows, head size] to one node's cached keys or values,
  // packed as `layout` for the float GEMM's `path`, after the cache's length, growing them
  // when full; the result reads all of them.
  static HeadRows Append(Tensor& held, const Tensor& rows, KvCacheState& cache, Layout layout,
                         SgemmPath path, KernelContext& ctx) {
    const Node& node = ctx.node();
    CheckRows(rows, "new keys and values", node);
    const int64_t count = rows.dim(2), size = rows.dim(3), heads = rows.dim(0) * rows.dim(1);
    const int64_t panel = SgemmPackedBPanel(path);
    const bool keys = layout == Layout::kPackedKeys;
    // Keys: capacity in whole panels of rows; values: columns in whole panels.
    const int64_t row_panel = keys ? panel : 0, columns = keys ? size : PanelRows(size, panel);
    if (cache.appended < 0) cache.appended = count;
    OCTET_CHECK(cache.appended == count, node.Describe(), ": appends ", count,
                " rows to the KV cache, where another attention node of this run appended ",
                cache.appended);
    if (held.defined()) {
      OCTET_CHECK(
          held.dim(0) == rows.dim(0) && held.dim(1) == rows.dim(1) && held.dim(3) == columns,
          node.Describe(), ": the KV cache holds keys and values of shape [", held.dim(0), ", ",
          held.dim(1), ", ", cache.length, ", ", size, "], the new ones have shape ",
          ShapeToString(rows.shape()), ": a cache serves one batch size");
    } else {
      OCTET_CHECK(cache.length == 0, "internal: ", node.Describe(), " holds no rows of the ",
                  cache.length, " in the KV cache");
    }
    const int64_t length = cache.length, capacity = held.defined() ? held.dim(2) : 0;
    // A head's panels, each `capacity` rows long for the values (so that a row appends in
    // place); the keys' panels are each a whole head's worth of keys.
    const int64_t value_panels = keys ? 1 : columns / panel;
    if (length + count > capacity) {
      const int64_t grown =
          PanelRows(std::max({length + count, cache.reserve, 2 * capacity}), row_panel);
      Tensor larger = cache.NewRows({rows.dim(0), rows.dim(1), grown, columns});
      // The keys' panels stay where they are as the capacity grows; each values panel
      // moves to its new start.
      if (length > 0) {
        const int64_t run = keys ? PanelRows(length, panel) * size : length * panel;
        CopyHeadRows(held.data<float>(), keys ? capacity * size : capacity * panel,
                     larger.data<float>(), keys ? grown * size : grown * panel,
                     heads * value_panels, run, ctx.pool());
      }
      held = std::move(larger);
    }
    const int64_t head_stride = held.dim(2) * columns, held_rows = held.dim(2);
    float* data = held.data<float>();
    const float* src = rows.data<float>();
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t r = 0; r < count; ++r) {
        const int64_t j = length + r;
        const float* row = src + (h * count + r) * size;
        float* head = data + h * head_stride;
        if (keys) {
          float* column = head + j / panel * size * panel + j % panel;
          for (int64_t p = 0; p < size; ++p) column[p * panel] = row[p];
        } else {
          for (int64_t q = 0; q * panel < size; ++q)
            std::memcpy(head + q * held_rows * panel + j * panel, row + q * panel,
                        std::min(panel, size - q * panel) * sizeof(float));
        }
      }
    return {nullptr,     data,   {rows.dim(0), rows.dim(1), length + count, size},
            head_stride, layout, panel,
            held_rows,   path};
  }

  // The decoder form (keys_rows): each (sequence, key and value head) entry start to end
  // on one thread with all its query heads, the key and value head read in place; else
  // the nodes' steps on whole tensors.
  void RunKeysRows(KernelContext& ctx, const HeadRows& k, const HeadRows& v) const {
    const Tensor& q = ctx.input(0);
    const Tensor& factor = ctx.input(2);
    const Tensor& mask = ctx.input(3);
    const Node& node = ctx.node();
    ThreadPool* pool = ctx.pool();
    const int64_t group = std::max<int64_t>(kv_repeat_, 1);
    bool fast = q.rank() == 4 && k.rank() == 4 && v.rank() == 4 && factor.numel() == 1 &&
                factor.rank() <= 4;
    const int64_t batch = fast ? q.dim(0) : 0, heads = fast ? q.dim(1) : 0;
    const int64_t m = fast ? q.dim(2) : 0, d = fast ? q.dim(3) : 0;
    const int64_t kv_heads = fast ? k.dim(1) : 0, n = fast ? k.dim(2) : 0;
    const int64_t dv = fast ? v.dim(3) : 0;
    Shape scores_shape = {batch, heads, m, n};
    fast = fast && k.dim(0) == batch && v.dim(0) == batch && v.dim(1) == kv_heads &&
           v.dim(2) == n && k.dim(3) == d && kv_heads * group == heads && n > 0 && dv > 0 &&
           NumElements(q.shape()) > 0 &&
           (kv_repeat_ == 0 || (kv_heads_ == heads && kv_size_ == d && v_size_ == dv)) &&
           BroadcastShapes(mask.shape(), scores_shape) == scores_shape;
    if (!fast) {
      const Tensor k_tensor = k.ToTensor(), v_tensor = v.ToTensor();
      const Tensor keys = kv_repeat_ ? RepeatKv(k_tensor, kv_size_, node, pool) : k_tensor;
      const Tensor values = kv_repeat_ ? RepeatKv(v_tensor, v_size_, node, pool) : v_tensor;
      OCTET_CHECK(keys.rank() == 4, node.Describe(), ": k must have rank 4, got shape ",
                  ShapeToString(keys.shape()));
      ctx.SetOutput(0,
                    Steps(q, Permuted(keys, {0, 1, 3, 2}, pool), factor, mask, values, node, pool));
      return;
    }
    Tensor& out = ctx.AllocateUninitializedOutput(0, DType::kFloat32, {batch, heads, m, dv});
    const std::vector<int64_t> mask_strides = BroadcastStrides(mask.shape(), scores_shape);
    const int mask_step = mask_strides.back() == 0 ? 0 : 1;
    const float* pq = q.data<float>();
    const float* pm = mask.data<float>();
    const float* factor_value = factor.data<float>();
    float* po = out.data<float>();
    // The query heads of one key and value head are consecutive, so their rows form one
    // matrix against the keys packed once: an entry takes all of them when a head has few
    // query rows (a decoding step, where packing the keys is most of the work), else one
    // (more entries to share among the threads; the packing is then a small part).
    const int64_t heads_per_entry = m < kQueryRowsPerKeyPacking ? group : 1;
    const int64_t rows = heads_per_entry * m, entry_count = batch * heads / heads_per_entry;
    auto entries = [&](int64_t begin, int64_t end) {
      std::vector<float> scores(rows * n);
      HiddenKeys hidden;
      for (int64_t entry = begin; entry < end; ++entry) {
        const int64_t first_head = entry * heads_per_entry % heads;
        const int64_t b = entry * heads_per_entry / heads, kv = b * kv_heads + first_head / group;
        const int64_t first_row = (b * heads + first_head) * m;
        const float* k_head = k.data + kv * k.head_stride;
        const float* v_head = v.data + kv * v.head_stride;
        const SgemmPacked k_packed = k.KeysTransposed(kv);
        const bool v_packed = v.layout == Layout::kPackedValues;
        const SgemmPacked v_panels = v_packed ? v.PackedValues(kv, n) : SgemmPacked{};
        if (heads_per_entry == 1 && mask_step == 1) {
          const float* mask_head = pm + b * mask_strides[0] + first_head * mask_strides[1];
          if (SkipsHiddenKeys(hidden, pq + first_row * d, kv, k_head, k.HeadSpan(), v_head,
                              v.HeadSpan(), mask_head, mask_strides[2], m, n, d, *factor_value)) {
            RunMaskedTail(m, n, d, dv, pq + first_row * d, k_packed, v_head,
                          v_packed ? &v_panels : nullptr, mask_head, mask_strides[2], factor_value,
                          hidden.kept, scores.data(), po + first_row * dv);
            continue;
          }
        }
        Sgemm(rows, n, d, SgemmOperand::RowMajor(pq + first_row * d, d),
              SgemmOperand::Packed(k_packed), scores.data(), n, nullptr);
        for (int64_t h = first_head; h < first_head + heads_per_entry; ++h) {
          const float* mask_head = pm + b * mask_strides[0] + h * mask_strides[1];
          float* head_scores = scores.data() + (h - first_head) * m * n;
          for (int64_t i = 0; i < m; ++i)
            ScaleMask(head_scores + i * n, n, factor_value, mask_head + i * mask_strides[2],
                      mask_step);
        }
        vmath::SoftmaxRows(scores.data(), scores.data(), n, rows, n);
        Sgemm(rows, dv, n, SgemmOperand::RowMajor(scores.data(), n),
              v_packed ? SgemmOperand::Packed(v_panels) : SgemmOperand::RowMajor(v_head, dv),
              po + first_row * dv, dv, nullptr);
      }
    };
    if (pool && entry_count > 1) {
      pool->ParallelFor(entry_count, entries);
    } else {
      entries(0, entry_count);
    }
  }

  // A mask value at or below kMasked hides its key: whatever the score, its exp is
  // 0 in the row's softmax as long as |score| <= kScoreBound and some key of the row
  // has a mask value above kKept (then e^(masked - max) underflows far past -104).
  static constexpr float kMasked = -1e30f, kKept = -1e29f;
  static constexpr double kScoreBound = 1e28;

  // What one thread's entries have found of the hidden keys so far: the kept prefixes of
  // the last mask rows read (a sequence's heads share one mask) and whether the last key
  // and value head is finite, with its largest |k| (its query heads are consecutive
  // entries), so that each is found once per run rather than once per query head.
  struct HiddenKeys {
    const float* mask = nullptr;
    bool any_hidden = false;
    std::vector<int64_t> kept;  // per row: the keys it must compute
    int64_t kv = -1;
    uint32_t k_max = 0;
    bool v_finite = false;
  };

  // For one query head's m rows of the decoder form (its key and value head kv): true,
  // with hidden.kept[i] the keys row i must compute, all keys past it being hidden by
  // the mask (a causal mask hides the future). False when skipping them could change a
  // bit: a q, k or v value that is not finite, scores that could reach kScoreBound, or
  // no hidden key at all.
  // k_count, v_count: the elements of k and v (a packed head's whole panels: what pads
  // them only raises the bound or makes a value non-finite, and so never skips where the
  // rows alone would not).
  bool SkipsHiddenKeys(HiddenKeys& hidden, const float* q, int64_t kv, const float* k,
                       int64_t k_count, const float* v, int64_t v_count, const float* mask,
                       int64_t mask_row_stride, int64_t m, int64_t n, int64_t d,
                       float factor) const {
    if (hidden.mask != mask) {
      hidden.mask = mask;
      hidden.kept.assign(m, n);
      hidden.any_hidden = false;
      for (int64_t i = 0; i < m; ++i) {
        const float* row = mask + i * mask_row_stride;
        int64_t j = n;
        while (j > 0 && row[j - 1] <= kMasked) --j;
        // The last kept key must lie above kKept (NaN counts as kept).
        if (j > 0 && j < n && !(row[j - 1] <= kKept)) hidden.kept[i] = j, hidden.any_hidden = true;
      }
    }
    if (!hidden.any_hidden) return false;
    if (hidden.kv != kv) {
      hidden.kv = kv;
      hidden.k_max = MaxAbsBits(k, k_count);
      hidden.v_finite = MaxAbsBits(v, v_count) < kNonFiniteBits;
    }
    const uint32_t q_max = MaxAbsBits(q, m * d);
    if (q_max >= kNonFiniteBits || hidden.k_max >= kNonFiniteBits || !hidden.v_finite ||
        !std::isfinite(factor))
      return false;
    // |q . k| <= d max|q| max|k| with room for the chain's rounding; then the scale.
    const double scale = scale_op_ == BinaryOp::kMul ? std::fabs(factor) : 1.0 / std::fabs(factor);
    const double bound = 4.0 * static_cast<double>(d) * std::bit_cast<float>(q_max) *
                         std::bit_cast<float>(hidden.k_max) * scale;
    return bound < kScoreBound;
  }

  // The bits of |x| as an integer, largest over n values: non-negative floats order
  // as their bits do, and an infinity or NaN gives kNonFiniteBits or more.
  static constexpr uint32_t kNonFiniteBits = 0x7F800000u;
  static uint32_t MaxAbsBits(const float* x, int64_t n) {
    int32_t largest = 0;
    for (int64_t i = 0; i < n; ++i)
      largest = std::max(largest, std::bit_cast<int32_t>(x[i]) & 0x7FFFFFFF);
    return static_cast<uint32_t>(largest);
  }

  // One query head (m rows) of the decoder form where SkipsHiddenKeys holds: each block
  // of rows computes the keys up to its longest kept prefix; the rest of each row is
  // -inf before the softmax (exp 0, as the hidden scores give) and no product reads
  // them (a probability of 0 times a finite value adds nothing to a chain). The
  // kept scores take the same chains and steps as the full rows.
  // v: the values' rows, or v_packed: them as a packed B (its first rows are read).
  void RunMaskedTail(int64_t m, int64_t n, int64_t d, int64_t dv, const float* q,
                     const SgemmPacked& k_packed, const float* v, const SgemmPacked* v_packed,
                     const float* mask, int64_t mask_row_stride, const float* factor,
                     const std::vector<int64_t>& kept, float* scores, float* out) const {
    constexpr int64_t kBlockRows = 48;
    for (int64_t r0 = 0; r0 < m; r0 += kBlockRows) {
      const int64_t r1 = std::min(m, r0 + kBlockRows);
      const int64_t width = *std::max_element(kept.begin() + r0, kept.begin() + r1);
      SgemmPacked keys = k_packed;  // its first `width` columns: panels do not depend on N
      keys.rows = width;
      Sgemm(r1 - r0, width, d, SgemmOperand::RowMajor(q + r0 * d, d), SgemmOperand::Packed(keys),
            scores + r0 * n, n, nullptr);
      for (int64_t i = r0; i < r1; ++i)
        ScaleMask(scores + i * n, width, factor, mask + i * mask_row_stride, 1);
      // The full rows' softmax would add keys at -inf: neutral to SoftmaxRow's lane
      // maxima, and each exp +0, neutral to its lane sums (or, when the max is NaN,
      // the NaN every lane already holds). So the first `width` values are the full
      // rows', and nothing reads the rest.
      vmath::SoftmaxRows(scores + r0 * n, scores + r0 * n, width, r1 - r0, n);
      SgemmPacked values;  // its first `width` rows: a panel's rows do not depend on K
      if (v_packed) {
        values = *v_packed;
        values.K = width;
      }
      Sgemm(r1 - r0, dv, width, SgemmOperand::RowMajor(scores + r0 * n, n),
            v_packed ? SgemmOperand::Packed(values) : SgemmOperand::RowMajor(v, dv), out + r0 * dv,
            dv, nullptr);
    }
  }

  // repeat_kv as its nodes compute it: Unsqueeze(x, [2]), Expand to [1, 1, g, 1, 1],
  // Reshape to [0, kv_heads, -1, size].
  Tensor RepeatKv(const Tensor& x, int64_t size, const Node& node, ThreadPool* pool) const {
    OCTET_CHECK(x.rank() >= 2, node.Describe(), ": repeat_kv needs rank >= 2, got shape ",
                ShapeToString(x.shape()));
    Shape unsqueezed = x.shape();
    unsqueezed.insert(unsqueezed.begin() + 2, 1);
    const Shape expanded = BroadcastOrFail(unsqueezed, {1, 1, kv_repeat_, 1, 1},
                                           [&] { return node.Describe() + " (repeat_kv)"; });
    Tensor repeated = Tensor::Uninitialized(DType::kFloat32, expanded);
    StridedCopy(x.raw(), repeated.raw(), sizeof(float), expanded,
                BroadcastStrides(unsqueezed, expanded), pool);
    const int64_t fixed = expanded[0] * kv_heads_ * size;
    OCTET_CHECK(fixed > 0 && repeated.numel() % fixed == 0, node.Describe(),
                ": repeat_kv cannot reshape ", ShapeToString(expanded), " to [0, ", kv_heads_,
                ", -1, ", size, "]");
    return repeated.Reshaped({expanded[0], kv_heads_, repeated.numel() / fixed, size});
  }

  // Whether the per-entry path applies (see the class comment), on the plain form's shapes.
  static bool InCache(const Shape& q, const Shape& k_t, const Tensor& divisor, const Tensor& mask,
                      const Shape& v) {
    const size_t rank = q.size();
    if (rank < 2 || k_t.size() != rank || v.size() != rank || divisor.numel() != 1 ||
        divisor.rank() > rank)
      return false;
    for (size_t dim = 0; dim + 2 < rank; ++dim)
      if (k_t[dim] != q[dim] || v[dim] != q[dim]) return false;
    if (k_t[rank - 2] != q[rank - 1] || v[rank - 2] != k_t[rank - 1]) return false;
    Shape scores_shape = q;
    scores_shape.back() = k_t[rank - 1];
    const std::optional<Shape> broadcast = BroadcastShapes(mask.shape(), scores_shape);
    return broadcast && *broadcast == scores_shape && NumElements(q) > 0 && NumElements(v) > 0 &&
           k_t[rank - 1] > 0;
  }

  // The separate nodes' steps, one after another on whole tensors.
  Tensor Steps(const Tensor& q, const Tensor& k_t, const Tensor& divisor, const Tensor& mask,
               const Tensor& v, const Node& node, ThreadPool* pool) const {
    Tensor scores, out;
    RunMatMul(q, k_t, nullptr, node, pool, [&](const Shape& shape) -> Tensor& {
      return scores = Tensor::Uninitialized(DType::kFloat32, shape);
    });
    Tensor scaled = Binary(scale_op_, scores, divisor, node, pool);
    Tensor masked = mask_first_ ? Binary(BinaryOp::kAdd, mask, scaled, node, pool)
                                : Binary(BinaryOp::kAdd, scaled, mask, node, pool);
    SoftmaxLastAxis(masked, masked, pool);
    RunMatMul(masked, v, nullptr, node, pool, [&](const Shape& shape) -> Tensor& {
      return out = Tensor::Uninitialized(DType::kFloat32, shape);
    });
    return out;
  }

  static Tensor Binary(BinaryOp op, const Tensor& a, const Tensor& b, const Node& node,
                       ThreadPool* pool) {
    Tensor out = Tensor::Uninitialized(
        DType::kFloat32, BroadcastOrFail(a.shape(), b.shape(), [&] { return node.Describe(); }));
    BinaryFloat32(op, a, b, out, pool);
    return out;
  }

  bool mask_first_;
  bool heads_inner_;
  bool keys_rows_;
  BinaryOp scale_op_;
  int64_t kv_repeat_, kv_heads_, kv_size_, v_size_;
  bool appends_kv_;
  int64_t cache_slot_;
};

// octet.MaskedSoftmax(x, table, mask, y_scale, y_zero_point) =
//   QuantizeLinear(Softmax(Add(LookupTable(x, table), mask), axis=-1), y_scale, y_zero_point)
// with the lookup (8-bit x, 256 float entries) and the quantization (one scale
// and zero point) each optional, made by rewrite/float_attention.h from the
// scores of quantized attention. Attribute mask_first=1 spells Add(mask, scores);
// min_rank is the lookup's (the looked-up scores have at least this rank).
// When the mask broadcasts to x's shape, each row goes from x to the output in
// cache; otherwise the steps run one after another. Both ways every element
// takes the operations of the separate nodes (table entry, IEEE add, softmax
// row, QuantizeLinear's division and rounding), so the bits are the graph's.
//
// With a constant table of finite values without -0, rows take their exps
// from tables made once per session (ExpTables) when every mask value is
// either +-0 or far enough below the scores that its exp is Exp's floor (BERT's
// mask: -0 for tokens, -10000 for padding): a kept position's score is T[x]
// exactly (T + +-0 = T), the row's max is T[i] for its largest kept entry i,
// and each kept exp exp(T[k] - T[i]) depends only on (i, k). The row is then a
// byte lookup of ranks, a byte max, one lookup of exps, the floor for masked
// positions and NormalizeRow (SoftmaxRow's sum and division): the same bits
// without an exp per element.
// For a constant table T of 256 finite floats without -0: rank[j] orders the
// entries (equal values share a rank), by_rank[r] is an entry of rank r, and
// exps[i][k] = exp(T[k] - T[i]), each computed as SoftmaxRow computes it.
struct ExpTables {
  uint8_t rank[256];
  uint8_t by_rank[256];
  std::vector<DwordTable256> exps;
  float lowest, highest;  // the table's extremes
  float floor_exp;        // exp of every argument <= kFloorArgument (Exp clamps there)
  static constexpr float kFloorArgument = -104.f;

  // Which positions of a mask row (n values, or one repeated when `step` is 0)
  // leave their score as it is (+0 / -0): keep[j] = 0xFF, and which are masked
  // so far below that their exp is floor_exp whatever the scores (keep[j] = 0:
  // T[x] + m - T[i] <= kFloorArgument for every entry pair, which also puts them
  // under every kept score, so the row's max is its largest kept score). False
  // (take the general path) for any other mask value, or with nothing kept.
  // keep_bits[j]: keep[j] widened to 32 bits, for a branchless select of floats.
  bool ClassifyMask(const float* mask, int step, int64_t n, uint8_t* keep,
                    uint32_t* keep_bits) const {
    bool any_kept = false;
    for (int64_t j = 0; j < n; ++j) {
      const float m = mask[step ? j : 0];
      const bool zero = (std::bit_cast<uint32_t>(m) & 0x7fffffffu) == 0;
      if (!zero) {
        const float highest_masked = highest + m;
        if (!(highest_masked - lowest <= kFloorArgument)) return false;  // also NaN
      }
      keep[j] = zero ? 0xFF : 0;
      keep_bits[j] = zero ? ~0u : 0u;
      any_kept |= zero;
    }
    return any_kept;
  }

  static std::optional<ExpTables> For(const float* table) {
    for (int k = 0; k < 256; ++k) {
      if (!std::isfinite(table[k]) || std::bit_cast<uint32_t>(table[k]) == 0x80000000u)
        return std::nullopt;
    }
    std::optional<ExpTables> t(std::in_place);
    std::vector<float> values(table, table + 256);
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    for (int k = 0; k < 256; ++k) {
      const auto r = std::lower_bound(values.begin(), values.end(), table[k]) - values.begin();
      t->rank[k] = static_cast<uint8_t>(r);
      t->by_rank[r] = static_cast<uint8_t>(k);
    }
    t->lowest = values.front();
    t->highest = values.back();
    const float floor_argument = kFloorArgument;
    vmath::Exp(&floor_argument, &t->floor_exp, 1);
    t->exps.reserve(256);
    float row[256];
    for (int i = 0; i < 256; ++i) {
      for (int k = 0; k < 256; ++k) row[k] = table[k] - table[i];
      vmath::Exp(row, row, 256);
      t->exps.emplace_back(row);
    }
    return t;
  }
};

class MaskedSoftmaxKernel : public OpKernel {
 public:
  explicit MaskedSoftmaxKernel(const KernelInit& init)
      : mask_first_(init.node.GetInt("mask_first", 0) != 0),
        min_rank_(init.node.GetInt("min_rank", 0)) {
    // The lookup pass makes the table a constant: lay it out once per session.
    const Tensor* table = init.constant_inputs.size() > 1 ? init.constant_inputs[1] : nullptr;
    if (table && table->numel() == 256 && DTypeSize(table->dtype()) == 4) {
      constant_entries_.emplace(table->raw());
      if (table->dtype() == DType::kFloat32) exp_tables_ = ExpTables::For(table->data<float>());
    }
  }
  void Run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    Shape shape = x.shape();
    if (static_cast<int64_t>(shape.size()) < min_rank_)
      shape.insert(shape.begin(), min_rank_ - shape.size(), 1);
    const Tensor* table = ctx.has_input(1) ? &ctx.input(1) : nullptr;
    const Tensor& mask = ctx.input(2);
    const bool quantize = ctx.has_input(3);
    const Node& node = ctx.node();
    OCTET_CHECK(!table || table->numel() == 256, node.Describe(), ": the table has ",
                table ? table->numel() : 0, " entries; expected 256");
    QuantizeSpanParams params;
    float scale = 1.f;
    int32_t zero_point = 0;
    if (quantize) {
      const Tensor& y_scale = ctx.input(3);
      OCTET_CHECK(y_scale.numel() == 1, node.Describe(), ": y_scale must be one value, got shape ",
                  ShapeToString(y_scale.shape()));
      scale = y_scale.data<float>()[0];
      params.type = DType::kUInt8;
      if (ctx.has_input(4)) {
        const Tensor& zero = ctx.input(4);
        OCTET_CHECK(zero.numel() == 1, node.Describe(),
                    ": y_zero_point must be one value, got shape ", ShapeToString(zero.shape()));
        params.type = zero.dtype();
        zero_point =
            zero.dtype() == DType::kInt8 ? zero.data<int8_t>()[0] : zero.data<uint8_t>()[0];
      }
      params.scale = &scale;
      params.zero_point = &zero_point;
    }
    const DType out_type = quantize ? params.type : DType::kFloat32;
    const uint8_t offset = x.dtype() == DType::kInt8 ? 128 : 0;
    // The table laid out for the vector lookup: once per session when constant.
    const DwordTable256* entries = constant_entries_ ? &*constant_entries_ : nullptr;
    std::optional<DwordTable256> run_entries;
    if (table && !entries) entries = &run_entries.emplace(table->raw());

    const std::optional<Shape> broadcast = BroadcastShapes(mask.shape(), shape);
    if (!broadcast || *broadcast != shape || shape.empty()) {
      Tensor scores = x;
      if (table) {
        scores = Tensor::Uninitialized(DType::kFloat32, shape);
        LookupDwords256(static_cast<const uint8_t*>(x.raw()), x.numel(), offset, *entries,
                        scores.raw());
      }
      const Shape out_shape =
          BroadcastOrFail(scores.shape(), mask.shape(), [&] { return node.Describe(); });
      Tensor probs = Tensor::Uninitialized(DType::kFloat32, out_shape);
      if (mask_first_) {
        BinaryFloat32(BinaryOp::kAdd, mask, scores, probs, ctx.pool());
      } else {
        BinaryFloat32(BinaryOp::kAdd, scores, mask, probs, ctx.pool());
      }
      SoftmaxLastAxis(probs, probs, ctx.pool());
      if (!quantize) return ctx.SetOutput(0, std::move(probs));
      QuantizeSpan(probs.data<float>(), probs.numel(), params,
                   ctx.AllocateUninitializedOutput(0, out_type, out_shape).raw());
      return;
    }
    const int64_t rank = static_cast<int64_t>(shape.size()), n = shape.back();
    const int64_t rows = n == 0 ? 0 : x.numel() / n;
    Tensor& out = ctx.AllocateUninitializedOutput(0, out_type, shape);
    if (rows == 0) return;
    const std::vector<int64_t> mask_strides = BroadcastStrides(mask.shape(), shape);
    const int mask_step = mask_strides.back() == 0 ? 0 : 1;
    const float* pm = mask.data<float>();
    const size_t out_size = DTypeSize(out_type);
    // The exp tables hold for the constant table only (a table fed at run time is not).
    const ExpTables* exp_tables = exp_tables_ && table && !run_entries ? &*exp_tables_ : nullptr;
    vmath::ParallelForWork(ctx.pool(), rows, x.numel() * 16, [&](int64_t begin, int64_t end) {
      std::vector<float> buffer(quantize ? n : 0);  // the row before quantization
      std::vector<uint8_t> ranks(exp_tables ? n : 0), keep(exp_tables ? n : 0);
      std::vector<uint32_t> keep_bits(exp_tables ? n : 0);
      int64_t classified_mask = -1;  // the mask row last classified (rows share it across heads)
      bool table_exps = false;
      for (int64_t r = begin; r < end; ++r) {
        float* row = quantize ? buffer.data() : out.data<float>() + r * n;
        const auto* x_row = static_cast<const uint8_t*>(x.raw()) + r * n;
        int64_t mask_offset = 0;
        for (int64_t dim = rank - 2, rest = r; dim >= 0; --dim) {
          mask_offset += rest % shape[dim] * mask_strides[dim];
          rest /= shape[dim];
        }
        if (exp_tables && mask_offset != classified_mask) {
          table_exps = exp_tables->ClassifyMask(pm + mask_offset, mask_step, n, keep.data(),
                                                keep_bits.data());
          classified_mask = mask_offset;
        }
        if (table_exps) {
          LookupTable256(x_row, n, offset, exp_tables->rank, 1, ranks.data());
          uint8_t top = 0;
          for (int64_t i = 0; i < n; ++i) top = std::max(top, uint8_t(ranks[i] & keep[i]));
          LookupDwords256(x_row, n, offset, exp_tables->exps[exp_tables->by_rank[top]], row);
          const uint32_t floor_bits = std::bit_cast<uint32_t>(exp_tables->floor_exp);
          for (int64_t i = 0; i < n; ++i) {  // masked positions: the floor (branchless)
            const uint32_t e = std::bit_cast<uint32_t>(row[i]);
            row[i] = std::bit_cast<float>((e & keep_bits[i]) | (floor_bits & ~keep_bits[i]));
          }
          vmath::NormalizeRow(row, n);
        } else {
          const float* scores = row;
          if (table) {
            LookupDwords256(x_row, n, offset, *entries, row);
          } else {
            scores = x.data<float>() + r * n;
          }
          if (mask_first_) {
            vmath::Binary(BinaryOp::kAdd, pm + mask_offset, mask_step, scores, 1, row, n);
          } else {
            vmath::Binary(BinaryOp::kAdd, scores, 1, pm + mask_offset, mask_step, row, n);
          }
          vmath::SoftmaxRow(row, row, n);
        }
        if (quantize)
          QuantizeSpan(row, n, params, static_cast<uint8_t*>(out.raw()) + r * n * out_size);
      }
    });
  }

 private:
  bool mask_first_;
  int64_t min_rank_;
  std::optional<DwordTable256> constant_entries_;
  std::optional<ExpTables> exp_tables_;
};

class BinaryKernel : public OpKernel {
 public:
  explicit BinaryKernel(BinaryOp op) : op_(op) {}
  void Run(KernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    const Shape shape =
        BroadcastOrFail(a.shape(), b.shape(), [&] { return ctx.node().Describe(); });
    switch (a.dtype()) {
      case DType::kInt32:
        return BinaryInteger<int32_t>(a, b, ctx.AllocateOutput(0, a.dtype(), shape), ctx.node());
      case DType::kInt64:
        return BinaryInteger<int64_t>(a, b, ctx.AllocateOutput(0, a.dtype(), shape), ctx.node());
      default:
        // Every element is written.
        return BinaryFloat32(op_, a, b, ctx.AllocateUninitializedOutput(0, a.dtype(), shape),
                             ctx.pool());
    }
  }

 private:
  // Shape arithmetic of exported graphs (int64, sometimes int32). Wraps on
  // overflow like ONNX Runtime; Div truncates toward zero and refuses zero.
  template <typename T>
  void BinaryInteger(const Tensor& a, const Tensor& b, Tensor& out, const Node& node) const {
    const T* pa = static_cast<const T*>(a.raw());
    const T* pb = static_cast<const T*>(b.raw());
    T* po = static_cast<T*>(out.raw());
    using U = std::make_unsigned_t<T>;
    const BinaryOp op = op_;
    ForEachBroadcast<2>(out.shape(), {&a.shape(), &b.shape()},
                        [&](int64_t i, const std::array<int64_t, 2>& off) {
                          const T x = pa[off[0]], y = pb[off[1]];
                          switch (op) {
                            case BinaryOp::kAdd:
                              po[i] = static_cast<T>(U(x) + U(y));
                              break;
                            case BinaryOp::kSub:
                              po[i] = static_cast<T>(U(x) - U(y));
                              break;
                            case BinaryOp::kMul:
                              po[i] = static_cast<T>(U(x) * U(y));
                              break;
                            case BinaryOp::kDiv:
                              OCTET_CHECK(y != 0, node.Describe(), ": integer division by zero");
                              po[i] = (y == -1) ? static_cast<T>(U(0) - U(x)) : x / y;
                              break;
                          }
                        });
  }

  BinaryOp op_;
};

class ReluKernel : public OpKernel {
 public:
  void Run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    ReluFloat32(x, ctx.AllocateUninitializedOutput(0, DType::kFloat32, x.shape()), ctx.pool());
  }
};

template <typename Kernel, typename... Args>
std::function<std::unique_ptr<OpKernel>(const KernelInit&)> Make(Args... args) {
  return [=](const KernelInit&) { return std::make_unique<Kernel>(args...); };
}

}  // namespace

void RegisterFloatOps(KernelRegistry& r) {
  // Opsets 1-6 of the binary ops used the legacy `broadcast`/`axis`
  // attributes, and Relu-1 `consumed_inputs`; those versions are not supported.
  r.Register({kOnnxDomain, "MatMul", 1, 1 << 30, AllFloat32, Float32Output,
              [](const KernelInit& init) { return std::make_unique<MatMulKernel>(init); }});
  const std::pair<const char*, BinaryOp> binary_ops[] = {{"Add", BinaryOp::kAdd},
                                                         {"Sub", BinaryOp::kSub},
                                                         {"Mul", BinaryOp::kMul},
                                                         {"Div", BinaryOp::kDiv}};
  for (const auto& [name, op] : binary_ops)
    r.Register({kOnnxDomain, name, 7, 1 << 30,
                [](const Node&, const std::vector<DType>& t) {
                  return t.size() == 2 && t[0] == t[1] &&
                         OneOf(t[0], {DType::kFloat32, DType::kInt32, DType::kInt64});
                },
                [](const Node&, const std::vector<DType>& t) { return std::vector<DType>{t[0]}; },
                Make<BinaryKernel>(op)});
  r.Register({kOnnxDomain, "Relu", 6, 1 << 30, AllFloat32, Float32Output, Make<ReluKernel>()});
  r.Register({kOctetDomain, kFloatAttentionOp, 1, 1 << 30,
              [](const Node& n, const std::vector<DType>& t) {
                return t.size() == (n.GetInt("appends_kv", 0) != 0 ? 7u : 5u) && AllFloat32(n, t);
              },
              [](const Node& n, const std::vector<DType>&) {
                // appends_kv: the attention, then the present keys and values.
                return std::vector<DType>(n.GetInt("appends_kv", 0) != 0 ? 3 : 1, DType::kFloat32);
              },
              [](const KernelInit& init) { return std::make_unique<FloatAttentionKernel>(init); }});
  r.Register(
      {kOctetDomain, kRotaryOp, 1, 1 << 30,
       [](const Node& n, const std::vector<DType>& t) { return t.size() == 3 && AllFloat32(n, t); },
       Float32Output, [](const KernelInit& init) { return std::make_unique<RotaryKernel>(init); }});
  r.Register(
      {kOctetDomain, kGatedSiluOp, 1, 1 << 30,
       [](const Node& n, const std::vector<DType>& t) { return t.size() == 2 && AllFloat32(n, t); },
       Float32Output,
       [](const KernelInit& init) { return std::make_unique<GatedSiluKernel>(init); }});
  r.Register({kOctetDomain, kMaskedSoftmaxOp, 1, 1 << 30,
              [](const Node&, const std::vector<DType>& t) {
                const bool byte_x = t.size() > 1 && (t[0] == DType::kUInt8 || t[0] == DType::kInt8);
                return t.size() == 5 && (t[0] == DType::kFloat32 || byte_x) &&
                       t[1] == (byte_x ? DType::kFloat32 : DType::kUndefined) &&
                       t[2] == DType::kFloat32 &&
                       OneOf(t[3], {DType::kFloat32, DType::kUndefined}) &&
                       OneOf(t[4], {DType::kUInt8, DType::kInt8, DType::kUndefined}) &&
                       (t[4] == DType::kUndefined || t[3] == DType::kFloat32);
              },
              [](const Node&, const std::vector<DType>& t) {
                return std::vector<DType>{t[4] != DType::kUndefined   ? t[4]
                                          : t[3] != DType::kUndefined ? DType::kUInt8
                                                                      : DType::kFloat32};
              },
              [](const KernelInit& init) { return std::make_unique<MaskedSoftmaxKernel>(init); }});
}

}  // namespace octet
