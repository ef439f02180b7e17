// Builder-style testers, one per op (as XNNPACK's operator testers): a test names only what its
// case is about (shape, window, layout, index dtype, path, threads), the tester makes the rest
// (random f32 values, indices from a real pooling), runs the op on views in the layout with
// guard elements around each output, and checks the result bit for bit against the reference
// (tests/reference.hpp), and that nothing outside the outputs was written.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "names.hpp"
#include "poolgen/poolgen.hpp"
#include "random_cases.hpp"
#include "reference.hpp"
#include "test_util.hpp"
#include "typed_views.hpp"

namespace poolgen::test {

using typed::from_channels_last;
using typed::ThreadsReset;
using typed::to_channels_last;

// A tensor's memory in a layout, with kGuard elements of a sentinel on each side.
template <typename T>
class GuardedTensor {
 public:
  static constexpr size_t kGuard = 16;
  GuardedTensor(const Ints& shape, int nd, bool channels_last, T fill)
      : shape_(shape), nd_(nd), channels_last_(channels_last),
        memory_(static_cast<size_t>(numel(shape)) + 2 * kGuard, fill), fill_(fill) {}

  TensorView view() {
    T* data = memory_.data() + kGuard;
    return channels_last_ ? channels_last(data, shape_, nd_) : contiguous(data, shape_);
  }
  void set(const std::vector<T>& logical) {
    const std::vector<T> laid =
        channels_last_ ? to_channels_last(logical, shape_, nd_) : logical;
    std::copy(laid.begin(), laid.end(), memory_.begin() + kGuard);
  }
  std::vector<T> get() const {
    const std::vector<T> laid(memory_.begin() + kGuard, memory_.end() - kGuard);
    return channels_last_ ? from_channels_last(laid, shape_, nd_) : laid;
  }
  bool guards_intact() const {
    for (size_t k = 0; k < kGuard; ++k) {
      if (std::memcmp(&memory_[k], &fill_, sizeof(T)) != 0 ||
          std::memcmp(&memory_[memory_.size() - 1 - k], &fill_, sizeof(T)) != 0) {
        return false;
      }
    }
    return true;
  }

 private:
  Ints shape_;
  int nd_;
  bool channels_last_;
  std::vector<T> memory_;
  T fill_;
};

// What every tester takes: the layout, the index dtype, the path and the threads.
template <typename Self>
class TesterBase {
 public:
  Self& channels_last(bool v = true) { return set(channels_last_, v); }
  Self& index_dtype(DType v) { return set(index_dtype_, v); }
  Self& path(Path v) { return set(path_, v); }
  Self& threads(int v) { return set(threads_, v); }
  Self& seed(uint64_t v) { return set(seed_, v); }

 protected:
  template <typename V>
  Self& set(V& field, const V& value) {
    field = value;
    return static_cast<Self&>(*this);
  }
  std::string describe(const Ints& shape, int nd) const {
    return std::to_string(nd) + "-D " + str(shape) + (channels_last_ ? " channels-last" : "") +
           ", " + dtype_name(index_dtype_) + " indices, path " + path_name(path_) + ", " +
           std::to_string(threads_) + " thread(s)";
  }

  bool channels_last_ = false;
  DType index_dtype_ = DType::i64;
  Path path_ = Path::automatic;
  int threads_ = 1;
  uint64_t seed_ = 1;
};

// Runs f with `threads` threads, restoring the count after.
template <typename F>
auto with_threads(int threads, F f) {
  const ThreadsReset reset;
  set_num_threads(threads);
  return f();
}

// What the pooling testers take besides: the input's shape and the pooling window.
template <typename Self>
class PoolWindowTester : public TesterBase<Self> {
 public:
  Self& input_shape(Ints v) { return this->set(shape_, v); }
  Self& kernel_size(Ints v) { return this->set(options_.kernel_size, v); }
  Self& stride(Ints v) { return this->set(options_.stride, v); }
  Self& padding(Ints v) { return this->set(options_.padding, v); }
  Self& dilation(Ints v) { return this->set(options_.dilation, v); }
  Self& ceil_mode(bool v = true) { return this->set(options_.ceil_mode, v); }

 protected:
  Ints shape_{1, 3, 8, 8};
  PoolOptions options_ = [] {
    PoolOptions o;
    o.kernel_size = {2};
    return o;
  }();
};

// Index tensors of either dtype, from and to int64 offsets in logical order.
class IndexTensor {
 public:
  IndexTensor(const Ints& shape, int nd, bool channels_last, DType dtype)
      : dtype_(dtype), i64_(shape, nd, channels_last, -7), i32_(shape, nd, channels_last, -7) {}
  TensorView view() { return dtype_ == DType::i32 ? i32_.view() : i64_.view(); }
  void set(const std::vector<int64_t>& logical) {
    if (dtype_ == DType::i64) return i64_.set(logical);
    i32_.set(std::vector<int32_t>(logical.begin(), logical.end()));
  }
  std::vector<int64_t> get() const {
    if (dtype_ == DType::i64) return i64_.get();
    const std::vector<int32_t> v = i32_.get();
    return std::vector<int64_t>(v.begin(), v.end());
  }
  bool guards_intact() const {
    return dtype_ == DType::i32 ? i32_.guards_intact() : i64_.guards_intact();
  }

