// The runtime's hand-written kernels on their own (docs/design.md, "Hand-written compute"),
// each beside memcpy of the same bytes: the packed copy's element copy, zeroing, the
// non-temporal copy, the index shift and range check, the first-tap rescan, the index rewrite
// to ONNX's offsets and the gather beyond a kernel's buffers. One thread; medians of 5.
//
//   build/bench/poolgen_runtime_kernels_bench --benchmark_filter=...
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "conventions/first_tap.hpp"
#include "conventions/index_formats.hpp"
#include "core/view.hpp"
#include "execute/memory.hpp"
#include "execute/scatter.hpp"

namespace poolgen::detail {
namespace {

const Ints kImage{1, 64, 56, 56}, kPooled{1, 64, 28, 28};  // a ResNet stem's pooling

void finish(benchmark::State& state, int64_t bytes) {
  state.SetBytesProcessed(state.iterations() * bytes);
}

void BM_memcpy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  std::vector<char> from(bytes, 1), to(bytes);
  for (auto _ : state) {
    std::memcpy(to.data(), from.data(), bytes);
    benchmark::DoNotOptimize(to.data());
  }
  finish(state, static_cast<int64_t>(2 * bytes));
}

void BM_copy_elements_nchw_to_nhwc(benchmark::State& state) {
  std::vector<float> from(64 * 56 * 56, 1.0f), to(from.size());
  const View a = dense(from.data(), DType::f32, kImage, Layout::contiguous);
  const View b = dense(to.data(), DType::f32, kImage, Layout::channels_last);
  for (auto _ : state) copy_elements(a, b);
  finish(state, 2 * a.bytes());
}

// A packed copy back into a caller's layout (Staged::finish), on the call's threads.
void BM_copy_elements_shared_nhwc_to_nchw(benchmark::State& state) {
  const Ints shape{8, 64, 56, 56};
  std::vector<float> from(8 * 64 * 56 * 56, 1.0f), to(from.size());
  const View a = dense(from.data(), DType::f32, shape, Layout::channels_last);
  const View b = dense(to.data(), DType::f32, shape, Layout::contiguous);
  for (auto _ : state) copy_elements_shared(a, b);
  finish(state, 2 * a.bytes());
}

// Packed copies between layouts of 3-D volumes, one thread: 64 channels whose planes lie 64 KiB
// apart (a multiple of 4 KiB: read or written at once, they share L1 sets) and 16 channels of
// i64, both ways.
void BM_copy_elements_3d(benchmark::State& state, DType dtype, int64_t channels, Layout from_layout) {
  const Ints shape{2, channels, 16, 32, 32};
  const Layout to_layout =
      from_layout == Layout::contiguous ? Layout::channels_last : Layout::contiguous;
  std::vector<char> from(static_cast<size_t>(2 * channels * 16 * 32 * 32) * dtype_size(dtype), 1),
      to(from.size());
  const View a = dense(from.data(), dtype, shape, from_layout);
  const View b = dense(to.data(), dtype, shape, to_layout);
  for (auto _ : state) copy_elements(a, b);
  finish(state, 2 * a.bytes());
}

void BM_zero_elements(benchmark::State& state) {
  std::vector<float> memory(64 * 56 * 56);
  const View v = dense(memory.data(), DType::f32, kImage, Layout::contiguous);
  for (auto _ : state) zero_elements(v, Layout::contiguous);
  finish(state, v.bytes());
}

void BM_copy_streaming(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  std::vector<char> from(bytes, 1), to(bytes);
  for (auto _ : state) copy_streaming(to.data(), from.data(), bytes);
  finish(state, static_cast<int64_t>(2 * bytes));
}

void BM_add_to_indices(benchmark::State& state) {
  std::vector<int64_t> indices(64 * 28 * 28, 3);
  const View v = dense(indices.data(), DType::i64, kPooled, Layout::contiguous);
  for (auto _ : state) add_to_indices(v, 1);
  finish(state, 2 * v.bytes());
}

void BM_indices_within(benchmark::State& state) {
  std::vector<int64_t> indices(64 * 28 * 28, 3);
  for (auto _ : state) {
    benchmark::DoNotOptimize(indices_within(indices.data(), DType::i64,
                                            static_cast<int64_t>(indices.size()), 0, 3136));
  }
  finish(state, static_cast<int64_t>(indices.size() * sizeof(int64_t)));
}

// A NaN in one window of every 64: the rescan's share of a first-tap pooling.
void BM_first_tap_rescan(benchmark::State& state) {
  std::vector<float> input(64 * 56 * 56, 1.0f), values(64 * 28 * 28, 1.0f);
  std::vector<int64_t> indices(values.size(), 0);
  for (size_t k = 0; k < values.size(); k += 64) {
    values[k] = std::numeric_limits<float>::quiet_NaN();
    input[(k / 784) * 3136 + (k % 784) / 28 * 112 + (k % 28) * 2] = values[k];
  }
  Window w;
  w.nd = 2;
  for (int i = 0; i < 2; ++i) {
    w.kernel[i] = w.stride[i] = 2;
    w.padding[i] = w.padding_end[i] = 0;
    w.dilation[i] = 1;
  }
  const View in = dense(input.data(), DType::f32, kImage, Layout::contiguous);
  const View v = dense(values.data(), DType::f32, kPooled, Layout::contiguous);
  const View i = dense(indices.data(), DType::i64, kPooled, Layout::contiguous);
  for (auto _ : state) apply_first_tap_rule(in, v, i, w);
  finish(state, in.bytes() + v.bytes() + i.bytes());
}

void BM_rewrite_plane_to_onnx(benchmark::State& state) {
  std::vector<int64_t> plane(64 * 28 * 28), onnx(plane.size());
  for (size_t k = 0; k < plane.size(); ++k) plane[k] = static_cast<int64_t>(k % 784) * 4 % 3136;
  const View p = dense(plane.data(), DType::i64, kPooled, Layout::contiguous);
  const View o = dense(onnx.data(), DType::i64, kPooled, Layout::contiguous);
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        rewrite_indices(2, kImage, nullptr, p, IndexFormat::plane, o, IndexFormat::onnx, false));
  }
  finish(state, 2 * p.bytes());
}

