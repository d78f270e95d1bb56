// Test memory that ends right before an inaccessible (PROT_NONE) page, so a
// kernel that reads or writes one element past the end faults instead of
// passing silently.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>

namespace octet {

// `count` values of T whose last one is followed by the guard page.
template <typename T>
class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t count) : count_(count) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t bytes = count * sizeof(T);
    const size_t data_pages = (bytes + page - 1) / page;
    map_bytes_ = (data_pages + 1) * page;
    base_ = static_cast<uint8_t*>(
        mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (base_ == MAP_FAILED) throw std::runtime_error("mmap failed");
    if (mprotect(base_ + data_pages * page, page, PROT_NONE) != 0)
      throw std::runtime_error("mprotect failed");
    data_ = reinterpret_cast<T*>(base_ + data_pages * page - bytes);
  }
  ~GuardedBuffer() { munmap(base_, map_bytes_); }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  T* data() { return data_; }
  T& operator[](size_t i) { return data_[i]; }
  size_t size() const { return count_; }

 private:
  size_t count_, map_bytes_;
  uint8_t* base_;
  T* data_;
};

}  // namespace octet