 private:
  DType dtype_;
  GuardedTensor<int64_t> i64_;
  GuardedTensor<int32_t> i32_;
};

// max_pool: values and indices as the reference's.
class MaxPoolTester : public PoolWindowTester<MaxPoolTester> {
 public:
  ::testing::AssertionResult Test() const {
    const int nd = static_cast<int>(shape_.size()) - 2;
    Rng rng(seed_);
    std::vector<float> input(static_cast<size_t>(numel(shape_)));
    for (float& x : input) x = static_cast<float>(rng.uniform(-1000, 1000)) / 8;
    Ints out_shape;
    std::vector<float> values;
    std::vector<int64_t> indices;
    PoolOptions o = options_;
    o.path = path_;
    const Status rs = ref::max_pool<float>(nd, shape_, input, o, &out_shape, &values, &indices);
    if (!rs.ok()) return ::testing::AssertionFailure() << "reference: " << rs.message();
    GuardedTensor<float> in(shape_, nd, channels_last_, 0.0f);
    in.set(input);
    GuardedTensor<float> v(out_shape, nd, channels_last_, -99.0f);
    IndexTensor i(out_shape, nd, channels_last_, index_dtype_);
    const Status st =
        with_threads(threads_, [&] { return max_pool(nd, in.view(), v.view(), i.view(), o); });
    const std::string what = "max_pool " + describe(shape_, nd);
    if (!st.ok()) return ::testing::AssertionFailure() << what << ": " << st.message();
    if (!v.guards_intact() || !i.guards_intact()) {
      return ::testing::AssertionFailure() << what << ": wrote outside its outputs";
    }
    if (auto r = same_floats(values, v.get()); !r) return r << " (values, " << what << ")";
    if (auto r = same_ints(indices, i.get()); !r) return r << " (indices, " << what << ")";
    return ::testing::AssertionSuccess();
  }
};

// The pooling whose values and indices the unpooling testers take: `window` over `input`.
struct PooledCase {
  Ints input_shape, pooled_shape;
  std::vector<float> values;
  std::vector<int64_t> indices;
};
inline PooledCase pooled(const Ints& input_shape, const PoolOptions& window, uint64_t seed) {
  const int nd = static_cast<int>(input_shape.size()) - 2;
  Rng rng(seed);
  std::vector<float> input(static_cast<size_t>(numel(input_shape)));
  for (float& x : input) x = static_cast<float>(rng.uniform(-1000, 1000)) / 8;
  PooledCase c{input_shape, {}, {}, {}};
  const Status st =
      ref::max_pool<float>(nd, input_shape, input, window, &c.pooled_shape, &c.values, &c.indices);
  EXPECT_TRUE(st.ok()) << st.message();
  return c;
}

// max_unpool of a real pooling's values and indices (kernel = stride = `window`), back to the
// pooling input's extents.
class MaxUnpoolTester : public TesterBase<MaxUnpoolTester> {
 public:
  MaxUnpoolTester& input_shape(Ints v) { return set(shape_, v); }  // the pooling input's
  MaxUnpoolTester& window(int64_t v) { return set(window_, v); }
  // Makes index `k` (logical order) name another slot of its plane.
  MaxUnpoolTester& move_index(int64_t k, int64_t to) { return set(moved_, Ints{k, to}); }

  ::testing::AssertionResult Test() const {
    const int nd = static_cast<int>(shape_.size()) - 2;
    PoolOptions p;
    p.kernel_size = {window_};
    PooledCase c = pooled(shape_, p, seed_);
    if (!moved_.empty()) c.indices[moved_[0]] = moved_[1];
    UnpoolOptions u;
    u.kernel_size = {window_};
    u.output_size = Ints(shape_.end() - nd, shape_.end());
    u.path = path_;
    Ints out_shape;
    std::vector<float> expected;
    const Status rs = ref::max_unpool<float>(nd, c.pooled_shape, c.values, c.indices, u,
                                             &out_shape, &expected);
    GuardedTensor<float> v(c.pooled_shape, nd, channels_last_, 0.0f);
    v.set(c.values);
    IndexTensor i(c.pooled_shape, nd, channels_last_, index_dtype_);
    i.set(c.indices);
    GuardedTensor<float> o(shape_, nd, channels_last_, -99.0f);
    const Status st =
        with_threads(threads_, [&] { return max_unpool(nd, v.view(), i.view(), o.view(), u); });
    const std::string what = "max_unpool " + describe(c.pooled_shape, nd);
    if (st.code() != rs.code()) {
      return ::testing::AssertionFailure() << what << ": " << st.message() << ", expected "
                                           << rs.message();
    }
    if (!o.guards_intact()) return ::testing::AssertionFailure() << what << ": wrote outside";
    if (!rs.ok()) {  // the moved index, named
      const std::string named =
          "got " + std::to_string(moved_[1]) + " at element " + std::to_string(moved_[0]);
      return st.message().find(named) != std::string::npos
                 ? ::testing::AssertionSuccess()
                 : ::testing::AssertionFailure() << what << ": " << st.message();
    }
    if (auto r = same_floats(expected, o.get()); !r) return r << " (output, " << what << ")";
    return ::testing::AssertionSuccess();
  }

