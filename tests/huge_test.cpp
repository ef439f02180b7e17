// Tensors beyond 2^31 elements, in one plane and in total, without the memory they would take:
// they live in anonymous mappings that cost memory only where written (untouched pages read as
// zeros), and windows with large strides touch little of them. Pooling results are checked at
// every output against the window's taps read directly; unpooling at every written slot and at
// a sample of the slots it must have zeroed.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "built_kernels.hpp"
#include "poolgen/poolgen.hpp"

namespace poolgen::test {
namespace {

constexpr int64_t k2To31 = int64_t{1} << 31;

// An anonymous mapping of `bytes` that costs memory only where it is written.
class Sparse {
 public:
  explicit Sparse(int64_t bytes) : bytes_(static_cast<size_t>(bytes)) {
    data_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (data_ == MAP_FAILED) data_ = nullptr;
  }
  ~Sparse() {
    if (data_) munmap(data_, bytes_);
  }
  Sparse(const Sparse&) = delete;
  Sparse& operator=(const Sparse&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  size_t bytes_;
  void* data_;
};

#define ASSERT_MAPPED(sparse) \
  if (!(sparse).as<char>()) GTEST_SKIP() << "no address space for a sparse mapping"

// Unpooling writes (zeroes) its whole output: a few GiB of real memory.
bool have_memory(int64_t bytes) {
  return static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE) >= 4 * bytes;
}

int64_t product(const Ints& shape) {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  return n;
}

// Row-major strides of `shape`, or channels-last ones (C innermost).
Ints strides_of(const Ints& shape, bool channels_last) {
  Ints strides(shape.size());
  int64_t step = 1;
  if (channels_last) {
    strides[1] = 1;
    step = shape[1];
  }
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    if (channels_last && d == 1) continue;
    strides[d] = step;
    step *= shape[d];
  }
  return strides;
}

// A pooling call over a sparse f32 input of (N, C, spatial...) `shape`: one tap of every window
// is given a distinct positive value (the rest stay zero), so each output has one right answer;
// it is computed from the taps directly and compared with the library's.
void check_sparse_pool(const Ints& shape, const PoolOptions& options, bool channels_last) {
  const int nd = static_cast<int>(shape.size()) - 2;
  Ints out_shape;
  ASSERT_TRUE(max_pool_output_shape(nd, shape, options, &out_shape).ok());
  Sparse input(product(shape) * 4);
  ASSERT_MAPPED(input);
  const Ints in_strides = strides_of(shape, channels_last);
  const int64_t plane = product(Ints(shape.begin() + 2, shape.end()));
  const int64_t outputs = product(out_shape);
  const int64_t out_plane = outputs / (out_shape[0] * out_shape[1]);
  auto param = [&](const Ints& list, int d, int64_t fallback) {
    return list.empty() ? fallback : list[list.size() == 1 ? 0 : d];
  };
  // The taps of output `o` (row-major over out_shape), in window order: plane offset and
  // element offset, -1 when out of bounds.
  auto taps = [&](int64_t o, std::vector<std::pair<int64_t, int64_t>>* list) {
    int64_t rest = o % out_plane;
    const int64_t nc = o / out_plane, n = nc / shape[1], c = nc % shape[1];
    int64_t start[3], kernel[3], dilation[3];
    for (int d = nd - 1; d >= 0; --d) {
      const int64_t k = param(options.kernel_size, d, 1);
      start[d] = (rest % out_shape[2 + d]) * param(options.stride, d, k) -
                 param(options.padding, d, 0);
      rest /= out_shape[2 + d];
      kernel[d] = k;
      dilation[d] = param(options.dilation, d, 1);
    }
    list->clear();
    int64_t count = 1;
    for (int d = 0; d < nd; ++d) count *= kernel[d];
    for (int64_t t = 0; t < count; ++t) {
      int64_t tap = t, flat = 0, offset = n * in_strides[0] + c * in_strides[1];
      bool inside = true;
      int64_t coords[3];
      for (int d = nd - 1; d >= 0; --d) {
        coords[d] = start[d] + (tap % kernel[d]) * dilation[d];
        tap /= kernel[d];
      }
      for (int d = 0; d < nd; ++d) {
        inside = inside && coords[d] >= 0 && coords[d] < shape[2 + d];
        flat = flat * shape[2 + d] + coords[d];
        offset += coords[d] * in_strides[2 + d];
      }
      list->emplace_back(inside ? flat : -1, inside ? offset : -1);
    }
  };
  float* x = input.as<float>();
  std::vector<std::pair<int64_t, int64_t>> list;
  for (int64_t o = 0; o < outputs; ++o) {
    taps(o, &list);
    const auto& pick = list[static_cast<size_t>((o * 7919) % static_cast<int64_t>(list.size()))];
    if (pick.second >= 0) x[pick.second] = static_cast<float>(o % 1000 + 1);
  }
  std::vector<float> values(static_cast<size_t>(outputs), -1.0f);
  std::vector<int64_t> indices(static_cast<size_t>(outputs), -1);
  auto view = [&](void* data, DType dtype, const Ints& s) {
    TensorView v = contiguous(data, dtype, s);
    if (channels_last) v.strides = strides_of(s, true);
    return v;
  };
  const Status status =
      max_pool(nd, view(x, DType::f32, shape), view(values.data(), DType::f32, out_shape),
               view(indices.data(), DType::i64, out_shape), options);
  ASSERT_TRUE(status.ok()) << status.message();
  const Ints out_strides = strides_of(out_shape, channels_last);
  int64_t mismatches = 0, beyond_2to31 = 0;
  for (int64_t o = 0; o < outputs && mismatches < 5; ++o) {
    taps(o, &list);
    // The first in-bounds tap, replaced by any strictly larger one.
    float best = 0;
    int64_t best_index = -1;
    for (const auto& [flat, offset] : list) {
      if (flat < 0) continue;
      if (best_index < 0 || x[offset] > best) best = x[offset], best_index = flat;
    }
    int64_t at = 0, rest = o;  // o's element offset in the output views
    for (int d = static_cast<int>(out_shape.size()) - 1; d >= 0; --d) {
      at += (rest % out_shape[d]) * out_strides[d];
      rest /= out_shape[d];
    }
    beyond_2to31 += best_index >= k2To31;
    if (values[at] != best || indices[at] != best_index) {
      ++mismatches;
      ADD_FAILURE() << "output " << o << ": got " << values[at] << " at " << indices[at]
                    << ", expected " << best << " at " << best_index;
    }
  }
  if (plane > k2To31) {
    EXPECT_GT(beyond_2to31, 0) << "no index beyond 2^31 was checked";
  }
}

TEST(Huge, Pool1dLongerThan2To31) {
  PoolOptions o;
  o.kernel_size = {3};
  o.stride = {(1 << 20) + 7};
  o.padding = {1};
  check_sparse_pool({1, 1, k2To31 + (3 << 20)}, o, false);
}

TEST(Huge, Pool2dPlaneOf2To31) {
  PoolOptions o;
  o.kernel_size = {2, 3};
  o.stride = {4096, 4093};
  o.padding = {1};
  o.ceil_mode = true;
  for (bool cl : {false, true}) {
    SCOPED_TRACE(cl ? "channels-last" : "contiguous");
    check_sparse_pool({1, 2, 32769, 65536}, o, cl);  // the last row lies beyond 2^31
  }
}

TEST(Huge, Pool3dPlaneOf2To31Dilated) {
  PoolOptions o;
  o.kernel_size = {2};
  o.stride = {342, 1031, 1031};  // the last D window reaches slice 1029, beyond 2^31
  o.dilation = {3, 1, 2};
  check_sparse_pool({1, 1, 1030, 2085, 1000}, o, false);
}

TEST(Huge, PoolTotalBeyond2To31InSmallPlanes) {
  PoolOptions o;
  o.kernel_size = {3};
  o.stride = {361};
  for (bool cl : {false, true}) {
    SCOPED_TRACE(cl ? "channels-last" : "contiguous");
    check_sparse_pool({2, 2048, 724, 724}, o, cl);  // 2.15e9 elements
  }
}

// The output of an unpooling of byte values over a sparse mapping; one value per window of
// `kernel` x `kernel` (1-D: `kernel`), at a tap chosen per window, with a duplicate pair.
struct SparseUnpool {
  Ints values_shape, output_shape;
  int64_t window;
  std::vector<uint8_t> values;
  std::vector<int64_t> indices;

