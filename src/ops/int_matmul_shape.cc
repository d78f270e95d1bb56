#include "ops/int_matmul_shape.h"

#include <optional>

#include "kernels/float/broadcast.h"

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
