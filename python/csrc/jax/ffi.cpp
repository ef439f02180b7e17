// poolgen as XLA FFI custom calls for JAX's CPU backend (poolgen.jax): max pooling with plane
// indices, max unpooling by them, and both gradients, one handler each, over every dtype the C
// API takes (the handlers read the buffers' element types, poolgen refuses what it lacks). A
// tensor is (batch..., C, spatial...) or, channels-last, (batch..., spatial..., C): every
// dimension before the last nd + 1 is folded into poolgen's N, so that vmap's extra leading
// dimensions cost one call, and a channels-last buffer is poolgen's channels-last view (strides
// only, no copy). Each handler comes twice: for XLA's CPU backend, and for its CUDA backend on
// XLA's stream (`_cuda`, which poolgen.jax registers where JAX has a CUDA device: poolgen's CUDA
// kernels, owed a run on a GPU). Plus C entry points (ctypes) for the output shapes poolgen.jax
// declares at trace time, the thread count and call counters. Built against jaxlib's headers
// (python/setup.py).
#include <xla/ffi/api/ffi.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "../bridge/bridge.hpp"

namespace ffi = xla::ffi;

namespace poolgen_jax {
namespace {

using poolgen_bridge::Outcome;

// Successful calls per handler (for poolgen.jax's tests: one call per vmap), in this order.
enum Op { kMaxPool, kMaxPoolBackward, kMaxUnpool, kMaxUnpoolBackward, kOpCount };
std::atomic<int64_t> served[kOpCount];

// The C API sets the thread count but has no way to read it: the last count set here (0: the
// default, or never set).
std::atomic<int32_t> threads_set{0};

// Where a handler runs: XLA's CPU backend, or its CUDA backend on XLA's stream.
struct Place {
  int32_t device;  // POOLGEN_CPU or POOLGEN_CUDA
  void* stream;    // the CUstream (CUDA)
};

// poolgen's dtype of an XLA element type; -1 where poolgen has none.
int dtype_of(ffi::DataType t) {
  switch (t) {
    case ffi::DataType::F32: return POOLGEN_F32;
    case ffi::DataType::F64: return POOLGEN_F64;
    case ffi::DataType::F16: return POOLGEN_F16;
    case ffi::DataType::BF16: return POOLGEN_BF16;
    case ffi::DataType::S8: return POOLGEN_I8;
    case ffi::DataType::U8: return POOLGEN_U8;
    case ffi::DataType::S16: return POOLGEN_I16;
    case ffi::DataType::S32: return POOLGEN_I32;
    case ffi::DataType::S64: return POOLGEN_I64;
    default: return -1;
  }
}

// A row-major JAX array of `rank` dims as poolgen's (N, C, spatial...) view: N the product of
// the leading dims, C and the nd spatial dims the last nd + 1 in the layout's order.
Outcome view(const char* argument, void* data, int dtype, const int64_t* dims, int64_t rank,
             int nd, bool channels_last, poolgen_tensor* t) {
  if (nd < 1 || nd > 3) {
    return poolgen_bridge::fail(POOLGEN_INVALID_ARGUMENT, POOLGEN_ERROR_OPTION, "nd",
                                ": expected 1, 2 or 3 spatial dimensions, got ", nd);
  }
  if (rank < nd + 1) {
    return poolgen_bridge::fail(POOLGEN_INVALID_ARGUMENT, POOLGEN_ERROR_TENSOR, argument,
                                ": expected at least ", nd + 1, " dimensions (",
                                channels_last ? "spatial..., C" : "C, spatial...", "), got ",
                                rank);
  }
  if (dtype < 0) {
    return poolgen_bridge::fail(POOLGEN_INVALID_ARGUMENT, POOLGEN_ERROR_TENSOR, argument,
                                ": expected float32, float64, float16, bfloat16, int8, uint8, "
                                "int16, int32 or int64, got another element type");
  }
  *t = poolgen_tensor{};
  t->data = data;
  t->dtype = dtype;
  t->rank = nd + 2;
  const int64_t first = rank - nd - 1;  // the item's first dim (C or the first spatial one)
  int64_t stride = 1;
  for (int p = nd; p >= 0; --p) {  // the item's dims, innermost first
    const int to = channels_last ? (p == nd ? 1 : 2 + p) : (p == 0 ? 1 : 1 + p);
    t->shape[to] = dims[first + p];
    t->strides[to] = stride;
    stride *= dims[first + p];
  }
  t->shape[0] = 1;
  for (int64_t d = 0; d < first; ++d) t->shape[0] *= dims[d];
  t->strides[0] = stride;
  return {};
}

Outcome view(const char* argument, const ffi::AnyBuffer& b, int nd, bool channels_last,
             poolgen_tensor* t) {
  const auto dims = b.dimensions();
  return view(argument, b.untyped_data(), dtype_of(b.element_type()), dims.begin(), dims.size(),
              nd, channels_last, t);
}

// The pooling window, as the attributes (and the shape entry point) give it: nd entries each.
struct Window {
  const int64_t *kernel, *stride, *padding_low, *padding_high, *dilation;
  bool ceil_mode;
};

// PyTorch's pooling, with the end padding given apart (poolgen's padding_end) so that
// asymmetric (SAME) padding needs no padded copy.
poolgen_pool_options pool_options(int nd, const Window& w) {
  poolgen_pool_options o{};
  for (int i = 0; i < nd; ++i) {
    o.kernel_size[i] = w.kernel[i];
    o.stride[i] = w.stride[i];
    o.padding[i] = w.padding_low[i];
    o.padding_end[i] = w.padding_high[i];
    o.dilation[i] = w.dilation[i];
  }
  o.padding_end_given = 1;
  o.ceil_mode = w.ceil_mode;
  return o;
}

// Unpooling by the indices alone: the output's spatial extents (`out`, a poolgen view) say
// where each plane offset lands; the window only chose them (poolgen.jax).
poolgen_unpool_options unpool_options(int nd, const poolgen_tensor& out, Place place) {
  poolgen_unpool_options o{};
  o.device = place.device;
  o.cuda_stream = place.stream;
  o.output_size_len = nd;
  for (int i = 0; i < nd; ++i) o.output_size[i] = out.shape[2 + i];
  return o;
}

ffi::Error as_error(const Outcome& r) {
  if (r.ok()) return ffi::Error::Success();
  ffi::ErrorCode code = ffi::ErrorCode::kInternal;
  switch (r.code) {
    case POOLGEN_INVALID_ARGUMENT: code = ffi::ErrorCode::kInvalidArgument; break;
    case POOLGEN_INDEX_OUT_OF_RANGE: code = ffi::ErrorCode::kOutOfRange; break;
    case POOLGEN_UNSUPPORTED: code = ffi::ErrorCode::kUnimplemented; break;
    default: break;
  }
  return ffi::Error(code, "poolgen: " + r.message);
}

// On CUDA an invalid index is found once the kernels have run on the stream, and reported at
// the next call (poolgen's cuda_check_reports), as poolgen.torch reports it.
Outcome earlier_cuda_reports() {
  Outcome r = poolgen_bridge::call(
      [](char* m, size_t n) { return poolgen_cuda_check_reports(0, m, n); });
  if (!r.ok()) {
    r.message = "an earlier call on CUDA found an invalid index once its kernels had run "
                "(nothing was written through it): " + r.message;
  }
  return r;
}

// Describes the three buffers to poolgen (on `place`) and runs f(a, b, c, message, size) on
// them, counting the call as `op`'s when it succeeds.
template <typename F>
ffi::Error serve(Op op, Place place, int64_t nd, bool channels_last, const char* const names[3],
                 const ffi::AnyBuffer& a, const ffi::AnyBuffer& b, const ffi::AnyBuffer& c,
                 F f) {
  poolgen_tensor ta, tb, tc;
  Outcome r = view(names[0], a, nd, channels_last, &ta);
  if (r.ok()) r = view(names[1], b, nd, channels_last, &tb);
  if (r.ok()) r = view(names[2], c, nd, channels_last, &tc);
  ta.device = tb.device = tc.device = place.device;
  if (r.ok() && place.device == POOLGEN_CUDA) r = earlier_cuda_reports();
  if (r.ok()) {
    r = poolgen_bridge::call([&](char* m, size_t n) { return f(ta, tb, tc, m, n); });
  }
  if (r.ok()) served[op].fetch_add(1, std::memory_order_relaxed);
  return as_error(r);
}

// The pooling handlers' options from their attributes, each list nd entries long (poolgen.jax
// expands them).
ffi::Error pool_options_of(Place place, int64_t nd, bool ceil_mode,
                           ffi::Span<const int64_t> kernel,
                           ffi::Span<const int64_t> stride, ffi::Span<const int64_t> padding_low,
                           ffi::Span<const int64_t> padding_high,
                           ffi::Span<const int64_t> dilation, poolgen_pool_options* o) {
  for (size_t s : {kernel.size(), stride.size(), padding_low.size(), padding_high.size(),
                   dilation.size()}) {
    if (int64_t(s) != nd) {
      return ffi::Error::InvalidArgument("poolgen: window attributes must hold nd entries each");
    }
  }
  *o = pool_options(nd, {kernel.begin(), stride.begin(), padding_low.begin(),
                         padding_high.begin(), dilation.begin(), ceil_mode});
  o->device = place.device;
  o->cuda_stream = place.stream;
  return ffi::Error::Success();
}

ffi::Error max_pool(Place place, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> values,
                    ffi::Result<ffi::AnyBuffer> indices, int64_t nd, bool channels_last,
                    bool ceil_mode, ffi::Span<const int64_t> kernel,
                    ffi::Span<const int64_t> stride, ffi::Span<const int64_t> padding_low,
                    ffi::Span<const int64_t> padding_high, ffi::Span<const int64_t> dilation) {
  poolgen_pool_options o;
  if (auto e = pool_options_of(place, nd, ceil_mode, kernel, stride, padding_low, padding_high,
                               dilation, &o);
      e.failure()) {
    return e;
  }
  static const char* const names[] = {"input", "values", "indices"};
  return serve(kMaxPool, place, nd, channels_last, names, x, *values, *indices,
               [&](auto& i, auto& v, auto& a, char* m, size_t n) {
                 return poolgen_max_pool(nd, &i, &v, &a, &o, m, n);
               });
}

ffi::Error max_pool_backward(Place place, ffi::AnyBuffer grad_output, ffi::AnyBuffer indices,
                             ffi::Result<ffi::AnyBuffer> grad_input, int64_t nd,
                             bool channels_last, bool ceil_mode, ffi::Span<const int64_t> kernel,
                             ffi::Span<const int64_t> stride,
                             ffi::Span<const int64_t> padding_low,
                             ffi::Span<const int64_t> padding_high,
                             ffi::Span<const int64_t> dilation) {
  poolgen_pool_options o;
  if (auto e = pool_options_of(place, nd, ceil_mode, kernel, stride, padding_low, padding_high,
                               dilation, &o);
      e.failure()) {
    return e;
  }
  static const char* const names[] = {"grad_output", "indices", "grad_input"};
  return serve(kMaxPoolBackward, place, nd, channels_last, names, grad_output, indices,
               *grad_input,
               [&](auto& g, auto& a, auto& gi, char* m, size_t n) {
                 return poolgen_max_pool_backward(nd, &g, &a, &gi, &o, m, n);
               });
}

ffi::Error max_unpool(Place place, ffi::AnyBuffer values, ffi::AnyBuffer indices,
                      ffi::Result<ffi::AnyBuffer> output, int64_t nd, bool channels_last) {
  static const char* const names[] = {"values", "indices", "output"};
  return serve(kMaxUnpool, place, nd, channels_last, names, values, indices, *output,
               [&](auto& v, auto& a, auto& out, char* m, size_t n) {
                 const poolgen_unpool_options o = unpool_options(nd, out, place);
                 return poolgen_max_unpool(nd, &v, &a, &out, &o, m, n);
               });
}

ffi::Error max_unpool_backward(Place place, ffi::AnyBuffer grad_output, ffi::AnyBuffer indices,
                               ffi::Result<ffi::AnyBuffer> grad_values, int64_t nd,
                               bool channels_last) {
  static const char* const names[] = {"grad_output", "indices", "grad_values"};
  return serve(kMaxUnpoolBackward, place, nd, channels_last, names, grad_output, indices,
               *grad_values,
               [&](auto& g, auto& a, auto& gv, char* m, size_t n) {
                 const poolgen_unpool_options o = unpool_options(nd, g, place);
                 return poolgen_max_unpool_backward(nd, &g, &a, &gv, &o, m, n);
               });
}

// The pooling handlers' attributes (jax.ffi.ffi_call's keywords).
template <typename Binding>
auto pool_attributes(Binding b) {
  return std::move(b)
      .template Attr<int64_t>("nd")
      .template Attr<bool>("channels_last")
      .template Attr<bool>("ceil_mode")
      .template Attr<ffi::Span<const int64_t>>("kernel")
      .template Attr<ffi::Span<const int64_t>>("stride")
      .template Attr<ffi::Span<const int64_t>>("padding_low")
      .template Attr<ffi::Span<const int64_t>>("padding_high")
      .template Attr<ffi::Span<const int64_t>>("dilation");
}

// An array's dims, poolgen's (N, C, spatial...) shape `nc`, back in the array's layout: the
// leading dims kept, the last nd + 1 from nc.
void array_shape(const int64_t* dims, int64_t rank, int nd, bool channels_last,
                 const int64_t* nc, int64_t* out) {
  const int64_t first = rank - nd - 1;
  std::memcpy(out, dims, first * sizeof(int64_t));
  for (int p = 0; p <= nd; ++p) {
    out[first + p] = channels_last ? (p == nd ? nc[1] : nc[2 + p]) : (p == 0 ? nc[1] : nc[1 + p]);
  }
}

// A shape entry point's result: the array's dims of poolgen's shape `nc` in `out`, or poolgen's
// code and message.
int32_t shape_result(const Outcome& r, const int64_t* dims, int64_t rank, int nd,
                     bool channels_last, const int64_t* nc, int64_t* out, char* message,
                     size_t message_size) {
  if (!r.ok()) {
    std::snprintf(message, message_size, "%s", r.message.c_str());
    return r.code;
  }
  array_shape(dims, rank, nd, channels_last, nc, out);
  return POOLGEN_OK;
}

}  // namespace
}  // namespace poolgen_jax