  SparseUnpool(const Ints& values_shape_, int64_t window_, int64_t output_extent = 0)
      : values_shape(values_shape_), window(window_) {
    const int nd = static_cast<int>(values_shape.size()) - 2;
    output_shape = values_shape;
    for (int d = 0; d < nd; ++d) output_shape[2 + d] *= window;
    if (output_extent) output_shape.back() = output_extent;
    const int64_t n = product(values_shape);
    const int64_t plane = n / (values_shape[0] * values_shape[1]);
    const int64_t row = nd == 1 ? plane : values_shape.back();
    const int64_t out_row = output_shape.back();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t p = i % plane, y = nd == 1 ? 0 : p / row, x = p % row;
      const int64_t tap = (i * 7919) % window;
      values.push_back(static_cast<uint8_t>(i % 251 + 1));
      indices.push_back((y * window + (nd == 1 ? 0 : tap)) * (nd == 1 ? 1 : out_row) +
                        x * window + (nd == 1 ? tap : 0));
    }
    indices[5] = indices[4];  // a duplicate: element 5, the later, wins
    if (output_extent) indices.back() = output_extent - 1;  // the plane's last slot
  }

  UnpoolOptions options() const {
    UnpoolOptions u;
    u.kernel_size = {window};
    u.output_size = Ints(output_shape.begin() + 2, output_shape.end());
    return u;
  }

