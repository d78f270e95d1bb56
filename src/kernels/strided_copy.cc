#include "kernels/strided_copy.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/thread_pool.h"

namespace octet {

namespace {

// Edge of the square tiles of the 2-D transpose: a 16x16 tile of 8-byte
// elements (2 KiB) keeps its source lines and destination lines in L1.
constexpr int64_t kTile = 16;
// Copies smaller than this stay on the calling thread.
constexpr int64_t kParallelBytes = int64_t{1} << 18;

struct Dim {
  int64_t size;
  int64_t src_stride;
  int64_t dst_stride;
};

// The copy's dims with size-1 dims dropped and each dim merged into the one
// before it when the two stay adjacent in the source (the destination is
// dense, so they always are there).
std::vector<Dim> MergedDims(const Shape& shape, const std::vector<int64_t>& src_strides) {
  std::vector<int64_t> dst_strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) dst_strides[d - 1] = dst_strides[d] * shape[d];
  std::vector<Dim> dims;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!dims.empty() && dims.back().src_stride == src_strides[d] * shape[d]) {
      dims.back() = {dims.back().size * shape[d], src_strides[d], dst_strides[d]};
      continue;
    }
    dims.push_back({shape[d], src_strides[d], dst_strides[d]});
  }
  return dims;
}

// Source and destination offsets of a multi-index over `dims`, advanced in
// row-major order.
class Odometer {
 public:
  Odometer(const std::vector<Dim>& dims, int64_t linear) : dims_(dims), index_(dims.size()) {
    for (size_t d = dims.size(); d-- > 0;) {
      index_[d] = linear % dims[d].size;
      linear /= dims[d].size;
      src_ += index_[d] * dims[d].src_stride;
      dst_ += index_[d] * dims[d].dst_stride;
    }
  }
  int64_t src() const { return src_; }
  int64_t dst() const { return dst_; }
  void Next() {
    for (size_t d = dims_.size(); d-- > 0;) {
      src_ += dims_[d].src_stride;
      dst_ += dims_[d].dst_stride;
      if (++index_[d] < dims_[d].size) return;
      src_ -= dims_[d].src_stride * dims_[d].size;
      dst_ -= dims_[d].dst_stride * dims_[d].size;
      index_[d] = 0;
    }
  }

 private:
  const std::vector<Dim>& dims_;
  std::vector<int64_t> index_;
  int64_t src_ = 0;
  int64_t dst_ = 0;
};

// dst[r * dst_row_stride + c] = src[r + c * src_col_stride], in square tiles
// so that both the contiguous reads and the contiguous writes stay cached.
template <typename T>
void TransposeTiles(const T* src, T* dst, int64_t rows, int64_t cols, int64_t src_col_stride,
                    int64_t dst_row_stride) {
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    const int64_t r1 = std::min(rows, r0 + kTile);
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t c1 = std::min(cols, c0 + kTile);
      for (int64_t r = r0; r < r1; ++r) {
        const T* s = src + r;
        T* d = dst + r * dst_row_stride;
        for (int64_t c = c0; c < c1; ++c) d[c] = s[c * src_col_stride];
      }
    }
  }
}

