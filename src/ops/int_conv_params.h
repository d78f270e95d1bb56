// Attributes of the integer convolutions (ConvInteger, QLinearConv): read and
// checked once per node, then resolved against the input shapes into a
// ConvGeometry. 1-D and 2-D convolutions; 3-D ones are refused.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "graph/graph.h"
#include "kernels/int8/conv_reference.h"

namespace octet {

struct ConvAttributes {
  std::string auto_pad;  // NOTSET, SAME_UPPER, SAME_LOWER or VALID
  int64_t group = 1;
  std::vector<int64_t> kernel_shape;  // empty: taken from W
  std::vector<int64_t> strides;       // empty: all 1
  std::vector<int64_t> dilations;     // empty: all 1
  std::vector<int64_t> pads;          // empty: all 0; [begin..., end...]
};

// Reads and checks the attributes that do not depend on shapes.
ConvAttributes ReadConvAttributes(const Node& node);

// The geometry for input x [N, C, (H,) W] and weights w [M, C/group, (kH,) kW].
ConvGeometry ResolveConvGeometry(const Node& node, const ConvAttributes& attrs, const Shape& x,
                                 const Shape& w);

// [N, M, (out_h,) out_w]: the output shape for an input of rank `rank`.
Shape ConvOutputShape(const ConvGeometry& g, size_t rank);

}  // namespace octet
