// Slice -> Slice on disjoint axes, with constant parameters and the first
// Slice's output read by nothing else, becomes one Slice over both sets of
// axes (how exporters spell a 2-D strided crop, e.g. YOLO's Focus layer:
// x[..., ::2, :] then [..., ::2]). Slicing is pure data movement and each
// axis is cropped independently, so the merged node gives the same bytes;
// it reads the source once and never writes the intermediate tensor.
#pragma once

#include "graph/graph.h"
#include "rewrite/qdq_matmul.h"

namespace octet {

void MergeSliceChains(Graph& g, QdqReport& report);

}  // namespace octet
