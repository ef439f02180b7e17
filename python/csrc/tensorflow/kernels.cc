// poolgen as TensorFlow's CPU kernels of its own ops MaxPoolWithArgmax and MaxPoolGradWithArgmax
// (tf.nn.max_pool_with_argmax and its gradient): registered at a higher priority than
// TensorFlow's, so that a graph, tf.function or Keras model that uses those ops runs poolgen once
// this library is loaded (tf.load_op_library, by `import poolgen.tensorflow`) before their
// first use. And the ops TensorFlow lacks, in its conventions: 3-D pooling with argmax and its
// gradient, unpooling (2-D and 3-D) by TensorFlow's argmax and its gradient. TensorFlow's
// channels-last tensors are poolgen's channels-last views; its SAME / VALID windows, first-tap
// NaN rule and argmax formats are PoolOptions' (docs/semantics.md, "Other frameworks"). Built
// against the installed TensorFlow (python/setup.py).
#include <tensorflow/core/framework/common_shape_fns.h>
#include <tensorflow/core/framework/op.h>
#include <tensorflow/core/framework/op_kernel.h>

#include <algorithm>
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

// Calls served, for stats(), per op: in kOps' order.
constexpr const char* kOps[] = {"MaxPoolWithArgmax",         "MaxPoolGradWithArgmax",
                                "PoolgenMaxPool3DWithArgmax", "PoolgenMaxPool3DGradWithArgmax",
                                "PoolgenMaxUnpool",           "PoolgenMaxUnpoolGrad"};
constexpr int kOpCount = sizeof kOps / sizeof kOps[0];
std::atomic<int64_t> served[kOpCount];

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

// A channels-last tensor's memory (TensorFlow's N, spatial..., C: `tf_shape`) as poolgen's
// (N, C, spatial...) view.
poolgen_tensor channels_last_view(const void* data, int dtype, const TensorShape& tf_shape) {
  poolgen_tensor t{};
  t.data = const_cast<void*>(data);
  t.dtype = dtype;
  t.rank = tf_shape.dims();
  const int last = t.rank - 1;
  int64_t stride = 1;
  for (int d = last; d >= 0; --d) {  // N stays first, C comes second, spatial d moves to d + 1
    const int to = d == last ? 1 : d == 0 ? 0 : d + 1;
    t.shape[to] = tf_shape.dim_size(d);
    t.strides[to] = stride;
    stride *= tf_shape.dim_size(d);
  }
  return t;
}

// poolgen's (N, C, spatial...) extents as TensorFlow's channels-last shape.
TensorShape channels_last_shape(const int64_t* nc_spatial, int rank) {
  TensorShape shape({nc_spatial[0]});
  for (int d = 2; d < rank; ++d) shape.AddDim(nc_spatial[d]);
  shape.AddDim(nc_spatial[1]);
  return shape;
}

// TensorFlow's error for a poolgen failure: InvalidArgument (the shapes, the argmax), or
// Unimplemented where poolgen lacks a kernel.
Status as_status(const Outcome& r) {
  if (r.ok()) return OkStatus();
  if (r.kind == POOLGEN_ERROR_NO_KERNEL) return errors::Unimplemented("poolgen: ", r.message);
  return errors::InvalidArgument(r.message);
}

// The pooling ops' window attributes (ksize and strides over all rank dimensions), checked as
// TensorFlow checks them, as poolgen's options.
struct Window {
  std::vector<int32> ksize, strides;
  int nd = 0;
  poolgen_pool_options options{};