 private:
  Ints shape_{1, 3, 8, 8};
  int64_t window_ = 2;
  Ints moved_;
};

// max_pool_backward of a real pooling's indices with random gradients.
class MaxPoolBackwardTester : public PoolWindowTester<MaxPoolBackwardTester> {
 public:
  ::testing::AssertionResult Test() const {
    const int nd = static_cast<int>(shape_.size()) - 2;
    const PooledCase c = pooled(shape_, options_, seed_);
    Rng rng(seed_ + 1);
    std::vector<float> grad(c.values.size());
    for (float& g : grad) g = static_cast<float>(rng.uniform(-64, 64)) / 16;
    PoolOptions o = options_;
    o.path = path_;
    std::vector<float> expected;
    const Status rs = ref::max_pool_backward<float>(nd, shape_, grad, c.indices, o, &expected);
    if (!rs.ok()) return ::testing::AssertionFailure() << "reference: " << rs.message();
    GuardedTensor<float> g(c.pooled_shape, nd, channels_last_, 0.0f);
    g.set(grad);
    IndexTensor i(c.pooled_shape, nd, channels_last_, index_dtype_);
    i.set(c.indices);
    GuardedTensor<float> gi(shape_, nd, channels_last_, -99.0f);
    const Status st = with_threads(
        threads_, [&] { return max_pool_backward(nd, g.view(), i.view(), gi.view(), o); });
    const std::string what = "max_pool_backward " + describe(shape_, nd);
    if (!st.ok()) return ::testing::AssertionFailure() << what << ": " << st.message();
    if (!gi.guards_intact()) return ::testing::AssertionFailure() << what << ": wrote outside";
    if (auto r = same_floats(expected, gi.get()); !r) return r << " (grad_input, " << what << ")";
    return ::testing::AssertionSuccess();
  }
};

// max_unpool_backward: the gradient of unpooling a real pooling's values.
class MaxUnpoolBackwardTester : public TesterBase<MaxUnpoolBackwardTester> {
 public:
  MaxUnpoolBackwardTester& input_shape(Ints v) { return set(shape_, v); }  // the unpooled
  MaxUnpoolBackwardTester& window(int64_t v) { return set(window_, v); }

  ::testing::AssertionResult Test() const {
    const int nd = static_cast<int>(shape_.size()) - 2;
    PoolOptions p;
    p.kernel_size = {window_};
    const PooledCase c = pooled(shape_, p, seed_);
    Rng rng(seed_ + 1);
    std::vector<float> grad(static_cast<size_t>(numel(shape_)));
    for (float& g : grad) g = static_cast<float>(rng.uniform(-64, 64)) / 16;
    UnpoolOptions u;
    u.kernel_size = {window_};
    u.path = path_;
    std::vector<float> expected;
    const Status rs =
        ref::max_unpool_backward<float>(nd, c.pooled_shape, grad, c.indices, u, &expected);
    if (!rs.ok()) return ::testing::AssertionFailure() << "reference: " << rs.message();
    GuardedTensor<float> g(shape_, nd, channels_last_, 0.0f);
    g.set(grad);
    IndexTensor i(c.pooled_shape, nd, channels_last_, index_dtype_);
    i.set(c.indices);
    GuardedTensor<float> gv(c.pooled_shape, nd, channels_last_, -99.0f);
    const Status st = with_threads(
        threads_, [&] { return max_unpool_backward(nd, g.view(), i.view(), gv.view(), u); });
    const std::string what = "max_unpool_backward " + describe(shape_, nd);
    if (!st.ok()) return ::testing::AssertionFailure() << what << ": " << st.message();
    if (!gv.guards_intact()) return ::testing::AssertionFailure() << what << ": wrote outside";
    if (auto r = same_floats(expected, gv.get()); !r) {
      return r << " (grad_values, " << what << ")";
    }
    return ::testing::AssertionSuccess();
  }

 private:
  Ints shape_{1, 3, 8, 8};
  int64_t window_ = 2;
};

}  // namespace poolgen::test