void BM_gather_large(benchmark::State& state) {
  std::vector<float> grad(64 * 56 * 56, 1.0f), out(64 * 28 * 28);
  std::vector<int64_t> indices(out.size());
  for (size_t k = 0; k < indices.size(); ++k) indices[k] = static_cast<int64_t>(k % 784) * 4;
  const View g = dense(grad.data(), DType::f32, kImage, Layout::contiguous);
  const View i = dense(indices.data(), DType::i64, kPooled, Layout::contiguous);
  const View o = dense(out.data(), DType::f32, kPooled, Layout::contiguous);
  for (auto _ : state) benchmark::DoNotOptimize(gather_large(g, i, o, Layout::contiguous, 0));
  finish(state, i.bytes() + 2 * o.bytes());
}

#define POOLGEN_ROW(fn) BENCHMARK(fn)->Repetitions(5)->ReportAggregatesOnly(true)
POOLGEN_ROW(BM_memcpy)->Arg(64 * 56 * 56 * 4)->Arg(8 << 20);
POOLGEN_ROW(BM_copy_elements_nchw_to_nhwc);
POOLGEN_ROW(BM_copy_elements_shared_nhwc_to_nchw)->UseRealTime();
BENCHMARK_CAPTURE(BM_copy_elements_3d, f32_64_ncdhw_to_ndhwc, DType::f32, 64, Layout::contiguous)
    ->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK_CAPTURE(BM_copy_elements_3d, f32_64_ndhwc_to_ncdhw, DType::f32, 64, Layout::channels_last)
    ->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK_CAPTURE(BM_copy_elements_3d, i64_16_ncdhw_to_ndhwc, DType::i64, 16, Layout::contiguous)
    ->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK_CAPTURE(BM_copy_elements_3d, i64_16_ndhwc_to_ncdhw, DType::i64, 16, Layout::channels_last)
    ->Repetitions(5)->ReportAggregatesOnly(true);
POOLGEN_ROW(BM_zero_elements);
POOLGEN_ROW(BM_copy_streaming)->Arg(64 * 56 * 56 * 4)->Arg(8 << 20);
POOLGEN_ROW(BM_add_to_indices);
POOLGEN_ROW(BM_indices_within);
POOLGEN_ROW(BM_first_tap_rescan);
POOLGEN_ROW(BM_rewrite_plane_to_onnx);
POOLGEN_ROW(BM_gather_large);

}  // namespace
}  // namespace poolgen::detail

BENCHMARK_MAIN();
