#include "graph/conv_attributes.h"

#include "core/error.h"

namespace octet {

ConvAttributes ReadConvAttributes(const Node& node) {
  ConvAttributes a;
  a.auto_pad = node.GetString("auto_pad", "NOTSET");
  OCTET_CHECK(a.auto_pad == "NOTSET" || a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER" ||
                  a.auto_pad == "VALID",
              node.Describe(), ": auto_pad '", a.auto_pad,
              "' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID");
  a.group = node.GetInt("group", 1);
  OCTET_CHECK(a.group >= 1, node.Describe(), ": group must be >= 1, got ", a.group);
  a.kernel_shape = node.GetInts("kernel_shape");
  a.strides = node.GetInts("strides");
  a.dilations = node.GetInts("dilations");
  a.pads = node.GetInts("pads");
  for (int64_t v : a.kernel_shape)
    OCTET_CHECK(v >= 1, node.Describe(), ": kernel_shape values must be >= 1");
  for (int64_t v : a.strides) OCTET_CHECK(v >= 1, node.Describe(), ": strides must be >= 1");
  for (int64_t v : a.dilations) OCTET_CHECK(v >= 1, node.Describe(), ": dilations must be >= 1");
  for (int64_t v : a.pads) OCTET_CHECK(v >= 0, node.Describe(), ": pads must be >= 0");
  return a;
}

}  // namespace octet
