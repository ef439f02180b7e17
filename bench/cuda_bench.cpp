// poolgen_cuda_bench: the CUDA kernels on the v0.1 shapes (device pointers, f32 values, i64
// indices, contiguous), each against a device-to-device copy of the op's compulsory bytes
// (pool: input + values + indices; unpool: values + indices + output). Counters: GB/s of those
// bytes and copy_fraction = copy time / kernel time (1.0 = at the copy roofline). Skips every
// benchmark when no CUDA device answers. Device memory comes from Halide's runtime.
#include <benchmark/benchmark.h>
#include <poolgen/poolgen.hpp>

#include <HalideRuntime.h>
#include <HalideRuntimeCuda.h>

#include <chrono>
#include <cstdint>
#include <vector>

namespace {

using poolgen::DType;
using poolgen::Ints;

// A device allocation of `bytes` (1-D, bytes as elements).
struct DeviceBuffer {
  halide_dimension_t dim{};
  halide_buffer_t buffer{};
  explicit DeviceBuffer(int64_t bytes) {
    dim = {0, static_cast<int32_t>(bytes), 1, 0};
    buffer.type = {halide_type_uint, 8};
    buffer.dimensions = 1;
    buffer.dim = &dim;
    halide_device_malloc(nullptr, &buffer, halide_cuda_device_interface());
  }
  ~DeviceBuffer() { halide_device_free(nullptr, &buffer); }
  void* pointer() const { return reinterpret_cast<void*>(buffer.device); }
  void sync() { halide_device_sync(nullptr, &buffer); }
};

poolgen::TensorView device_view(const DeviceBuffer& b, DType dtype, const Ints& shape) {
  poolgen::TensorView v = poolgen::contiguous(b.pointer(), dtype, shape);
  v.device = poolgen::Device::cuda;
  return v;
}

int64_t numel(const Ints& s) {
  int64_t n = 1;
  for (int64_t e : s) n *= e;
  return n;
}

// Seconds per device-to-device copy of `bytes` (split in two halves, source and destination).
double copy_seconds(int64_t bytes) {
  DeviceBuffer src(bytes / 2), dst(bytes / 2);
  auto copy = [&] { halide_buffer_copy(nullptr, &src.buffer, halide_cuda_device_interface(), &dst.buffer); };
  copy();
  dst.sync();
  const int reps = 20;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) copy();
  dst.sync();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / reps;
}

void run(benchmark::State& state, int nd, const Ints& shape, int k, int s, int p, bool unpool) {
  if (!poolgen::cuda_available()) {
    state.SkipWithError("no CUDA device is available");
    return;
  }
  poolgen::PoolOptions pool;
  pool.kernel_size = {k};
  pool.stride = {s};
  pool.padding = {p};
  Ints out;
  poolgen::max_pool_output_shape(nd, shape, pool, &out);
  DeviceBuffer in(numel(shape) * 4), values(numel(out) * 4), indices(numel(out) * 8),
      restored(numel(shape) * 4);
  poolgen::Status status = poolgen::max_pool(nd, device_view(in, DType::f32, shape),
                                             device_view(values, DType::f32, out),
                                             device_view(indices, DType::i64, out), pool);
  poolgen::UnpoolOptions options;
  options.kernel_size = pool.kernel_size;
  options.stride = pool.stride;
  options.padding = pool.padding;
  options.output_size = Ints(shape.end() - nd, shape.end());
  auto call = [&] {
    return unpool ? poolgen::max_unpool(nd, device_view(values, DType::f32, out),
                                        device_view(indices, DType::i64, out),
                                        device_view(restored, DType::f32, shape), options)
                  : poolgen::max_pool(nd, device_view(in, DType::f32, shape),
                                      device_view(values, DType::f32, out),
                                      device_view(indices, DType::i64, out), pool);
  };
  if (status.ok()) status = call();
  if (!status.ok()) {
    state.SkipWithError(status.message().c_str());
    return;
  }
  DeviceBuffer& result = unpool ? restored : indices;
  result.sync();
  const int64_t bytes = numel(shape) * 4 + numel(out) * 12;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    call();
    result.sync();
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  const double copy = copy_seconds(bytes);
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["copy_GBps"] = bytes / copy / 1e9;
  state.counters["copy_fraction"] = benchmark::Counter(
      copy * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

#define POOLGEN_CUDA_BENCH(label, nd, k, s, p, ...)                                            \
  BENCHMARK_CAPTURE(run, pool_##label, nd, Ints{__VA_ARGS__}, k, s, p, false)->UseManualTime(); \
  BENCHMARK_CAPTURE(run, unpool_##label, nd, Ints{__VA_ARGS__}, k, s, p, true)->UseManualTime();
POOLGEN_CUDA_BENCH(2d_k2s2p0_8x64x112x112, 2, 2, 2, 0, 8, 64, 112, 112)
POOLGEN_CUDA_BENCH(2d_k3s2p1_8x64x112x112, 2, 3, 2, 1, 8, 64, 112, 112)
POOLGEN_CUDA_BENCH(3d_k2s2p0_2x16x32x64x64, 3, 2, 2, 0, 2, 16, 32, 64, 64)
POOLGEN_CUDA_BENCH(1d_k2s2p0_8x64x65536, 1, 2, 2, 0, 8, 64, 65536)

}  // namespace

BENCHMARK_MAIN();
