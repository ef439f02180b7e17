// poolgen as TensorFlow's CPU kernels of its own ops MaxPoolWithArgmax and MaxPoolGradWithArgmax
// (tf.nn.max_pool_with_argmax and its gradient): registered at a higher priority than
// TensorFlow's, so that a graph, tf.function or Keras model that uses those ops runs poolgen once
// this library is loaded (tf.load_op_library, by `import poolgen.tensorflow`) before their
// first use. TensorFlow's NHWC tensors are poolgen's channels-last views; its SAME / VALID
// windows, first-tap NaN rule and argmax formats are PoolOptions' (docs/semantics.md, "Other
// frameworks"). Built against the installed TensorFlow (python/setup.py).
#include <tensorflow/core/framework/op_kernel.h>

#include <atomic>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "../bridge/bridge.hpp"

namespace poolgen_tensorflow {
namespace {

using namespace tensorflow;
using poolgen_bridge::Outcome;

// Calls served, for stats(): the forward op's, the gradient's.
std::atomic<int64_t> served[2];

template <typename T>
constexpr int dtype_of() {
  if constexpr (std::is_same_v<T, float>) return POOLGEN_F32;
  if constexpr (std::is_same_v<T, double>) return POOLGEN_F64;
  if constexpr (std::is_same_v<T, Eigen::half>) return POOLGEN_F16;
  if constexpr (std::is_same_v<T, bfloat16>) return POOLGEN_BF16;
  if constexpr (std::is_same_v<T, int8_t>) return POOLGEN_I8;
  if constexpr (std::is_same_v<T, uint8_t>) return POOLGEN_U8;
  if constexpr (std::is_same_v<T, int16_t>) return POOLGEN_I16;
  if constexpr (std::is_same_v<T, int32_t>) return POOLGEN_I32;
  return POOLGEN_I64;
}

// An NHWC tensor's memory as poolgen's (N, C, H, W) view: channels innermost.
poolgen_tensor nhwc_view(const void* data, int dtype, const int64_t (&nchw)[4]) {
  poolgen_tensor t{};
  t.data = const_cast<void*>(data);
  t.dtype = dtype;
  t.rank = 4;
  std::memcpy(t.shape, nchw, sizeof nchw);
  t.strides[1] = 1;
  t.strides[3] = nchw[1];
  t.strides[2] = nchw[1] * nchw[3];
  t.strides[0] = nchw[1] * nchw[2] * nchw[3];
  return t;
}

// TensorFlow's error for a poolgen failure: InvalidArgument (the shapes, the argmax), or
// Unimplemented where poolgen lacks a kernel.
Status as_status(const Outcome& r) {
  if (r.ok()) return OkStatus();
  if (r.kind == POOLGEN_ERROR_NO_KERNEL) return errors::Unimplemented("poolgen: ", r.message);
  return errors::InvalidArgument(r.message);
}

// The ops' window attributes, checked as TensorFlow checks them, as poolgen's options.
struct Window {
  std::vector<int32> ksize, strides;
  bool include_batch_in_index = false;
  poolgen_pool_options options{};

  explicit Window(OpKernelConstruction* c) {
    std::string padding;
    OP_REQUIRES_OK(c, c->GetAttr("ksize", &ksize));
    OP_REQUIRES_OK(c, c->GetAttr("strides", &strides));
    OP_REQUIRES_OK(c, c->GetAttr("padding", &padding));
    OP_REQUIRES_OK(c, c->GetAttr("include_batch_in_index", &include_batch_in_index));
    OP_REQUIRES(c, ksize.size() == 4,
                errors::InvalidArgument("Sliding window ksize field must specify 4 dimensions"));
    OP_REQUIRES(c, strides.size() == 4,
                errors::InvalidArgument("Sliding window stride field must specify 4 dimensions"));
    for (int32 k : ksize) {
      OP_REQUIRES(c, k > 0,
                  errors::InvalidArgument("ksize must be a positive int32 value, got:", k));
    }
    for (int32 s : strides) {
      OP_REQUIRES(c, s > 0, errors::InvalidArgument("Stride must be > 0, but got ", s));
    }
    OP_REQUIRES(c, ksize[0] == 1 && strides[0] == 1,
                errors::Unimplemented("Pooling is not yet supported on the batch dimension."));
    // TensorFlow pools across channels here too; poolgen's windows are spatial.
    OP_REQUIRES(c, ksize[3] == 1 && strides[3] == 1,
                errors::Unimplemented("poolgen.tensorflow pools spatial windows only (ksize and "
                                      "strides 1 in the depth dimension), got ksize ",
                                      ksize[3], " and stride ", strides[3], " there"));
    options.kernel_size[0] = ksize[1];
    options.kernel_size[1] = ksize[2];
    options.stride[0] = strides[1];
    options.stride[1] = strides[2];
    options.dilation[0] = options.dilation[1] = 1;
    options.auto_pad = padding == "SAME" ? POOLGEN_SAME_UPPER : POOLGEN_VALID;
    options.max_rule = POOLGEN_MAX_FIRST_TAP;
    options.pool_rule = POOLGEN_POOL_RULE_TENSORFLOW;
    options.index_format =
        include_batch_in_index ? POOLGEN_INDEX_TENSORFLOW_WITH_BATCH : POOLGEN_INDEX_TENSORFLOW;
  }