  explicit Window(OpKernelConstruction* c) {
    std::string padding;
    bool include_batch_in_index = false;
    OP_REQUIRES_OK(c, c->GetAttr("ksize", &ksize));
    OP_REQUIRES_OK(c, c->GetAttr("strides", &strides));
    OP_REQUIRES_OK(c, c->GetAttr("padding", &padding));
    OP_REQUIRES_OK(c, c->GetAttr("include_batch_in_index", &include_batch_in_index));
    const int rank = c->def().op() == "MaxPoolWithArgmax" || c->def().op() ==
                     "MaxPoolGradWithArgmax" ? 4 : 5;
    OP_REQUIRES(c, int(ksize.size()) == rank,
                errors::InvalidArgument("Sliding window ksize field must specify ", rank,
                                        " dimensions"));
    OP_REQUIRES(c, int(strides.size()) == rank,
                errors::InvalidArgument("Sliding window stride field must specify ", rank,
                                        " dimensions"));
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
    OP_REQUIRES(c, ksize[rank - 1] == 1 && strides[rank - 1] == 1,
                errors::Unimplemented("poolgen.tensorflow pools spatial windows only (ksize and "
                                      "strides 1 in the depth dimension), got ksize ",
                                      ksize[rank - 1], " and stride ", strides[rank - 1],
                                      " there"));
    nd = rank - 2;
    for (int i = 0; i < nd; ++i) {
      options.kernel_size[i] = ksize[1 + i];
      options.stride[i] = strides[1 + i];
      options.dilation[i] = 1;
    }
    options.auto_pad = padding == "SAME" ? POOLGEN_SAME_UPPER : POOLGEN_VALID;
    options.max_rule = POOLGEN_MAX_FIRST_TAP;
    options.pool_rule = POOLGEN_POOL_RULE_TENSORFLOW;
    options.index_format =
        include_batch_in_index ? POOLGEN_INDEX_TENSORFLOW_WITH_BATCH : POOLGEN_INDEX_TENSORFLOW;
  }

