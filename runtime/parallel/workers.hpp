#pragma once

#include <functional>

namespace poolgen::detail {

// poolgen's own worker threads, which run every shared loop of the kernels and the runtime
// (docs/kernels.md, "Threads"), in place of Halide's pool: an idle worker stays awake 2 ms after
// a call, as pthreadpool's and OpenMP's do, and a call never waits for a worker to wake.

// Runs body(task) for every task in [0, count) on `threads` threads of a pool of `pool`, the
// calling one and pool - 1 workers (started, or restarted, to that count), each taking one
// contiguous range of the tasks and then what is left of the others'. Returns the first
// non-zero result (the tasks after it may not run).
//
// Waking a sleeping worker costs the caller a system call and brings the worker tens of
// microseconds late (10 us and 30 us on the 2-core VM of docs/kernels.md), more than a call of a
// few hundred KiB takes alone. So a call shares with the workers that are awake, and wakes the
// others only with `wake` (a call large enough to repay it) or when it follows the previous call
// by less than the workers stay awake (calls in quick succession, which keep them awake);
// with every worker asleep otherwise, it runs on the calling thread. A call made while another
// thread's call holds the workers, or from inside a task, runs on its calling thread too.
int run_on_workers(int count, int threads, int pool, bool wake,
                   const std::function<int(int)>& body);

// Runs body(task) for every task in [0, count) in order on the calling thread, up to the first
// non-zero result, which it returns.
int run_in_order(int count, const std::function<int(int)>& body);

// Ends the workers (waiting for a call in progress); the next shared call starts them afresh.
void stop_workers();

// True in a process forked after the workers started: fork copies the calling thread only, so
// the workers are not there and every loop runs on the calling thread, as PyTorch's pools do
// after a fork.
bool in_child_of_workers();

}  // namespace poolgen::detail
