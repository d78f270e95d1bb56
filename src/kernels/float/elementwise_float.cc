#include "kernels/float/elementwise_float.h"

#include "kernels/float/broadcast.h"

namespace octet {

namespace {

template <typename Fn>
void BroadcastLoop(const Tensor& a, const Tensor& b, Tensor& out, Fn fn) {
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* po = out.data<float>();
  const int64_t total = out.numel();
  if (total == 0) return;
  const Shape& shape = out.shape();
  if (shape.empty()) {
    po[0] = fn(pa[0], pb[0]);
    return;
  }
  std::vector<int64_t> sa = BroadcastStrides(a.shape(), shape);
  std::vector<int64_t> sb = BroadcastStrides(b.shape(), shape);
  const size_t last = shape.size() - 1;
  const int64_t inner = shape[last];
  const int64_t step_a = sa[last], step_b = sb[last];
  // Odometer over all dims but the last; the inner loop runs along the last.
  std::vector<int64_t> index(shape.size(), 0);
  int64_t off_a = 0, off_b = 0;
  for (int64_t done = 0; done < total; done += inner) {
    for (int64_t j = 0; j < inner; ++j)
      po[done + j] = fn(pa[off_a + j * step_a], pb[off_b + j * step_b]);
    for (size_t d = last; d-- > 0;) {
      off_a += sa[d];
      off_b += sb[d];
      if (++index[d] < shape[d]) break;
      off_a -= sa[d] * shape[d];
      off_b -= sb[d] * shape[d];
      index[d] = 0;
    }
  }
}

}  // namespace

void BinaryFloat32(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  switch (op) {
    case BinaryOp::kAdd:
      return BroadcastLoop(a, b, out, [](float x, float y) { return x + y; });
    case BinaryOp::kSub:
      return BroadcastLoop(a, b, out, [](float x, float y) { return x - y; });
    case BinaryOp::kMul:
      return BroadcastLoop(a, b, out, [](float x, float y) { return x * y; });
    case BinaryOp::kDiv:
      return BroadcastLoop(a, b, out, [](float x, float y) { return x / y; });
  }
}

void ReluFloat32(const Tensor& x, Tensor& out) {
  const float* px = x.data<float>();
  float* po = out.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) po[i] = px[i] < 0.f ? 0.f : px[i];
}

}  // namespace octet