  // The pooled shape of a channels-last input, or TensorFlow's error for a window that does
  // not fit.
  Status pooled(const Tensor& input, TensorShape* out_shape) const {
    if (input.dims() != nd + 2) {
      return errors::InvalidArgument("tensor_in must be ", nd + 2, "-dimensional (",
                                     input.dims(), ")");
    }
    const poolgen_tensor in = channels_last_view(nullptr, POOLGEN_F32, input.shape());
    int64_t out[5];
    const Outcome r = poolgen_bridge::call([&](char* m, size_t n) {
      return poolgen_max_pool_output_shape(nd, in.rank, in.shape, &options, out, m, n);
    });
    if (r.ok()) {
      *out_shape = channels_last_shape(out, in.rank);
      return OkStatus();
    }
    if (r.argument != "input") return as_status(r);
    for (int i = 0; i < nd; ++i) {  // TensorFlow's words for the dimension that does not fit
      const int64_t size = (in.shape[2 + i] - ksize[1 + i] + strides[1 + i]) / strides[1 + i];
      if (size < 0) {
        return errors::InvalidArgument("Computed output size would be negative: ", size,
                                       " [input_size: ", in.shape[2 + i],
                                       ", effective_filter_size: ", ksize[1 + i],
                                       ", stride: ", strides[1 + i], "]");
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

// The adapter's kernels: each runs its poolgen calls on the device's threads and counts, for
// stats(), those of its op that succeed (the op's counter found once, as TensorFlow makes the
// kernel, not on every call).
class ServingKernel : public OpKernel {
 public:
  explicit ServingKernel(OpKernelConstruction* c) : OpKernel(c) {
    const auto op = std::find(std::begin(kOps), std::end(kOps), c->def().op());
    if (op != std::end(kOps)) served_ = &served[op - kOps];
  }

 protected:
  // Runs one poolgen call, f(message, size).
  template <typename F>
  void serve(OpKernelContext* c, F f) const {
    follow_threads(c);
    const Status status = as_status(poolgen_bridge::call(f));
    if (!status.ok()) return c->SetStatus(status);
    if (served_) served_->fetch_add(1, std::memory_order_relaxed);
  }

 private:
  std::atomic<int64_t>* served_ = nullptr;
};

// MaxPoolWithArgmax (2-D) and PoolgenMaxPool3DWithArgmax.
template <typename T, typename Targmax>
class MaxPoolWithArgmax : public ServingKernel {
 public:
  explicit MaxPoolWithArgmax(OpKernelConstruction* c) : ServingKernel(c), window_(c) {}

  void Compute(OpKernelContext* c) override {
    const Tensor& input = c->input(0);
    TensorShape shape;
    OP_REQUIRES_OK(c, window_.pooled(input, &shape));
    Tensor *values = nullptr, *argmax = nullptr;
    OP_REQUIRES_OK(c, c->allocate_output(0, shape, &values));
    OP_REQUIRES_OK(c, c->allocate_output(1, shape, &argmax));
    const poolgen_tensor i = channels_last_view(input.data(), dtype_of<T>(), input.shape()),
                         v = channels_last_view(values->data(), dtype_of<T>(), shape),
                         a = channels_last_view(argmax->data(), dtype_of<Targmax>(), shape);
    serve(c, [&](char* m, size_t n) {
      return poolgen_max_pool(window_.nd, &i, &v, &a, &window_.options, m, n);
    });
  }

 private:
  Window window_;
};

// The gradient: grad_input (the input's shape) gets each pooled gradient at its argmax, summed
// where windows share a maximum. An argmax outside its image is InvalidArgument here, where
// TensorFlow's own kernel aborts the process.
template <typename T, typename Targmax>
class MaxPoolGradWithArgmax : public ServingKernel {
 public:
  explicit MaxPoolGradWithArgmax(OpKernelConstruction* c)
      : ServingKernel(c), window_(c) {}

  void Compute(OpKernelContext* c) override {
    const Tensor &input = c->input(0), &grad = c->input(1), &argmax = c->input(2);
    TensorShape pooled;
    OP_REQUIRES_OK(c, window_.pooled(input, &pooled));
    OP_REQUIRES(c, grad.shape() == pooled,
                errors::InvalidArgument("Expected grad shape to be ", pooled.DebugString(),
                                        ", but got ", grad.shape().DebugString()));
    OP_REQUIRES(c, argmax.shape() == pooled,
                errors::InvalidArgument("Expected argmax shape to be ", pooled.DebugString(),
                                        ", but got ", argmax.shape().DebugString()));
    Tensor* grad_input = nullptr;
    OP_REQUIRES_OK(c, c->allocate_output(0, input.shape(), &grad_input));
    const poolgen_tensor g = channels_last_view(grad.data(), dtype_of<T>(), pooled),
                         a = channels_last_view(argmax.data(), dtype_of<Targmax>(), pooled),
                         gi = channels_last_view(grad_input->data(), dtype_of<T>(),
                                                 input.shape());
    serve(c, [&](char* m, size_t n) {
      return poolgen_max_pool_backward(window_.nd, &g, &a, &gi, &window_.options, m, n);
    });
  }

 private:
  Window window_;
};

// Unpooling by TensorFlow's argmax: the output (N, output_size..., C) is zero but for each
// value, stored at its argmax, the latest in NHWC order winning where two name one place
// (docs/semantics.md, "index_format"). An argmax outside the output is InvalidArgument.
template <typename T, typename Targmax>
class MaxUnpool : public ServingKernel {
 public:
  explicit MaxUnpool(OpKernelConstruction* c) : ServingKernel(c) {
    bool with_batch = false;
    OP_REQUIRES_OK(c, c->GetAttr("include_batch_in_index", &with_batch));
    options_.index_format =
        with_batch ? POOLGEN_INDEX_TENSORFLOW_WITH_BATCH : POOLGEN_INDEX_TENSORFLOW;
  }

  void Compute(OpKernelContext* c) override {
    const Tensor &values = c->input(0), &argmax = c->input(1), &size = c->input(2);
    const int rank = values.dims(), nd = rank - 2;
    OP_REQUIRES(c, rank == 4 || rank == 5,
                errors::InvalidArgument("values must be 4- or 5-dimensional (N, spatial..., C), "
                                        "got ", values.shape().DebugString()));
    OP_REQUIRES(c, argmax.shape() == values.shape(),
                errors::InvalidArgument("Expected argmax shape to be ",
                                        values.shape().DebugString(), " (the values'), but got ",
                                        argmax.shape().DebugString()));
    OP_REQUIRES(c, size.dims() == 1 && size.NumElements() == nd,
                errors::InvalidArgument("output_size must hold ", nd,
                                        " spatial extents, got shape ",
                                        size.shape().DebugString()));
    poolgen_unpool_options o = options_;
    o.output_size_len = nd;
    // The output's shape is checked before TensorShape sees it: its AddDim aborts the process
    // on an element count past int64.
    TensorShape shape({values.dim_size(0)});
    int64_t elements = values.dim_size(0) * values.dim_size(rank - 1);
    for (int i = 0; i < nd; ++i) {
      o.output_size[i] = size.vec<int64_t>()(i);
      OP_REQUIRES(c, o.output_size[i] > 0,
                  errors::InvalidArgument("output_size must be positive, got ",
                                          o.output_size[i], " in spatial dimension ", i));
      OP_REQUIRES(c, !__builtin_mul_overflow(elements, o.output_size[i], &elements),
                  errors::InvalidArgument(
                      "output_size: expected an output (N, output_size..., C) of at most 2^63 - "
                      "1 elements, got output_size ", size.SummarizeValue(nd), " for values ",
                      values.shape().DebugString()));
      OP_REQUIRES_OK(c, shape.AddDimWithStatus(o.output_size[i]));
    }
    OP_REQUIRES_OK(c, shape.AddDimWithStatus(values.dim_size(rank - 1)));
    Tensor* output = nullptr;
    OP_REQUIRES_OK(c, c->allocate_output(0, shape, &output));
    const poolgen_tensor v = channels_last_view(values.data(), dtype_of<T>(), values.shape()),
                         a = channels_last_view(argmax.data(), dtype_of<Targmax>(),
                                                argmax.shape()),
                         out = channels_last_view(output->data(), dtype_of<T>(), shape);
    serve(c, [&](char* m, size_t n) { return poolgen_max_unpool(nd, &v, &a, &out, &o, m, n); });
  }

 private:
  poolgen_unpool_options options_{};
};

// Its gradient: each value's gradient is the output's gradient at its argmax (every duplicate
// reads it, as PyTorch's unpooling gradient does). A TensorFlow argmax is an offset into each
// batch item's (or, with the batch, the whole) NHWC memory, which is a plane offset of that
// memory seen as one 1-D plane per item: poolgen's gather over those planes.
template <typename T, typename Targmax>
class MaxUnpoolGrad : public ServingKernel {
 public:
  explicit MaxUnpoolGrad(OpKernelConstruction* c) : ServingKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("include_batch_in_index", &with_batch_));
  }

  void Compute(OpKernelContext* c) override {
    const Tensor &grad = c->input(0), &argmax = c->input(1);
    OP_REQUIRES(c, (grad.dims() == 4 || grad.dims() == 5) && argmax.dims() == grad.dims() &&
                       argmax.dim_size(0) == grad.dim_size(0) &&
                       argmax.dim_size(grad.dims() - 1) == grad.dim_size(grad.dims() - 1),
                errors::InvalidArgument("Expected grad (N, spatial..., C) and argmax (N, "
                                        "pooled..., C) of one rank, 4 or 5, with N and C in "
                                        "common, got ", grad.shape().DebugString(), " and ",
                                        argmax.shape().DebugString()));
    Tensor* grad_values = nullptr;
    OP_REQUIRES_OK(c, c->allocate_output(0, argmax.shape(), &grad_values));
    // Each item's memory as one channel of one spatial dimension (the whole batch's: with it).
    const int64_t items = with_batch_ ? 1 : grad.dim_size(0);
    const auto flat = [&](const Tensor& t) {
      return TensorShape({items, items ? t.NumElements() / items : 0, 1});
    };
    const poolgen_tensor g = channels_last_view(grad.data(), dtype_of<T>(), flat(grad)),
                         a = channels_last_view(argmax.data(), dtype_of<Targmax>(), flat(argmax)),
                         gv = channels_last_view(grad_values->data(), dtype_of<T>(),
                                                 flat(argmax));
    poolgen_unpool_options o{};
    o.output_size_len = 1;
    o.output_size[0] = g.shape[2];
    serve(c, [&](char* m, size_t n) {
      return poolgen_max_unpool_backward(1, &g, &a, &gv, &o, m, n);
    });
  }

 private:
  bool with_batch_ = false;
};

// Whether this poolgen build has the kernels a dtype needs (a 1x1x1x1 call of each op when the
// library loads): a dtype it left out (CMake's POOLGEN_VALUE_TYPES) stays TensorFlow's.
bool built(int dtype, int index_dtype, bool gradient) {
  poolgen_pool_options o{};
  o.kernel_size[0] = o.kernel_size[1] = 1;
  o.index_format = POOLGEN_INDEX_TENSORFLOW;
  alignas(8) unsigned char in[8] = {}, out[8] = {}, argmax[8] = {};
  const TensorShape one({1, 1, 1, 1});
  const poolgen_tensor a = channels_last_view(in, dtype, one),
                       b = channels_last_view(out, dtype, one),
                       i = channels_last_view(argmax, index_dtype, one);
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

// Registers Kernel for `op` on the CPU with these types; TensorFlow's own ops' kernels above
// TensorFlow's (priority 0).
template <template <typename, typename> class Kernel, typename T, typename Targmax>
void register_kernel_of(const char* op) {
  const kernel_factory::OpKernelRegistrar registrar(register_kernel::Name(op)
                                                        .Device(DEVICE_CPU)
                                                        .template TypeConstraint<T>("T")
                                                        .template TypeConstraint<Targmax>("Targmax")
                                                        .Priority(1)
                                                        .Build(),
                                                    op, &create<Kernel<T, Targmax>>);
}

// TensorFlow's ops for each dtype TensorFlow registers that this poolgen build has (the rest
// stay TensorFlow's), with both argmax types; the gradient for floating-point gradients
// (poolgen's backward adds in the gradient's type) with TensorFlow's int64 argmax. poolgen's own
// ops for every dtype: poolgen says which its build lacks (UnimplementedError).
template <typename T, typename Targmax>
void register_ops() {
  constexpr bool floating = !std::is_integral_v<T>;
  if (built(dtype_of<T>(), dtype_of<Targmax>(), false)) {
    register_kernel_of<MaxPoolWithArgmax, T, Targmax>("MaxPoolWithArgmax");
  }
  if (floating && std::is_same_v<Targmax, int64_t> &&
      built(dtype_of<T>(), dtype_of<Targmax>(), true)) {
    register_kernel_of<MaxPoolGradWithArgmax, T, Targmax>("MaxPoolGradWithArgmax");
  }
  register_kernel_of<MaxPoolWithArgmax, T, Targmax>("PoolgenMaxPool3DWithArgmax");
  register_kernel_of<MaxUnpool, T, Targmax>("PoolgenMaxUnpool");
  if constexpr (floating) {
    register_kernel_of<MaxPoolGradWithArgmax, T, Targmax>("PoolgenMaxPool3DGradWithArgmax");
    register_kernel_of<MaxUnpoolGrad, T, Targmax>("PoolgenMaxUnpoolGrad");
  }
}

template <typename T>
void register_both() {
  register_ops<T, int32_t>();
  register_ops<T, int64_t>();
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

// The ops TensorFlow lacks. Their shapes: pooling's as MaxPool3D's; unpooling's (N,
// output_size..., C) from a constant output_size where the graph has one; its gradient's the
// argmax's.
Status unpool_shape(shape_inference::InferenceContext* c) {
  shape_inference::ShapeHandle values, spatial, batch, depth, out;
  TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(0), 4, &values));
  TF_RETURN_IF_ERROR(c->WithRankAtMost(values, 5, &values));
  TF_RETURN_IF_ERROR(c->Merge(values, c->input(1), &values));
  TF_RETURN_IF_ERROR(c->MakeShapeFromShapeTensor(2, &spatial));
  TF_RETURN_IF_ERROR(c->Subshape(values, 0, 1, &batch));
  TF_RETURN_IF_ERROR(c->Subshape(values, -1, &depth));
  TF_RETURN_IF_ERROR(c->Concatenate(batch, spatial, &out));
  TF_RETURN_IF_ERROR(c->Concatenate(out, depth, &out));
  c->set_output(0, out);
  return OkStatus();
}

REGISTER_OP("PoolgenMaxPool3DWithArgmax")
    .Input("input: T")
    .Output("output: T")
    .Output("argmax: Targmax")
    .Attr("ksize: list(int) >= 5")
    .Attr("strides: list(int) >= 5")
    .Attr("padding: {'SAME', 'VALID'}")
    .Attr("include_batch_in_index: bool = false")
    .Attr("Targmax: {int32, int64} = DT_INT64")
    .Attr("T: realnumbertype")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      TF_RETURN_IF_ERROR(shape_inference::Pool3DShape(c));
      c->set_output(1, c->output(0));
      return OkStatus();
    });

