#include "core/tensor.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <list>
#include <map>
#include <mutex>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "core/memory_limit.h"
#include "core/sanitizers.h"

namespace octet {

namespace {

// Buffers are kept when their last tensor goes and handed to the next tensor of the
// same size class instead of going back to the system.
//
// Large ones: glibc maps and unmaps, or trims, buffers this large, and faulting fresh
// pages in costs more than the kernels that fill them (MiniLM at batch 32: 277k page
// faults, half of every run). Like an inference runtime's arena, this keeps a session's
// working set between runs. A large buffer is freed when keeping it would pass
// kCacheBytes, or when kMaxIdleOps cache operations went by without a tensor of its size
// class (a decoder's KV cache grows through the classes; the ones it left are not needed
// again).
//
// Small ones: glibc's aligned_alloc (before 2.38) takes its slow path for every size
// (no per-thread cache for aligned blocks), and a model of small tensors (a decoding
// step, a short sequence) makes hundreds per run. Each thread keeps a free list per size
// class, linked through the buffers themselves, up to kSmallCacheBytes: no lock, so that
// sessions run from many threads at once do not queue on one. A buffer freed on another
// thread than the one that took it joins the freeing thread's lists.
//
// Under AddressSanitizer every buffer goes back to the allocator, so that a use after
// free is still caught.
constexpr size_t kCachedMinBytes = size_t{256} << 10;
constexpr size_t kCacheBytes = size_t{1} << 30;
constexpr uint64_t kMaxIdleOps = 4096;
constexpr size_t kSmallCacheBytes = size_t{16} << 20;  // per thread

// Eight size classes per power of two (page multiples), so that a tensor that grows a
// little from run to run reuses the buffer of the run before. Below a page, every
// 64-byte multiple (what Tensor allocates) is its own class.
size_t SizeClass(size_t bytes) {
  if (bytes <= 4096) return (bytes + 63) / 64 * 64;
  const size_t step = std::max<size_t>(4096, std::bit_floor(bytes) / 8);
  return (bytes + step - 1) / step * step;
}

class BufferCache {
 public:
  void* Take(size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    ++ops_;
    auto it = by_size_.find(bytes);
    if (it == by_size_.end()) return nullptr;
    void* p = it->second->data;
    cached_ -= bytes;
    by_age_.erase(it->second);
    by_size_.erase(it);
    return p;
  }
  void Give(void* p, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    ++ops_;
    while (!by_age_.empty() &&
           (cached_ + bytes > kCacheBytes || by_age_.front().given + kMaxIdleOps < ops_))
      FreeOldest();
    if (cached_ + bytes > kCacheBytes) {
      std::free(p);
      return;
    }
    by_age_.push_back({p, bytes, ops_, {}});
    by_age_.back().where = by_size_.emplace(bytes, std::prev(by_age_.end()));
    cached_ += bytes;
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    while (!by_age_.empty()) FreeOldest();
  }

 private:
  struct Entry;
  using Entries = std::list<Entry>;
  struct Entry {
    void* data;
    size_t bytes;
    uint64_t given;  // ops_ when it was cached
    std::multimap<size_t, Entries::iterator>::iterator where;
  };
  void FreeOldest() {
    Entry& e = by_age_.front();
    std::free(e.data);
    cached_ -= e.bytes;
    by_size_.erase(e.where);
    by_age_.pop_front();
  }

  std::mutex mu_;
  Entries by_age_;  // oldest first
  std::multimap<size_t, Entries::iterator> by_size_;
  size_t cached_ = 0;
  uint64_t ops_ = 0;
};

// Never destroyed: tensors with static storage may outlive any static cache object.
BufferCache& Cache() {
  static BufferCache* cache = new BufferCache;
  return *cache;
}

// One thread's small buffers: per size class the first free one, each holding the
// next's address.
class SmallBuffers {
 public:
  ~SmallBuffers() { Clear(); }
  void* Take(size_t bytes) {
    auto it = heads_.find(bytes);
    if (it == heads_.end() || it->second == nullptr) return nullptr;
    void* p = it->second;
    std::memcpy(&it->second, p, sizeof(void*));
    cached_ -= bytes;
    return p;
  }
  // False when keeping p would pass kSmallCacheBytes: the caller frees it.
  bool Give(void* p, size_t bytes) {
    if (cached_ + bytes > kSmallCacheBytes) return false;
    void*& head = heads_[bytes];
    std::memcpy(p, &head, sizeof(void*));
    head = p;
    cached_ += bytes;
    return true;
  }
  void Clear() {
    for (auto& [bytes, head] : heads_)
      while (head != nullptr) {
        void* p = head;
        std::memcpy(&head, p, sizeof(void*));
        std::free(p);
      }
    cached_ = 0;
  }

