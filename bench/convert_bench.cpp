// poolgen_convert_bench: convert_indices between the index formats on the pooled indices of the
// v0.1 shapes (i64, one thread: the converter runs on the calling thread), against memcpy of the
// same bytes (the roofline: a conversion reads and writes each index once); and max_pool and its
// gradient under each framework's convention, whose rules are passes over the kernel's results
// (the gradient's: a rewrite of the indices before it).
//
//   build/bench/poolgen_convert_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include "poolgen/poolgen.hpp"

#include <benchmark/benchmark.h>

#include <cstring>
#include <tuple>
#include <vector>

namespace {

using poolgen::IndexFormat;
using poolgen::Ints;

struct Case {
  Ints frame, pooled;
};

// 2x2 stride-2 pooling of the v0.1 inputs.
const Case kCases[] = {{{8, 64, 112, 112}, {8, 64, 56, 56}}, {{1, 64, 56, 56}, {1, 64, 28, 28}}};

// Plane indices of a 2x2 pooling: the top-left tap of every window.
Ints plane_indices(const Case& c) {
  const int64_t ph = c.pooled[2], pw = c.pooled[3], w = c.frame[3];
  Ints out(c.pooled[0] * c.pooled[1] * ph * pw);
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t y = (i / pw) % ph, x = i % pw;
    out[i] = 2 * y * w + 2 * x;
  }
  return out;
}

void convert(benchmark::State& state, const Case& c, IndexFormat from, IndexFormat to) {
  poolgen::PoolOptions window;
  window.kernel_size = {2};
  const Ints plane = plane_indices(c);
  Ints in(plane.size()), out(plane.size());
  if (!poolgen::convert_indices(2, c.frame, poolgen::contiguous(plane.data(), c.pooled),
                                IndexFormat::plane, poolgen::contiguous(in.data(), c.pooled),
                                from, &window)
           .ok()) {
    state.SkipWithError("preparing the input failed");
    return;
  }
  for (auto _ : state) {
    const poolgen::Status st = poolgen::convert_indices(
        2, c.frame, poolgen::contiguous(in.data(), c.pooled), from,
        poolgen::contiguous(out.data(), c.pooled), to, &window);
    if (!st.ok()) state.SkipWithError(st.message().c_str());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * 2 * 8 * static_cast<int64_t>(in.size()));
}

void copy(benchmark::State& state, const Case& c) {
  const Ints plane = plane_indices(c);
  Ints out(plane.size());
  for (auto _ : state) {
    std::memcpy(out.data(), plane.data(), plane.size() * sizeof(int64_t));
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * 2 * 8 * static_cast<int64_t>(plane.size()));
}

// A 2x2 pooling of channels-last tensors (TensorFlow's NHWC) under one framework's convention
// (its NaN rule and index format), on range(0) threads for the benchmark's life.
struct NhwcPooling {
  const Case& c;
  std::vector<float> input, values;
  Ints indices;
  poolgen::PoolOptions options;
  NhwcPooling(benchmark::State& state, const Case& shapes, poolgen::MaxRule rule,
              IndexFormat format)
      : c(shapes),
        input(c.frame[0] * c.frame[1] * c.frame[2] * c.frame[3]),
        values(c.pooled[0] * c.pooled[1] * c.pooled[2] * c.pooled[3]),
        indices(values.size()) {
    poolgen::set_num_threads(static_cast<int>(state.range(0)));
    for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>((i * 7919) % 1000);
    options.kernel_size = {2};
    options.max_rule = rule;
    options.index_format = format;
  }
  ~NhwcPooling() { poolgen::set_num_threads(0); }
  poolgen::Status pool() {
    return poolgen::max_pool(2, poolgen::channels_last(input.data(), c.frame),
                             poolgen::channels_last(values.data(), c.pooled),
                             poolgen::channels_last(indices.data(), c.pooled), options);
  }
  poolgen::Status backward() {  // into `input`, as grad_input
    return poolgen::max_pool_backward(2, poolgen::channels_last(values.data(), c.pooled),
                                      poolgen::channels_last(indices.data(), c.pooled),
                                      poolgen::channels_last(input.data(), c.frame), options);
  }
};

// max_pool under each framework's convention: the NaN rule and the index format are passes
// after the kernel, which these rows price against PyTorch's.
void pool(benchmark::State& state, const Case& c, poolgen::MaxRule rule, IndexFormat format) {
  NhwcPooling p(state, c, rule, format);
  for (auto _ : state) {
    const poolgen::Status st = p.pool();
    if (!st.ok()) state.SkipWithError(st.message().c_str());
    benchmark::DoNotOptimize(p.indices.data());
  }
}

// max_pool_backward from each convention's indices, the pooling's own (TensorFlow's
// MaxPoolGradWithArgmax and Addons' unpooling take its indices): a rewrite before the kernel.
void pool_backward(benchmark::State& state, const Case& c, poolgen::MaxRule rule,
                   IndexFormat format) {
  NhwcPooling p(state, c, rule, format);
  if (!p.pool().ok()) return state.SkipWithError("pooling failed");
  for (auto _ : state) {
    const poolgen::Status st = p.backward();
    if (!st.ok()) state.SkipWithError(st.message().c_str());
    benchmark::DoNotOptimize(p.input.data());
  }
}

std::string shape_name(const Ints& s) {
  std::string n;
  for (int64_t e : s) n += (n.empty() ? "" : "x") + std::to_string(e);
  return n;
}

int register_all() {
  const std::pair<IndexFormat, IndexFormat> pairs[] = {
      {IndexFormat::plane, IndexFormat::onnx},
      {IndexFormat::onnx, IndexFormat::plane},
      {IndexFormat::plane, IndexFormat::onnx_column_major},
      {IndexFormat::onnx_column_major, IndexFormat::plane},
      {IndexFormat::tensorflow, IndexFormat::plane},
      {IndexFormat::plane, IndexFormat::tensorflow_with_batch},
      {IndexFormat::tensorflow_with_batch, IndexFormat::plane},
      {IndexFormat::plane, IndexFormat::window},
      {IndexFormat::window, IndexFormat::plane}};
  for (const Case& c : kCases) {
    const std::string shape = shape_name(c.pooled);
    benchmark::RegisterBenchmark(("memcpy/" + shape).c_str(), copy, c)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
    for (const auto& [from, to] : pairs) {
      const std::string name = std::string(poolgen::index_format_name(from)) + "->" +
                               poolgen::index_format_name(to) + "/" + shape;
      benchmark::RegisterBenchmark(name.c_str(), convert, c, from, to)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
    }
    const std::tuple<const char*, poolgen::MaxRule, IndexFormat> conventions[] = {
        {"pytorch", poolgen::MaxRule::any_nan, IndexFormat::plane},
        {"onnx", poolgen::MaxRule::first_tap, IndexFormat::onnx},
        {"tensorflow", poolgen::MaxRule::first_tap, IndexFormat::tensorflow_with_batch}};
    for (const auto& [name, rule, format] : conventions) {
      for (const auto& [op, run] : {std::pair{"max_pool_nhwc_k2s2/", pool},
                                    std::pair{"max_pool_backward_nhwc_k2s2/", pool_backward}}) {
        benchmark::RegisterBenchmark((op + std::string(name) + "/" + shape_name(c.frame)).c_str(),
                                     run, c, rule, format)
            ->Arg(1)
            ->Arg(2)
            ->ArgName("threads")
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
      }
    }
  }
  return 0;
}

const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
