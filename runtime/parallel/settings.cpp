#include "parallel/settings.hpp"

#include "parallel/workers.hpp"

#include <HalideRuntime.h>
#include <poolgen/poolgen.hpp>

#include <algorithm>
#include <atomic>
#include <limits>
#include <mutex>

#if defined(__x86_64__) || defined(_M_X64)
#define POOLGEN_SSE2 1
#if defined(__GNUC__)
#include <cpuid.h>
#endif
#endif

namespace poolgen::detail {

namespace {

// The thread count, 0 until first read from Halide.
std::atomic<int> known_threads{0};
std::atomic<int64_t> min_parallel{kDefaultMinParallelBytes};
std::atomic<int64_t> streaming{-1};  // -1: default_streaming_bytes()
std::atomic<int64_t> settings_changed{0};

// set_parallel_for's: read by every shared call, changed rarely.
std::mutex host_mutex;
ParallelFor host;

ParallelFor current_host() {
  std::lock_guard<std::mutex> lock(host_mutex);
  return host;
}

// A loop handed to the host's parallel_for: the first failure is kept, and the tasks that start
// after it return at once.
struct HostLoop {
  const std::function<int(int)>* body;
  std::atomic<int> result{0};
};

void run_host_task(int32_t task, void* context) {
  auto* loop = static_cast<HostLoop*>(context);
  if (loop->result.load(std::memory_order_relaxed) != 0) return;
  if (const int r = (*loop->body)(task)) {
    int none = 0;
    loop->result.compare_exchange_strong(none, r);
  }
}

}  // namespace

void note_thread_count() { known_threads = halide_get_num_threads(); }

int thread_count() {
  // Read from Halide once, not per call: its default (HL_NUM_THREADS, else the host's cores)
  // costs system calls. Halide fills it in when its pool starts; asking for the default with 0
  // fills it in now, as the pool would.
  int threads = known_threads;
  if (threads == 0) {
    if (halide_get_num_threads() == 0) halide_set_num_threads(0);
    note_thread_count();
    threads = known_threads;
  }
  return std::max(1, threads);
}

int64_t min_parallel_bytes() { return min_parallel; }

int64_t streaming_bytes() {
  const int64_t bytes = streaming;
  return bytes >= 0 ? bytes : default_streaming_bytes();
}

int64_t out_of_cache_bytes() {
  const int64_t bytes = streaming;
  return bytes >= 0 ? bytes : listed_cache_bytes();
}

bool prefetch_pays(int64_t call_bytes) { return call_bytes >= out_of_cache_bytes() / 8 * 5; }

int64_t settings_changes() { return settings_changed.load(std::memory_order_relaxed); }

void note_settings_change() { settings_changed.fetch_add(1, std::memory_order_relaxed); }

int sharing_threads(int64_t bytes) {
  const int64_t least = min_parallel_bytes();
  if (in_child_of_workers() || bytes < least) return 1;
  const int64_t per_thread = std::max<int64_t>(1, least / 2);
  return static_cast<int>(std::min<int64_t>(thread_count(), bytes / per_thread));
}

bool worth_sharing(int64_t bytes) { return sharing_threads(bytes) > 1; }

int parallel_for(int count, const std::function<int(int)>& body, int64_t call_bytes) {
  const int threads = sharing_threads(call_bytes);
  if (count <= 1 || threads <= 1) return run_in_order(count, body);
  if (const ParallelFor h = current_host(); h.run) {
    HostLoop loop{&body};
    h.run(count, threads, run_host_task, &loop, h.context);
    return loop.result.load();
  }
  // Waking a sleeping worker repays itself from about 2 MiB (docs/kernels.md, "Threads").
  constexpr int64_t kWakeBytes = 2 << 20;
  return run_on_workers(count, threads, thread_count(), call_bytes >= kWakeBytes, body);
}

#if defined(POOLGEN_SSE2) && defined(__GNUC__)
namespace {
// The largest data or unified cache that a deterministic-cache-parameters leaf lists (Intel's 4,
// AMD's 0x8000001D: same layout, and each reads as empty on the other vendor's processors), of
// cache level `level` (0: any level). glibc's sysconf(_SC_LEVEL3_CACHE_SIZE) is no substitute:
// on the AMD EPYC VM of 2026-11-27 it gave 320 MiB, the socket's ten L3s together, for the 32 MiB
// a core shares. Cold: it runs once, and optimized for speed its loop unrolled into 4 KB.
[[gnu::cold]] int64_t largest_cache(unsigned leaf, unsigned level = 0) {
  if (__get_cpuid_max(leaf & 0x80000000u, nullptr) < leaf) return 0;
  int64_t largest = 0;
  for (unsigned index = 0; index < 16; ++index) {
    unsigned a, b, c, d;
    __cpuid_count(leaf, index, a, b, c, d);
    const unsigned type = a & 31;  // 0: no more caches; 2: an instruction cache
    if (type == 0) break;
    if (type == 2 || (level != 0 && ((a >> 5) & 7) != level)) continue;
    const int64_t ways = ((b >> 22) & 0x3ff) + 1, partitions = ((b >> 12) & 0x3ff) + 1,
                  line = (b & 0xfff) + 1, sets = int64_t{c} + 1;
    largest = std::max(largest, ways * partitions * line * sets);
  }
  return largest;
}

// The cache of `level` a core lists (Intel's leaf, else AMD's), 0 where neither lists one.
int64_t listed_cache_bytes(unsigned level) {
  const int64_t intel = largest_cache(4, level);
  return intel > 0 ? intel : largest_cache(0x8000001D, level);
}

// Whether cpuid's vendor string is AMD's: the rules measured to differ by vendor (below).
bool is_amd() {
  static const bool amd = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return false;
    return b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163;  // "AuthenticAMD"
  }();
  return amd;
}
}  // namespace

