#include "parallel/workers.hpp"

#ifndef _WIN32
#include <pthread.h>  // pthread_atfork
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace poolgen::detail {
namespace {

// How long an idle worker watches for the next call, and a caller for the workers still in its
// tasks, before sleeping: kSpin on the processor, then up to kAwake yielding it to whatever else
// wants it. Calls less than kAwake apart find the workers awake; a program that calls seldom
// meets them asleep (parallel/workers.hpp). 100 us awake left two-thread calls 500 us apart 1.4x
// slower than 2 ms did (docs/kernels.md, "Threads"); GNU OpenMP spins up to 300,000 iterations
// by default, pthreadpool up to a million.
using Clock = std::chrono::steady_clock;
constexpr std::chrono::microseconds kSpin{100}, kAwake{2000};

void pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  __asm__ __volatile__("yield");
#endif
}

// Waits for done() as said above, up to kAwake; returns done().
template <typename Done>
bool spin_until(Done done) {
  const auto start = Clock::now();
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      pause();
    }
    const auto waited = Clock::now() - start;
    if (waited >= kAwake) return done();
    if (waited >= kSpin) std::this_thread::yield();
  }
}

// A loop's tasks as one contiguous range per thread: each thread runs its own range from the
// front, then takes what is left of the others' from their backs, one task at a time
// (pthreadpool's scheme). `left` counts a range's untaken tasks; a task is taken by whoever
// decrements it from above zero, the owner at `next`, a thief at `end`.
class Ranges {
 public:
  struct alignas(64) Range {  // a line each: owners and thieves write them
    std::atomic<int> left{0};
    std::atomic<int> next{0};  // atomic for a range that two joiners own one after the other
    std::atomic<int> end{0};
  };

  // A call's loop in `ranges` ranges, their lines kept from call to call (allocated anew for
  // each call, they had cost the caller a malloc and a free and the workers new lines).
  void start(int count, int ranges, const std::function<int(int)>& body) {
    if (ranges > static_cast<int>(ranges_.size())) ranges_ = std::vector<Range>(ranges);
    body_ = &body;
    size_ = ranges;
    failure_.store(0, std::memory_order_relaxed);
    for (int r = 0; r < ranges; ++r) {
      const int first = static_cast<int>(int64_t{count} * r / ranges);
      const int last = static_cast<int>(int64_t{count} * (r + 1) / ranges);
      ranges_[r].next = first;
      ranges_[r].end = last;
      ranges_[r].left = last - first;
    }
  }
  // The owner of range `own`: its range, then the others'.
  void run(int own) {
    for (int k = 0; k < size_ && failure() == 0; ++k) {
      Range& range = ranges_[(own + k) % size_];
      while (failure() == 0 && range.left.fetch_sub(1, std::memory_order_relaxed) > 0) {
        const int task = k == 0 ? range.next.fetch_add(1, std::memory_order_relaxed)
                                : range.end.fetch_sub(1, std::memory_order_relaxed) - 1;
        if (const int result = (*body_)(task)) {
          int none = 0;
          failure_.compare_exchange_strong(none, result);
        }
      }
    }
  }
  int failure() const { return failure_.load(std::memory_order_relaxed); }

 private:
  const std::function<int(int)>* body_ = nullptr;
  int size_ = 0;  // the call's ranges, the first of ranges_
  std::vector<Range> ranges_;
  std::atomic<int> failure_{0};
};

std::atomic<bool> started{false}, forked_from_workers{false};

// True on a worker, and on a caller while its call holds the workers: a loop there runs inline.
thread_local bool in_shared_call = false;

// The workers, and the one call they serve at a time. A call is published in `state_`: its
// generation (high 32 bits), whether it is closed to workers (kClosed), how many threads it
// uses (the 15 bits from kUsedShift) and how many workers joined it (the low 16 bits). A worker joins an open call
// of a new generation that wants more threads by incrementing the count, which makes it the
// owner of the range numbered by the new count, runs that range and whatever it can steal, and
// decrements the count. The caller owns range 0 and steals too, then closes the call and waits
// for the count to reach zero: a worker that had not joined by then never touches the call, so
// the caller never waits for one still asleep.
class Workers {
 public:
  ~Workers() {
    if (forked_from_workers) {  // the threads are not in this process: nothing to join
      static auto* orphans = new std::vector<std::thread>();
      for (std::thread& t : threads_) orphans->push_back(std::move(t));
      return;
    }
    stop();
  }

  int run(int count, int threads, int pool, bool wake, const std::function<int(int)>& body) {
    std::unique_lock<std::mutex> call(call_, std::defer_lock);
    if (in_shared_call || !call.try_lock()) return run_in_order(count, body);
    in_shared_call = true;
    wake = wake || Clock::now() - last_end_ < kAwake;
    const bool alone = !start(pool) || (!wake && sleepers_.load() == pool - 1);
    const int result = alone ? run_in_order(count, body) : share(count, threads, wake, body);
    last_end_ = Clock::now();
    in_shared_call = false;
    return result;
  }

