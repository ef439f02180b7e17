// Calling the library on contiguous std::vector data, with guard elements around every output
// buffer (they must come back untouched) and sentinel-filled outputs (every element must be
// written).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "poolgen/poolgen.hpp"
#include "test_util.hpp"

namespace poolgen::test {

constexpr int64_t kGuard = 16;  // guard elements on each side of an output
constexpr float kGuardF = -12345.5f;
constexpr int64_t kGuardI = -0x5a5a5a5a5a5a5a5bLL;
constexpr float kSentinelF = 98765.25f;
constexpr int64_t kSentinelI = 0x7eadbeef;

template <typename T>
std::vector<T> guarded_buffer(int64_t n, T guard, T fill) {
  std::vector<T> b(static_cast<size_t>(n + 2 * kGuard), guard);
  for (int64_t i = 0; i < n; ++i) b[kGuard + i] = fill;
  return b;
}

template <typename T>
bool guards_intact(const std::vector<T>& b, T guard) {
  const size_t n = b.size();
  for (size_t i = 0; i < static_cast<size_t>(kGuard); ++i) {
    if (test::bits_equal(b[i], guard) == false || !test::bits_equal(b[n - 1 - i], guard)) {
      return false;
    }
  }
  return true;
}

// True when the guards and every element between them still hold what guarded_buffer put there
// (a refused call writes nothing).
template <typename T>
bool untouched(const std::vector<T>& b, T guard, T fill) {
  if (!guards_intact(b, guard)) return false;
  for (size_t i = kGuard; i + kGuard < b.size(); ++i) {
    if (!test::bits_equal(b[i], fill)) return false;
  }
  return true;
}

template <typename T>
std::vector<T> inner(const std::vector<T>& b) {
  return std::vector<T>(b.begin() + kGuard, b.end() - kGuard);
}

// The elements a view reaches (at least one; at most 2^20: a prepared call never reads its
// views' data, so a view of a broken or large shape may point at less).
inline size_t reached_elements(const TensorView& v) {
  constexpr int64_t kMost = 1 << 20;
  int64_t reached = 1;  // contiguous: the product of the extents; strided: the last one's offset
  for (size_t d = 0; d < v.shape.size(); ++d) {
    const int64_t extent = std::clamp<int64_t>(v.shape[d], 0, kMost);
    if (v.strides.size() != v.shape.size()) {
      reached = std::min(reached * extent, kMost);
    } else {
      const int64_t stride = std::min<int64_t>(std::abs(v.strides[d]), kMost);
      reached += std::max<int64_t>(extent - 1, 0) * stride;
    }
  }
  return static_cast<size_t>(std::clamp<int64_t>(reached, 1, kMost));
}

// `prepare` (an op's prepare_*) on views of a, b and c's shapes over data of their own (valid and
// apart, as a caller may prepare once on any buffers), then `runs` runs on a, b and c's data: a
// run must take the data it is given. A refused prepare is the result, and must leave the
// PreparedCall empty (else an internal error says so).
template <typename Options, typename Prepare>
Status prepare_elsewhere_then_run(Prepare prepare, int nd, const TensorView& a,
                                  const TensorView& b, const TensorView& c,
                                  const Options& options, int runs) {
  const TensorView* const views[3] = {&a, &b, &c};
  std::vector<char> scratch[3];
  TensorView elsewhere[3] = {a, b, c};
  for (int k = 0; k < 3; ++k) {
    scratch[k].resize(reached_elements(*views[k]) *
                      std::max<size_t>(dtype_size(views[k]->dtype), 1));
    elsewhere[k].data = scratch[k].data();
  }
  PreparedCall prepared;
  Status st = prepare(nd, elsewhere[0], elsewhere[1], elsewhere[2], options, &prepared);
  if (!st.ok() && prepared.prepared()) {
    return Status(Code::internal, "internal: a refused prepare left a prepared call");
  }
  for (int run = 0; run < runs && st.ok(); ++run) st = prepared.run(a.data, b.data, c.data);
  return st;
}

// How a helper calls an op: as the call itself, or prepared elsewhere and then run twice on the
// call's data, so that a run must also give the call's result over the outputs of the run
// before it.
enum class Calling { call, prepared };

inline const char* calling_name(Calling calling) {
  return calling == Calling::prepared ? " (prepared)" : "";
}

template <typename Options, typename Op, typename Prepare>
Status call_op(Calling calling, Op op, Prepare prepare, int nd, const TensorView& a,
               const TensorView& b, const TensorView& c, const Options& options) {
  if (calling == Calling::call) return op(nd, a, b, c, options);
  return prepare_elsewhere_then_run(prepare, nd, a, b, c, options, 2);
}

struct PoolRun {
  Status status;
  std::vector<float> values;
  std::vector<int64_t> indices;
  bool guards_ok = true;
};

inline PoolRun run_pool(int nd, const Ints& shape, const std::vector<float>& input,
                        const Ints& out_shape, PoolOptions options, Path path,
                        Calling calling = Calling::call) {
  options.path = path;
  const int64_t n = numel(out_shape);
  std::vector<float> vals = guarded_buffer<float>(n, kGuardF, kSentinelF);
  std::vector<int64_t> idx = guarded_buffer<int64_t>(n, kGuardI, kSentinelI);
  PoolRun r;
  r.status = call_op(calling, max_pool, prepare_max_pool, nd, contiguous(input.data(), shape),
                     contiguous(vals.data() + kGuard, out_shape),
                     contiguous(idx.data() + kGuard, out_shape), options);
  r.guards_ok = guards_intact(vals, kGuardF) && guards_intact(idx, kGuardI);
  r.values = inner(vals);
  r.indices = inner(idx);
  return r;
}

struct UnpoolRun {
  Status status;
  std::vector<float> output;
  bool guards_ok = true;
};

inline UnpoolRun run_unpool(int nd, const Ints& shape, const std::vector<float>& values,
                            const std::vector<int64_t>& indices, const Ints& out_shape,
                            UnpoolOptions options, Path path, Calling calling = Calling::call) {
  options.path = path;
  const int64_t n = numel(out_shape);
  std::vector<float> out = guarded_buffer<float>(n, kGuardF, kSentinelF);
  UnpoolRun r;
  r.status = call_op(calling, max_unpool, prepare_max_unpool, nd,
                     contiguous(values.data(), shape), contiguous(indices.data(), shape),
                     contiguous(out.data() + kGuard, out_shape), options);
  r.guards_ok = guards_intact(out, kGuardF);
  r.output = inner(out);
  return r;
}

struct BackwardRun {
  Status status;
  std::vector<float> gradient;  // grad_input or grad_values
  bool guards_ok = true;
};

inline BackwardRun run_pool_backward(int nd, const Ints& input_shape, const Ints& out_shape,
                                     const std::vector<float>& grad_output,
                                     const std::vector<int64_t>& indices, PoolOptions options,
                                     Path path, Calling calling = Calling::call) {
  options.path = path;
  std::vector<float> g = guarded_buffer<float>(numel(input_shape), kGuardF, kSentinelF);
  BackwardRun r;
  r.status = call_op(calling, max_pool_backward, prepare_max_pool_backward, nd,
                     contiguous(grad_output.data(), out_shape),
                     contiguous(indices.data(), out_shape),
                     contiguous(g.data() + kGuard, input_shape), options);
  r.guards_ok = guards_intact(g, kGuardF);
  r.gradient = inner(g);
  return r;
}

inline BackwardRun run_unpool_backward(int nd, const Ints& values_shape, const Ints& out_shape,
                                       const std::vector<float>& grad_output,
                                       const std::vector<int64_t>& indices, UnpoolOptions options,
                                       Path path, Calling calling = Calling::call) {
  options.path = path;
  std::vector<float> g = guarded_buffer<float>(numel(values_shape), kGuardF, kSentinelF);
  BackwardRun r;
  r.status = call_op(calling, max_unpool_backward, prepare_max_unpool_backward, nd,
                     contiguous(grad_output.data(), out_shape),
                     contiguous(indices.data(), values_shape),
                     contiguous(g.data() + kGuard, values_shape), options);
  r.guards_ok = guards_intact(g, kGuardF);
  r.gradient = inner(g);
  return r;
}

}  // namespace poolgen::test
