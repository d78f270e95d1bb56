// octet.Int8DynamicMatMul (graph/octet_ops.h; made by rewrite/float_matmul_int8.h): the
// forward route. w (int8 [K, N]) is packed once here; each run quantizes the rows of x
// (symmetric, amax / 127), multiplies on the int8 GEMM and scales the exact int32 sums
// back: y = (float(acc) * s_row[m]) * w_scale[n].
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/thread_pool.h"
#include "graph/octet_ops.h"
#include "kernels/int8/epilogue.h"
#include "kernels/int8/gemm.h"
#include "kernels/isa.h"
#include "ops/registry.h"

namespace octet {

namespace {

// Rows per quantization task: one row is K divisions, cheap beside its K x N products.
constexpr int64_t kRowChunk = 16;

class Int8DynamicMatMulKernel : public OpKernel {
 public:
  explicit Int8DynamicMatMulKernel(const KernelInit& init) {
    const Node& node = init.node;
    const Tensor* w = init.constant_inputs.size() > 1 ? init.constant_inputs[1] : nullptr;
    const Tensor* s = init.constant_inputs.size() > 2 ? init.constant_inputs[2] : nullptr;
    OCTET_CHECK(w && s, node.Describe(), ": w and w_scale must be constants");
    OCTET_CHECK(w->dtype() == DType::kInt8 && w->rank() == 2, node.Describe(),
                ": w must be int8 [K, N], got ", DTypeName(w->dtype()), " ",
                ShapeToString(w->shape()));
    OCTET_CHECK(s->dtype() == DType::kFloat32 && s->numel() == w->dim(1), node.Describe(),
                ": w_scale must hold N = ", w->dim(1), " float32 values");
    K_ = w->dim(0);
    N_ = w->dim(1);
    packed_ = PackB(plan_, w->raw(), /*b_signed=*/true, K_, N_, N_, init.weights);
    w_scale_.assign(s->data<float>(), s->data<float>() + N_);
  }

  // w and w_scale live on packed and copied.
  bool ReadsConstantInRun(size_t input) const override { return input == 0; }

  void Run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    OCTET_CHECK(x.dtype() == DType::kFloat32 && x.rank() >= 1 && x.dim(x.rank() - 1) == K_,
                ctx.node().Describe(), ": x must be float32 [..., ", K_, "], got ",
                DTypeName(x.dtype()), " ", ShapeToString(x.shape()));
    Shape out_shape = x.shape();
    out_shape.back() = N_;
    Tensor& y = ctx.AllocateUninitializedOutput(0, DType::kFloat32, out_shape);
    const int64_t M = K_ == 0 ? 0 : x.numel() / K_;
    if (M == 0 || N_ == 0) return;
    float* out = y.data<float>();
    if (K_ == 0) {
      std::fill(out, out + y.numel(), 0.f);
      return;
    }
    Tensor x_q = Tensor::Uninitialized(DType::kInt8, {M, K_});
    std::vector<float> s_row(M);
    const float* in = x.data<float>();
    int8_t* q = x_q.data<int8_t>();
    ParallelFor(ctx.pool(), (M + kRowChunk - 1) / kRowChunk, [&](int64_t begin, int64_t end) {
      for (int64_t m = begin * kRowChunk; m < std::min(M, end * kRowChunk); ++m) {
        const float* row = in + m * K_;
        float amax = 0.f;
        for (int64_t k = 0; k < K_; ++k) amax = std::fmax(amax, std::fabs(row[k]));
        const float s = amax / 127.f;
        s_row[m] = s;
        int8_t* q_row = q + m * K_;
        for (int64_t k = 0; k < K_; ++k) {
          const float v = s == 0.f ? 0.f : std::nearbyint(row[k] / s);
          q_row[k] = static_cast<int8_t>(std::fmin(127.f, std::fmax(-127.f, v)));
        }
      }
    });
    // The epilogue forms float(acc) * s_row[m]; the column scales follow in a
    // second multiply, the reference's order.
    Epilogue e;
    e.output = EpilogueOutput::kFloat;
    e.multiplier = {s_row.data(), /*per_row=*/true, /*per_column=*/false};
    Gemm(plan_, M, Int8Operand{q, /*is_signed=*/true, K_}, GemmZeroPoints{}, packed_, e, out, N_,
         ctx.pool());
    const float* col_scale = w_scale_.data();
    ParallelFor(ctx.pool(), (M + kRowChunk - 1) / kRowChunk, [&](int64_t begin, int64_t end) {
      for (int64_t m = begin * kRowChunk; m < std::min(M, end * kRowChunk); ++m) {
        float* o = out + m * N_;
        for (int64_t n = 0; n < N_; ++n) o[n] *= col_scale[n];
      }
    });
  }

 private:
  int64_t K_ = 0, N_ = 0;
  GemmPlan plan_ = PlanGemm(ActiveIsa(), /*a_signed=*/true);
  PackedB packed_;
  std::vector<float> w_scale_;
};

bool AcceptsInt8DynamicMatMul(const Node&, const std::vector<DType>& t) {
  return t.size() == 3 && t[0] == DType::kFloat32 && t[1] == DType::kInt8 &&
         t[2] == DType::kFloat32;
}

}  // namespace

void RegisterInt8DynamicMatMulOps(KernelRegistry& r) {
  r.Register(
      {kOctetDomain, kInt8DynamicMatMulOp, 1, 1 << 30, AcceptsInt8DynamicMatMul,
       [](const Node&, const std::vector<DType>&) { return std::vector<DType>{DType::kFloat32}; },
       [](const KernelInit& init) { return std::make_unique<Int8DynamicMatMulKernel>(init); }});
}

}  // namespace octet