  // Runs the unpooling into a sparse output and checks every written slot and sampled zeros.
  void run_and_check(Path path) const {
    const int nd = static_cast<int>(values_shape.size()) - 2;
    Sparse output(product(output_shape));
    ASSERT_MAPPED(output);
    uint8_t* out = output.as<uint8_t>();
    const int64_t plane = product(output_shape) / (output_shape[0] * output_shape[1]);
    const int64_t values_plane = product(values_shape) / (values_shape[0] * values_shape[1]);
    // Nonzero where zeros are due: the library must clear them.
    for (int64_t at = 0; at < product(output_shape); at += 65537) out[at] = 0xee;
    UnpoolOptions u = options();
    u.path = path;
    const Status status = max_unpool(nd, contiguous(values.data(), values_shape),
                                     contiguous(indices.data(), values_shape),
                                     contiguous(out, output_shape), u);
    ASSERT_TRUE(status.ok()) << status.message();
    std::vector<int64_t> written;
    int64_t beyond_2to31 = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      if (i == 4) continue;  // overwritten by its duplicate
      const int64_t at = static_cast<int64_t>(i) / values_plane * plane + indices[i];
      ASSERT_EQ(out[at], values[i]) << "element " << i << " at plane slot " << indices[i];
      written.push_back(at);
      beyond_2to31 += indices[i] >= k2To31;
    }
    std::sort(written.begin(), written.end());
    for (int64_t at = 0; at < product(output_shape); at += 65537) {
      if (!std::binary_search(written.begin(), written.end(), at)) {
        ASSERT_EQ(out[at], 0) << "slot " << at << " was not zeroed";
      }
    }
    if (plane > k2To31) {
    EXPECT_GT(beyond_2to31, 0) << "no index beyond 2^31 was checked";
  }
  }
};

