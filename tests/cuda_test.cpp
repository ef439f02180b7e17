// The deterministic winner unpooling (the GPUs' algorithm) on the CPU, and the CUDA kernels
// against the reference: pooling, unpooling and both backward ops, host data (PoolOptions::device)
// and device pointers (allocated through Halide's device API, so no CUDA toolkit is needed), duplicates,
// determinism over repeated runs, invalid indices reported with nothing written outside the
// output. CUDA tests report themselves skipped where there is no GPU (CI, most dev machines).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "built_kernels.hpp"
#include "poolgen/poolgen.hpp"
#include "random_cases.hpp"
#include "reference.hpp"

// CUDA device pointers exist in a CUDA build; the OpenCL check build (POOLGEN_GPU_API=opencl,
// its GPU kernels on PoCL) takes host views only.
#if POOLGEN_WITH_CUDA && !POOLGEN_GPU_OPENCL
#define POOLGEN_CUDA_DEVICE_POINTERS 1
#else
#define POOLGEN_CUDA_DEVICE_POINTERS 0
#endif
#if POOLGEN_CUDA_DEVICE_POINTERS
#include <HalideRuntime.h>
#include <HalideRuntimeCuda.h>
#include <dlfcn.h>
#endif

namespace poolgen {
namespace {

constexpr int64_t kGuard = 16;
constexpr float kGuardValue = -12345.5f;

// One random unpooling case: shapes, options, and values/indices of a pooling's shape whose
// indices are duplicate-heavy (few distinct slots) and, when asked, sometimes invalid (negative,
// one past the plane, or a valid slot plus 2^32, which 32-bit arithmetic would take as valid).
struct UnpoolCase {
  int nd = 2;
  Ints shape, out_shape;
  UnpoolOptions options;
  std::vector<float> values;
  std::vector<int64_t> indices;
};

UnpoolCase random_unpool_case(std::mt19937_64& rng, bool invalid, bool wide_indices) {
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  UnpoolCase c;
  c.nd = static_cast<int>(pick(1, 3));
  c.shape = {pick(1, 2), pick(1, 5)};
  for (int i = 0; i < c.nd; ++i) c.shape.push_back(pick(1, c.nd == 1 ? 40 : 9));
  c.options.kernel_size = {pick(1, 3)};
  c.options.stride = {pick(1, 3)};
  EXPECT_TRUE(max_unpool_output_shape(c.nd, c.shape, c.options, &c.out_shape).ok());
  const int64_t n = ref::numel(c.shape), plane = ref::numel(Ints(c.out_shape.end() - c.nd,
                                                                   c.out_shape.end()));
  std::vector<int64_t> slots(static_cast<size_t>(pick(1, 4)));
  for (int64_t& s : slots) s = pick(0, plane - 1);
  for (int64_t i = 0; i < n; ++i) {
    c.values.push_back(static_cast<float>(i) + 0.5f);  // distinct: the winner is visible
    c.indices.push_back(pick(0, 3) == 0 ? pick(0, plane - 1) : slots[pick(0, slots.size() - 1)]);
    if (invalid && pick(0, 15) == 0) {
      const int64_t bad[] = {-1, plane, wide_indices ? c.indices.back() + (int64_t{1} << 32) : -7};
      c.indices.back() = bad[pick(0, 2)];
    }
  }
  return c;
}

struct Unpooled {
  Status status;
  std::vector<float> output;  // with kGuard guard elements on each side
};

template <typename Index>
Unpooled run_unpool(const UnpoolCase& c, UnpoolOptions options) {
  std::vector<Index> indices(c.indices.begin(), c.indices.end());
  Unpooled r;
  r.output.assign(static_cast<size_t>(ref::numel(c.out_shape) + 2 * kGuard), kGuardValue);
  r.status = max_unpool(c.nd, contiguous(c.values.data(), c.shape),
                        contiguous(indices.data(), c.shape),
                        contiguous(r.output.data() + kGuard, c.out_shape), options);
  return r;
}

bool guards_intact(const std::vector<float>& b) {
  for (int64_t i = 0; i < kGuard; ++i) {
    if (b[i] != kGuardValue || b[b.size() - 1 - i] != kGuardValue) return false;
  }
  return true;
}

std::vector<float> inner(const std::vector<float>& b) {
  return std::vector<float>(b.begin() + kGuard, b.end() - kGuard);
}

bool winner_built(DType index) { return test::cpu_twin_built("unpool_winner", index); }

// Runs `c` through Path::winner (index type Index) and checks it against the reference and, for
// invalid indices, against the scatter's error (same code and message).
template <typename Index>
void check_winner_case(const UnpoolCase& c, const std::string& where) {
  UnpoolOptions winner = c.options, scatter = c.options;
  winner.path = Path::winner;
  scatter.path = Path::general;
  const Unpooled got = run_unpool<Index>(c, winner);
  EXPECT_TRUE(guards_intact(got.output)) << where;
  Ints ref_shape;
  std::vector<float> expected;
  const Status ref_status =
      ref::max_unpool<float>(c.nd, c.shape, c.values, c.indices, c.options, &ref_shape, &expected);
  if (!ref_status.ok()) {
    const Unpooled scattered = run_unpool<Index>(c, scatter);
    EXPECT_EQ(got.status.code(), Code::index_out_of_range) << where << got.status.message();
    EXPECT_EQ(got.status.message(), scattered.status.message()) << where;
    return;
  }
  ASSERT_TRUE(got.status.ok()) << where << got.status.message();
  EXPECT_EQ(inner(got.output), expected) << where;
}

class WinnerCpu : public ::testing::TestWithParam<DType> {};

TEST_P(WinnerCpu, MatchesReferenceWithDuplicatesAndInvalidIndices) {
  const DType index = GetParam();
  if (!winner_built(index)) GTEST_SKIP() << "this build has no CPU winner kernel for " << dtype_name(index);
  std::mt19937_64 rng(20261122 + static_cast<int>(index));
  for (int i = 0; i < 300; ++i) {
    const UnpoolCase c = random_unpool_case(rng, i % 3 == 2, index == DType::i64);
    const std::string where = "case " + std::to_string(i) + ": ";
    if (index == DType::i64) {
      check_winner_case<int64_t>(c, where);
    } else {
      check_winner_case<int32_t>(c, where);
    }
  }
}

// Large planes with every element naming one of a few slots: the threads' tasks race on them.
TEST_P(WinnerCpu, DeterministicAcrossThreadCountsAndRuns) {
  const DType index = GetParam();
  if (!winner_built(index)) GTEST_SKIP() << "this build has no CPU winner kernel for " << dtype_name(index);
  UnpoolCase c;
  c.nd = 1;
  c.shape = {2, 3, 50000};
  c.options.kernel_size = {2};
  ASSERT_TRUE(max_unpool_output_shape(1, c.shape, c.options, &c.out_shape).ok());
  std::mt19937_64 rng(7);
  for (int64_t i = 0; i < ref::numel(c.shape); ++i) {
    c.values.push_back(static_cast<float>(i));
    c.indices.push_back(static_cast<int64_t>(rng() % 3) * 333);
  }
  Ints shape;
  std::vector<float> expected;
  ASSERT_TRUE(ref::max_unpool<float>(1, c.shape, c.values, c.indices, c.options, &shape, &expected).ok());
  UnpoolOptions options = c.options;
  options.path = Path::winner;
  for (int threads : {1, 2, 8}) {
    set_num_threads(threads);
    for (int run = 0; run < 3; ++run) {
      const Unpooled got = index == DType::i64 ? run_unpool<int64_t>(c, options)
                                               : run_unpool<int32_t>(c, options);
      ASSERT_TRUE(got.status.ok()) << got.status.message();
      EXPECT_EQ(inner(got.output), expected) << threads << " threads, run " << run;
    }
  }
  set_num_threads(0);
}

// Indices that each lie in their own cell's window, as a pooling's do, where windows overlap
// (stride below kernel) and several cells name one slot: Path::winner's window gather (CUDA's
// algorithm) serves them, and the last cell naming a slot wins, as in the scatter.
TEST_P(WinnerCpu, WindowGatherTakesTheLastCellOfOverlappingWindows) {
  const DType index = GetParam();
  if (!test::cpu_twin_built("unpool_window_gather", index)) {
    GTEST_SKIP() << "this build has no CPU window gather for " << dtype_name(index);
  }
  std::mt19937_64 rng(20261127 + static_cast<int>(index));
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  int gathered = 0;
  for (int i = 0; i < 300; ++i) {
    UnpoolCase c;
    c.nd = static_cast<int>(pick(1, 3));
    c.shape = {pick(1, 2), pick(1, 4)};
    for (int d = 0; d < c.nd; ++d) c.shape.push_back(pick(1, c.nd == 1 ? 30 : 7));
    const int64_t k = pick(1, 4), stride = pick(1, k), padding = pick(0, k / 2);
    c.options.kernel_size = {k};
    c.options.stride = {stride};
    c.options.padding = {padding};
    if (!max_unpool_output_shape(c.nd, c.shape, c.options, &c.out_shape).ok()) continue;
    const Ints out(c.out_shape.end() - c.nd, c.out_shape.end());
    const Ints cells(c.shape.end() - c.nd, c.shape.end());
    int64_t cells_per_plane = 1;
    for (int64_t e : cells) cells_per_plane *= e;
    for (int64_t e = 0; e < ref::numel(c.shape); ++e) {
      // A random slot of cell e's window (row-major over the plane), one inside the output.
      int64_t rest = e % cells_per_plane, slot = 0, scale = 1;
      for (int d = c.nd - 1; d >= 0; --d) {
        const int64_t cell = rest % cells[d];
        rest /= cells[d];
        const int64_t lo = std::max<int64_t>(0, cell * stride - padding),
                      hi = std::min<int64_t>(out[d] - 1, cell * stride - padding + k - 1);
        slot += (lo <= hi ? pick(lo, hi) : 0) * scale;
        scale *= out[d];
      }
      c.values.push_back(static_cast<float>(e) + 0.5f);
      c.indices.push_back(slot);
    }
    const std::string where = "case " + std::to_string(i) + ": ";
    if (index == DType::i64) {
      check_winner_case<int64_t>(c, where);
    } else {
      check_winner_case<int32_t>(c, where);
    }
    UnpoolOptions options = c.options;
    options.path = Path::winner;
    std::string name;
    ASSERT_TRUE(max_unpool_kernel_name(c.nd, c.shape, options, &name).ok());
    if (name.find("_gather_") != std::string::npos) ++gathered;
  }
  EXPECT_GT(gathered, 100);
}

INSTANTIATE_TEST_SUITE_P(Index, WinnerCpu, ::testing::Values(DType::i64, DType::i32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(WinnerCpu, KernelChoice) {
  if (!winner_built(DType::i64)) GTEST_SKIP() << "this build has no CPU winner kernel";
  UnpoolOptions options;
  options.kernel_size = {2};
  options.path = Path::winner;
  std::string name;
  ASSERT_TRUE(max_unpool_kernel_name(2, {1, 2, 4, 4}, options, &name).ok());
  EXPECT_EQ(name, "max_unpool2d_gather_b32_i64");  // the winner behind it, where an index strays
}

// ------------------------------------------------------------------------------------------
// CUDA. Every test skips, saying why, where no CUDA device answers the capability query.

#define POOLGEN_REQUIRE_CUDA()                                                              \
  do {                                                                                      \
    if (!cuda_available()) {                                                                \
      GTEST_SKIP() << "no CUDA device is available (this build's CUDA kernels need a GPU " \
                      "and driver; the capability query failed)";                           \
    }                                                                                       \
  } while (false)

#if POOLGEN_CUDA_DEVICE_POINTERS
// Device memory through Halide's CUDA runtime: a 1-D byte buffer with a host mirror.
class DeviceMemory {
 public:
  explicit DeviceMemory(size_t bytes) : host_(bytes) {
    dim_ = {0, static_cast<int32_t>(bytes), 1, 0};
    buffer_.host = host_.data();
    buffer_.type = {halide_type_uint, 8};
    buffer_.dimensions = 1;
    buffer_.dim = &dim_;
    ok_ = halide_device_malloc(nullptr, &buffer_, halide_cuda_device_interface()) == 0;
  }
  ~DeviceMemory() { halide_device_free(nullptr, &buffer_); }
  bool ok() const { return ok_; }
  void* pointer() const { return reinterpret_cast<void*>(buffer_.device); }
  bool upload(const void* data) {
    std::memcpy(host_.data(), data, host_.size());
    buffer_.flags = halide_buffer_flag_host_dirty;
    return halide_copy_to_device(nullptr, &buffer_, halide_cuda_device_interface()) == 0;
  }
  bool download(void* data) {
    buffer_.flags = halide_buffer_flag_device_dirty;
    if (halide_copy_to_host(nullptr, &buffer_) != 0) return false;
    std::memcpy(data, host_.data(), host_.size());
    return true;
  }

 private:
  std::vector<uint8_t> host_;
  halide_dimension_t dim_{};
  halide_buffer_t buffer_{};
  bool ok_ = false;
};

template <typename T>
void* on_device(DeviceMemory& memory, const std::vector<T>& data) {
  EXPECT_TRUE(memory.ok() && memory.upload(data.data()));
  return memory.pointer();
}
#endif

#if POOLGEN_CUDA_DEVICE_POINTERS
// An unpooling case's values, indices and guarded output in device memory, and their views.
struct DeviceUnpool {
  std::vector<float> out;  // the output with kGuard guard elements on each side
  DeviceMemory v, idx, o;
  TensorView values, indices, output;
  explicit DeviceUnpool(const UnpoolCase& c)
      : out(static_cast<size_t>(ref::numel(c.out_shape) + 2 * kGuard), kGuardValue),
        v(c.values.size() * sizeof(float)), idx(c.indices.size() * sizeof(int64_t)),
        o(out.size() * sizeof(float)),
        values(contiguous(on_device(v, c.values), DType::f32, c.shape)),
        indices(contiguous(on_device(idx, c.indices), DType::i64, c.shape)),
        output(contiguous(static_cast<float*>(on_device(o, out)) + kGuard, DType::f32,
                          c.out_shape)) {
    for (TensorView* view : {&values, &indices, &output}) view->device = Device::cuda;
  }
  bool download() { return o.download(out.data()); }
};
#endif

struct PoolCase {
  int nd;
  Ints shape;
  PoolOptions options;
};

std::vector<PoolCase> pool_cases() {
  std::vector<PoolCase> cases;
  PoolOptions k2;
  k2.kernel_size = {2};
  PoolOptions k3s2p1;
  k3s2p1.kernel_size = {3};
  k3s2p1.stride = {2};
  k3s2p1.padding = {1};
  PoolOptions dilated;
  dilated.kernel_size = {3};
  dilated.dilation = {2};
  dilated.padding = {1};
  dilated.ceil_mode = true;
  for (const PoolOptions& o : {k2, k3s2p1, dilated}) {
    cases.push_back({1, {2, 3, 37}, o});
    cases.push_back({2, {2, 5, 13, 17}, o});
    cases.push_back({3, {1, 3, 7, 9, 11}, o});
  }
  return cases;
}

std::vector<float> random_floats(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = static_cast<float>(static_cast<int>(rng() % 64));  // many ties
  if (n > 3) v[3] = std::numeric_limits<float>::quiet_NaN();
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(Cuda, PoolHostDataMatchesReference) {
  POOLGEN_REQUIRE_CUDA();
  for (const PoolCase& c : pool_cases()) {
    const std::vector<float> input = random_floats(ref::numel(c.shape), c.shape.back());
    Ints out_shape;
    std::vector<float> expected;
    std::vector<int64_t> expected_indices;
    ASSERT_TRUE(ref::max_pool<float>(c.nd, c.shape, input, c.options, &out_shape, &expected,
                                     &expected_indices).ok());
    std::vector<float> values(expected.size());
    std::vector<int64_t> indices(expected.size());
    PoolOptions options = c.options;
    options.device = Device::cuda;
    const Status s = max_pool(c.nd, contiguous(input.data(), c.shape),
                              contiguous(values.data(), out_shape),
                              contiguous(indices.data(), out_shape), options);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_TRUE(same_bits(values, expected)) << c.nd << "-D";
    EXPECT_EQ(indices, expected_indices) << c.nd << "-D";
  }
}

TEST(Cuda, PoolDevicePointersMatchReference) {
  POOLGEN_REQUIRE_CUDA();
  if (!POOLGEN_CUDA_DEVICE_POINTERS) GTEST_SKIP() << "the OpenCL check build takes host views only";
#if POOLGEN_CUDA_DEVICE_POINTERS
  for (const PoolCase& c : pool_cases()) {
    const std::vector<float> input = random_floats(ref::numel(c.shape), c.shape.back() + 1);
    Ints out_shape;
    std::vector<float> expected;
    std::vector<int64_t> expected_indices;
    ASSERT_TRUE(ref::max_pool<float>(c.nd, c.shape, input, c.options, &out_shape, &expected,
                                     &expected_indices).ok());
    DeviceMemory in(input.size() * sizeof(float)), v(expected.size() * sizeof(float)),
        i(expected.size() * sizeof(int64_t));
    TensorView in_view = contiguous(on_device(in, input), DType::f32, c.shape);
    TensorView v_view = contiguous(v.pointer(), DType::f32, out_shape);
    TensorView i_view = contiguous(i.pointer(), DType::i64, out_shape);
    for (TensorView* view : {&in_view, &v_view, &i_view}) view->device = Device::cuda;
    const Status s = max_pool(c.nd, in_view, v_view, i_view, c.options);
    ASSERT_TRUE(s.ok()) << s.message();
    std::vector<float> values(expected.size());
    std::vector<int64_t> indices(expected.size());
    ASSERT_TRUE(v.download(values.data()) && i.download(indices.data()));
    EXPECT_TRUE(same_bits(values, expected)) << c.nd << "-D";
    EXPECT_EQ(indices, expected_indices) << c.nd << "-D";
  }
#endif
}

TEST(Cuda, UnpoolHostDataMatchesReferenceDeterministically) {
  POOLGEN_REQUIRE_CUDA();
  std::mt19937_64 rng(11);
  for (int i = 0; i < 60; ++i) {
    const UnpoolCase c = random_unpool_case(rng, i % 3 == 2, true);
    UnpoolOptions options = c.options;
    options.device = Device::cuda;
    Ints shape;
    std::vector<float> expected;
    const Status ref_status =
        ref::max_unpool<float>(c.nd, c.shape, c.values, c.indices, c.options, &shape, &expected);
    for (int run = 0; run < 3; ++run) {
      const Unpooled got = run_unpool<int64_t>(c, options);
      EXPECT_TRUE(guards_intact(got.output)) << "case " << i;
      if (!ref_status.ok()) {
        UnpoolOptions scatter = c.options;
        scatter.path = Path::general;
        EXPECT_EQ(got.status.code(), Code::index_out_of_range);
        EXPECT_EQ(got.status.message(), run_unpool<int64_t>(c, scatter).status.message());
        break;
      }
      ASSERT_TRUE(got.status.ok()) << got.status.message();
      EXPECT_EQ(inner(got.output), expected) << "case " << i << ", run " << run;
    }
  }
}

TEST(Cuda, UnpoolDevicePointersWithGuards) {
  POOLGEN_REQUIRE_CUDA();
  if (!POOLGEN_CUDA_DEVICE_POINTERS) GTEST_SKIP() << "the OpenCL check build takes host views only";
#if POOLGEN_CUDA_DEVICE_POINTERS
  std::mt19937_64 rng(12);
  for (int i = 0; i < 30; ++i) {
    const UnpoolCase c = random_unpool_case(rng, i % 2 == 1, true);
    Ints shape;
    std::vector<float> expected;
    const Status ref_status =
        ref::max_unpool<float>(c.nd, c.shape, c.values, c.indices, c.options, &shape, &expected);
    DeviceUnpool d(c);
    const Status s = max_unpool(c.nd, d.values, d.indices, d.output, c.options);
    ASSERT_TRUE(d.download());
    EXPECT_TRUE(guards_intact(d.out)) << "case " << i;
    if (!ref_status.ok()) {
      EXPECT_EQ(s.code(), Code::index_out_of_range) << s.message();
      continue;
    }
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(inner(d.out), expected) << "case " << i;
  }
#endif
}

#if POOLGEN_CUDA_DEVICE_POINTERS
// The CUDA driver's stream and memory functions the stream tests need (libcuda is loaded by the
// time a CUDA call has run).
struct StreamDriver {
  int (*stream_create)(void** stream, unsigned flags) = nullptr;
  int (*stream_synchronize)(void* stream) = nullptr;
  int (*stream_destroy)(void* stream) = nullptr;
  int (*mem_alloc)(uint64_t* pointer, size_t bytes) = nullptr;
  int (*mem_free)(uint64_t pointer) = nullptr;
  StreamDriver() {
    void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!lib) return;
    stream_create = reinterpret_cast<decltype(stream_create)>(dlsym(lib, "cuStreamCreate"));
    stream_synchronize =
        reinterpret_cast<decltype(stream_synchronize)>(dlsym(lib, "cuStreamSynchronize"));
    stream_destroy = reinterpret_cast<decltype(stream_destroy)>(dlsym(lib, "cuStreamDestroy_v2"));
    mem_alloc = reinterpret_cast<decltype(mem_alloc)>(dlsym(lib, "cuMemAlloc_v2"));
    mem_free = reinterpret_cast<decltype(mem_free)>(dlsym(lib, "cuMemFree_v2"));
  }
  bool ok() const { return stream_create && stream_synchronize && stream_destroy && mem_alloc && mem_free; }
};

// An allocator over cuMemAlloc that counts what it hands out and gets back.
struct CountingAllocator {
  const StreamDriver* driver;
  int allocated = 0, released = 0;
  static void* allocate(void* self, size_t bytes, void*, void** handle) {
    auto* a = static_cast<CountingAllocator*>(self);
    uint64_t pointer = 0;
    if (a->driver->mem_alloc(&pointer, bytes) != 0) return nullptr;
    ++a->allocated;
    *handle = reinterpret_cast<void*>(pointer);
    return reinterpret_cast<void*>(pointer);
  }
  static void release(void* self, void* handle, void* stream) {
    auto* a = static_cast<CountingAllocator*>(self);
    a->driver->stream_synchronize(stream);  // cuMemFree would not wait for the stream
    a->driver->mem_free(reinterpret_cast<uint64_t>(handle));
    ++a->released;
  }
};
#endif

// Calls on a caller's stream (PoolOptions::cuda_stream) with the caller's allocator: they return
// once queued, their results are complete once the stream has run them, the scratch comes from
// the allocator and goes back to it, and an invalid unpooling index is reported afterwards by
// cuda_check_reports, with the CPU's message and nothing written outside the output.
TEST(Cuda, CallsOnCallersStreamWithCallersAllocator) {
  POOLGEN_REQUIRE_CUDA();
  if (!POOLGEN_CUDA_DEVICE_POINTERS) GTEST_SKIP() << "the OpenCL check build has no CUDA streams";
#if POOLGEN_CUDA_DEVICE_POINTERS
  const StreamDriver driver;
  ASSERT_TRUE(driver.ok());
  void* stream = nullptr;
  ASSERT_EQ(driver.stream_create(&stream, 1), 0);  // CU_STREAM_NON_BLOCKING
  CountingAllocator counting{&driver};
  CudaAllocator allocator;
  allocator.allocate = CountingAllocator::allocate;
  allocator.release = CountingAllocator::release;
  allocator.context = &counting;
  set_cuda_allocator(allocator);
  std::mt19937_64 rng(14);
  for (int i = 0; i < 20; ++i) {
    const UnpoolCase c = random_unpool_case(rng, i % 2 == 1, true);
    Ints shape;
    std::vector<float> expected;
    const Status ref_status =
        ref::max_unpool<float>(c.nd, c.shape, c.values, c.indices, c.options, &shape, &expected);
    DeviceUnpool d(c);
    UnpoolOptions options = c.options;
    options.cuda_stream = stream;
    const Status s = max_unpool(c.nd, d.values, d.indices, d.output, options);
    ASSERT_TRUE(s.ok()) << "case " << i << ": " << s.message();  // errors come later
    ASSERT_EQ(driver.stream_synchronize(stream), 0);
    const Status later = cuda_check_reports(false);
    ASSERT_TRUE(d.download());
    EXPECT_TRUE(guards_intact(d.out)) << "case " << i;
    if (!ref_status.ok()) {
      UnpoolOptions cpu = c.options;
      cpu.path = Path::general;
      EXPECT_EQ(later.code(), Code::index_out_of_range) << later.message();
      EXPECT_EQ(later.message(), run_unpool<int64_t>(c, cpu).status.message()) << "case " << i;
      continue;
    }
    EXPECT_TRUE(later.ok()) << later.message();
    EXPECT_EQ(inner(d.out), expected) << "case " << i;
  }
  EXPECT_TRUE(cuda_check_reports(true).ok());
  set_cuda_allocator(CudaAllocator{});
  EXPECT_GT(counting.allocated, 0);
  EXPECT_EQ(counting.released, counting.allocated);
  driver.stream_destroy(stream);
#endif
}

TEST(Cuda, RefusesStridedDeviceViewsAndMixedDevices) {
  POOLGEN_REQUIRE_CUDA();
  std::vector<float> host(64);
  UnpoolOptions options;
  options.kernel_size = {2};
  TensorView values = contiguous(host.data(), DType::f32, {1, 1, 2, 2});
  std::vector<int64_t> indices(4);
  TensorView index_view = contiguous(indices.data(), DType::i64, {1, 1, 2, 2});
  TensorView out = contiguous(host.data() + 8, DType::f32, {1, 1, 4, 4});
  values.device = Device::cuda;
  Status s = max_unpool(2, values, index_view, out, options);
  EXPECT_EQ(s.code(), Code::invalid_argument) << s.message();
  EXPECT_NE(s.message().find("indices"), std::string::npos) << s.message();
  index_view.device = out.device = Device::cuda;
  values.strides = {4, 4, 2, 1};  // rows stepped by 2: not dense
  values.shape = {1, 1, 2, 1};
  index_view.shape = {1, 1, 2, 1};
  out.shape = {1, 1, 4, 2};
  s = max_unpool(2, values, index_view, out, options);
  EXPECT_EQ(s.code(), Code::unsupported) << s.message();
}

// Gradients whose sums depend on the order of the additions (1e8, 1, -1e8, 3e-8, ...).
std::vector<float> random_gradients(int64_t n, uint64_t seed) {
  static const float kPalette[] = {1e8f, 1.0f, -1e8f, 3e-8f, -1.0f, 0.5f, -0.0f, 2.0f};
  std::mt19937_64 rng(seed);
  std::vector<float> g(static_cast<size_t>(n));
  for (float& x : g) x = kPalette[rng() % 8];
  return g;
}

// The backward of pooling on the GPU: the reference's bytes, which are the CPU's (PyTorch's
// order of additions; PyTorch's own CUDA kernel adds with atomics), on host data copied to the
// GPU and, in the contiguous layout, on device pointers; three runs give the same bytes.
TEST(Cuda, PoolBackwardMatchesReferenceAndCpu) {
  POOLGEN_REQUIRE_CUDA();
  for (const PoolCase& c : pool_cases()) {
    const std::vector<float> input = random_floats(ref::numel(c.shape), c.shape.back() + 2);
    Ints out_shape;
    std::vector<float> pooled, expected;
    std::vector<int64_t> indices;
    ASSERT_TRUE(ref::max_pool<float>(c.nd, c.shape, input, c.options, &out_shape, &pooled,
                                     &indices).ok());
    const std::vector<float> grad = random_gradients(ref::numel(out_shape), c.shape.back());
    ASSERT_TRUE(
        ref::max_pool_backward<float>(c.nd, c.shape, grad, indices, c.options, &expected).ok());
    std::vector<float> cpu(expected.size()), gpu(expected.size());
    ASSERT_TRUE(max_pool_backward(c.nd, contiguous(grad.data(), out_shape),
                                  contiguous(indices.data(), out_shape),
                                  contiguous(cpu.data(), c.shape), c.options).ok());
    PoolOptions options = c.options;
    options.device = Device::cuda;
    for (int run = 0; run < 3; ++run) {
      const Status s = max_pool_backward(c.nd, contiguous(grad.data(), out_shape),
                                         contiguous(indices.data(), out_shape),
                                         contiguous(gpu.data(), c.shape), options);
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_TRUE(same_bits(gpu, expected)) << c.nd << "-D, run " << run;
      EXPECT_TRUE(same_bits(gpu, cpu)) << c.nd << "-D, run " << run;
    }
#if POOLGEN_CUDA_DEVICE_POINTERS
    DeviceMemory g(grad.size() * sizeof(float)), i(indices.size() * sizeof(int64_t)),
        o(expected.size() * sizeof(float));
    TensorView g_view = contiguous(on_device(g, grad), DType::f32, out_shape);
    TensorView i_view = contiguous(on_device(i, indices), DType::i64, out_shape);
    TensorView o_view = contiguous(o.pointer(), DType::f32, c.shape);
    for (TensorView* view : {&g_view, &i_view, &o_view}) view->device = Device::cuda;
    const Status s = max_pool_backward(c.nd, g_view, i_view, o_view, c.options);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_TRUE(o.download(gpu.data()));
    EXPECT_TRUE(same_bits(gpu, expected)) << c.nd << "-D, device pointers";
#endif
  }
}

// The backward of unpooling on the GPU: a gather, duplicates and invalid indices as on the CPU
// (the same error message), with guard elements around grad_values.
TEST(Cuda, UnpoolBackwardMatchesReference) {
  POOLGEN_REQUIRE_CUDA();
  std::mt19937_64 rng(13);
  for (int i = 0; i < 60; ++i) {
    const UnpoolCase c = random_unpool_case(rng, i % 3 == 2, true);
    const std::vector<float> grad = random_gradients(ref::numel(c.out_shape), i);
    std::vector<float> expected;
    const Status ref_status =
        ref::max_unpool_backward<float>(c.nd, c.shape, grad, c.indices, c.options, &expected);
    std::vector<float> cpu(static_cast<size_t>(ref::numel(c.shape) + 2 * kGuard), kGuardValue);
    std::vector<float> gpu = cpu;
    const Status cpu_status = max_unpool_backward(
        c.nd, contiguous(grad.data(), c.out_shape), contiguous(c.indices.data(), c.shape),
        contiguous(cpu.data() + kGuard, c.shape), c.options);
    UnpoolOptions options = c.options;
    options.device = Device::cuda;
    const Status s = max_unpool_backward(c.nd, contiguous(grad.data(), c.out_shape),
                                         contiguous(c.indices.data(), c.shape),
                                         contiguous(gpu.data() + kGuard, c.shape), options);
    EXPECT_TRUE(guards_intact(gpu)) << "case " << i;
    EXPECT_EQ(s.code(), ref_status.code()) << "case " << i << ": " << s.message();
    if (!ref_status.ok()) {
      EXPECT_EQ(s.message(), cpu_status.message()) << "case " << i;
      continue;
    }
    EXPECT_EQ(inner(gpu), expected) << "case " << i;
  }
}

// Random windows (any kernel, stride, padding, dilation, ceil_mode; 1-D to 3-D; both layouts):
// pooling, its backward and unpooling by the pooling's window on CUDA give the CPU's bits. The
// CUDA kernels divide by the runtime window and extents (with magic pairs where built so), so
// every divisor and numerator range counts.
TEST(Cuda, RandomWindowsMatchCpu) {
  POOLGEN_REQUIRE_CUDA();
  test::Rng rng(21);
  for (int i = 0; i < 120; ++i) {
    const int nd = static_cast<int>(rng.uniform(1, 3));
    const bool last = rng.chance(0.5);
    Ints shape;
    PoolOptions o;
    test::random_pool_config(rng, nd, 0, {}, &shape, &o);
    if (ref::numel(shape) == 0) continue;
    Ints out_shape;
    ASSERT_TRUE(max_pool_output_shape(nd, shape, o, &out_shape).ok());
    auto view = [&](auto* data, const Ints& s) {
      return last ? channels_last(data, s, nd) : contiguous(data, s);
    };
    const std::vector<float> input = random_floats(ref::numel(shape), rng.bits());
    const std::vector<float> grad = random_gradients(ref::numel(out_shape), rng.bits());
    std::vector<float> values[2], grad_input[2];
    std::vector<int64_t> indices[2];
    for (int d = 0; d < 2; ++d) {
      PoolOptions on = o;
      on.device = d ? Device::cuda : Device::cpu;
      values[d].resize(static_cast<size_t>(ref::numel(out_shape)));
      indices[d].resize(values[d].size());
      grad_input[d].resize(input.size());
      Status s = max_pool(nd, view(input.data(), shape), view(values[d].data(), out_shape),
                          view(indices[d].data(), out_shape), on);
      ASSERT_TRUE(s.ok()) << "case " << i << ": " << s.message();
      s = max_pool_backward(nd, view(grad.data(), out_shape), view(indices[0].data(), out_shape),
                            view(grad_input[d].data(), shape), on);
      ASSERT_TRUE(s.ok()) << "case " << i << ": " << s.message();
    }
    EXPECT_TRUE(same_bits(values[1], values[0])) << "case " << i;
    EXPECT_EQ(indices[1], indices[0]) << "case " << i;
    EXPECT_TRUE(same_bits(grad_input[1], grad_input[0])) << "case " << i;
    // Unpooling by the same window (unpooling has no dilation): the window gather.
    const bool unit_dilation =
        std::all_of(o.dilation.begin(), o.dilation.end(), [](int64_t d) { return d == 1; });
    if (!unit_dilation) continue;
    UnpoolOptions u;
    u.kernel_size = o.kernel_size;
    u.stride = o.stride;
    u.padding = o.padding;
    u.output_size = Ints(shape.end() - nd, shape.end());
    Ints unpooled_shape;
    if (!max_unpool_output_shape(nd, out_shape, u, &unpooled_shape).ok()) continue;
    std::vector<float> unpooled[2];
    for (int d = 0; d < 2; ++d) {
      u.device = d ? Device::cuda : Device::cpu;
      unpooled[d].resize(static_cast<size_t>(ref::numel(unpooled_shape)));
      const Status s = max_unpool(nd, view(values[0].data(), out_shape),
                                  view(indices[0].data(), out_shape),
                                  view(unpooled[d].data(), unpooled_shape), u);
      ASSERT_TRUE(s.ok()) << "case " << i << ": " << s.message();
    }
    EXPECT_TRUE(same_bits(unpooled[1], unpooled[0])) << "case " << i;
  }
}

// Where there is no GPU, a CUDA request is a clean `unsupported` error, for every op.
TEST(Cuda, NoDeviceIsUnsupported) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present";
  std::vector<float> in(16), values(4);
  std::vector<int64_t> indices(4);
  PoolOptions options;
  options.kernel_size = {2};
  options.device = Device::cuda;
  UnpoolOptions unpool;
  unpool.kernel_size = {2};
  unpool.device = Device::cuda;
  const TensorView big = contiguous(in.data(), {1, 1, 4, 4}),
                   small = contiguous(values.data(), {1, 1, 2, 2}),
                   index = contiguous(indices.data(), {1, 1, 2, 2});
  for (const Status& s : {max_pool(2, big, small, index, options),
                          max_pool_backward(2, small, index, big, options),
                          max_unpool_backward(2, big, index, small, unpool)}) {
    EXPECT_EQ(s.code(), Code::unsupported) << s.message();
    EXPECT_NE(s.message().find("no CUDA device"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace poolgen
