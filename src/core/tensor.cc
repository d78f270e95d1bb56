#include "core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <limits>

namespace octet {

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    OCTET_CHECK(d >= 0, "negative dimension in shape ", ShapeToString(shape));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      Fail("shape ", ShapeToString(shape), " has too many elements");
    n *= d;
  }
  return n;
}

std::string ShapeToString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Tensor::Tensor(DType dtype, Shape shape) : Tensor(dtype, std::move(shape), true) {}

Tensor Tensor::Uninitialized(DType dtype, Shape shape) {
  return Tensor(dtype, std::move(shape), false);
}

Tensor::Tensor(DType dtype, Shape shape, bool zero_fill) : dtype_(dtype), shape_(std::move(shape)) {
  OCTET_CHECK(IsSupportedStorage(dtype), "tensors of type ", DTypeName(dtype), " are not supported");
  numel_ = NumElements(shape_);
  size_t bytes = nbytes();
  // Round up so that vector kernels may read a full 64-byte line past the end
  // of the last element without leaving the allocation.
  size_t alloc = ((bytes + 63) / 64) * 64 + 64;
  void* p = std::aligned_alloc(64, alloc);
  OCTET_CHECK(p != nullptr, "out of memory allocating ", bytes, " bytes");
  // The padding past the last element is always cleared, so vector reads of
  // it are deterministic even when the elements are not.
  if (zero_fill) {
    std::memset(p, 0, alloc);
  } else {
    std::memset(static_cast<char*>(p) + bytes, 0, alloc - bytes);
  }
  owner_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  data_ = p;
}

Tensor Tensor::View(DType dtype, Shape shape, void* data, std::shared_ptr<void> owner) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numel_ = NumElements(t.shape_);
  t.owner_ = std::move(owner);
  t.data_ = data;
  return t;
}

Tensor Tensor::Reshaped(Shape shape) const {
  OCTET_CHECK(NumElements(shape) == numel_, "cannot reshape ", ShapeToString(shape_), " to ",
              ShapeToString(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::Clone() const {
  Tensor t(dtype_, shape_);
  if (nbytes()) std::memcpy(t.data_, data_, nbytes());
  return t;
}

void Tensor::CheckType(size_t elem_size, DType requested) const {
  bool ok = requested == dtype_;
  if (!ok) {
    // Bit-pattern storage: 16-bit floats as uint16_t, 8-bit floats and 4-bit ints as bytes.
    if (elem_size == 2 && requested == DType::kUInt16)
      ok = dtype_ == DType::kFloat16 || dtype_ == DType::kBFloat16;
    else if (elem_size == 1 && requested == DType::kUInt8)
      ok = IsFloat8(dtype_) || dtype_ == DType::kUInt4;
    else if (elem_size == 1 && requested == DType::kInt8)
      ok = dtype_ == DType::kInt4;
  }
  OCTET_CHECK(ok, "internal: tensor of type ", DTypeName(dtype_), " accessed as ",
              DTypeName(requested));
}

}  // namespace octet
