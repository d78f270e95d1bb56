#include "kernels/int8/conv_reference.h"

namespace octet {

namespace {
int64_t Load(const void* data, bool is_signed, int64_t index) {
  const uint8_t byte = static_cast<const uint8_t*>(data)[index];
  return is_signed ? static_cast<int8_t>(byte) : byte;
}
}  // namespace

void ConvReferenceS32(const ConvGeometry& g, const Int8ConvOperand& x, const Int8ConvOperand& w,
                      int32_t* y) {
  const int64_t in_per_group = g.in_channels / g.group;
  const int64_t out_per_group = g.out_channels / g.group;
  const int64_t x_zero = x.zero ? x.zero[0] : 0;
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t o = 0; o < g.out_channels; ++o) {
      const int64_t w_zero = w.zero ? w.zero[w.zero_per_channel ? o : 0] : 0;
      const int64_t first_channel = (o / out_per_group) * in_per_group;
      for (int64_t oy = 0; oy < g.out_h; ++oy) {
        for (int64_t ox = 0; ox < g.out_w; ++ox) {
          int64_t acc = 0;
          for (int64_t c = 0; c < in_per_group; ++c) {
            for (int64_t ky = 0; ky < g.kernel_h; ++ky) {
              const int64_t iy = oy * g.stride_h - g.pad_top + ky * g.dilation_h;
              if (iy < 0 || iy >= g.in_h) continue;
              for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
                const int64_t ix = ox * g.stride_w - g.pad_left + kx * g.dilation_w;
                if (ix < 0 || ix >= g.in_w) continue;
                const int64_t x_index =
                    ((n * g.in_channels + first_channel + c) * g.in_h + iy) * g.in_w + ix;
                const int64_t w_index =
                    ((o * in_per_group + c) * g.kernel_h + ky) * g.kernel_w + kx;
                acc += (Load(x.data, x.is_signed, x_index) - x_zero) *
                       (Load(w.data, w.is_signed, w_index) - w_zero);
              }
            }
          }
          y[((n * g.out_channels + o) * g.out_h + oy) * g.out_w + ox] =
              static_cast<int32_t>(static_cast<uint32_t>(acc));
        }
      }
    }
  }
}

}  // namespace octet
