// CUDA against the CPU path, bit for bit: every op (max_pool, max_unpool by the indices alone and
// with the pooling's window, which takes the window gather, both backward passes)
// in every value type, layout and index type this build has CUDA kernels for, on small shapes
// with padding, dilation, ceil_mode and overlapping windows, the v0.1 shapes, and shapes past the
// GPU's grid limits (an 8192x8192 plane, 200000 planes, 70000 batches, a 70000-long row). Values
// hold NaN, infinities, -0 and ties; gradients cancel (1e8, 1, -1e8, ...), so a different order
// of additions shows. Each CUDA result is run twice (the same bits), and host threads calling
// CUDA at once agree with the CPU; invalid unpooling indices get the CPU's error from both
// unpooling ops; nothing is written beside an output. Everything skips where no CUDA device
// answers.
//
// Gradients are compared as values (any NaN equals any NaN): a NaN that an addition makes or
// passes on has the GPU's canonical bits there and the CPU's operand bits here. Everything
// else, NaN payloads in pooled and unpooled values included, must match bit for bit.
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "dtypes.hpp"
#include "poolgen/poolgen.hpp"
#include "values.hpp"

namespace poolgen {
namespace {

using test::visit_dtype;
using namespace test::values;

struct Shape {
  std::string name;
  int nd;
  Ints shape;
  PoolOptions options;
  bool big;  // one value type and index type, both layouts
};

PoolOptions window(Ints kernel, Ints stride = {}, Ints padding = {0}, Ints dilation = {1},
                   bool ceil_mode = false) {
  PoolOptions o;
  o.kernel_size = kernel;
  o.stride = stride;
  o.padding = padding;
  o.dilation = dilation;
  o.ceil_mode = ceil_mode;
  return o;
}

std::vector<Shape> shapes() {
  std::vector<Shape> s;
  const PoolOptions k2 = window({2}), k3s2p1 = window({3}, {2}, {1}), k3s1 = window({3}, {1}),
                    dilated = window({3}, {2}, {1}, {2}, true), ceil = window({2}, {2}, {0}, {1}, true);
  for (const auto& [name, o] : std::vector<std::pair<std::string, PoolOptions>>{
           {"k2s2", k2}, {"k3s2p1", k3s2p1}, {"k3s1", k3s1}, {"k3s2p1d2ceil", dilated}, {"k2s2ceil", ceil}}) {
    s.push_back({"1-D 2x3x37 " + name, 1, {2, 3, 37}, o, false});
    s.push_back({"2-D 2x5x13x17 " + name, 2, {2, 5, 13, 17}, o, false});
    s.push_back({"3-D 1x3x7x9x11 " + name, 3, {1, 3, 7, 9, 11}, o, false});
  }
  s.push_back({"2-D 8x64x112x112 k2s2", 2, {8, 64, 112, 112}, k2, false});
  s.push_back({"2-D 8x64x112x112 k3s2p1", 2, {8, 64, 112, 112}, k3s2p1, false});
  s.push_back({"3-D 2x16x32x64x64 k2s2", 3, {2, 16, 32, 64, 64}, k2, false});
  s.push_back({"1-D 8x64x65536 k2s2", 1, {8, 64, 65536}, k2, false});
  s.push_back({"2-D 1x1x8192x8192 k2s2", 2, {1, 1, 8192, 8192}, k2, true});
  s.push_back({"2-D 1x200000x4x4 k3s1", 2, {1, 200000, 4, 4}, k3s1, true});
  s.push_back({"1-D 70000x1x2 k2s2", 1, {70000, 1, 2}, k2, true});
  s.push_back({"2-D 1x1x1x70000 k1x3s1x2p0x1", 2, {1, 1, 1, 70000}, window({1, 3}, {1, 2}, {0, 1}), true});
  return s;
}

// A tensor's memory, poisoned, with guard elements before and after it, and its view in a
// layout.
struct Tensor {
  static constexpr uint8_t kPoison = 0xA5;
  static constexpr int64_t kGuard = 16;  // elements on each side
  DType dtype;
  Ints shape;
  int nd;
  bool channels_last;
  std::vector<uint8_t> bytes;

