// poolgen_cuda_bench: the CUDA kernels on device pointers, f32 values and i64 indices, on the
// v0.1 shapes in both layouts and a 1x1x2x2 pooling (the fixed cost of a call): the four ops
// (pool, unpool, pool_backward, unpool_backward), each beside a device-to-device copy of the same
// compulsory bytes (copy_<op>_<case>). Every timed call ends on the GPU: poolgen's calls return
// when their outputs are complete, and the copy's are synchronized the same way, so each row is
// launch + kernel + synchronization, timed on the host clock (manual time). Rows skip when no
// CUDA device answers. Device memory comes from Halide's runtime (no CUDA toolkit needed);
// bench/torch_cuda_bench.py times PyTorch's CUDA kernels the same way and reads this program's
// JSON output into one table.
//
//   poolgen_cuda_bench --benchmark_repetitions=7 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <poolgen/poolgen.hpp>

#include <HalideRuntime.h>
#include <HalideRuntimeCuda.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

using poolgen::DType;
using poolgen::Ints;

int64_t numel(const Ints& s) {
  int64_t n = 1;
  for (int64_t e : s) n *= e;
  return n;
}

// A device allocation of `bytes` (1-D, bytes as elements), filled with `fill` when given.
struct DeviceBuffer {
  std::vector<uint8_t> host;
  halide_dimension_t dim{};
  halide_buffer_t buffer{};
  explicit DeviceBuffer(int64_t bytes, const void* fill = nullptr) {
    dim = {0, static_cast<int32_t>(bytes), 1, 0};
    buffer.type = {halide_type_uint, 8};
    buffer.dimensions = 1;
    buffer.dim = &dim;
    if (fill != nullptr) {
      host.assign(static_cast<const uint8_t*>(fill), static_cast<const uint8_t*>(fill) + bytes);
      buffer.host = host.data();
      buffer.flags = halide_buffer_flag_host_dirty;
      halide_copy_to_device(nullptr, &buffer, halide_cuda_device_interface());
    } else {
      halide_device_malloc(nullptr, &buffer, halide_cuda_device_interface());
    }
  }
  ~DeviceBuffer() { halide_device_free(nullptr, &buffer); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* pointer() const { return reinterpret_cast<void*>(buffer.device); }
};

// Random floats with ties (small integers), so the windows' comparisons take both branches.
std::vector<float> random_floats(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = static_cast<float>(static_cast<int>(rng() % 1024) - 512) * 0.25f;
  return v;
}

enum class Op { pool, unpool, pool_backward, unpool_backward };

struct Case {
  int nd;
  Ints shape;
  int k, s, p;
  bool channels_last;
};

// The case's buffers on the device: the input, the pooling's values and indices (computed once,
// so unpooling and the backward passes see real indices), and the gradients.
struct Tensors {
  Case c;
  Ints out;
  poolgen::PoolOptions pool;
  poolgen::UnpoolOptions unpool;
  DeviceBuffer input, values, indices, restored, grad_out, grad_in;

  explicit Tensors(const Case& k)
      : c(k), out(output_shape(k)), pool(options(k)), unpool(unpool_options(k)),
        input(numel(k.shape) * 4, random_floats(numel(k.shape), 1).data()),
        values(numel(out) * 4), indices(numel(out) * 8), restored(numel(k.shape) * 4),
        grad_out(numel(out) * 4, random_floats(numel(out), 2).data()),
        grad_in(numel(k.shape) * 4, random_floats(numel(k.shape), 3).data()) {}

  static poolgen::PoolOptions options(const Case& k) {
    poolgen::PoolOptions o;
    o.kernel_size = {k.k};
    o.stride = {k.s};
    o.padding = {k.p};
    return o;
  }
  static poolgen::UnpoolOptions unpool_options(const Case& k) {
    poolgen::UnpoolOptions o;
    o.kernel_size = {k.k};
    o.stride = {k.s};
    o.padding = {k.p};
    o.output_size = Ints(k.shape.end() - k.nd, k.shape.end());
    return o;
  }
  static Ints output_shape(const Case& k) {
    Ints out;
    poolgen::max_pool_output_shape(k.nd, k.shape, options(k), &out);
    return out;
  }

  poolgen::TensorView view(const DeviceBuffer& b, DType dtype, const Ints& shape) const {
    poolgen::TensorView v = c.channels_last ? poolgen::channels_last(b.pointer(), dtype, shape, c.nd)
                                            : poolgen::contiguous(b.pointer(), dtype, shape);
    v.device = poolgen::Device::cuda;
    return v;
  }