bool masked_loads_miss_slowly() { return is_amd(); }
bool element_prefetches_pay() { return is_amd(); }

int64_t listed_cache_bytes() {
  static const int64_t bytes = [] {
    const int64_t cache = listed_cache_bytes(0);
    return cache > 0 ? cache : int64_t{8} << 20;
  }();
  return bytes;
}

int64_t scatter_group_bytes() {
  static const int64_t bytes = [] {
    const int64_t l2 = listed_cache_bytes(2);
    return l2 > 0 ? std::clamp<int64_t>(l2 / 2, kLeastScatterGroupBytes, kMostScatterGroupBytes)
                  : kMostScatterGroupBytes;
  }();
  return bytes;
}

int64_t default_streaming_bytes() {
  // A listed cache above kMaxCache is a whole server socket's (a VM's cpuid shows its host's),
  // shared by many cores: on the Intel Xeon VM of 2026-12-03, which lists 480 MiB, a 134 MB
  // output ran 17% faster streamed and a 25.7 MB one 22% slower (docs/kernels.md).
  constexpr int64_t kMaxCache = int64_t{64} << 20;
  return std::min(listed_cache_bytes(), kMaxCache);
}
#elif defined(POOLGEN_SSE2)
bool masked_loads_miss_slowly() { return false; }
bool element_prefetches_pay() { return false; }
int64_t listed_cache_bytes() { return int64_t{8} << 20; }
int64_t default_streaming_bytes() { return listed_cache_bytes(); }
int64_t scatter_group_bytes() { return kMostScatterGroupBytes; }
#else
bool masked_loads_miss_slowly() { return false; }
bool element_prefetches_pay() { return false; }
int64_t listed_cache_bytes() { return std::numeric_limits<int64_t>::max(); }
int64_t default_streaming_bytes() { return listed_cache_bytes(); }
int64_t scatter_group_bytes() { return kMostScatterGroupBytes; }
#endif

}  // namespace poolgen::detail

namespace poolgen {

void set_min_parallel_bytes(int64_t bytes) {
  detail::min_parallel = bytes < 0 ? detail::kDefaultMinParallelBytes : bytes;
  detail::note_settings_change();
}

void set_streaming_bytes(int64_t bytes) {
  detail::streaming = bytes < 0 ? -1 : bytes;
  detail::note_settings_change();
}

void set_parallel_for(const ParallelFor& host) {
  if (host.run) detail::stop_workers();  // idle from now on: their cores are the host's
  std::lock_guard<std::mutex> lock(detail::host_mutex);
  detail::host = host.run ? host : ParallelFor{};
}

}  // namespace poolgen
