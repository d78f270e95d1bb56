// The attributes of Conv, ConvInteger and QLinearConv that do not depend on
// shapes, read and checked once per node (the rewrites read them to decide
// whether a group folds; the kernels resolve them against the input shapes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"

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

}  // namespace octet
