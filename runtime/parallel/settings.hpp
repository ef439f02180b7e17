// The process-wide settings that decide how calls run (set_num_threads, set_min_parallel_bytes,
// set_streaming_bytes), how many threads a call of so many bytes shares, and the parallel loop
// that shares it (over the worker threads of parallel/workers.hpp).
#pragma once

#include <cstdint>
#include <functional>

namespace poolgen::detail {

// The threads a shared call runs on (parallel/workers.hpp): set_num_threads's count, kept by
// Halide's runtime, else Halide's default (HL_NUM_THREADS, else the host's cores).
// note_thread_count() rereads it after a change.
int thread_count();
void note_thread_count();

// Calls touching fewer bytes than min_parallel_bytes() run on the calling thread: below the
// default, sharing the work costs more than it saves, even with the workers awake
// (docs/kernels.md, "Threads"). set_min_parallel_bytes changes it.
constexpr int64_t kDefaultMinParallelBytes = int64_t{128} << 10;
int64_t min_parallel_bytes();

// The threads a call touching `bytes` (inputs and outputs) runs on: one below
// min_parallel_bytes(), else one for each half of it, up to thread_count() (a smaller share
// costs more to hand out than it saves). worth_sharing: more than one.
int sharing_threads(int64_t bytes);
bool worth_sharing(int64_t bytes);

// Outputs of at least streaming_bytes() go to memory by copy_streaming (set_streaming_bytes;
// default_streaming_bytes(), below): an ordinary store reads each line before writing it
// (read-for-ownership, 1.5x a scatter's compulsory traffic), while an output larger than the
// caches leaves them before anything reads it.
int64_t streaming_bytes();

// How many times the settings that plans depend on (set_min_parallel_bytes, set_streaming_bytes,
// set_num_threads: threads, streaming, the gathers that pay) have changed; a call's remembered
// plan holds for the count it was made at (ops/call_memo.hpp).
int64_t settings_changes();
void note_settings_change();

// Calls moving at least this many bytes leave every cache: set_streaming_bytes' value where set,
// else listed_cache_bytes(). The kernels that pay only there (the contiguous gradient of
// unpooling by windows, gather_pays) start from it.
int64_t out_of_cache_bytes();

// Whether a call moving `call_bytes` runs its kernel's software prefetches (pooling's
// `prefetch_rows`: the kernel's out_of_cache flag): from 5/8 of out_of_cache_bytes(), where on
// the Zen 4 VM (32 MiB of L3, shared) a repeated call's input no longer stayed in cache
// (docs/kernels.md, "Prefetching pooling's input rows out of cache"). Below, the prefetches
// would only cost instructions.
bool prefetch_pays(int64_t call_bytes);

// Whether the processor's masked vector loads (AVX-512's, under a mask register) run at memory
// latency when they miss the caches: AMD's (cpuid's vendor; measured on a Zen 5, where the
// AVX-512 variants that load under masks lost 1.3-2.3x out of cache: docs/kernels.md, "Rows
// outside the plane"). Read from the processor once; false off x86-64.
bool masked_loads_miss_slowly();

// Whether the contiguous scatters' software prefetches of their values and indices (a fixed
// distance ahead, in cache or out: the kernel's flag) pay: on AMD's processors (cpuid's vendor;
// Zen 5 VM, NCHW k3s2p1 unpooling 8x64x112x112 1.93-2.0 -> 1.28-1.36 ms on one thread), not on
// the Intel Xeon VM, where every call measured took 1.04-1.9x the time with them, in cache and
// out (docs/kernels.md, "Prefetching the scatter's elements"). False off x86-64 (unmeasured).
bool element_prefetches_pay();

// The size of the largest data cache a core reaches, as the processor lists it (x86-64: cpuid's
// cache parameters, 8 MiB if it lists none; elsewhere unbounded). Read from the processor once.
int64_t listed_cache_bytes();

// The most output bytes a contiguous group of the scatter takes (execute/scatter.hpp), which
// stays in the core's L2 between the runtime's zero and the kernel's scatter: half the L2 the
// processor lists, so that the group's values and indices fit beside it, between 256 KiB and
// 1 MiB (1 MiB where it lists none). On the Zen 4 VM (1 MiB L2) 512 KiB groups ran NCHW k3s2p1
// pooling's gradient 1.2x and 3-D NCDHW's 1.1x faster than 1 MiB ones (docs/kernels.md,
// "Scatter groups"). Read from the processor once.
constexpr int64_t kLeastScatterGroupBytes = int64_t{256} << 10;
constexpr int64_t kMostScatterGroupBytes = int64_t{1} << 20;
int64_t scatter_group_bytes();

// streaming_bytes()'s default: where copy_streaming has non-temporal stores,
// listed_cache_bytes() but at most 64 MiB, so an output that a cache could still hold for its
// consumer stays there; elsewhere no output streams, copy_streaming being a plain copy.
int64_t default_streaming_bytes();

// Runs body(task) for every task in [0, count) for a call moving `call_bytes`: on
// sharing_threads(call_bytes) threads, each a contiguous range of the tasks (run_on_workers,
// which wakes sleeping workers for calls of 2 MiB or more), or on the host's loop where one is
// set (set_parallel_for). Returns the first non-zero result.
int parallel_for(int count, const std::function<int(int)>& body, int64_t call_bytes);


}  // namespace poolgen::detail