  poolgen::Status call(Op op) const {
    const poolgen::TensorView in = view(input, DType::f32, c.shape),
                              v = view(values, DType::f32, out), i = view(indices, DType::i64, out);
    switch (op) {
      case Op::pool: return poolgen::max_pool(c.nd, in, v, i, pool);
      case Op::unpool:
        return poolgen::max_unpool(c.nd, v, i, view(restored, DType::f32, c.shape), unpool);
      case Op::pool_backward:
        return poolgen::max_pool_backward(c.nd, view(grad_out, DType::f32, out), i,
                                          view(grad_in, DType::f32, c.shape), pool);
      case Op::unpool_backward:
        return poolgen::max_unpool_backward(c.nd, view(grad_in, DType::f32, c.shape), i,
                                            view(grad_out, DType::f32, out), unpool);
    }
    return {};
  }

  // The op's compulsory bytes: what it must read and write once.
  int64_t bytes(Op op) const {
    const int64_t big = numel(c.shape) * 4, small = numel(out) * 4, index = numel(out) * 8;
    switch (op) {
      case Op::pool: return big + small + index;
      case Op::unpool: return small + index + big;
      case Op::pool_backward: return small + index + big;
      case Op::unpool_backward: return index + 2 * small;  // reads only the indexed gradients
    }
    return 0;
  }
};

std::string case_name(const Case& c);

template <typename F>
void timed(benchmark::State& state, F&& step) {
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    step();
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
}

void run(benchmark::State& state, Case c, Op op, bool copy) {
  if (!poolgen::cuda_available()) {
    state.SkipWithError("no CUDA device is available");
    return;
  }
  // One case's tensors serve all its rows and repetitions (making them costs more than timing).
  static std::map<std::string, std::unique_ptr<Tensors>> cache;
  std::unique_ptr<Tensors>& cached = cache[case_name(c)];
  if (!cached) cached = std::make_unique<Tensors>(c);
  const Tensors& t = *cached;
  poolgen::Status status = t.call(Op::pool);
  if (status.ok()) status = t.call(op);
  if (!status.ok()) {
    state.SkipWithError(status.message().c_str());
    return;
  }
  const int64_t bytes = t.bytes(op);
  if (copy) {  // half the bytes read, half written
    DeviceBuffer src(bytes / 2, std::vector<uint8_t>(static_cast<size_t>(bytes / 2), 1).data()),
        dst(bytes / 2);
    timed(state, [&] {
      halide_buffer_copy(nullptr, &src.buffer, halide_cuda_device_interface(), &dst.buffer);
      halide_device_sync(nullptr, &dst.buffer);
    });
  } else {
    timed(state, [&] { t.call(op); });
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}

const char* op_name(Op op) {
  switch (op) {
    case Op::pool: return "pool";
    case Op::unpool: return "unpool";
    case Op::pool_backward: return "pool_backward";
    case Op::unpool_backward: return "unpool_backward";
  }
  return "";
}

// The v0.1 shapes (bench/cases.cpp's), both layouts for 2-D and 3-D, the per-call case, and
// large tensors where a call's fixed cost is negligible (the memory limit's rows;
// bench/bench_cases.py's LARGE).
const Case kCases[] = {
    {2, {8, 64, 112, 112}, 2, 2, 0, false}, {2, {8, 64, 112, 112}, 3, 2, 1, false},
    {3, {2, 16, 32, 64, 64}, 2, 2, 0, false}, {1, {8, 64, 65536}, 2, 2, 0, false},
    {2, {8, 64, 112, 112}, 2, 2, 0, true},  {2, {8, 64, 112, 112}, 3, 2, 1, true},
    {3, {2, 16, 32, 64, 64}, 2, 2, 0, true},  {2, {1, 1, 2, 2}, 2, 2, 0, false},
    {2, {32, 64, 224, 224}, 2, 2, 0, false}, {2, {32, 64, 224, 224}, 2, 2, 0, true},
    {3, {16, 32, 64, 128, 128}, 2, 2, 0, false}, {3, {16, 32, 64, 128, 128}, 2, 2, 0, true},
};

std::string case_name(const Case& c) {
  std::string name = std::to_string(c.nd) + "d_k" + std::to_string(c.k) + "s" +
                     std::to_string(c.s) + "p" + std::to_string(c.p) + "_";
  for (size_t i = 0; i < c.shape.size(); ++i) {
    name += (i ? "x" : "") + std::to_string(c.shape[i]);
  }
  return name + (c.nd == 1 ? "" : c.channels_last ? "_last" : "_first");
}

const bool kRegistered = [] {
  for (const Case& c : kCases) {
    for (Op op : {Op::pool, Op::unpool, Op::pool_backward, Op::unpool_backward}) {
      for (bool copy : {false, true}) {
        const std::string name =
            std::string(copy ? "copy_" : "") + op_name(op) + "/" + case_name(c);
        benchmark::RegisterBenchmark(name.c_str(), run, c, op, copy)->UseManualTime();
      }
    }
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