  Tensor(DType d, Ints s, int rank, bool last)
      : dtype(d), shape(std::move(s)), nd(rank), channels_last(last),
        bytes(static_cast<size_t>((count() + 2 * kGuard) * static_cast<int64_t>(dtype_size(d))),
              kPoison) {}
  int64_t count() const {
    int64_t n = 1;
    for (int64_t e : shape) n *= e;
    return n;
  }
  size_t guard_bytes() const { return static_cast<size_t>(kGuard) * dtype_size(dtype); }
  TensorView view(Device device = Device::cpu) {
    TensorView v = channels_last ? poolgen::channels_last(data<uint8_t>(), dtype, shape, nd)
                                 : contiguous(data<uint8_t>(), dtype, shape);
    v.device = device;
    return v;
  }
  template <typename T>
  T* data() { return reinterpret_cast<T*>(bytes.data() + guard_bytes()); }
  template <typename T>
  const T* data() const { return reinterpret_cast<const T*>(bytes.data() + guard_bytes()); }
  bool guards_intact() const {
    for (size_t i = 0; i < guard_bytes(); ++i) {
      if (bytes[i] != kPoison || bytes[bytes.size() - 1 - i] != kPoison) return false;
    }
    return true;
  }
  void set_index(int64_t at, int64_t index) {
    if (dtype == DType::i64) data<int64_t>()[at] = index;
    else data<int32_t>()[at] = static_cast<int32_t>(index);
  }
};

// A fast generator: the big shapes have 67M elements.
struct SplitMix {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};

// Values with ties, -0, infinities, the extremes and NaN (two payloads) for floats; random bits
// for integers (pooling on CUDA takes floats only).
void fill_values(Tensor& t, uint64_t seed) {
  SplitMix rng{seed};
  visit_dtype(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    if constexpr (kIsFloat<T>) {
      const double inf = std::numeric_limits<double>::infinity();
      std::vector<T> palette;
      for (double d : {0.0, 1.0, 2.0, 1.0, 0.0, -0.0, 0.5, -1.0, 3.0, 2.0, -inf, inf}) {
        palette.push_back(from_double<T>(d));
      }
      palette.push_back(lowest<T>());
      palette.push_back(highest<T>());
      palette.push_back(winning_value<T>());  // NaN
      palette.push_back(from_bits<T>(bits_of(winning_value<T>()) ^ 1 ^ (uint64_t{1} << (sizeof(T) * 8 - 1))));
      for (int64_t i = 0; i < t.count(); ++i) p[i] = palette[rng.next() % palette.size()];
    } else {
      for (int64_t i = 0; i < t.count(); ++i) p[i] = from_bits<T>(rng.next());
    }
  });
}

// Gradients whose sums depend on the order of additions, and an occasional NaN.
void fill_gradients(Tensor& t, uint64_t seed) {
  SplitMix rng{seed};
  visit_dtype(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    const double palette[] = {1e8, 1.0, -1e8, 3e-8, -1.0, 0.5, -0.0, 2.0, 1e4, -1e4, 0.25, 7.0};
    for (int64_t i = 0; i < t.count(); ++i) {
      const uint64_t r = rng.next();
      p[i] = r % 4096 == 0 ? winning_value<T>() : from_double<T>(palette[r % 12]);
    }
  });
}

// Indices of a pooling's shape naming a few slots of each plane (duplicates, and windows
// that don't hold them).
void fill_duplicate_indices(Tensor& t, int64_t plane, uint64_t seed) {
  SplitMix rng{seed};
  const int64_t slots[] = {0, plane / 3, plane / 2, plane - 1};
  for (int64_t i = 0; i < t.count(); ++i) {
    const uint64_t r = rng.next();
    t.set_index(i, r % 4 == 0 ? static_cast<int64_t>(r >> 8) % plane : slots[(r >> 2) % 4]);
  }
}

// How many elements differ (as bits; as values with nan_equal), and the first one.
std::string differences(const Tensor& a, const Tensor& b, bool nan_equal) {
  int64_t count = 0, first = -1;
  visit_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = a.data<T>();
    const T* y = b.data<T>();
    for (int64_t i = 0; i < a.count(); ++i) {
      if (nan_equal ? same_value(x[i], y[i]) : same_bits(x[i], y[i])) continue;
      if (count++ == 0) first = i;
    }
  });
  if (count == 0) return "";
  return std::to_string(count) + " of " + std::to_string(a.count()) +
         " elements differ, the first at memory offset " + std::to_string(first);
}