  void stop() {
    std::lock_guard<std::mutex> call(call_);
    stop_threads();
  }

 private:
  static constexpr uint64_t kClosed = uint64_t{1} << 31, kJoined = 0xffff;
  static constexpr int kUsedShift = 16;
  static constexpr int kMostUsed = static_cast<int>((kClosed >> kUsedShift) - 1);
  static uint32_t generation(uint64_t state) { return static_cast<uint32_t>(state >> 32); }
  static uint64_t joined(uint64_t state) { return state & kJoined; }
  static uint64_t used(uint64_t state) { return (state & (kClosed - 1)) >> kUsedShift; }

  // The call, published to the workers (under call_).
  int share(int count, int threads, bool wake, const std::function<int(int)>& body) {
    threads = std::min(threads, kMostUsed);
    job_.start(count, threads, body);
    state_.store(uint64_t{++generation_} << 32 | uint64_t(threads) << kUsedShift);
    if (wake && sleepers_.load() > 0) {
      std::lock_guard<std::mutex> lock(sleep_mutex_);
      if (threads - 1 >= sleepers_.load()) {
        wake_.notify_all();
      } else {
        for (int w = 1; w < threads; ++w) wake_.notify_one();
      }
    }
    job_.run(0);
    state_.fetch_or(kClosed);
    auto all_left = [this] { return joined(state_.load()) == 0; };
    if (!spin_until(all_left)) {
      std::unique_lock<std::mutex> lock(done_mutex_);
      caller_waiting_ = true;
      done_.wait(lock, all_left);
      caller_waiting_ = false;
    }
    return job_.failure();
  }

  // Makes `pool - 1` workers run; false if the system refused a thread.
  bool start(int pool) {
    if (static_cast<int>(threads_.size()) == pool - 1) return true;
    stop_threads();
    note_start();
    try {
      for (int w = 1; w < pool; ++w) {
        threads_.emplace_back([this, seen = generation_] { work(seen); });
      }
    } catch (const std::system_error&) {
      stop_threads();
      return false;
    }
    return true;
  }

  void stop_threads() {
    {
      std::lock_guard<std::mutex> lock(sleep_mutex_);
      stopping_ = true;
      wake_.notify_all();
    }
    for (std::thread& t : threads_) t.join();
    threads_.clear();
    stopping_ = false;
  }

  static void note_start() {
#ifndef _WIN32
    static std::once_flag registered;
    std::call_once(registered, [] {
      pthread_atfork(nullptr, nullptr, [] { forked_from_workers = started.load(); });
    });
#endif
    started = true;
  }

  void work(uint32_t seen) {
    in_shared_call = true;
    for (;;) {
      uint64_t state = 0;
      auto called = [&] {
        state = state_.load();
        return generation(state) != seen || stopping_;
      };
      if (!spin_until(called)) {
        std::unique_lock<std::mutex> lock(sleep_mutex_);
        sleepers_.fetch_add(1);
        wake_.wait(lock, called);
        sleepers_.fetch_sub(1);
      }
      if (stopping_) return;
      seen = generation(state);
      while (!(state & kClosed) && generation(state) == seen && joined(state) + 1 < used(state)) {
        if (state_.compare_exchange_weak(state, state + 1)) {
          job_.run(static_cast<int>(joined(state)) + 1);
          if (joined(state_.fetch_sub(1)) == 1 && caller_waiting_) {
            std::lock_guard<std::mutex> lock(done_mutex_);
            done_.notify_one();
          }
          break;
        }
      }
    }
  }

  // Sequentially consistent throughout: a sleeper's count and the state it checks pair with a
  // caller's state and the count it checks, so one of the two always sees the other. The state
  // and the call's loop share a cache line, apart from the caller's own fields: each line of
  // the caller's that a worker reads is a transfer between cores on every call (the loop on
  // the caller's stack, allocated ranges and the fields beside the state each cost one).
  alignas(64) std::atomic<uint64_t> state_{0};
  Ranges job_;  // the open call's loop; read only by the workers that joined it
  alignas(64) uint32_t generation_ = 0;  // under call_
  Clock::time_point last_end_{};  // under call_: when the last call ended
  std::mutex call_;
  std::vector<std::thread> threads_;  // under call_
  std::mutex sleep_mutex_;
  std::condition_variable wake_;
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stopping_{false};
  std::mutex done_mutex_;
  std::condition_variable done_;
  std::atomic<bool> caller_waiting_{false};
};

Workers& workers() {
  static Workers instance;
  return instance;
}

}  // namespace

int run_in_order(int count, const std::function<int(int)>& body) {
  for (int task = 0; task < count; ++task) {
    if (const int result = body(task)) return result;
  }
  return 0;
}

int run_on_workers(int count, int threads, int pool, bool wake,
                   const std::function<int(int)>& body) {
  return workers().run(count, threads, pool, wake, body);
}

void stop_workers() {
  if (!forked_from_workers) workers().stop();
}

bool in_child_of_workers() { return forked_from_workers; }

}  // namespace poolgen::detail
