// Float32 operators that whole quantized models need around their integer
// parts: MatMul, Add, Sub, Mul, Div, Relu (ONNX semantics, numpy broadcasting).
// Add/Sub/Mul/Div also take int32/int64 for exported shape arithmetic.
#include <algorithm>

#include "kernels/float/broadcast.h"
#include "kernels/float/elementwise_float.h"
#include "kernels/float/sgemm.h"
#include "ops/registry.h"
#include "runtime/thread_pool.h"

namespace octet {

namespace {

bool AllFloat32(const Node&, const std::vector<DType>& types) {
  return std::all_of(types.begin(), types.end(), [](DType t) { return t == DType::kFloat32; });
}

std::vector<DType> Float32Output(const Node&, const std::vector<DType>&) {
  return {DType::kFloat32};
}

// Numpy matmul: 1-D operands are promoted to matrices and the added dim is
// dropped from the result; the leading (batch) dims broadcast.
class MatMulKernel : public OpKernel {
 public:
  // A constant 2-D B (the usual weight) is packed once here.
  explicit MatMulKernel(const KernelInit& init) {
    const Tensor* b = init.constant_inputs.size() > 1 ? init.constant_inputs[1] : nullptr;
    if (b && b->rank() == 2 && b->dtype() == DType::kFloat32)
      packed_b_ = SgemmPackB(b->data<float>(), b->dim(0), b->dim(1), b->dim(1));
  }
  void Run(KernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    const Node& node = ctx.node();
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
    Tensor& out = ctx.AllocateOutput(0, DType::kFloat32, out_shape);

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
        packed_b_.data && b_shape.size() == 2 && packed_b_.K == k && packed_b_.rows == n;
    const SgemmOperand b_matrix =
        b_packed ? SgemmOperand::Packed(packed_b_) : SgemmOperand::RowMajor(pb, n);
    // A 2-D B shared by unbroadcast batches of A: one GEMM over all their rows.
    if (b_batch.empty() && a_batch == *batch) {
      Sgemm(batch_count * m, n, k, SgemmOperand::RowMajor(pa, k), b_matrix, pc, n, ctx.pool());
      return;
    }
    // Each product's bits do not depend on the pool, so many small products
    // run one per thread and few large ones share the pool.
    const bool per_batch = ctx.pool() && batch_count >= ctx.pool()->num_threads();
    auto products = [&](int64_t begin, int64_t end) {
      for (int64_t bi = begin; bi < end; ++bi) {
        const SgemmOperand b_entry =
            b_packed ? b_matrix : SgemmOperand::RowMajor(pb + b_offset[bi] * k * n, n);
        Sgemm(m, n, k, SgemmOperand::RowMajor(pa + a_offset[bi] * m * k, k), b_entry,
              pc + bi * m * n, n, per_batch ? nullptr : ctx.pool());
      }
    };
    if (per_batch) {
      ctx.pool()->ParallelFor(batch_count, products);
    } else {
      products(0, batch_count);
    }
  }

 private:
  SgemmPacked packed_b_;
};

class BinaryKernel : public OpKernel {
 public:
  explicit BinaryKernel(BinaryOp op) : op_(op) {}
  void Run(KernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    const Shape shape = BroadcastOrFail(a.shape(), b.shape(), ctx.node().Describe());
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
}

}  // namespace octet