std::set<DType> cuda_dtypes(const std::string& op, bool by_width) {
  std::set<DType> out;
  for (const KernelInfo& k : compiled_kernels()) {
    if (k.device != Device::cuda || k.op != op) continue;
    if (!by_width) {
      out.insert(k.value_dtype);
      continue;
    }
    for (DType d : test::kAllDTypes) {
      if (dtype_size(d) == dtype_size(k.value_dtype)) out.insert(d);
    }
  }
  return out;
}

std::set<DType> cuda_index_dtypes() {
  std::set<DType> out;
  for (const KernelInfo& k : compiled_kernels()) {
    if (k.device == Device::cuda) out.insert(k.index_dtype);
  }
  return out;
}

bool is_gradient_dtype(DType d) {
  for (DType g : test::kGradientDTypes) {
    if (g == d) return true;
  }
  return false;
}

UnpoolOptions unpool_options(const Shape& s, Device device) {
  UnpoolOptions u;  // by the indices alone: any pooling's indices, dilated ones too
  u.output_size = Ints(s.shape.end() - s.nd, s.shape.end());
  u.device = device;
  return u;
}

// The same with the pooling's window (kernel, stride, padding), which lets CUDA take the window
// gather while every index lies in its own window (dilated windows' indices do not: the winner
// then runs); false where unpooling refuses that window for these shapes.
bool windowed_unpool_options(const Shape& s, const Ints& pooled_shape, Device device,
                             UnpoolOptions* u) {
  *u = unpool_options(s, device);
  u->kernel_size = s.options.kernel_size;
  u->stride = s.options.stride;
  u->padding = s.options.padding;
  Ints shape;
  return max_unpool_output_shape(s.nd, pooled_shape, *u, &shape).ok();
}

// Runs `call` on the CPU, then twice on CUDA (host data), and checks that the three outputs
// agree and that nothing was written beside them.
void agree(const std::string& where, Tensor& cpu_out, bool nan_equal,
           const std::function<Status(Tensor& out, Device device)>& call) {
  const Status cpu = call(cpu_out, Device::cpu);
  ASSERT_TRUE(cpu.ok()) << where << ": CPU: " << cpu.message();
  for (int run = 0; run < 2; ++run) {
    Tensor gpu_out(cpu_out.dtype, cpu_out.shape, cpu_out.nd, cpu_out.channels_last);
    const Status gpu = call(gpu_out, Device::cuda);
    ASSERT_TRUE(gpu.ok()) << where << ": CUDA: " << gpu.message();
    EXPECT_EQ(differences(cpu_out, gpu_out, nan_equal), "") << where << ", CUDA run " << run;
    EXPECT_TRUE(gpu_out.guards_intact()) << where << ", CUDA run " << run;
  }
}

// Runs `call` on the CPU and on CUDA, expecting the CPU's index_out_of_range error (the same
// message) from both and nothing written outside the output.
void refuse_alike(const std::string& where, const Tensor& like,
                  const std::function<Status(Tensor& out, Device device)>& call) {
  Tensor cpu_out(like.dtype, like.shape, like.nd, like.channels_last), gpu_out = cpu_out;
  const Status cpu = call(cpu_out, Device::cpu), gpu = call(gpu_out, Device::cuda);
  EXPECT_EQ(cpu.code(), Code::index_out_of_range) << where << ": CPU: " << cpu.message();
  EXPECT_EQ(gpu.code(), cpu.code()) << where << ": CUDA: " << gpu.message();
  EXPECT_EQ(gpu.message(), cpu.message()) << where;
  EXPECT_TRUE(gpu_out.guards_intact()) << where;
}

// A shape, an index type and a layout: one test each, so that gtest's shards (scripts/
// gpu_check.sh's SHARDS) spread the large shapes' value types over processes.
class CudaParity : public ::testing::TestWithParam<std::tuple<Shape, DType, bool>> {};

