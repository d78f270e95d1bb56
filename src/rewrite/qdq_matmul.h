// The QDQ MatMul/Gemm fold (issue 4; docs/qdq.md):
//
//   DequantizeLinear(x) ---------------+
//                                       +--> MatMul | Gemm --> [QuantizeLinear] --> y
//   DequantizeLinear(W, constant) -----+     (Gemm: optional int32 DequantizeLinear bias)
//
// becomes one node octet.QLinearMatMulFused that multiplies the 8-bit integers
// and requantizes the int32 result once, in ONNX Runtime's float order. Without
// the QuantizeLinear the node returns float (MatMulIntegerToFloat semantics).
// Groups whose parameters cannot fold are left alone and counted by reason.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "graph/graph.h"

namespace octet {

inline constexpr const char* kOctetDomain = "octet";
inline constexpr const char* kFusedMatMulOp = "QLinearMatMulFused";

// Fused node interface. Inputs (-1 = omitted):
enum FusedMatMulInput {
  kFusedX = 0,   // int8/uint8 activations [..., K]
  kFusedXScale,  // float32, one value or one per index of attribute x_axis
  kFusedXZero,   // optional, x's dtype, same layout as the scale
  kFusedW,       // int8/uint8 constant weight, [K, N], or [N, K] when trans_b=1
  kFusedWScale,  // float32 constant, one value or N (per output column)
  kFusedWZero,   // optional, W's dtype, same layout as the scale
  kFusedYScale,  // optional float32 scalar; omitted = float output
  kFusedYZero,   // optional 8-bit scalar
  kFusedBias,    // optional int32 constant, one value or N; scale is x_scale * w_scale
  kFusedInputCount
};
// Attributes: x_axis (-1 = per tensor, else the axis of x the scale runs along,
// never the last), x_rank (x's rank when x_axis >= 0), trans_b (0/1),
// y_type (DType of the quantized output when y_zero_point is omitted),
// y_min / y_max (optional: clamp of the quantized output, from an absorbed
// Relu / Clip; rewrite/qdq_activation.h).

// What the pass did on one graph: candidate groups (a MatMul/Gemm fed by two
// DequantizeLinear nodes), how many became fused nodes, and the refusals as
// (reason, operator) -> count.
// Every decision is also kept in order as a record for `octet inspect`.
struct QdqRecord {
  std::string node;    // the node the group is named after (its MatMul, Add, ...)
  std::string op;      // that node's op_type
  bool fused = false;  // true: rewritten; false: refused, kept as written
  std::string detail;  // what it became, or the refusal reason
};

struct QdqReport {
  int groups = 0;
  int claimed = 0;
  std::map<std::pair<std::string, std::string>, int> refused;
  std::vector<QdqRecord> records;

  void Refuse(const std::string& why, const Node& at);
  void Fuse(const Node& at, const std::string& became);
};

// Rewrites g in place. The graph's inputs and outputs, and every value that
// some remaining node consumes, stay produced; nodes stay topologically ordered.
QdqReport FuseQdqMatMul(Graph& g);

// The OCTET_QDQ_DEBUG lines for one graph: one `qdq_refused why=<reason>
// op=<op> count=<n>` per reason, then `qdq_groups=<n> claimed=<n>`.
std::string FormatQdqReport(const QdqReport& report);

}  // namespace octet
