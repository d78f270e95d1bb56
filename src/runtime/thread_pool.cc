#include "runtime/thread_pool.h"

#include <algorithm>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace octet {

namespace {

// Chunk c of `chunks` over [0, n): as equal as possible, larger ones first.
std::pair<int64_t, int64_t> ChunkRange(int64_t n, int chunks, int c) {
  int64_t base = n / chunks, extra = n % chunks;
  int64_t begin = c * base + std::min<int64_t>(c, extra);
  return {begin, begin + base + (c < extra ? 1 : 0)};
}

// About 50-100 microseconds of polling before a thread goes to sleep.
constexpr int kSpinIterations = 4000;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Polls `done` for a while; true if it became true while polling.
template <typename Done>
bool Spin(Done done) {
  for (int i = 0; i < kSpinIterations; ++i) {
    if (done()) return true;
    CpuRelax();
  }
  return done();
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < std::max(threads, 1); ++i)
    workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int chunks = static_cast<int>(std::min<int64_t>(n, num_threads()));
  if (chunks == 1) {
    fn(0, n);
    return;
  }
  job_ = &fn;
  job_n_ = n;
  job_chunks_ = chunks;
  error_ = nullptr;
  remaining_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  {
    // Under the lock so that a worker about to sleep cannot miss the bump.
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  work_cv_.notify_all();

  std::exception_ptr mine;
  try {
    auto [b, e] = ChunkRange(n, chunks, 0);
    fn(b, e);
  } catch (...) {
    mine = std::current_exception();
  }
  auto all_done = [this] { return remaining_.load(std::memory_order_acquire) == 0; };
  if (!Spin(all_done)) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, all_done);
  }
  job_ = nullptr;
  if (mine) std::rethrow_exception(mine);
  std::lock_guard<std::mutex> lock(mu_);
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    auto has_work = [&] {
      return stop_.load(std::memory_order_relaxed) ||
             generation_.load(std::memory_order_acquire) != seen;
    };
    if (!Spin(has_work)) {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, has_work);
    }
    if (stop_.load()) return;
    seen = generation_.load(std::memory_order_acquire);
    if (index < job_chunks_) {
      try {
        auto [b, e] = ChunkRange(job_n_, job_chunks_, index);
        (*job_)(b, e);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!error_) error_ = std::current_exception();
      }
    }
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_all();
    }
  }
}

void ParallelFor(ThreadPool* pool, int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (pool != nullptr) {
    pool->ParallelFor(n, fn);
  } else if (n > 0) {
    fn(0, n);
  }
}

}  // namespace octet