TEST(Huge, Unpool1dPlaneOf2To31) {
  if (!unpool_kernel_built(DType::u8, DType::i64)) GTEST_SKIP() << "no 8-bit unpooling kernel";
  const int64_t window = int64_t{1} << 20, extent = k2To31 + (1 << 16);
  if (!have_memory(extent)) GTEST_SKIP() << "needs 4x the 2 GiB output in memory";
  const SparseUnpool call({1, 1, k2To31 / window}, window, extent);
  call.run_and_check(Path::automatic);
  // The winner kernel (Path::winner, CUDA) takes only planes its buffers hold.
  UnpoolOptions u = call.options();
  u.path = Path::winner;
  std::string name;
  if (!max_unpool_kernel_name(1, contiguous(call.values.data(), call.values_shape), DType::i64, u,
                              &name)
           .ok()) {
    return;  // no CPU winner kernel in this build
  }
  uint8_t byte = 0;
  const Status s = max_unpool(1, contiguous(call.values.data(), call.values_shape),
                              contiguous(call.indices.data(), call.values_shape),
                              contiguous(&byte, call.output_shape), u);
  if (s.code() != Code::unsupported || s.message().find("winner") == std::string::npos) {
    ADD_FAILURE() << "Path::winner on a plane of 2^31 elements: " << s.message();
  }
}

TEST(Huge, UnpoolInvalidIndexBeyondLargePlane) {
  if (!unpool_kernel_built(DType::u8, DType::i64)) GTEST_SKIP() << "no 8-bit unpooling kernel";
  const int64_t window = int64_t{1} << 20, extent = k2To31 + (1 << 16);
  if (!have_memory(extent)) GTEST_SKIP() << "needs 4x the 2 GiB output in memory";
  SparseUnpool call({1, 1, k2To31 / window}, window, extent);
  call.indices[1000] = extent;  // one past the plane
  Sparse output(extent);
  ASSERT_MAPPED(output);
  const Status s = max_unpool(1, contiguous(call.values.data(), call.values_shape),
                              contiguous(call.indices.data(), call.values_shape),
                              contiguous(output.as<uint8_t>(), call.output_shape), call.options());
  EXPECT_EQ(s.code(), Code::index_out_of_range) << s.message();
  EXPECT_NE(s.message().find("got " + std::to_string(extent) + " at element 1000"),
            std::string::npos)
      << s.message();
}

TEST(Huge, UnpoolTotalBeyond2To31InSmallPlanes) {
  if (!unpool_kernel_built(DType::u8, DType::i64)) GTEST_SKIP() << "no 8-bit unpooling kernel";
  const SparseUnpool call({1, 2098, 2, 2}, 512);  // 2098 planes of 1024 x 1024: 2.2e9 bytes
  if (!have_memory(product(call.output_shape))) GTEST_SKIP() << "needs 4x the output in memory";
  call.run_and_check(Path::automatic);
  std::string name;
  if (max_unpool_kernel_name(2, contiguous(call.values.data(), call.values_shape), DType::i64,
                             [&] {
                               UnpoolOptions u = call.options();
                               u.path = Path::winner;
                               return u;
                             }(),
                             &name)
          .ok()) {
    call.run_and_check(Path::winner);
  }
}

// ---------------------------------------------------------------------------------------------
// The backward ops beyond 2^31 elements, in bf16 (the narrowest gradient type: a plane of 2^31
// elements is 4.3 GB, which pool backward zeroes). One pooled gradient per window of `window`
// elements, at a tap chosen per window (some beyond 2^31 in a plane that long); elements 1, 2
// and 3 name one position (their sum rounds to bf16 in order: 1 + 3*2^-10 + 3*2^-10 = 1), and
// for pool backward element 0's index lies outside the plane (dropped).

bool gradient_kernel_built(DType value) {
  return any_kernel_built([&](const KernelInfo& k) {
    return k.op == "pool_backward_scatter" && k.value_dtype == value && k.index_dtype == DType::i64;
  });
}

