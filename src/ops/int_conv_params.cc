#include "ops/int_conv_params.h"

#include <algorithm>

namespace octet {

namespace {

// Output size and leading pad of one spatial axis.
struct AxisResolution {
  int64_t out = 0;
  int64_t pad_begin = 0;
};

AxisResolution ResolveAxis(const Node& node, const std::string& auto_pad, int64_t in,
                           int64_t kernel, int64_t stride, int64_t dilation, int64_t pad_begin,
                           int64_t pad_end, size_t axis) {
  const int64_t effective_kernel = (kernel - 1) * dilation + 1;
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    const int64_t out = (in + stride - 1) / stride;
    const int64_t total = std::max<int64_t>(0, (out - 1) * stride + effective_kernel - in);
    return {out, auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2};
  }
  if (auto_pad == "VALID") pad_begin = pad_end = 0;
  const int64_t padded = in + pad_begin + pad_end;
  OCTET_CHECK(padded >= effective_kernel, node.Describe(), ": spatial axis ", axis, " has size ",
              in, " with pads ", pad_begin, "+", pad_end, ", smaller than the dilated kernel size ",
              effective_kernel);
  return {(padded - effective_kernel) / stride + 1, pad_begin};
}

std::vector<int64_t> OrDefault(const std::vector<int64_t>& v, size_t size, int64_t value) {
  return v.empty() ? std::vector<int64_t>(size, value) : v;
}

}  // namespace

ConvGeometry ResolveConvGeometry(const Node& node, const ConvAttributes& attrs, const Shape& x,
                                 const Shape& w) {
  OCTET_CHECK(x.size() != 5, node.Describe(), ": 3-D convolution is not supported (x has shape ",
              ShapeToString(x), ")");
  OCTET_CHECK(x.size() == 3 || x.size() == 4, node.Describe(), ": x has shape ", ShapeToString(x),
              "; expected [N, C, W] or [N, C, H, W]");
  OCTET_CHECK(w.size() == x.size(), node.Describe(), ": w has shape ", ShapeToString(w),
              "; expected rank ", x.size(), " like x ", ShapeToString(x));
  const size_t spatial = x.size() - 2;
  const Shape kernel(w.begin() + 2, w.end());
  OCTET_CHECK(attrs.kernel_shape.empty() || attrs.kernel_shape == kernel, node.Describe(),
              ": kernel_shape ", ShapeToString(attrs.kernel_shape), " differs from w's shape ",
              ShapeToString(w));
  const auto strides = OrDefault(attrs.strides, spatial, 1);
  const auto dilations = OrDefault(attrs.dilations, spatial, 1);
  const auto pads = OrDefault(attrs.pads, 2 * spatial, 0);
  OCTET_CHECK(
      strides.size() == spatial && dilations.size() == spatial && pads.size() == 2 * spatial,
      node.Describe(), ": strides ", ShapeToString(strides), ", dilations ",
      ShapeToString(dilations), " and pads ", ShapeToString(pads), " do not fit ", spatial,
      "-D convolution of x ", ShapeToString(x));
  OCTET_CHECK(x[1] % attrs.group == 0 && w[0] % attrs.group == 0 && w[1] * attrs.group == x[1],
              node.Describe(), ": group ", attrs.group, " does not fit x ", ShapeToString(x),
              " and w ", ShapeToString(w), " (need C = w[1] * group and w[0] divisible by group)");

  ConvGeometry g;
  g.batch = x[0];
  g.in_channels = x[1];
  g.out_channels = w[0];
  g.group = attrs.group;
  // Axis 0 of a 1-D convolution is the width; the height stays 1.
  const size_t w_axis = spatial - 1;
  const AxisResolution along_w =
      ResolveAxis(node, attrs.auto_pad, x.back(), w.back(), strides[w_axis], dilations[w_axis],
                  pads[w_axis], pads[spatial + w_axis], w_axis);
  g.in_w = x.back();
  g.out_w = along_w.out;
  g.kernel_w = w.back();
  g.stride_w = strides[w_axis];
  g.dilation_w = dilations[w_axis];
  g.pad_left = along_w.pad_begin;
  if (spatial == 2) {
    const AxisResolution along_h = ResolveAxis(node, attrs.auto_pad, x[2], w[2], strides[0],
                                               dilations[0], pads[0], pads[2], 0);
    g.in_h = x[2];
    g.out_h = along_h.out;
    g.kernel_h = w[2];
    g.stride_h = strides[0];
    g.dilation_h = dilations[0];
    g.pad_top = along_h.pad_begin;
  }
  return g;
}

Shape ConvOutputShape(const ConvGeometry& g, size_t rank) {
  if (rank == 3) return {g.batch, g.out_channels, g.out_w};
  return {g.batch, g.out_channels, g.out_h, g.out_w};
}

}  // namespace octet
