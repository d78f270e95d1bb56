// The integer convolutions' attributes (graph/conv_attributes.h) resolved
// against the input shapes into a ConvGeometry. 1-D and 2-D convolutions; 3-D
// ones are refused.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "graph/conv_attributes.h"
#include "graph/graph.h"
#include "kernels/int8/conv_reference.h"

namespace octet {

// The geometry for input x [N, C, (H,) W] and weights w [M, C/group, (kH,) kW].
ConvGeometry ResolveConvGeometry(const Node& node, const ConvAttributes& attrs, const Shape& x,
                                 const Shape& w);

// [N, M, (out_h,) out_w]: the output shape for an input of rank `rank`.
Shape ConvOutputShape(const ConvGeometry& g, size_t rank);

}  // namespace octet