uint16_t bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return static_cast<uint16_t>(u >> 16);  // the values used here are exact in bf16
}

float bf16_value(uint16_t b) {
  const uint32_t u = uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

struct SparseGradients {
  Ints pooled_shape, input_shape;  // (pooled) grad_output and indices; grad_input
  int64_t window;
  std::vector<bf16_t> gradients;
  std::vector<int64_t> indices;
  PoolOptions pool;

  // A 1-D plane of `extent` elements pooled with ceil_mode (its last window is partial), or the
  // 2-D `input_shape` given.
  SparseGradients(const Ints& input, int64_t window_) : input_shape(input), window(window_) {
    const int nd = static_cast<int>(input_shape.size()) - 2;
    pool.kernel_size = {window};
    pool.ceil_mode = true;
    EXPECT_TRUE(max_pool_output_shape(nd, input_shape, pool, &pooled_shape).ok());
    const int64_t n = product(pooled_shape), cells = n / (pooled_shape[0] * pooled_shape[1]);
    const int64_t row = pooled_shape.back(), in_row = input_shape.back();
    const int64_t in_plane = product(input_shape) / (input_shape[0] * input_shape[1]);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t cell = i % cells, y = cell / row, x = cell % row;
      const int64_t tap_x = (i * 7919) % window, tap_y = nd == 1 ? 0 : (i * 104729) % window;
      const int64_t at = (y * window + tap_y) * (nd == 1 ? 0 : in_row) + x * window + tap_x;
      indices.push_back(std::min(at, in_plane - 1));
      gradients.push_back(bf16_t{bf16_bits(static_cast<float>(i % 61 + 1))});
    }
    // Elements 2 and 3 name element 1's position (all in the first plane): 1 + 3*2^-10 +
    // 3*2^-10 rounds to 1 in bf16.
    gradients[1] = bf16_t{bf16_bits(1.0f)};
    gradients[2] = gradients[3] = bf16_t{bf16_bits(3.0f / 1024)};
    indices[2] = indices[3] = indices[1];
  }

  // Pool backward into a sparse grad_input: every named position holds its sum, sampled other
  // positions (made non-zero first) are zero.
  void check_pool_backward() const {
    const int nd = static_cast<int>(input_shape.size()) - 2;
    const int64_t total = product(input_shape), in_plane = total / (input_shape[0] * input_shape[1]);
    const int64_t cells = product(pooled_shape) / (pooled_shape[0] * pooled_shape[1]);
    Sparse grad_input(total * 2);
    ASSERT_MAPPED(grad_input);
    uint16_t* g = grad_input.as<uint16_t>();
    for (int64_t at = 0; at < total; at += 65537) g[at] = 0x3f80;  // 1.0: must be cleared
    std::vector<int64_t> with_outside = indices;
    with_outside[0] = in_plane + 5;  // outside the plane: dropped, never written
    const Status status = max_pool_backward(
        nd, contiguous(gradients.data(), pooled_shape),
        contiguous(with_outside.data(), pooled_shape), contiguous(grad_input.as<bf16_t>(), input_shape),
        pool);
    ASSERT_TRUE(status.ok()) << status.message();
    std::vector<int64_t> written;
    int64_t beyond_2to31 = 0;
    for (size_t i = 1; i < indices.size(); ++i) {
      if (i == 2 || i == 3) continue;  // summed into element 1's position
      const int64_t at = static_cast<int64_t>(i) / cells * in_plane + indices[i];
      const float want = i == 1 ? 1.0f : bf16_value(gradients[i].bits);
      ASSERT_EQ(bf16_value(g[at]), want) << "element " << i << " at plane position " << indices[i];
      written.push_back(at);
      beyond_2to31 += indices[i] >= k2To31;
    }
    std::sort(written.begin(), written.end());
    for (int64_t at = 0; at < total; at += 65537) {
      if (!std::binary_search(written.begin(), written.end(), at)) {
        ASSERT_EQ(g[at], 0) << "position " << at << " was not zeroed";
      }
    }
    if (in_plane > k2To31) {
      EXPECT_GT(beyond_2to31, 0) << "no index beyond 2^31 was checked";
    }
  }

  // Unpool backward from a sparse grad_output (the pooling input's shape) that holds a distinct
  // value at every named position: each gradient gathered is its own.
  void check_unpool_backward() const {
    const int nd = static_cast<int>(input_shape.size()) - 2;
    const int64_t total = product(input_shape), in_plane = total / (input_shape[0] * input_shape[1]);
    const int64_t cells = product(pooled_shape) / (pooled_shape[0] * pooled_shape[1]);
    Sparse grad_output(total * 2);
    ASSERT_MAPPED(grad_output);
    uint16_t* g = grad_output.as<uint16_t>();
    for (size_t i = 0; i < indices.size(); ++i) {
      g[static_cast<int64_t>(i) / cells * in_plane + indices[i]] = gradients[i].bits;
    }
    UnpoolOptions u;
    u.kernel_size = {window};
    u.output_size = Ints(input_shape.begin() + 2, input_shape.end());
    std::vector<bf16_t> grad_values(indices.size(), bf16_t{0x7fc0});
    const Status status = max_unpool_backward(
        nd, contiguous(grad_output.as<bf16_t>(), input_shape),
        contiguous(indices.data(), pooled_shape), contiguous(grad_values.data(), pooled_shape), u);
    ASSERT_TRUE(status.ok()) << status.message();
    for (size_t i = 0; i < indices.size(); ++i) {
      const size_t named = i >= 1 && i <= 3 ? 3 : i;  // the last write to a shared position
      ASSERT_EQ(grad_values[i].bits, gradients[named].bits) << "element " << i;
    }
    // An index one past the plane, beyond 2^31 where the plane is that long: named.
    std::vector<int64_t> invalid = indices;
    invalid[1000] = in_plane;
    const Status bad = max_unpool_backward(
        nd, contiguous(grad_output.as<bf16_t>(), input_shape),
        contiguous(invalid.data(), pooled_shape), contiguous(grad_values.data(), pooled_shape), u);
    EXPECT_EQ(bad.code(), Code::index_out_of_range) << bad.message();
    EXPECT_NE(bad.message().find("got " + std::to_string(in_plane) + " at element 1000"),
              std::string::npos)
        << bad.message();
  }
};