 private:
  std::map<size_t, void*> heads_;
  size_t cached_ = 0;
};

// Set when this thread's lists are destroyed (thread exit): a tensor freed after that,
// by a later thread-local or static destructor, goes straight back to the allocator.
thread_local bool small_buffers_gone = false;
struct SmallBuffersOfThread {
  SmallBuffers lists;
  ~SmallBuffersOfThread() { small_buffers_gone = true; }
};

SmallBuffers* ThreadSmallBuffers() {
  if (small_buffers_gone) return nullptr;
  thread_local SmallBuffersOfThread buffers;
  return &buffers.lists;
}

void FreeSmall(void* p, size_t bytes) {
  SmallBuffers* lists = ThreadSmallBuffers();
  if (lists == nullptr || !lists->Give(p, bytes)) std::free(p);
}

std::shared_ptr<void> AllocateStorage(size_t alloc) {
  const size_t rounded = SizeClass(alloc);
  if (kAddressSanitizer) {
    void* p = std::aligned_alloc(64, rounded);
    OCTET_CHECK(p != nullptr, "out of memory allocating ", alloc, " bytes");
    return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  }
  const bool small = rounded < kCachedMinBytes;
  SmallBuffers* lists = small ? ThreadSmallBuffers() : nullptr;
  void* p = small ? (lists ? lists->Take(rounded) : nullptr) : Cache().Take(rounded);
  if (p == nullptr) p = std::aligned_alloc(64, rounded);
  OCTET_CHECK(p != nullptr, "out of memory allocating ", alloc, " bytes");
  if (small) return std::shared_ptr<void>(p, [rounded](void* q) { FreeSmall(q, rounded); });
  return std::shared_ptr<void>(p, [rounded](void* q) { Cache().Give(q, rounded); });
}

}  // namespace

void ReleaseCachedTensorMemory() {
  Cache().Clear();
  if (SmallBuffers* lists = ThreadSmallBuffers()) lists->Clear();
#if defined(__GLIBC__)
  // glibc keeps freed heap pages; what replaces them (core/weight_arena.h) is elsewhere.
  malloc_trim(0);
#endif
}

int64_t NumElements(const Shape& shape) {
  // The product of the non-zero dims must fit too, so that every partial product of a
  // shape's dims (the outer and inner counts of a kernel) does, also when one dim is 0.
  int64_t nonzero = 1;
  bool empty = false;
  for (int64_t d : shape) {
    OCTET_CHECK(d >= 0, "negative dimension in shape ", ShapeToString(shape));
    if (d == 0) {
      empty = true;
      continue;
    }
    OCTET_CHECK(!__builtin_mul_overflow(nonzero, d, &nonzero), "shape ", ShapeToString(shape),
                " has too many elements");
  }
  return empty ? 0 : nonzero;
}

size_t CheckedTensorBytes(DType dtype, const Shape& shape) {
  const int64_t numel = NumElements(shape);
  // Capped so that the allocation's padding (Tensor's constructor) cannot overflow.
  const uint64_t elem = DTypeSize(dtype), limit = std::min(MaxTensorBytes(), uint64_t{1} << 62);
  if (elem != 0 && static_cast<uint64_t>(numel) > limit / elem)
    Fail(DTypeName(dtype), " tensor of shape ", ShapeToString(shape), " (", numel, " elements of ",
         elem, " bytes) is larger than the tensor size limit, ", ByteCountToString(limit),
         " (SessionOptions::max_tensor_bytes, OCTET_MAX_TENSOR_BYTES)");
  return static_cast<size_t>(numel) * elem;
}

std::string ShapeToString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::optional<int64_t> NormalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

Tensor::Tensor(DType dtype, Shape shape) : Tensor(dtype, std::move(shape), true) {}

Tensor Tensor::Uninitialized(DType dtype, Shape shape) {
  return Tensor(dtype, std::move(shape), false);
}

Tensor::Tensor(DType dtype, Shape shape, bool zero_fill) : dtype_(dtype), shape_(std::move(shape)) {
  OCTET_CHECK(IsSupportedStorage(dtype), "tensors of type ", DTypeName(dtype),
              " are not supported");
  const size_t bytes = CheckedTensorBytes(dtype, shape_);
  numel_ = NumElements(shape_);
  // Round up so that vector kernels may read a full 64-byte line past the end
  // of the last element without leaving the allocation.
  size_t alloc = ((bytes + 63) / 64) * 64 + 64;
  owner_ = AllocateStorage(alloc);
  void* p = owner_.get();
  // The padding past the last element is always cleared, so vector reads of
  // it are deterministic even when the elements are not.
  if (zero_fill) {
    std::memset(p, 0, alloc);
  } else {
    std::memset(static_cast<char*>(p) + bytes, 0, alloc - bytes);
  }
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

Tensor Tensor::PackedNibbles(DType dtype, Shape shape, const void* bytes,
                             std::shared_ptr<void> owner) {
  OCTET_CHECK(dtype == DType::kInt4 || dtype == DType::kUInt4, "packed nibbles of type ",
              DTypeName(dtype), ": only int4 and uint4 are packed");
  Tensor t = View(dtype, std::move(shape), const_cast<void*>(bytes), std::move(owner));
  t.packed_nibbles_ = true;
  return t;
}

const uint8_t* Tensor::nibbles() const {
  if (!packed_nibbles_)
    FailInternal("tensor of type ", DTypeName(dtype_), " read as packed nibbles; it is unpacked");
  return static_cast<const uint8_t*>(data_);
}

void Tensor::FailPackedNibbles() const {
  FailInternal("tensor of type ", DTypeName(dtype_), " ", ShapeToString(shape_),
               " holds packed nibbles; its reader must unpack it (UnpackedNibbles)");
}

Tensor UnpackedNibbles(const Tensor& t) {
  if (!t.packed_nibbles()) return t;
  Tensor out = Tensor::Uninitialized(t.dtype(), t.shape());
  Unpack4Bit(t.nibbles(), t.numel(), t.dtype() == DType::kInt4, static_cast<uint8_t*>(out.raw()));
  return out;
}

Tensor Tensor::Reshaped(Shape shape) const {
  OCTET_CHECK(NumElements(shape) == numel_, "cannot reshape ", ShapeToString(shape_), " to ",
              ShapeToString(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::Clone() const {
  if (packed_nibbles_) return UnpackedNibbles(*this);
  Tensor t(dtype_, shape_);
  if (nbytes()) std::memcpy(t.data_, data_, nbytes());
  return t;
}

void Tensor::CheckType(size_t elem_size, DType requested) const {
  if (packed_nibbles_) FailPackedNibbles();
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
  if (!ok)
    FailInternal("tensor of type ", DTypeName(dtype_), " accessed as ", DTypeName(requested));
}

}  // namespace octet
