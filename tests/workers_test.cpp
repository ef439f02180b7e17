// The runtime's worker threads (runtime/parallel/workers.hpp), on their own: every task runs once
// whatever the thread count and however tasks are stolen, failures come back, calls nest and
// race, and the wake policy keeps a small call on its calling thread while the workers sleep.
#include "parallel/workers.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace poolgen::detail {
namespace {

using std::chrono::milliseconds;

// Runs `count` tasks on `threads` threads; each task counts itself and optionally waits.
std::vector<int> run_counting(int count, int threads, bool wake, int spin_every = 0) {
  std::unique_ptr<std::atomic<int>[]> runs(new std::atomic<int>[count]);
  for (int i = 0; i < count; ++i) runs[i] = 0;
  const int result = run_on_workers(count, threads, threads, wake, [&](int task) {
    if (spin_every && task % spin_every == 0) std::this_thread::sleep_for(milliseconds(1));
    runs[task].fetch_add(1);
    return 0;
  });
  EXPECT_EQ(result, 0);
  std::vector<int> counts(count);
  for (int i = 0; i < count; ++i) counts[i] = runs[i];
  return counts;
}

TEST(Workers, EveryTaskRunsOnce) {
  for (const int threads : {1, 2, 3, 4}) {
    for (const int count : {1, 2, 3, 5, 8, 63, 1000}) {
      for (const int spin_every : {0, 7}) {  // uneven tasks: the others' ranges get stolen
        const std::vector<int> counts = run_counting(count, threads, true, spin_every);
        for (int task = 0; task < count; ++task) {
          ASSERT_EQ(counts[task], 1) << "task " << task << " of " << count << " on " << threads
                                     << " threads";
        }
      }
    }
  }
  stop_workers();
  EXPECT_EQ(run_counting(10, 2, true), std::vector<int>(10, 1)) << "after stop_workers";
}

// A call asking for fewer threads than the pool has runs on no more than it asked for.
TEST(Workers, CallsUseTheThreadsTheyAskFor) {
  for (const int threads : {1, 2, 3}) {
    std::mutex mutex;
    std::set<std::thread::id> ran_on;
    std::atomic<int> ran{0};
    ASSERT_EQ(run_on_workers(64, threads, 4, true,
                             [&](int) {
                               std::this_thread::sleep_for(milliseconds(1));
                               std::lock_guard<std::mutex> lock(mutex);
                               ran_on.insert(std::this_thread::get_id());
                               ran.fetch_add(1);
                               return 0;
                             }),
              0);
    EXPECT_EQ(ran.load(), 64);
    EXPECT_LE(ran_on.size(), static_cast<size_t>(threads)) << threads << " of a pool of 4";
  }
}

TEST(Workers, FailureComesBack) {
  std::atomic<int> ran{0};
  const int result = run_on_workers(100, 2, 2, true, [&](int task) {
    ran.fetch_add(1);
    return task == 37 ? 5 : 0;
  });
  EXPECT_EQ(result, 5);
  EXPECT_LE(ran.load(), 100);
}

// A loop inside a task, and calls from several threads at once, run (on their calling thread
// when the workers are taken) and complete.
TEST(Workers, NestedAndConcurrentCalls) {
  std::atomic<int> inner{0};
  EXPECT_EQ(run_on_workers(8, 2, 2, true,
                           [&](int) {
                             return run_on_workers(4, 2, 2, true, [&](int) {
                               inner.fetch_add(1);
                               return 0;
                             });
                           }),
            0);
  EXPECT_EQ(inner.load(), 32);
  std::vector<std::thread> callers;
  std::atomic<int> wrong{0};
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int rep = 0; rep < 50; ++rep) {
        if (run_counting(97, 3, true) != std::vector<int>(97, 1)) wrong.fetch_add(1);
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

// Two tasks; the first one run waits (up to `patience`) for the other to run on another thread.
// Returns whether some task ran off the calling thread.
bool second_thread_joined(bool wake, milliseconds patience) {
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> elsewhere{false};
  run_on_workers(2, 2, 2, wake, [&](int) {
    if (std::this_thread::get_id() != caller) {
      elsewhere = true;
    } else {
      const auto until = std::chrono::steady_clock::now() + patience;
      while (!elsewhere && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    }
    return 0;
  });
  return elsewhere;
}

// Waking a sleeping worker costs more than a small call: without `wake`, a call finding every
// worker asleep (long after the last call) runs on its calling thread; with it, the worker comes.
TEST(Workers, SleepingWorkersWakeOnlyForLargeCalls) {
  ASSERT_TRUE(second_thread_joined(true, std::chrono::seconds(30))) << "no worker joined";
  bool stayed = false;
  for (int attempt = 0; attempt < 5 && !stayed; ++attempt) {  // a loaded host may delay sleep
    std::this_thread::sleep_for(milliseconds(100));
    stayed = !second_thread_joined(false, milliseconds(200));
  }
  EXPECT_TRUE(stayed) << "a small call woke a sleeping worker";
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_TRUE(second_thread_joined(true, std::chrono::seconds(30)))
      << "a large call left the workers asleep";
  // Right after a call (within the workers' spin), a small call shares: calls in succession.
  EXPECT_TRUE(second_thread_joined(false, std::chrono::seconds(30)))
      << "a call right after another ran alone";
}

}  // namespace
}  // namespace poolgen::detail
