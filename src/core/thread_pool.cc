#include "core/thread_pool.h"

#include <algorithm>

#include "core/memory_limit.h"
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

constexpr uint64_t ClaimWord(uint64_t generation, int chunks, int next) {
  return generation << 32 | static_cast<uint64_t>(chunks) << 16 | static_cast<uint64_t>(next);
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  // The claim word holds the chunk count in 16 bits.
  const int count = std::clamp(threads, 1, 1 << 15);
  for (int i = 1; i < count; ++i) workers_.emplace_back([this] { WorkerLoop(); });
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
  job_max_tensor_bytes_ = MaxTensorBytes();
  error_ = nullptr;
  chunks_done_.store(0, std::memory_order_relaxed);
  generation_ = (generation_ + 1) & 0xffffffffu;
  {
    // Under the lock so that a worker about to sleep cannot miss the new job.
    std::lock_guard<std::mutex> lock(mu_);
    claim_.store(ClaimWord(generation_, chunks, 0), std::memory_order_release);
  }
  work_cv_.notify_all();
  RunChunks(generation_);
  auto all_done = [&] { return chunks_done_.load(std::memory_order_acquire) == chunks; };
  if (!Spin(all_done)) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, all_done);
  }
  job_ = nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::RunChunks(uint64_t generation) {
  uint64_t word = claim_.load(std::memory_order_acquire);
  for (;;) {
    if (word >> 32 != generation) return;
    const int chunks = static_cast<int>(word >> 16 & 0xffff),
              next = static_cast<int>(word & 0xffff);
    if (next >= chunks) return;
    if (!claim_.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire))
      continue;  // `word` now holds the current value
    try {
      const TensorByteLimit limit(job_max_tensor_bytes_);
      auto [b, e] = ChunkRange(job_n_, chunks, next);
      (*job_)(b, e);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
    }
    if (chunks_done_.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_all();
    }
    word = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  for (;;) {
    auto has_work = [&] {
      return stop_.load(std::memory_order_relaxed) ||
             claim_.load(std::memory_order_acquire) >> 32 != seen;
    };
    if (!Spin(has_work)) {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, has_work);
    }
    if (stop_.load()) return;
    seen = claim_.load(std::memory_order_acquire) >> 32;
    RunChunks(seen);
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
