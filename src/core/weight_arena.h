// Memory for the operands a session's kernels pack once, at creation: their
// weights in the kernels' layouts (and, in arenas of their own, a KV cache's
// rows, ops/kv_cache.h). A decoding step streams every weight once
// per token, so the weights' pages matter as much as their bytes: from 4 KiB
// pages each one costs the walk of a TLB miss (a two-level walk in a virtual
// machine), which a core's stream of loads cannot hide. The arena hands out
// its blocks in creation order from large chunks that Linux is asked to back
// with 2 MiB pages (madvise MADV_HUGEPAGE, honoured when transparent huge
// pages are "always" or "madvise"), and frees them all at once when it is
// destroyed. Under AddressSanitizer each block is a heap allocation of its
// own, so that the sanitizer still sees a packed operand's bounds (and so
// is each block where there is no mmap).
#pragma once

#include <cstddef>
#include <memory>
#include <type_traits>
#include <vector>

#include "core/tensor.h"

namespace octet {

class WeightArena {
 public:
  // Blocks start at this alignment (a cache line and a 512-bit vector).
  static constexpr size_t kAlignment = 64;

  WeightArena() = default;
  ~WeightArena();
  WeightArena(const WeightArena&) = delete;
  WeightArena& operator=(const WeightArena&) = delete;

  // `bytes` zero-filled bytes, valid until the arena is destroyed. Not thread-safe.
  // Throws octet::Error when the system refuses the memory.
  void* Allocate(size_t bytes);

 private:
  struct Chunk {
    void* base;
    size_t bytes;
  };
  void AddChunk(size_t bytes);

  std::vector<Chunk> chunks_;
  char* next_ = nullptr;  // the free rest of the newest chunk
  size_t left_ = 0;
};

// A tensor in `arena`, zero-filled with a Tensor's 64 bytes of padding past its end (the
// size checked as every tensor's is); `owner`, if any, is what keeps the arena alive.
Tensor ArenaTensor(WeightArena& arena, DType dtype, Shape shape,
                   std::shared_ptr<void> owner = nullptr);

// A std::allocator for containers whose elements live in an arena (with none, the heap).
// Freeing is left to the arena; the arena moves with the container.
template <typename T>
class WeightAllocator {
 public:
  using value_type = T;
  using propagate_on_container_copy_assignment = std::true_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;

  WeightAllocator() = default;
  explicit WeightAllocator(WeightArena* arena) : arena_(arena) {}
  template <typename U>
  WeightAllocator(const WeightAllocator<U>& other) : arena_(other.arena()) {}

  T* allocate(size_t n) {
    if (arena_ == nullptr) return std::allocator<T>().allocate(n);
    return static_cast<T*>(arena_->Allocate(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) {
    if (arena_ == nullptr) std::allocator<T>().deallocate(p, n);
  }
  WeightArena* arena() const { return arena_; }

  friend bool operator==(const WeightAllocator& a, const WeightAllocator& b) {
    return a.arena_ == b.arena_;
  }

 private:
  WeightArena* arena_ = nullptr;
};

template <typename T>
using WeightVector = std::vector<T, WeightAllocator<T>>;

}  // namespace octet