// Pooling, then unpooling and both backward passes on its indices, then unpooling and pooling's
// backward on duplicate-heavy indices (the latter falls back to the scatter: most lie outside
// their windows), in every value type.
TEST_P(CudaParity, EveryOpMatchesCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device is available";
  const Shape& s = std::get<0>(GetParam());
  const DType index = std::get<1>(GetParam());
  const bool last = std::get<2>(GetParam());
  if (!cuda_index_dtypes().count(index)) {
    GTEST_SKIP() << "this build has no CUDA kernels with " << dtype_name(index) << " indices";
  }
  if (s.big && index != DType::i64) GTEST_SKIP() << "the large shapes run int64 indices only";
  const std::set<DType> pool_types = cuda_dtypes("pool", false);
  const std::set<DType> gradient_types = cuda_dtypes("pool_backward_scatter", false);
  const std::set<DType> gather_types = cuda_dtypes("pool_backward_window_gather", false);
  const std::set<DType> unpool_types = cuda_dtypes("unpool_winner", true);
  const std::set<DType> unpool_gradient_types = cuda_dtypes("unpool_backward_reporting", true);
  Ints out_shape;
  ASSERT_TRUE(max_pool_output_shape(s.nd, s.shape, s.options, &out_shape).ok());
  int64_t plane = 1;
  for (int i = 0; i < s.nd; ++i) plane *= s.shape[s.shape.size() - 1 - i];
  uint64_t seed = std::hash<std::string>()(s.name) + 2 * static_cast<uint64_t>(index) + last;
  int combinations = 0;
  for (DType value : test::kAllDTypes) {
    if (s.big && value != DType::f32) continue;
    const bool pools = pool_types.count(value) != 0;
    if (!pools && !unpool_types.count(value)) continue;
    ++combinations;
    std::ostringstream w;
    w << s.name << (last ? " channels-last " : " ") << dtype_name(value) << "/"
      << dtype_name(index);
    const std::string where = w.str();
    Tensor input(value, s.shape, s.nd, last), values(value, out_shape, s.nd, last),
        indices(index, out_shape, s.nd, last);
    fill_values(input, ++seed);
    if (pools) {
      agree(where + " max_pool values", values, false, [&](Tensor& out, Device d) {
        PoolOptions o = s.options;
        o.device = d;
        Tensor i(index, out_shape, s.nd, last);
        const Status st = max_pool(s.nd, input.view(), out.view(), i.view(), o);
        if (d == Device::cpu) indices = i;
        else EXPECT_EQ(differences(indices, i, false), "") << where << " max_pool indices";
        return st;
      });
    } else {  // unpooling only: a float pooling's indices, this type's values
      Tensor f(DType::f32, s.shape, s.nd, last), fv(DType::f32, out_shape, s.nd, last);
      fill_values(f, seed);
      ASSERT_TRUE(max_pool(s.nd, f.view(), fv.view(), indices.view(), s.options).ok());
      fill_values(values, ++seed);
    }
    Tensor restored(value, s.shape, s.nd, last);
    agree(where + " max_unpool", restored, false, [&](Tensor& out, Device d) {
      return max_unpool(s.nd, values.view(), indices.view(), out.view(), unpool_options(s, d));
    });
    Tensor duplicates(index, out_shape, s.nd, last);
    fill_duplicate_indices(duplicates, plane, ++seed);
    agree(where + " max_unpool, duplicates", restored, false, [&](Tensor& out, Device d) {
      return max_unpool(s.nd, values.view(), duplicates.view(), out.view(),
                        unpool_options(s, d));
    });
    UnpoolOptions windowed;
    if (windowed_unpool_options(s, out_shape, Device::cpu, &windowed)) {
      for (Tensor* i : {&indices, &duplicates}) {
        agree(where + (i == &indices ? " max_unpool, window" : " max_unpool, window, duplicates"),
              restored, false, [&](Tensor& out, Device d) {
                UnpoolOptions u = windowed;
                u.device = d;
                return max_unpool(s.nd, values.view(), i->view(), out.view(), u);
              });
      }
    }
    if (!s.big) {  // two invalid indices: one past the plane, one negative
      Tensor invalid = duplicates;
      invalid.set_index(invalid.count() / 2, plane);
      invalid.set_index(invalid.count() / 3, -1);
      refuse_alike(where + " max_unpool, invalid indices", restored, [&](Tensor& out, Device d) {
        return max_unpool(s.nd, values.view(), invalid.view(), out.view(), unpool_options(s, d));
      });
      UnpoolOptions windowed_invalid;
      if (windowed_unpool_options(s, out_shape, Device::cpu, &windowed_invalid)) {
        refuse_alike(where + " max_unpool, window, invalid indices", restored,
                     [&](Tensor& out, Device d) {
                       windowed_invalid.device = d;
                       return max_unpool(s.nd, values.view(), invalid.view(), out.view(),
                                         windowed_invalid);
                     });
      }
      if (unpool_gradient_types.count(value) && is_gradient_dtype(value)) {
        Tensor grad(value, s.shape, s.nd, last);
        fill_gradients(grad, ++seed);
        refuse_alike(where + " max_unpool_backward, invalid indices", values,
                     [&](Tensor& out, Device d) {
                       return max_unpool_backward(s.nd, grad.view(), invalid.view(),
                                                  out.view(), unpool_options(s, d));
                     });
      }
    }
    if (unpool_gradient_types.count(value) && is_gradient_dtype(value)) {
      Tensor grad(value, s.shape, s.nd, last), grad_values(value, out_shape, s.nd, last);
      fill_gradients(grad, ++seed);
      agree(where + " max_unpool_backward", grad_values, true, [&](Tensor& out, Device d) {
        return max_unpool_backward(s.nd, grad.view(), indices.view(), out.view(),
                                   unpool_options(s, d));
      });
    }
    if (pools && gradient_types.count(value)) {
      Tensor grad(value, out_shape, s.nd, last), grad_input(value, s.shape, s.nd, last);
      fill_gradients(grad, ++seed);
      for (Tensor* i : {&indices, &duplicates}) {
        // The scatter (indices outside their windows, types without the gather): a thread
        // per plane, too slow for the big shapes' few planes.
        const bool scatter = i == &duplicates || !gather_types.count(value);
        if (scatter && s.big) continue;
        agree(where + (i == &indices ? " max_pool_backward" : " max_pool_backward, duplicates"),
              grad_input, true, [&](Tensor& out, Device d) {
                PoolOptions o = s.options;
                o.device = d;
                return max_pool_backward(s.nd, grad.view(), i->view(), out.view(), o);
              });
      }
    }
  }
  EXPECT_GT(combinations, 0) << "no CUDA kernels in this build";
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaParity,
    ::testing::Combine(::testing::ValuesIn(shapes()), ::testing::Values(DType::i64, DType::i32),
                       ::testing::Bool()),
    [](const auto& info) {
      std::string name;
      for (char ch : std::get<0>(info.param).name) {
        name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
      }
      return name + "_" + dtype_name(std::get<1>(info.param)) +
             (std::get<2>(info.param) ? "_channels_last" : "");
    });