template <typename T>
void CopyTyped(const T* src, T* dst, std::vector<Dim> dims, ThreadPool* pool) {
  const Dim last = dims.back();
  dims.pop_back();
  // When the source-contiguous axis is not the last one, copy 2-D tiles of
  // (that axis, last axis); the remaining dims are walked outside.
  Dim tile_rows{1, 0, 0};
  const bool tiled =
      last.src_stride != 1 &&
      std::any_of(dims.begin(), dims.end(), [](const Dim& d) { return d.src_stride == 1; });
  if (tiled) {
    const auto it =
        std::find_if(dims.begin(), dims.end(), [](const Dim& d) { return d.src_stride == 1; });
    tile_rows = *it;
    dims.erase(it);
  }
  int64_t outer = 1;
  for (const Dim& d : dims) outer *= d.size;
  auto copy = [&](int64_t begin, int64_t end) {
    Odometer at(dims, begin);
    for (int64_t i = begin; i < end; ++i, at.Next()) {
      const T* s = src + at.src();
      T* d = dst + at.dst();
      if (tiled) {
        TransposeTiles(s, d, tile_rows.size, last.size, last.src_stride, tile_rows.dst_stride);
      } else if (last.src_stride == 1) {
        std::memcpy(d, s, static_cast<size_t>(last.size) * sizeof(T));
      } else if (last.src_stride == 2) {
        // Every other element (a stride-2 Slice): a constant stride vectorizes.
        for (int64_t c = 0; c < last.size; ++c) d[c] = s[2 * c];
      } else {
        const int64_t stride = last.src_stride;
        for (int64_t c = 0; c < last.size; ++c) d[c] = s[c * stride];
      }
    }
  };
  const int64_t bytes = outer * tile_rows.size * last.size * static_cast<int64_t>(sizeof(T));
  if (pool && outer > 1 && bytes >= kParallelBytes)
    ParallelFor(pool, outer, copy);
  else
    copy(0, outer);
}

}  // namespace

void StridedCopy(const void* src, void* dst, size_t elem_size, const Shape& shape,
                 const std::vector<int64_t>& src_strides, ThreadPool* pool) {
  OCTET_CHECK(src_strides.size() == shape.size(), "StridedCopy: ", src_strides.size(),
              " strides for shape ", ShapeToString(shape));
  if (NumElements(shape) == 0) return;
  const std::vector<Dim> dims = MergedDims(shape, src_strides);
  if (dims.empty()) {
    std::memcpy(dst, src, elem_size);
    return;
  }
  switch (elem_size) {
    case 1:
      return CopyTyped(static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), dims, pool);
    case 2:
      return CopyTyped(static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst), dims, pool);
    case 4:
      return CopyTyped(static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst), dims, pool);
    case 8:
      return CopyTyped(static_cast<const uint64_t*>(src), static_cast<uint64_t*>(dst), dims, pool);
    default:
      Fail("StridedCopy: element size ", elem_size, " is not supported (1, 2, 4 or 8 bytes)");
  }
}

namespace {

// One memcpy of a Concat: a block of one input, or a piece of a big block.
struct ByteCopy {
  uint8_t* dst;
  const uint8_t* src;
  size_t bytes;
};
constexpr size_t kCopyPiece = size_t{1} << 14;
constexpr size_t kParallelCopyBytes = size_t{1} << 17;

}  // namespace

void ConcatCopy(const std::vector<const Tensor*>& inputs, int64_t axis, Tensor& out,
                ThreadPool* pool) {
  const Shape& out_shape = out.shape();
  const size_t elem = DTypeSize(out.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= out_shape[d];
  for (int64_t d = axis + 1; d < static_cast<int64_t>(out_shape.size()); ++d) inner *= out_shape[d];
  const size_t out_row = static_cast<size_t>(out_shape[axis] * inner) * elem;
  uint8_t* dst = static_cast<uint8_t*>(out.raw());
  // One memcpy per (outer index, input) block, big blocks cut into pieces
  // so that large outputs are copied by all threads.
  std::vector<ByteCopy> copies;
  for (int64_t o = 0; o < outer; ++o) {
    size_t column = 0;
    for (const Tensor* in : inputs) {
      const size_t in_row = static_cast<size_t>(in->shape()[axis] * inner) * elem;
      const uint8_t* src = static_cast<const uint8_t*>(in->raw()) + o * in_row;
      for (size_t done = 0; done < in_row; done += kCopyPiece)
        copies.push_back(
            {dst + o * out_row + column + done, src + done, std::min(kCopyPiece, in_row - done)});
      column += in_row;
    }
  }
  const bool parallel = out.nbytes() >= kParallelCopyBytes;
  ParallelFor(parallel ? pool : nullptr, static_cast<int64_t>(copies.size()),
              [&](int64_t begin, int64_t end) {
                for (int64_t c = begin; c < end; ++c)
                  std::memcpy(copies[c].dst, copies[c].src, copies[c].bytes);
              });
}

}  // namespace octet
