// The thread pool a benchmark runs with: none for one thread, else one pool
// per thread count, made on first use and kept for the process (creating
// threads inside the timed loop would be timed).
#pragma once

#include <map>
#include <memory>

#include "core/thread_pool.h"

namespace octet::bench {

inline ThreadPool* PoolFor(int threads) {
  static std::map<int, std::unique_ptr<ThreadPool>> pools;
  if (threads <= 1) return nullptr;
  auto& pool = pools[threads];
  if (!pool) pool = std::make_unique<ThreadPool>(threads);
  return pool.get();
}

}  // namespace octet::bench