// Host threads calling CUDA at once (each call on its thread's context and stream) get the CPU's
// bits: the deterministic unpooling on duplicates and pooling's backward.
TEST(CudaParityThreads, ConcurrentCallsMatchCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device is available";
  const Shape s{"2-D 4x16x64x64 k3s1", 2, {4, 16, 64, 64}, window({3}, {1}), false};
  Ints out_shape;
  ASSERT_TRUE(max_pool_output_shape(s.nd, s.shape, s.options, &out_shape).ok());
  Tensor input(DType::f32, s.shape, 2, false), values(DType::f32, out_shape, 2, false),
      indices(DType::i64, out_shape, 2, false), grad(DType::f32, out_shape, 2, false),
      duplicates(DType::i64, out_shape, 2, false);
  fill_values(input, 1);
  fill_gradients(grad, 2);
  fill_duplicate_indices(duplicates, 64 * 64, 3);
  ASSERT_TRUE(max_pool(2, input.view(), values.view(), indices.view(), s.options).ok());
  Tensor unpooled(DType::f32, s.shape, 2, false), grad_input(DType::f32, s.shape, 2, false);
  ASSERT_TRUE(max_unpool(2, values.view(), duplicates.view(), unpooled.view(),
                         unpool_options(s, Device::cpu)).ok());
  ASSERT_TRUE(max_pool_backward(2, grad.view(), indices.view(), grad_input.view(), s.options).ok());
  std::vector<std::string> failures(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int run = 0; run < 3; ++run) {
        Tensor u(DType::f32, s.shape, 2, false), g(DType::f32, s.shape, 2, false);
        PoolOptions o = s.options;
        o.device = Device::cuda;
        const Status a = max_unpool(2, values.view(), duplicates.view(), u.view(),
                                    unpool_options(s, Device::cuda));
        const Status b = max_pool_backward(2, grad.view(), indices.view(), g.view(), o);
        if (!a.ok() || !b.ok()) {
          failures[t] = a.message() + b.message();
        } else if (!differences(u, unpooled, false).empty() ||
                   !differences(g, grad_input, true).empty()) {
          failures[t] = "run " + std::to_string(run) + " differs from the CPU";
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
}

}  // namespace
}  // namespace poolgen