  // The pooled extents of an NHWC input as (N, C, H, W), or TensorFlow's error for a window
  // that does not fit.
  Status pooled(const Tensor& input, int64_t (&in)[4], int64_t (&out)[4]) const {
    if (input.dims() != 4) {
      return errors::InvalidArgument("tensor_in must be 4-dimensional (", input.dims(), ")");
    }
    const int64_t shape[4] = {input.dim_size(0), input.dim_size(3), input.dim_size(1),
                              input.dim_size(2)};
    std::memcpy(in, shape, sizeof shape);
    const Outcome r = poolgen_bridge::call([&](char* m, size_t n) {
      return poolgen_max_pool_output_shape(2, 4, in, &options, out, m, n);
    });
    if (r.ok() || r.argument != "input") return as_status(r);
    for (int i = 0; i < 2; ++i) {  // TensorFlow's words for the dimension that does not fit
      const int64_t size = (in[2 + i] - ksize[1 + i] + strides[1 + i]) / strides[1 + i];
      if (size < 0) {
        return errors::InvalidArgument("Computed output size would be negative: ", size,
                                       " [input_size: ", in[2 + i], ", effective_filter_size: ",
                                       ksize[1 + i], ", stride: ", strides[1 + i], "]");
      }
    }
    return as_status(r);
  }
};

// poolgen's threads follow the op's device (the session's intra-op threads).
void follow_threads(OpKernelContext* c) {
  static std::atomic<int> current{-1};
  const int wanted = c->device()->tensorflow_cpu_worker_threads()->num_threads;
  if (current.exchange(wanted, std::memory_order_relaxed) != wanted) {
    poolgen_set_num_threads(wanted);
  }
}

// Runs one poolgen call, f(message, size), for op `which` (0 the forward op, 1 the gradient) on
// the device's threads; counts it when it succeeds.
template <typename F>
void serve(OpKernelContext* c, int which, F f) {
  follow_threads(c);
  const Status status = as_status(poolgen_bridge::call(f));
  if (!status.ok()) return c->SetStatus(status);
  served[which].fetch_add(1, std::memory_order_relaxed);
}

template <typename T, typename Targmax>
class MaxPoolWithArgmax : public OpKernel {
 public:
  explicit MaxPoolWithArgmax(OpKernelConstruction* c) : OpKernel(c), window_(c) {}

  void Compute(OpKernelContext* c) override {
    const Tensor& input = c->input(0);
    int64_t in[4], out[4];
    OP_REQUIRES_OK(c, window_.pooled(input, in, out));
    const TensorShape shape({out[0], out[2], out[3], out[1]});
    Tensor *values = nullptr, *argmax = nullptr;
    OP_REQUIRES_OK(c, c->allocate_output(0, shape, &values));
    OP_REQUIRES_OK(c, c->allocate_output(1, shape, &argmax));
    const poolgen_tensor i = nhwc_view(input.data(), dtype_of<T>(), in),
                         v = nhwc_view(values->data(), dtype_of<T>(), out),
                         a = nhwc_view(argmax->data(), dtype_of<Targmax>(), out);
    serve(c, 0, [&](char* m, size_t n) {
      return poolgen_max_pool(2, &i, &v, &a, &window_.options, m, n);
    });
  }

 private:
  Window window_;
};

// The gradient: grad_input (the input's shape) gets each pooled gradient at its argmax, summed
// where windows share a maximum. An argmax outside its image is InvalidArgument here, where
// TensorFlow's own kernel aborts the process.
template <typename T>
class MaxPoolGradWithArgmax : public OpKernel {
 public:
  explicit MaxPoolGradWithArgmax(OpKernelConstruction* c) : OpKernel(c), window_(c) {}