#define POOLGEN_JAX_EXPORT extern "C" __attribute__((visibility("default")))

// The handlers' bindings, after the CUDA handlers' stream where there is one.
template <typename Binding>
auto pool_binding(Binding b) {
  return poolgen_jax::pool_attributes(
      std::move(b).template Arg<ffi::AnyBuffer>().template Ret<ffi::AnyBuffer>().template Ret<
          ffi::AnyBuffer>());
}
template <typename Binding>
auto pool_backward_binding(Binding b) {
  return poolgen_jax::pool_attributes(
      std::move(b).template Arg<ffi::AnyBuffer>().template Arg<ffi::AnyBuffer>().template Ret<
          ffi::AnyBuffer>());
}
template <typename Binding>
auto unpool_binding(Binding b) {
  return std::move(b)
      .template Arg<ffi::AnyBuffer>()
      .template Arg<ffi::AnyBuffer>()
      .template Ret<ffi::AnyBuffer>()
      .template Attr<int64_t>("nd")
      .template Attr<bool>("channels_last");
}

// The CPU handler of an op and its CUDA twin, which takes XLA's stream first.
template <auto op>
constexpr auto on_cpu = [](auto... a) { return op({POOLGEN_CPU, nullptr}, a...); };
template <auto op>
constexpr auto on_cuda = [](void* stream, auto... a) { return op({POOLGEN_CUDA, stream}, a...); };
#define POOLGEN_JAX_HANDLERS(name, binding)                                                  \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(poolgen_jax_##name, on_cpu<poolgen_jax::name>,                \
                                binding(ffi::Ffi::Bind()));                                   \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(poolgen_jax_##name##_cuda, on_cuda<poolgen_jax::name>,        \
                                binding(ffi::Ffi::Bind().Ctx<ffi::PlatformStream<void*>>()))

