// DequantizeLinear -> (Reshape | Transpose | Squeeze | Unsqueeze | Flatten |
// Gather | Slice) -> QuantizeLinear with equal per-tensor parameters: the
// movement op runs on the 8-bit data and both Q/DQ nodes go (issue 4;
// docs/qdq.md). Exact because Q(DQ(q)) == q for every 8-bit q, which the pass
// checks by enumeration with ONNX Runtime's float steps before it rewrites.
#pragma once

#include "graph/graph.h"
#include "rewrite/qdq_matmul.h"

namespace octet {

void ElideQdqAroundMovement(Graph& g, QdqReport& report);

}  // namespace octet
