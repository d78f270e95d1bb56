#include "core/weight_arena.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "core/memory_limit.h"
#include "core/sanitizers.h"

// Heap blocks, one per Allocate: under AddressSanitizer, and where there is no mmap.
#if !defined(__linux__) || OCTET_ADDRESS_SANITIZER
#define OCTET_ARENA_HEAP_BLOCKS 1
#endif

#if !defined(OCTET_ARENA_HEAP_BLOCKS)
#include <sys/mman.h>
#endif

namespace octet {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;
// A chunk holds many layers' weights; a block above a quarter of it gets a chunk of its own.
constexpr size_t kChunkBytes = size_t{32} << 20;

size_t RoundUp(size_t bytes, size_t unit) { return (bytes + unit - 1) / unit * unit; }

}  // namespace

WeightArena::~WeightArena() {
  for (const Chunk& c : chunks_) {
#if !defined(OCTET_ARENA_HEAP_BLOCKS)
    munmap(c.base, c.bytes);
#else
    std::free(c.base);
#endif
  }
}

void WeightArena::AddChunk(size_t bytes) {
  void* base = nullptr;
#if !defined(OCTET_ARENA_HEAP_BLOCKS)
  // Mapped with a huge page of slack, then trimmed to a huge-page-aligned range.
  void* mapped =
      mmap(nullptr, bytes + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  OCTET_CHECK(mapped != MAP_FAILED, "out of memory reserving ", ByteCountToString(bytes),
              " for packed weights");
  const auto start = reinterpret_cast<uintptr_t>(mapped);
  const uintptr_t aligned = RoundUp(start, kHugePage);
  if (aligned > start) munmap(mapped, aligned - start);
  const size_t tail = start + bytes + kHugePage - (aligned + bytes);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + bytes), tail);
  base = reinterpret_cast<void*>(aligned);
  madvise(base, bytes, MADV_HUGEPAGE);  // advice: refused where huge pages are off
#else
  base = std::aligned_alloc(kAlignment, bytes);
  OCTET_CHECK(base != nullptr, "out of memory reserving ", ByteCountToString(bytes),
              " for packed weights");
  std::memset(base, 0, bytes);
#endif
  chunks_.push_back({base, bytes});
}

void* WeightArena::Allocate(size_t bytes) {
  bytes = RoundUp(bytes == 0 ? 1 : bytes, kAlignment);
#if defined(OCTET_ARENA_HEAP_BLOCKS)
  AddChunk(bytes);
  return chunks_.back().base;
#else
  if (bytes > kChunkBytes / 4) {
    AddChunk(RoundUp(bytes, kHugePage));
    return chunks_.back().base;
  }
  if (bytes > left_) {
    AddChunk(kChunkBytes);
    next_ = static_cast<char*>(chunks_.back().base);
    left_ = kChunkBytes;
  }
  void* block = next_;
  next_ += bytes;
  left_ -= bytes;
  return block;
#endif
}

Tensor ArenaTensor(WeightArena& arena, DType dtype, Shape shape, std::shared_ptr<void> owner) {
  void* data = arena.Allocate(CheckedTensorBytes(dtype, shape) + 64);
  return Tensor::View(dtype, std::move(shape), data, std::move(owner));
}

}  // namespace octet
