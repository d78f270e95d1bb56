// A fixed pool of worker threads. ParallelFor splits [0, n) into contiguous
// chunks; kernels must make their results independent of how work is split
// (fixed block sizes), so outputs never depend on the thread count.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace octet {

class ThreadPool {
 public:
  // threads >= 1; the calling thread counts as one of them.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over a partition of [0, n) into at most num_threads()
  // contiguous chunks and waits for all of them. Exceptions thrown by fn are
  // rethrown here (the first one).
  void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int job_chunks_ = 0;
  uint64_t generation_ = 0;
  int remaining_ = 0;
  std::exception_ptr error_;
  bool stop_ = false;
};

// pool->ParallelFor(n, fn), or fn(0, n) on the caller when pool is null.
void ParallelFor(ThreadPool* pool, int64_t n, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace octet
