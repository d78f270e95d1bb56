// A dense, row-major tensor with shared, 64-byte aligned storage.
// Copying a Tensor shares its buffer; Clone() copies the bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace octet {

using Shape = std::vector<int64_t>;

// Product of dims; throws on a negative dim or when the product of the non-zero dims
// overflows int64 (so every partial product of a valid shape's dims fits).
int64_t NumElements(const Shape &shape);
// Frees the buffers freed tensors left for reuse (core/tensor.cc: every large one,
// and the calling thread's small ones), and hands the allocator's free pages back to
// the system: the weights a session's creation packs and frees would not be reused.
void ReleaseCachedTensorMemory();
// Bytes of the elements of a dtype/shape tensor; throws octet::Error, before anything is
// allocated, on a negative dim, an overflow or more bytes than MaxTensorBytes()
// (core/memory_limit.h). Every Tensor octet allocates passes through here.
size_t CheckedTensorBytes(DType dtype, const Shape &shape);
std::string ShapeToString(const Shape &shape);  // "[2,3,4]"
// axis in [-rank, rank) as a non-negative index; nullopt when out of range.
std::optional<int64_t> NormalizeAxis(int64_t axis, int64_t rank);

class Tensor {
 public:
  Tensor() = default;
  // Allocates zero-initialized storage for shape.
  Tensor(DType dtype, Shape shape);

  // Allocates without zero-filling, for outputs a kernel writes in full.
  static Tensor Uninitialized(DType dtype, Shape shape);

  // Wraps external memory without owning it (owner keeps it alive).
  static Tensor View(DType dtype, Shape shape, void *data, std::shared_ptr<void> owner = nullptr);

  // A 4-bit (int4 / uint4) tensor over bytes that hold two elements each, element 2 i in
  // byte i's low nibble as ONNX serializes them: how the loader maps a model's large 4-bit
  // external data, so that the file's pages stay the tensor's until a kernel packs them
  // (or, for a table read a row at a time, for good). raw() and data() refuse it;
  // nibbles() reads it, UnpackedNibbles() gives octet's byte-per-element form.
  static Tensor PackedNibbles(DType dtype, Shape shape, const void *bytes,
                              std::shared_ptr<void> owner);

  DType dtype() const { return dtype_; }
  const Shape &shape() const { return shape_; }
  size_t rank() const { return shape_.size(); }
  int64_t dim(size_t i) const { return shape_[i]; }
  int64_t numel() const { return numel_; }
  // Bytes of the elements: one per element of a 4-bit tensor, but half that, rounded up,
  // when it holds packed nibbles.
  size_t nbytes() const {
    return packed_nibbles_ ? static_cast<size_t>(numel_ / 2 + numel_ % 2)
                           : static_cast<size_t>(numel_) * DTypeSize(dtype_);
  }
  bool defined() const { return dtype_ != DType::kUndefined; }
  // True when no other Tensor shares this tensor's storage owner, so a caller may
  // hand the bytes on without copying; false for views of memory they do not own
  // (no owner). A view that alone holds its owner (a mapped external-data tensor,
  // whose private mapping may be written) counts as sole.
  bool SoleOwner() const { return owner_ && owner_.use_count() == 1; }

  void *raw() {
    if (packed_nibbles_) FailPackedNibbles();
    return data_;
  }
  const void *raw() const {
    if (packed_nibbles_) FailPackedNibbles();
    return data_;
  }
  bool packed_nibbles() const { return packed_nibbles_; }
  // The bytes of a PackedNibbles tensor; throws for any other.
  const uint8_t *nibbles() const;

  // Typed access; checks that T matches dtype() (4-bit types are int8/uint8
  // bytes, float16/bfloat16 are uint16_t bits, float8 types are uint8_t bits).
  template <typename T>
  T *data() {
    CheckType(sizeof(T), DTypeOf<T>::value);
    return static_cast<T *>(data_);
  }
  template <typename T>
  const T *data() const {
    CheckType(sizeof(T), DTypeOf<T>::value);
    return static_cast<const T *>(data_);
  }

  // Same bytes, new shape with the same element count.
  Tensor Reshaped(Shape shape) const;
  // A copy in storage of its own; a packed-nibble tensor's copy is unpacked.
  Tensor Clone() const;

 private:
  void CheckType(size_t elem_size, DType requested) const;
  [[noreturn]] void FailPackedNibbles() const;
  Tensor(DType dtype, Shape shape, bool zero_fill);

  DType dtype_ = DType::kUndefined;
  Shape shape_;
  int64_t numel_ = 0;
  std::shared_ptr<void> owner_;
  void *data_ = nullptr;
  bool packed_nibbles_ = false;
};

// t in octet's form of a 4-bit tensor, one element per byte (int4 as int8 -8..7): t
// itself unless it holds packed nibbles, else an unpacked copy.
Tensor UnpackedNibbles(const Tensor &t);

}  // namespace octet
