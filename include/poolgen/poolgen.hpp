// poolgen: max pooling with indices and max unpooling, PyTorch-exact.
//
// Tensors are views (pointer, dtype, shape, strides) in PyTorch's dimension order:
// (N, C, spatial...) or batch-less (C, spatial...). The library never allocates tensors and
// never includes a Halide header here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace poolgen {

enum class DType : int32_t { f32 = 0, i64 = 1 };
enum class Device : int32_t { cpu = 0 };

// Error classes; every non-ok Status also carries a message naming the argument, what was
// expected and what was given.
enum class Code : int32_t {
  ok = 0,
  invalid_argument = 1,    // a shape, stride or parameter breaks SEMANTICS.md
  index_out_of_range = 2,  // max_unpool: an index outside its output plane
  unsupported = 3,         // valid request this build has no kernel for (dtype, layout, ...)
  internal = 4,            // a kernel failed unexpectedly
};

class Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  bool ok() const { return code_ == Code::ok; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  Code code_ = Code::ok;
  std::string message_;
};

using Ints = std::vector<int64_t>;

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::f32;
  Ints shape;    // PyTorch order
  Ints strides;  // in elements, PyTorch order; empty means contiguous (row-major). The innermost
                 // stride must be 1, and outputs may not reach an element twice.
  Device device = Device::cpu;
};

// A contiguous view of `shape` at `data`.
TensorView contiguous(float* data, Ints shape);
TensorView contiguous(int64_t* data, Ints shape);
TensorView contiguous(const float* data, Ints shape);
TensorView contiguous(const int64_t* data, Ints shape);

// Which compiled kernels a call may use. `automatic` takes a window-specialized kernel when the
// call matches one; `general` always takes the general kernel (results are identical).
enum class Path : int32_t { automatic = 0, general = 1 };

// Mirrors torch.nn.functional.max_pool{1,2,3}d(..., return_indices=True). Each list holds one
// entry per spatial dimension, or a single entry used for all of them.
struct PoolOptions {
  Ints kernel_size;
  Ints stride;  // empty: kernel_size
  Ints padding{0};
  Ints dilation{1};
  bool ceil_mode = false;
  Path path = Path::automatic;
};

// Mirrors torch.nn.functional.max_unpool{1,2,3}d. output_size is empty, nd spatial extents, or
// a full shape of nd+2 entries whose leading N and C are ignored.
struct UnpoolOptions {
  Ints kernel_size;
  Ints stride;  // empty: kernel_size
  Ints padding{0};
  Ints output_size;
  Path path = Path::automatic;
};

// Shape of the pooled values/indices for an input of `input_shape` (rank nd+1 or nd+2).
Status max_pool_output_shape(int nd, const Ints& input_shape, const PoolOptions& options,
                             Ints* output_shape);

// values and indices must have the shape max_pool_output_shape gives; values has the input's
// dtype, indices is i64 (offsets inside one (n, c) plane, as PyTorch).
Status max_pool(int nd, const TensorView& input, const TensorView& values,
                const TensorView& indices, const PoolOptions& options);

// Shape of the unpooled output for values/indices of `input_shape`.
Status max_unpool_output_shape(int nd, const Ints& input_shape, const UnpoolOptions& options,
                               Ints* output_shape);

// output must have the shape max_unpool_output_shape gives. Invalid indices are reported
// (index_out_of_range, naming the first in input order); nothing outside `output` is written.
// Duplicate indices: the latest in input order wins, on any thread count.
Status max_unpool(int nd, const TensorView& values, const TensorView& indices,
                  const TensorView& output, const UnpoolOptions& options);

// Name of the compiled kernel a call with these arguments would run (for tests and tools).
Status max_pool_kernel_name(int nd, const Ints& input_shape, const PoolOptions& options,
                            std::string* name);
Status max_unpool_kernel_name(int nd, const Ints& input_shape, const UnpoolOptions& options,
                              std::string* name);

// Every compiled kernel, e.g. "max_pool2d_k2s2p0", with the CPU variants it carries.
struct KernelInfo {
  std::string name;
  std::vector<std::string> targets;
};
std::vector<KernelInfo> compiled_kernels();

// Threads the kernels may use (process-wide; 0 restores the default: one per core, or the
// HL_NUM_THREADS environment variable). Call it while no kernel is running: it restarts the
// thread pool.
void set_num_threads(int threads);

inline Status max_pool1d(const TensorView& in, const TensorView& values, const TensorView& indices,
                         const PoolOptions& o) {
  return max_pool(1, in, values, indices, o);
}
inline Status max_pool2d(const TensorView& in, const TensorView& values, const TensorView& indices,
                         const PoolOptions& o) {
  return max_pool(2, in, values, indices, o);
}
inline Status max_pool3d(const TensorView& in, const TensorView& values, const TensorView& indices,
                         const PoolOptions& o) {
  return max_pool(3, in, values, indices, o);
}
inline Status max_unpool1d(const TensorView& values, const TensorView& indices,
                           const TensorView& out, const UnpoolOptions& o) {
  return max_unpool(1, values, indices, out, o);
}
inline Status max_unpool2d(const TensorView& values, const TensorView& indices,
                           const TensorView& out, const UnpoolOptions& o) {
  return max_unpool(2, values, indices, out, o);
}
inline Status max_unpool3d(const TensorView& values, const TensorView& indices,
                           const TensorView& out, const UnpoolOptions& o) {
  return max_unpool(3, values, indices, out, o);
}

}  // namespace poolgen
