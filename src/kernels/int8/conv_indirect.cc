#include "kernels/int8/conv_indirect.h"

#include <cstdint>

namespace octet::conv {

namespace {

// The panel width with the least estimated cost: per channel group and pixel,
// a zmm of 16 channels costs 2 units (one double-pumped vpdpbusd), the ymm
// of a last 8 channels 1, and each panel 1 more for the broadcasts (so
// 24 -> 24, 48/96/192/384 -> 48, 64 -> 32, 50 -> 32). Ties go to the wider.
int64_t PanelWidth(int64_t out_channels) {
  int64_t best = 48, best_cost = INT64_MAX;
  for (int64_t width = 48; width >= 8; width -= 8) {
    const int64_t panels = (out_channels + width - 1) / width;
    const int64_t cost = panels * (width / 8 + 1);
    if (cost < best_cost) best = width, best_cost = cost;
  }
  return best;
}

}  // namespace

IndirectWeights PackIndirectWeights(const int8_t* w, int64_t out_channels, int64_t in_channels,
                                    int64_t taps) {
  IndirectWeights p;
  p.cp = (in_channels + 3) / 4 * 4;
  p.panel_width = PanelWidth(out_channels);
  const int64_t width = p.panel_width, groups = p.cp / 4;
  p.panels = (out_channels + width - 1) / width;
  p.packed.assign(p.panels * taps * groups * width * 4, 0);
  p.col_sum.assign(p.panels * width, 0);
  for (int64_t o = 0; o < out_channels; ++o) {
    const int64_t panel = o / width, lane = o % width;
    int32_t sum = 0;
    for (int64_t c = 0; c < in_channels; ++c) {
      for (int64_t t = 0; t < taps; ++t) {
        const int8_t v = w[(o * in_channels + c) * taps + t];
        sum += v;
        const int64_t group = (panel * taps + t) * groups + c / 4;
        p.packed[(group * width + lane) * 4 + c % 4] = static_cast<uint8_t>(v);
      }
    }
    p.col_sum[o] = sum;
  }
  return p;
}

}  // namespace octet::conv
