#include "kernels/float/broadcast.h"

#include <algorithm>

namespace octet {

std::optional<Shape> BroadcastShapes(const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Align from the right; a missing leading dim acts as 1.
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> BroadcastStrides(const Shape& in, const Shape& out) {
  std::vector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  size_t offset = out.size() - in.size();
  for (size_t i = in.size(); i-- > 0;) {
    strides[i + offset] = in[i] == 1 ? 0 : stride;
    stride *= in[i];
  }
  return strides;
}

}  // namespace octet
