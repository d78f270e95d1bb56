// A fixed pool of worker threads. ParallelFor splits [0, n) into contiguous
// chunks; kernels must make their results independent of how work is split
// (fixed block sizes), so outputs never depend on the thread count. Threads
// claim chunks as they come, so a worker the OS has not scheduled yet never
// holds the caller up: the caller runs the chunks nobody claimed.
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
  void WorkerLoop();
  // Claims and runs chunks of job `generation` until none is left.
  void RunChunks(uint64_t generation);

  std::vector<std::thread> workers_;
  // The current job; written by ParallelFor before `claim_` announces it. A thread
  // reads them only after claiming a chunk, and the job cannot finish (and be
  // replaced) before that chunk is done.
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  uint64_t job_max_tensor_bytes_ = 0;  // the caller's MaxTensorBytes(), for the workers
  uint64_t generation_ = 0;            // written by the calling thread only
  // generation << 32 | chunk count << 16 | next unclaimed chunk: one compare-and-
  // swap claims a chunk of exactly one job.
  std::atomic<uint64_t> claim_{0};
  std::atomic<int> chunks_done_{0};
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
