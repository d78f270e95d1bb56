// Copies a strided view of a tensor into a dense row-major one: the common
// engine of Transpose and Slice (and any other pure data movement), and the
// copy of Concat. Works on
// element bytes (sizes 1, 2, 4 and 8), so every storage dtype is handled.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace octet {

class ThreadPool;

// dst[i_0, ..., i_k] = src[sum_d(i_d * src_strides[d])] for every index of
// `shape`, with dst dense row-major. Strides are in elements and may be
// negative or zero; `src` points at the element of index (0, ..., 0).
// Dims that stay together are merged first; then the copy is a memcpy per
// contiguous run, a blocked 2-D transpose when the source-contiguous axis
// moved, or a strided loop (vectorized for stride 2). Large copies are split
// over `pool` (a copy's result never depends on the split). Throws
// octet::Error for an element size other than 1, 2, 4 or 8.
void StridedCopy(const void* src, void* dst, size_t elem_size, const Shape& shape,
                 const std::vector<int64_t>& src_strides, ThreadPool* pool);

// Writes `inputs` one after another along `axis` into `out`, which has their
// dtype and the shape of their concatenation (the callers check the shapes).
// Large outputs are copied by all of `pool`'s threads.
void ConcatCopy(const std::vector<const Tensor*>& inputs, int64_t axis, Tensor& out,
                ThreadPool* pool);

}  // namespace octet
