// A fixed pool of worker threads. ParallelFor splits [0, n) into contiguous
// chunks; kernels must make their results independent of how work is split
// (fixed block sizes), so outputs never depend on the thread count.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
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
  // rethrown here (the first one). Not reentrant: one ParallelFor at a time.
  void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop(int index);

  std::vector<std::thread> workers_;
  // The current job; written by ParallelFor before `generation_` is bumped and
  // read by workers after they see the new generation.
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int job_chunks_ = 0;
  std::atomic<uint64_t> generation_{0};
  // Workers that have not yet finished the current job (every worker reports,
  // whether or not it had a chunk, so a job's fields are never overwritten
  // while a worker may still read them).
  std::atomic<int> remaining_{0};
  std::atomic<bool> stop_{false};
  // Sleeping after a short spin keeps back-to-back kernels from paying a
  // futex wake-up each, without burning a core between runs.
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::exception_ptr error_;  // guarded by mu_
};

// pool->ParallelFor(n, fn), or fn(0, n) on the caller when pool is null.
void ParallelFor(ThreadPool* pool, int64_t n, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace octet