TEST(Huge, BackwardPlaneOf2To31) {
  if (!gradient_kernel_built(DType::bf16)) GTEST_SKIP() << "no bf16 backward kernels";
  const int64_t extent = k2To31 + (1 << 16);
  if (!have_memory(2 * extent)) GTEST_SKIP() << "needs 4x the 4.3 GB grad_input in memory";
  const SparseGradients call({1, 1, extent}, int64_t{1} << 20);
  call.check_pool_backward();
  call.check_unpool_backward();
}

TEST(Huge, BackwardTotalBeyond2To31InSmallPlanes) {
  if (!gradient_kernel_built(DType::bf16)) GTEST_SKIP() << "no bf16 backward kernels";
  const Ints shape{1, 1049, 1024, 1024};  // 1.1e9 elements, 2.2 GB: beyond 2 GiB in bytes
  if (!have_memory(2 * product(shape))) GTEST_SKIP() << "needs 4x the grad_input in memory";
  const SparseGradients call(shape, 512);
  call.check_pool_backward();
  call.check_unpool_backward();
}

// Shapes whose sizes would overflow are refused with the argument named, before any data is
// touched (the data pointers are null or one element).
TEST(Huge, OverflowingShapesAreErrors) {
  Ints out;
  PoolOptions o;
  o.kernel_size = {2};
  Status s = max_pool_output_shape(2, {int64_t{1} << 30, int64_t{1} << 30, 4, 4}, o, &out);
  EXPECT_EQ(s.code(), Code::invalid_argument);
  EXPECT_EQ(s.message().rfind("input: expected at most 2^59 elements", 0), 0u) << s.message();

  // Empty tensors too: their strides are products of the other extents.
  s = max_pool_output_shape(2, {0, int64_t{1} << 40, int64_t{1} << 40, 4}, o, &out);
  EXPECT_EQ(s.code(), Code::invalid_argument);
  EXPECT_EQ(s.message().rfind("input: expected at most 2^59 elements", 0), 0u) << s.message();

  // A window reaching past 2^29 elements: the kernels' 32-bit coordinates could overflow.
  o.kernel_size = {int64_t{1} << 29};
  s = max_pool_output_shape(1, {1, 1, int64_t{1} << 30}, o, &out);
  EXPECT_EQ(s.code(), Code::unsupported);
  EXPECT_EQ(s.message().rfind("kernel_size: expected a window whose dilated span", 0), 0u)
      << s.message();
  // A window of more than 2^26 taps (valid in PyTorch with ceil_mode and its default stride).
  o.kernel_size = {int64_t{1} << 20};
  o.ceil_mode = true;
  s = max_pool_output_shape(2, {1, 1, 5, 5}, o, &out);
  EXPECT_EQ(s.code(), Code::unsupported);
  EXPECT_EQ(s.message().rfind("kernel_size: expected a window spanning at most 2^26", 0), 0u)
      << s.message();
  o.kernel_size = {2};
  o.ceil_mode = false;

  // An unknown device code in the options.
  o.device = static_cast<Device>(2);
  s = max_pool_output_shape(2, {1, 1, 4, 4}, o, &out);
  EXPECT_EQ(s.code(), Code::unsupported);
  EXPECT_EQ(s.message().rfind("device: expected cpu (0) or cuda (1), got 2", 0), 0u)
      << s.message();
  o.device = Device::cpu;

  UnpoolOptions u;
  u.kernel_size = {(int64_t{1} << 31) - 1};
  s = max_unpool_output_shape(1, {1, 1, int64_t{1} << 40}, u, &out);
  EXPECT_EQ(s.code(), Code::invalid_argument);
  EXPECT_EQ(s.message().rfind("output: expected an unpooled extent of at most 2^59", 0), 0u)
      << s.message();

  for (int64_t big : {int64_t{1} << 31, int64_t{1} << 40, std::numeric_limits<int64_t>::max()}) {
    o.kernel_size = {big};
    s = max_pool_output_shape(1, {1, 1, 8}, o, &out);
    EXPECT_EQ(s.code(), Code::unsupported) << s.message();
    EXPECT_EQ(s.message().rfind("kernel_size: expected every entry <= 2^31-1, got " +
                                    std::to_string(big), 0),
              0u)
        << s.message();
  }

  // Strides that reach past 2^59 elements.
  float x = 0;
  int64_t i = 0;
  o.kernel_size = {1};
  TensorView input = contiguous(&x, {1, 1, 2, 1});
  input.strides = {1, 1, int64_t{1} << 60, 1};
  s = max_pool(2, input, contiguous(&x, {1, 1, 2, 1}), contiguous(&i, {1, 1, 2, 1}), o);
  EXPECT_EQ(s.code(), Code::invalid_argument);
  EXPECT_EQ(s.message().rfind("input: expected strides that keep every element within", 0), 0u)
      << s.message();

  // A valid shape of 2^40 elements without data.
  s = max_pool(1, contiguous(nullptr, DType::f32, {1, 1, int64_t{1} << 40}),
               contiguous(nullptr, DType::f32, {1, 1, int64_t{1} << 40}),
               contiguous(nullptr, DType::i64, {1, 1, int64_t{1} << 40}), o);
  EXPECT_EQ(s.code(), Code::invalid_argument);
  EXPECT_EQ(s.message().rfind("input: expected data for a tensor of shape", 0), 0u) << s.message();
}

}  // namespace
}  // namespace poolgen::test