POOLGEN_JAX_HANDLERS(max_pool, pool_binding);
POOLGEN_JAX_HANDLERS(max_pool_backward, pool_backward_binding);
POOLGEN_JAX_HANDLERS(max_unpool, unpool_binding);
POOLGEN_JAX_HANDLERS(max_unpool_backward, unpool_binding);

// The pooled array's dims (`out`, rank entries) of an input array's, or poolgen's error: what
// poolgen.jax declares as the call's results, at trace time.
POOLGEN_JAX_EXPORT int32_t poolgen_jax_pool_shape(int32_t nd, int32_t rank, const int64_t* dims,
                                                  int32_t channels_last, const int64_t* kernel,
                                                  const int64_t* stride,
                                                  const int64_t* padding_low,
                                                  const int64_t* padding_high,
                                                  const int64_t* dilation, int32_t ceil_mode,
                                                  int64_t* out, char* message,
                                                  size_t message_size) {
  using namespace poolgen_jax;
  poolgen_tensor in;
  Outcome r = view("input", nullptr, POOLGEN_F32, dims, rank, nd, channels_last, &in);
  int64_t pooled[5];
  if (r.ok()) {
    const poolgen_pool_options o =
        pool_options(nd, {kernel, stride, padding_low, padding_high, dilation, ceil_mode != 0});
    r = poolgen_bridge::call([&](char* m, size_t n) {
      return poolgen_max_pool_output_shape(nd, in.rank, in.shape, &o, pooled, m, n);
    });
  }
  return shape_result(r, dims, rank, nd, channels_last, pooled, out, message, message_size);
}

