// CopyPool: the memcpy roofline's copy (bench/pool_bench.cpp). `threads` threads each copy one
// contiguous chunk, on threads that persist between copies (as poolgen's and the peers' pools
// do): starting threads per copy would cost more than copying the small sweep sizes.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace bench {

class CopyPool {
 public:
  ~CopyPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      ++generation_;
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
  }

  void copy(char* dst, const char* src, size_t bytes, int threads) {
    while (static_cast<int>(workers_.size()) < threads - 1)
      workers_.emplace_back([this, i = static_cast<int>(workers_.size()) + 1] { work(i); });
    const Job job{dst, src, bytes, threads};
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = job;
      pending_ = threads - 1;
      ++generation_;
    }
    wake_.notify_all();
    job.chunk(0);
    while (pending_.load() > 0) std::this_thread::yield();
  }

 private:
  struct Job {
    char* dst;
    const char* src;
    size_t bytes;
    int threads;
    void chunk(int i) const {
      const size_t per = (bytes + threads - 1) / threads;
      const size_t b = std::min(bytes, i * per), e = std::min(bytes, b + per);
      std::memcpy(dst + b, src + b, e - b);
    }
  };

  // Spins for up to 1 ms (the next copy of a timed loop comes at once), then sleeps.
  void work(int i) {
    uint64_t seen = 0;
    for (;;) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
      while (generation_.load() == seen && std::chrono::steady_clock::now() < until)
        std::this_thread::yield();
      Job job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_.load() != seen; });
        if (stop_) return;
        seen = generation_.load();
        job = job_;
      }
      if (i < job.threads) job.chunk(i), --pending_;
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mutex_;  // guards job_ and stop_; generation_ moves under it
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  Job job_{};
  bool stop_ = false;
};

}  // namespace bench