REGISTER_OP("PoolgenMaxPool3DGradWithArgmax")
    .Input("input: T")
    .Input("grad: T")
    .Input("argmax: Targmax")
    .Output("output: T")
    .Attr("ksize: list(int) >= 5")
    .Attr("strides: list(int) >= 5")
    .Attr("padding: {'SAME', 'VALID'}")
    .Attr("include_batch_in_index: bool = false")
    .Attr("Targmax: {int32, int64}")
    .Attr("T: realnumbertype")
    .SetShapeFn(shape_inference::UnchangedShape);

REGISTER_OP("PoolgenMaxUnpool")
    .Input("values: T")
    .Input("argmax: Targmax")
    .Input("output_size: int64")
    .Output("output: T")
    .Attr("include_batch_in_index: bool = false")
    .Attr("Targmax: {int32, int64} = DT_INT64")
    .Attr("T: realnumbertype")
    .SetShapeFn(unpool_shape);

REGISTER_OP("PoolgenMaxUnpoolGrad")
    .Input("grad: T")
    .Input("argmax: Targmax")
    .Output("output: T")
    .Attr("include_batch_in_index: bool = false")
    .Attr("Targmax: {int32, int64}")
    .Attr("T: realnumbertype")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(1));
      return OkStatus();
    });

}  // namespace
}  // namespace poolgen_tensorflow

// Registers the kernels; poolgen.tensorflow calls it (ctypes) once TensorFlow has loaded the
// library, rather than a static initializer asking poolgen which kernels it has before
// poolgen's own static initializers (its kernel tables) have run.
extern "C" __attribute__((visibility("default"))) void poolgen_tensorflow_register() {
  static const bool once = (poolgen_tensorflow::register_all(), true);
  (void)once;
}

// For poolgen.tensorflow.stats() (ctypes): calls served by op `which` (kOps' order), -1 past
// them.
extern "C" __attribute__((visibility("default"))) int64_t poolgen_tensorflow_served(int which) {
  using poolgen_tensorflow::kOpCount;
  return which >= 0 && which < kOpCount ? poolgen_tensorflow::served[which].load() : -1;
}