// The unpooled array's dims of a values array's and the nd spatial extents, or poolgen's error.
POOLGEN_JAX_EXPORT int32_t poolgen_jax_unpool_shape(int32_t nd, int32_t rank,
                                                    const int64_t* dims, int32_t channels_last,
                                                    const int64_t* output_size, int64_t* out,
                                                    char* message, size_t message_size) {
  using namespace poolgen_jax;
  poolgen_tensor values;
  Outcome r = view("values", nullptr, POOLGEN_F32, dims, rank, nd, channels_last, &values);
  int64_t unpooled[5];
  if (r.ok()) {
    poolgen_unpool_options o{};
    o.output_size_len = nd;
    std::memcpy(o.output_size, output_size, nd * sizeof(int64_t));
    r = poolgen_bridge::call([&](char* m, size_t n) {
      return poolgen_max_unpool_output_shape(nd, values.rank, values.shape, &o, unpooled, m, n);
    });
  }
  return shape_result(r, dims, rank, nd, channels_last, unpooled, out, message, message_size);
}

POOLGEN_JAX_EXPORT void poolgen_jax_set_num_threads(int32_t threads) {
  poolgen_set_num_threads(threads);
  poolgen_jax::threads_set = threads;
}

POOLGEN_JAX_EXPORT int32_t poolgen_jax_num_threads_set() { return poolgen_jax::threads_set; }

// Successful calls of handler `which` (Op's order: max_pool, max_pool_backward, max_unpool,
// max_unpool_backward) since the library loaded; -1 past them.
POOLGEN_JAX_EXPORT int64_t poolgen_jax_served(int32_t which) {
  using poolgen_jax::kOpCount;
  return which >= 0 && which < kOpCount ? poolgen_jax::served[which].load() : -1;
}
