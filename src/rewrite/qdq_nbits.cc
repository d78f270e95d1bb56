#include "rewrite/qdq_nbits.h"

#include <string>
#include <vector>

#include "graph/octet_ops.h"
#include "rewrite/qdq_util.h"

namespace octet {

namespace {

// Why a MatMul whose weight comes from blocked DequantizeLinear `dq` cannot fold; empty
// when it can. (The activation is float32: MatMul wants the float32 weight's type.)
std::string CheckGroup(const Graph& g, const Node& dq) {
  const int data = InputAt(dq, 0), scale_v = InputAt(dq, 1), zero_v = InputAt(dq, 2);
  const Tensor* w = ConstantValue(g, data);
  if (!w) return "weight_not_constant";
  if (w->dtype() != DType::kInt4 && w->dtype() != DType::kUInt4) return "weight_not_4bit";
  if (w->rank() != 2) return "weight_rank";
  if (dq.GetInt("axis", 1) != 0 && dq.GetInt("axis", 1) != -2) return "block_not_along_k";
  const int64_t bs = dq.GetInt("block_size", 0);
  if (bs < 16 || (bs & (bs - 1)) != 0) return "block_size";
  const int64_t out_type = dq.GetInt("output_dtype", 0);
  if (out_type != 0 && out_type != static_cast<int64_t>(DType::kFloat32)) return "dq_output_dtype";
  const Tensor* scale = ConstantValue(g, scale_v);
  if (!scale) return "scale_not_constant";
  if (scale->dtype() != DType::kFloat32) return "scale_dtype";
  const int64_t K = w->dim(0), N = w->dim(1);
  if (scale->shape() != Shape{(K + bs - 1) / bs, N}) return "scale_shape";
  if (zero_v >= 0) {
    const Tensor* zero = ConstantValue(g, zero_v);
    if (!zero) return "zero_point_not_constant";
    if (zero->dtype() != w->dtype() || zero->shape() != scale->shape()) return "zero_point_shape";
  }
  return "";
}

}  // namespace

void FuseBlockedDqMatMul(Graph& g, QdqReport& report) {
  bool changed = false;
  for (Node& mm : g.nodes) {
    if (mm.domain != kOnnxDomain || mm.op_type != "MatMul" || mm.inputs.size() != 2) continue;
    const int producer = g.values[mm.inputs[1]].producer;
    if (producer < 0 || !IsDequantizeNode(g.nodes[producer])) continue;
    const Node& dq = g.nodes[producer];
    if (dq.GetInt("block_size", 0) == 0) continue;  // per tensor / per axis: FuseQdqMatMul's
    // A MatMul whose activation is also dequantized was counted by FuseQdqMatMul.
    const int x_producer = g.values[mm.inputs[0]].producer;
    if (x_producer < 0 || !IsDequantizeNode(g.nodes[x_producer])) ++report.groups;
    if (const std::string why = CheckGroup(g, dq); !why.empty()) {
      report.Refuse(why, mm);
      continue;
    }
    ++report.claimed;
    Node f;
    f.name = (mm.name.empty() ? dq.name : mm.name) + "/nbits";
    f.op_type = kBlockedDqMatMulOp;
    f.domain = kOctetDomain;
    f.opset = 1;
    f.inputs = {mm.inputs[0], InputAt(dq, 0), InputAt(dq, 1), InputAt(dq, 2)};
    f.outputs = mm.outputs;
    f.attributes["block_size"] = Attribute::Int(dq.GetInt("block_size", 0));
    report.Fuse(mm, std::string(kOctetDomain) + "." + kBlockedDqMatMulOp + " (float output)");
    mm = std::move(f);
    changed = true;
  }
  if (changed) DropUnreadDequantize(g);
}

}  // namespace octet