  void Compute(OpKernelContext* c) override {
    const Tensor &input = c->input(0), &grad = c->input(1), &argmax = c->input(2);
    int64_t in[4], out[4];
    OP_REQUIRES_OK(c, window_.pooled(input, in, out));
    const TensorShape pooled({out[0], out[2], out[3], out[1]});
    OP_REQUIRES(c, grad.shape() == pooled,
                errors::InvalidArgument("Expected grad shape to be ", pooled.DebugString(),
                                        ", but got ", grad.shape().DebugString()));
    OP_REQUIRES(c, argmax.shape() == pooled,
                errors::InvalidArgument("Expected argmax shape to be ", pooled.DebugString(),
                                        ", but got ", argmax.shape().DebugString()));
    Tensor* grad_input = nullptr;
    OP_REQUIRES_OK(c, c->allocate_output(0, input.shape(), &grad_input));
    const poolgen_tensor g = nhwc_view(grad.data(), dtype_of<T>(), out),
                         a = nhwc_view(argmax.data(), POOLGEN_I64, out),
                         gi = nhwc_view(grad_input->data(), dtype_of<T>(), in);
    serve(c, 1, [&](char* m, size_t n) {
      return poolgen_max_pool_backward(2, &g, &a, &gi, &window_.options, m, n);
    });
  }

 private:
  Window window_;
};

// Whether this poolgen build has the kernels a dtype needs (a 1x1x1x1 call of each op when the
// library loads): a dtype it left out (CMake's POOLGEN_VALUE_TYPES) stays TensorFlow's.
bool built(int dtype, int index_dtype, bool gradient) {
  poolgen_pool_options o{};
  o.kernel_size[0] = o.kernel_size[1] = 1;
  o.index_format = POOLGEN_INDEX_TENSORFLOW;
  alignas(8) unsigned char in[8] = {}, out[8] = {}, argmax[8] = {};
  const int64_t one[4] = {1, 1, 1, 1};
  const poolgen_tensor a = nhwc_view(in, dtype, one), b = nhwc_view(out, dtype, one),
                       i = nhwc_view(argmax, index_dtype, one);
  const Outcome r = poolgen_bridge::call([&](char* m, size_t n) {
    return gradient ? poolgen_max_pool_backward(2, &a, &i, &b, &o, m, n)
                    : poolgen_max_pool(2, &a, &b, &i, &o, m, n);
  });
  return r.kind != POOLGEN_ERROR_NO_KERNEL;
}

template <typename Kernel>
OpKernel* create(OpKernelConstruction* c) {
  return new Kernel(c);
}

// Registers Kernel for `op` on the CPU with these types, above TensorFlow's own kernels
// (priority 0).
template <typename Kernel, typename T, typename Targmax>
void register_kernel_of(const char* op) {
  const kernel_factory::OpKernelRegistrar registrar(register_kernel::Name(op)
                                                        .Device(DEVICE_CPU)
                                                        .template TypeConstraint<T>("T")
                                                        .template TypeConstraint<Targmax>("Targmax")
                                                        .Priority(1)
                                                        .Build(),
                                                    op, &create<Kernel>);
}

// Each dtype TensorFlow registers that this poolgen build has, with both argmax types; the
// gradient for floating-point gradients (poolgen's backward adds in the gradient's type) with
// TensorFlow's int64 argmax.
template <typename T>
void register_both() {
  if (built(dtype_of<T>(), POOLGEN_I32, false)) {
    register_kernel_of<MaxPoolWithArgmax<T, int32_t>, T, int32_t>("MaxPoolWithArgmax");
  }
  if (built(dtype_of<T>(), POOLGEN_I64, false)) {
    register_kernel_of<MaxPoolWithArgmax<T, int64_t>, T, int64_t>("MaxPoolWithArgmax");
  }
  if constexpr (!std::is_integral_v<T>) {
    if (built(dtype_of<T>(), POOLGEN_I64, true)) {
      register_kernel_of<MaxPoolGradWithArgmax<T>, T, int64_t>("MaxPoolGradWithArgmax");
    }
  }
}

void register_all() {
  register_both<float>();
  register_both<double>();
  register_both<Eigen::half>();
  register_both<bfloat16>();
  register_both<int8_t>();
  register_both<uint8_t>();
  register_both<int16_t>();
  register_both<int32_t>();
  register_both<int64_t>();
}

}  // namespace
}  // namespace poolgen_tensorflow

// Registers the kernels; poolgen.tensorflow calls it (ctypes) once TensorFlow has loaded the
// library, rather than a static initializer asking poolgen which kernels it has before
// poolgen's own static initializers (its kernel tables) have run.
extern "C" __attribute__((visibility("default"))) void poolgen_tensorflow_register() {
  static const bool once = (poolgen_tensorflow::register_all(), true);
  (void)once;
}

// For poolgen.tensorflow.stats() (ctypes): calls served by the forward op (0) and the gradient
// (1).
extern "C" __attribute__((visibility("default"))) int64_t poolgen_tensorflow_served(int which) {
  return which == 0 || which == 1 ? poolgen_tensorflow::served[which].load() : -1;
}
