// poolgen: max pooling with indices and max unpooling, PyTorch-exact.
//
// Tensors are views (pointer, dtype, shape, strides) in PyTorch's dimension order:
// (N, C, spatial...) or batch-less (C, spatial...). The library never allocates tensors and
// never includes a Halide header here.
#pragma once

#include "poolgen/layout.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace poolgen {

// Element types. Pooling takes every value type below, unpooling too (it moves bits, so any type
// of a width works alike); indices are i64 (PyTorch's) or i32 (half the traffic, for planes of
// fewer than 2^31 elements). Which value types a build compiles is a CMake option.
enum class DType : int32_t { f32 = 0, i64 = 1, f64 = 2, f16 = 3, bf16 = 4, i8 = 5, u8 = 6, i16 = 7, i32 = 8 };
// Where a view's data lives: cpu (host memory) or cuda (a CUDA device pointer, CUdeviceptr, in
// the CUDA context current on the calling thread, e.g. the primary context of the CUDA runtime and
// PyTorch; with none current, Halide's own context). All views of one call must be on one device.
// CUDA views must be contiguous or channels-last as a whole (no packed copies are made on the
// device; other strides are refused as unsupported).
enum class Device : int32_t { cpu = 0, cuda = 1 };

// True when this build has CUDA kernels and a CUDA driver and device are present (the first call
// loads libcuda; there is no link dependency on it).
bool cuda_available();


// The 16-bit float types have no C++ type of their own: these hold their bits.
struct f16_t { uint16_t bits; };
struct bf16_t { uint16_t bits; };

const char* dtype_name(DType dtype);  // "f32", "bf16", ...
size_t dtype_size(DType dtype);       // bytes per element

// Error classes; every non-ok Status also carries a message naming the argument, what was
// expected and what was given.
enum class Code : int32_t {
  ok = 0,
  invalid_argument = 1,    // a shape, stride or parameter breaks SEMANTICS.md
  index_out_of_range = 2,  // max_unpool: an index outside its output plane
  unsupported = 3,         // valid request this build has no kernel for (dtype, layout, ...)
  internal = 4,            // a kernel failed unexpectedly
};

// What an error is about, beyond its code: for programs and bindings that act on it (a
// framework's exception type, say) without reading the message, whose wording may change.
enum class ErrorKind : int32_t {
  none = 0,       // success
  option = 1,     // an option's value: kernel_size, stride, padding, output_size, a rule, ...
  tensor = 2,     // a tensor's dtype, rank, shape, strides, device or memory
  index = 3,      // an index outside its plane (Code::index_out_of_range)
  no_kernel = 4,  // a valid call this build has no kernel for (its dtype, layout, rank, CPU)
  no_device = 5,  // no CUDA device or driver to run on
  internal = 6,   // a kernel or the runtime failed unexpectedly
};

// The kind of an error of `code` that says no more: none, tensor, index, no_kernel, internal.
constexpr ErrorKind default_kind(Code code) {
  switch (code) {
    case Code::ok: return ErrorKind::none;
    case Code::invalid_argument: return ErrorKind::tensor;
    case Code::index_out_of_range: return ErrorKind::index;
    case Code::unsupported: return ErrorKind::no_kernel;
    default: return ErrorKind::internal;
  }
}

class Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : Status(code, std::move(message), default_kind(code)) {}
  Status(Code code, std::string message, ErrorKind kind)
      : code_(code), kind_(kind), message_(std::move(message)) {}
  bool ok() const { return code_ == Code::ok; }
  Code code() const { return code_; }
  ErrorKind kind() const { return kind_; }
  // "<argument>: expected <what>, got <what>": which argument, what was expected, what was
  // given.
  const std::string& message() const { return message_; }
  // The argument the error names, as the API names it ("input", "indices", "output_size",
  // "kernel_size", ...): the message's leading name, which every error has; "" for none (a
  // success, an internal error).
  std::string argument() const {
    if (code_ == Code::ok || kind_ == ErrorKind::internal) return {};
    return message_.substr(0, message_.find(':'));
  }

 private:
  Code code_ = Code::ok;
  ErrorKind kind_ = ErrorKind::none;  // in what was code_'s padding: a Status is no larger
  std::string message_;
};

using Ints = std::vector<int64_t>;

// Any non-negative strides are accepted (negative ones are unsupported); an output's must keep
// its elements apart (sorted by stride, each dimension steps over all that the finer ones
// cover), and its memory apart from every other argument's: the bytes from its first to its
// last element may not overlap an input's or another output's (inputs may overlap each other;
// views of one buffer that interleave without sharing an element are refused too). Such calls
// are invalid_argument, refused before anything is written. Kernels exist for the two
// layouts PyTorch uses: contiguous (NCHW: the innermost spatial stride is 1) and channels-last
// (NHWC, NDHWC, NLC: the channel stride is 1); any other view goes through a packed copy.
// Indices mean the same in every layout: offsets inside one (n, c) plane.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::f32;
  Ints shape;    // PyTorch order: (N, C, spatial...) or (C, spatial...)
  Ints strides;  // in elements, PyTorch order; empty means contiguous (row-major)
  Device device = Device::cpu;
};

// A contiguous (row-major) view of `shape` at `data`.
TensorView contiguous(void* data, DType dtype, Ints shape);
// A channels-last view: `shape` is (N, C, spatial...) in PyTorch order, memory holds
// (N, spatial..., C); with `nd` spatial dimensions given, a shape of rank nd + 1 is batch-less
// (C, spatial...) over memory (spatial..., C).
TensorView channels_last(void* data, DType dtype, Ints shape, int nd = 0);
// Typed shorthands: the dtype follows the element type.
#define POOLGEN_TYPED_VIEWS(T)                                                            \
  TensorView contiguous(T* data, Ints shape);                                             \
  TensorView contiguous(const T* data, Ints shape);                                       \
  TensorView channels_last(T* data, Ints shape, int nd = 0);                              \
  TensorView channels_last(const T* data, Ints shape, int nd = 0);
POOLGEN_TYPED_VIEWS(float)
POOLGEN_TYPED_VIEWS(double)
POOLGEN_TYPED_VIEWS(f16_t)
POOLGEN_TYPED_VIEWS(bf16_t)
POOLGEN_TYPED_VIEWS(int8_t)
POOLGEN_TYPED_VIEWS(uint8_t)
POOLGEN_TYPED_VIEWS(int16_t)
POOLGEN_TYPED_VIEWS(int32_t)
POOLGEN_TYPED_VIEWS(int64_t)
#undef POOLGEN_TYPED_VIEWS

// Which compiled kernels a call may use. `automatic` takes a window-specialized kernel when the
// call matches one; `general` always takes the general kernel (results are identical).
// `winner` runs the GPUs' algorithms on the CPU, where the build has their CPU twins
// (-DPOOLGEN_GPU_TWINS=ON; 32-bit values, contiguous): for max_unpool the gather over any
// window's covering cells where every index lies in its own window, else the deterministic
// two-pass unpooling (an atomic max of input positions per slot, then a gather), for
// max_unpool_backward
// the gather that reports invalid indices instead of stopping, for max_pool_backward the gather
// over any window's covering outputs (checks of the GPU algorithms; CUDA calls always take
// them). An unsupported error where they are not built; pooling has one CPU algorithm, which
// `winner` takes.
enum class Path : int32_t { automatic = 0, general = 1, winner = 2 };

// How an index names an element of the frame it points into: the pooling input, or the unpooled
// output, of shape (N, C, spatial...). Each format is one system's convention (docs/semantics.md,
// "Index formats"); the ops write and read `plane`.
enum class IndexFormat : int32_t {
  plane = 0,              // PyTorch: row-major offset inside the element's (n, c) plane
  onnx = 1,               // ONNX MaxPool (storage_order 0), MaxUnpool: row-major over the frame
  onnx_column_major = 2,  // ONNX MaxPool storage_order 1: (n*C + c) * plane + the plane offset
                          // with the first spatial dimension fastest (h + w*H in 2-D)
  tensorflow = 3,         // tf.nn.max_pool_with_argmax: offset in one item's (spatial..., C)
                          // tensor, offset * C + c
  tensorflow_with_batch = 4,  // include_batch_in_index: (n * plane + offset) * C + c
  window = 5,  // XNNPACK's argmax pooling: the tap inside the element's window, the first
               // spatial dimension fastest (x * KH + y in 2-D); needs the pooling options
};
const char* index_format_name(IndexFormat format);  // "plane", "onnx", ...

// How pooling's padding is given: explicitly (padding, padding_end), or computed from the input
// as ONNX's auto_pad (TensorFlow's "SAME" is same_upper, "VALID" valid).
enum class AutoPad : int32_t { explicit_padding = 0, same_upper = 1, same_lower = 2, valid = 3 };

// Which tap wins a window (docs/semantics.md, "Other frameworks"). any_nan: PyTorch's scan, where
// a tap replaces the maximum when greater or NaN (any NaN wins). first_tap: ONNX Runtime's and
// TensorFlow's, which start from the window's first tap and replace it only by a greater one (a
// NaN after the first tap never wins, a NaN first tap stays). Ties go to the first either way,
// and the two agree on every window without a NaN.
enum class MaxRule : int32_t { any_nan = 0, first_tap = 1 };

// Whose window arithmetic pooling follows where frameworks differ (docs/semantics.md, "Other
// frameworks"): the output extents of windows that do not fit the padded input, SAME's padding
// where the stride exceeds the kernel, and windows with no tap inside the input.
//  - pytorch: floor division; an extent below 1 is an error. A window with no tap inside gives
//    -inf (the lowest value) and its first tap's index, which only PyTorch's plane offsets
//    carry: with another index_format such a window is an error, before anything is written.
//  - onnx_runtime: C++'s truncating division, so an extent is 1 where floor gives 0, then 0 (an
//    empty output) where the window misses by up to a stride more, an error below. SAME's
//    padding is not clamped at 0 (a stride past the kernel: negative padding, windows that start
//    inside the input). A window with no tap inside gives the type's lowest finite value and the
//    index of coordinates (n, c, -1, ..., -1) in the index format.
//  - tensorflow: TensorFlow's (in + padding + padding_end - span + stride) / stride, truncated
//    (0 where the window misses by less than a stride, an error below); no ceil_mode, and every
//    window must hold a tap (TensorFlow's windows always do).
enum class PoolRule : int32_t { pytorch = 0, onnx_runtime = 1, tensorflow = 2 };

// Mirrors torch.nn.functional.max_pool{1,2,3}d(..., return_indices=True). Each list holds one
// entry per spatial dimension, or a single entry used for all of them. The last five fields
// (defaults: PyTorch's) give ONNX's MaxPool and TensorFlow's max_pool_with_argmax.
struct PoolOptions {
  Ints kernel_size;
  Ints stride;  // empty: kernel_size
  Ints padding{0};
  Ints dilation{1};
  bool ceil_mode = false;
  Path path = Path::automatic;
  // Where to run: cuda runs on the GPU even for host views (copied there and back). Views on
  // the device always run there.
  Device device = Device::cpu;
  // The CUstream a CUDA call's kernels run on, in order with the caller's other work there (a
  // framework's current stream); the call returns once they are queued, with no host
  // synchronization (host views aside: they are copied back before it returns), and any invalid
  // index is reported later (cuda_check_reports). Null: Halide's stream of the current context,
  // and the call returns when its outputs are complete.
  void* cuda_stream = nullptr;
  // Padding after each dimension's end (ONNX's pads end half); empty: `padding` on both sides.
  // Given, each side may be up to kernel_size - 1 (ONNX Runtime's limit) instead of PyTorch's
  // half the kernel.
  Ints padding_end;
  // Padding computed from the input extent (then padding stays 0, padding_end unset and ceil_mode
  // false): ONNX's SAME_UPPER (TensorFlow's "SAME"), SAME_LOWER, VALID, as ONNX Runtime computes
  // them (docs/semantics.md).
  AutoPad auto_pad = AutoPad::explicit_padding;
  MaxRule max_rule = MaxRule::any_nan;
  // The format of the indices written (max_pool) or read (max_pool_backward).
  IndexFormat index_format = IndexFormat::plane;
  PoolRule pool_rule = PoolRule::pytorch;
};

// Which framework's rule a given output_size follows (docs/semantics.md, "Unpooling in other
// frameworks"); "default" is the extent with no output_size, (in - 1) * stride - padding -
// padding_end + kernel_size.
enum class OutputSizeRule : int32_t {
  pytorch = 0,       // each extent strictly between default - stride and default + stride
  onnx_runtime = 1,  // ONNX Runtime's MaxUnpool: a full shape's N and C are the values', and the
                     // output holds at least as many elements as the default one
  onnx = 2,          // ONNX's definition (its reference and backend tests): each extent at least
                     // the default; the indices address the default-sized output, and each value
                     // lands at the same coordinates of the larger one
  any = 3,           // any extents >= 1 (TensorFlow Lite's MaxUnpooling2D sizes its own output)
};

// Mirrors torch.nn.functional.max_unpool{1,2,3}d. output_size is empty, nd spatial extents, or
// a full shape of nd+2 entries whose leading N and C are ignored (PyTorch's rule); each extent
// must satisfy output_size_rule. The last three fields (defaults: PyTorch's) give ONNX's
// MaxUnpool and TensorFlow's unpooling by argmax.
// Without a kernel_size, unpooling goes by the indices alone, as aten::max_unpool2d does (PyTorch's
// functional form computes the output size and passes only that): output_size must then be given
// and any extents >= 1 go; stride and padding must stay unset.
struct UnpoolOptions {
  Ints kernel_size;
  Ints stride;  // empty: kernel_size (ONNX's default is 1: pass it)
  Ints padding{0};
  Ints output_size;
  Path path = Path::automatic;
  Device device = Device::cpu;  // as PoolOptions::device
  void* cuda_stream = nullptr;  // as PoolOptions::cuda_stream
  Ints padding_end;  // ONNX's pads end half, for the default extent; empty: `padding`
  OutputSizeRule output_size_rule = OutputSizeRule::pytorch;
  // The format of the indices read (all but window): onnx addresses the whole output and may
  // cross planes (ONNX Runtime stores those too, the latest in row-major order winning);
  // tensorflow may cross channels (TensorFlow Lite's MaxUnpooling2D, the latest in its NHWC
  // order winning). TensorFlow Addons' MaxUnpooling2D, whose duplicates add (scatter_nd), is
  // max_pool_backward with tensorflow indices (docs/semantics.md).
  IndexFormat index_format = IndexFormat::plane;
};

// Shape of the pooled values/indices for an input of `input_shape` (rank nd+1 or nd+2).
Status max_pool_output_shape(int nd, const Ints& input_shape, const PoolOptions& options,
                             Ints* output_shape);

// values and indices must have the shape max_pool_output_shape gives; values has the input's
// dtype, indices is i64 or i32 (offsets inside one (n, c) plane, as PyTorch). The kernel follows
// the input's layout; outputs in another layout are written through a packed copy.
Status max_pool(int nd, const TensorView& input, const TensorView& values,
                const TensorView& indices, const PoolOptions& options);

// Shape of the unpooled output for values/indices of `input_shape`.
Status max_unpool_output_shape(int nd, const Ints& input_shape, const UnpoolOptions& options,
                               Ints* output_shape);

// output must have the shape max_unpool_output_shape gives. Invalid indices are reported
// (index_out_of_range, naming the first in input order); nothing outside `output` is written,
// but `output` itself may then be partly written (its contents are unspecified).
// Duplicate indices: the latest in input order wins, on any thread count.
Status max_unpool(int nd, const TensorView& values, const TensorView& indices,
                  const TensorView& output, const UnpoolOptions& options);

// The gradients (the backward passes), mirroring PyTorch's autograd of
// max_pool{1,2,3}d(return_indices=True) and max_unpool{1,2,3}d. Gradients are floats: f32, f64,
// f16, bf16 (any other dtype is invalid_argument). The leading view, grad_output, decides the
// kernels' layout as the forward ops' input and values do; views in another layout go through
// packed copies. Deterministic: the same bytes on every thread count, CPU variant and device.

// grad_input has the pooling input's shape and grad_output's dtype; grad_output and indices the
// shape max_pool_output_shape gives for it with `options` (indices as the forward op wrote them,
// i64 or i32). grad_input is zero except where an index names an input position, which receives
// the sum of the grad_output elements naming it, added in ascending output order (within each
// (n, c) plane) in grad_output's dtype: f16 and bf16 round to their type after every addition, as
// PyTorch's CPU kernels do. An index outside the input plane (an empty window's, say) adds
// nothing: it is dropped, never written (docs/semantics.md, "Gradients").
Status max_pool_backward(int nd, const TensorView& grad_output, const TensorView& indices,
                         const TensorView& grad_input, const PoolOptions& options);

// grad_values has the unpooling values' shape (indices' shape) and grad_output's dtype;
// grad_output the shape max_unpool_output_shape gives for that shape with `options`.
// grad_values[n, c, i] = grad_output[n, c].flat[indices[n, c, i]]: every duplicate index reads
// its slot. An index outside the output plane is index_out_of_range naming the first in input
// order, as in max_unpool (grad_values is then unspecified).
Status max_unpool_backward(int nd, const TensorView& grad_output, const TensorView& indices,
                           const TensorView& grad_values, const UnpoolOptions& options);


// A call prepared once and run many times on new data, as oneDNN's primitives and XNNPACK's
// reshaped operators are: the prepare_* functions below check a call's views (shapes, strides,
// dtypes, devices; their data must be present but is not read) and options exactly as the call
// itself would, and choose its kernels; run() then takes the three tensors' data pointers, in
// the call's argument order, for views of those same shapes and strides, checks only that they
// are present and that the outputs overlap nothing, and runs. It skips the conversions and the
// comparison with the thread's last call that a repeated call pays (a 1x1x2x2 pooling call
// through the C API: 2,499 instructions, prepared 926; docs/kernels.md, "Threads and
// per-call cost").
// Each run gives the same result as the call on those views would; a run after a setting
// changed (threads, streaming, ...) follows the new settings, and a CUDA call is prepared only
// in its checks (its device is asked on every run). A PreparedCall is movable, not copyable; one
// PreparedCall runs on one thread at a time (each thread may keep its own).
struct PreparedAccess;
class PreparedCall {
 public:
  PreparedCall();
  ~PreparedCall();
  PreparedCall(PreparedCall&&) noexcept;
  PreparedCall& operator=(PreparedCall&&) noexcept;
  // Whether a prepare_* call succeeded into this one (run() on an empty one is invalid_argument).
  bool prepared() const { return state_ != nullptr; }
  Status run(void* first, void* second, void* third);

  struct State;  // the runtime's (ops/op.hpp)

 private:
  friend struct PreparedAccess;
  std::unique_ptr<State> state_;
};

// Each prepares the call of the same name and arguments into *call (left empty on failure, the
// error being the call's).
Status prepare_max_pool(int nd, const TensorView& input, const TensorView& values,
                        const TensorView& indices, const PoolOptions& options,
                        PreparedCall* call);
Status prepare_max_unpool(int nd, const TensorView& values, const TensorView& indices,
                          const TensorView& output, const UnpoolOptions& options,
                          PreparedCall* call);
Status prepare_max_pool_backward(int nd, const TensorView& grad_output, const TensorView& indices,
                                 const TensorView& grad_input, const PoolOptions& options,
                                 PreparedCall* call);
Status prepare_max_unpool_backward(int nd, const TensorView& grad_output,
                                   const TensorView& indices, const TensorView& grad_values,
                                   const UnpoolOptions& options, PreparedCall* call);

// Rewrites the indices of `from` (format from_format) into `to` as to_format. Both have one shape,
// of the frame's rank, N and C; frame_shape is the frame's (N, C, spatial...) or (C, spatial...).
// With the window format, `window` gives the pooling options, and `from` must have the pooled
// shape they give for frame_shape (it is unused otherwise and may be null). i64 or i32 each, any
// strides, host memory; `to` may be `from` itself (in place) but must not otherwise overlap it,
// and an i32 `to` must hold every index to_format can give for the frame. An index that names no
// element of its own (n, c) plane, or (window) none its element's window reaches, is
// index_out_of_range naming the first in memory order (`to` is then partly written): PyTorch's
// out-of-plane index of an empty window (docs/semantics.md, "Gradients") has no other format.
// One pass on the calling thread: reads and writes each index once.
Status convert_indices(int nd, const Ints& frame_shape, const TensorView& from,
                       IndexFormat from_format, const TensorView& to, IndexFormat to_format,
                       const PoolOptions* window = nullptr);

// Name of the compiled kernel a call would run (for tests and tools): `input` (pooling) or
// `values` (unpooling) gives shape, dtype and layout (its data is not read), `index_dtype` the
// indices' dtype. An unsupported combination is an error naming it.
Status max_pool_kernel_name(int nd, const TensorView& input, DType index_dtype,
                            const PoolOptions& options, std::string* name);
Status max_unpool_kernel_name(int nd, const TensorView& values, DType index_dtype,
                              const UnpoolOptions& options, std::string* name);
// The backward ops' kernels: `grad_output` gives shape, dtype and layout (its data is not read),
// `input_shape` the pooling input's (grad_input's) shape, `values_shape` the unpooling values'
// (grad_values') shape.
Status max_pool_backward_kernel_name(int nd, const TensorView& grad_output, DType index_dtype,
                                     const Ints& input_shape, const PoolOptions& options,
                                     std::string* name);
Status max_unpool_backward_kernel_name(int nd, const TensorView& grad_output, DType index_dtype,
                                       const Ints& values_shape, const UnpoolOptions& options,
                                       std::string* name);
// The same for a contiguous f32 tensor of `shape` and i64 indices.
Status max_pool_kernel_name(int nd, const Ints& input_shape, const PoolOptions& options,
                            std::string* name);
Status max_unpool_kernel_name(int nd, const Ints& values_shape, const UnpoolOptions& options,
                              std::string* name);

// Every compiled kernel the program links, e.g. "max_pool2d_k2s2p0_f32_i64", with what it serves
// and the CPU variants it carries. Unpooling kernels (and the unpooling backward's) move bits:
// they serve every value type of their width. The backward ops' kernels are listed when the
// program links a backward op (calls max_pool_backward or max_unpool_backward): a program that
// calls only the forward ops does not carry them.
struct KernelInfo {
  std::string name;
  // "pool", "unpool_scatter", "unpool_gather", "unpool_winner", "pool_backward_scatter",
  // "pool_backward_gather", "pool_backward_window_gather" (CUDA's), "unpool_window_gather"
  // (CUDA's), "unpool_backward", "unpool_backward_reporting" (CUDA's) or "pool_flat" (small NCHW
  // planes pooled over every plane at once)
  std::string op;
  int nd = 0;          // 0: any rank
  Layout layout = Layout::contiguous;
  DType value_dtype = DType::f32;
  DType index_dtype = DType::i64;
  std::vector<std::string> targets;
  Device device = Device::cpu;
  int cuda_capability = 0;  // CUDA kernels: 70 for sm_70 (runs on that capability and above)
};
std::vector<KernelInfo> compiled_kernels();

// Threads the kernels may use (process-wide; 0 restores the default: one per core, or the
// HL_NUM_THREADS environment variable). It waits for the call holding the worker threads, if
// any, and ends them; the next shared call starts the new count.
void set_num_threads(int threads);

// Calls that move fewer bytes (inputs and outputs together) run on the calling thread: below
// that, sharing the work costs more than it saves. The default, 128 KiB, was measured on 2-core
// x86 VMs (docs/kernels.md, "Threads"). A shared call runs on one thread for each half of it it
// moves, up to set_num_threads's count, and its tasks each move at least a quarter of it (small
// planes go several to a task). The worker threads stay awake 2 ms after a call; a call that
// finds them asleep wakes them only if it moves 2 MiB or more, or follows the previous call
// within those 2 ms, and otherwise runs on the calling thread. 0 shares every call that has
// more than one task, a plane to a task, on every thread; a negative count restores the
// default. Process-wide, like set_num_threads.
void set_min_parallel_bytes(int64_t bytes);

// Calls whose output (a scatter's: max_unpool, max_pool_backward) is at least this large write it
// with non-temporal stores, bypassing the caches: an ordinary store reads each line from memory
// before writing it, and an output this large has left the caches before anything reads it.
// Default on x86-64: the size of the largest data cache a core reaches (its L3, as the processor
// describes itself, at most 64 MiB; 8 MiB if it lists none); elsewhere no output streams
// (docs/kernels.md, "Streaming outputs"). 0 streams every call's; a negative count restores the
// default.
// Where set, calls moving at least this many bytes in all (inputs and outputs) are also the
// ones the contiguous gradient of unpooling by windows serves, which loses in cache (by default
// those moving more than the largest cache the processor lists, uncapped); at 0 every window
// gather (docs/kernels.md) is tried on every call, as if no cache held any.
// Process-wide, like set_min_parallel_bytes.
void set_streaming_bytes(int64_t bytes);

// A host's threads for the calls poolgen shares (a framework's own pool: PyTorch's
// at::parallel_for, OpenVINO's, TensorFlow's), run in place of poolgen's workers so that two
// pools do not contend for the same cores: a pool whose idle threads spin, as OpenMP's do,
// held the cores poolgen's workers were woken on (docs/kernels.md, "Threads"). `run` must call
// task(t, task_context) once for every t in [0, count), in any order, on any of its threads
// (the calling one included), and return when all have; a task after a failed one returns at
// once. `threads` is how many threads poolgen would share the call with (at least 2:
// set_num_threads, set_min_parallel_bytes), `context` set_parallel_for's. Calls that poolgen
// does not share still run on their calling thread. Process-wide; a ParallelFor whose `run` is
// null restores poolgen's workers.
struct ParallelFor {
  void (*run)(int32_t count, int32_t threads, void (*task)(int32_t t, void* task_context),
              void* task_context, void* context) = nullptr;
  void* context = nullptr;
};
void set_parallel_for(const ParallelFor& host);

// Device memory for a CUDA call's scratch (the winner unpooling's slots, the counts that gate a
// fallback kernel on the device), as a framework's caching allocator hands it out: allocate
// returns `bytes` for work on `stream` (a CUstream; null: the legacy default stream) and sets
// *handle, which release gets back once the call has queued its last use of the memory on that
// stream (stream-ordered: the allocator may reuse it for later work on the same stream at
// once); null on failure. Process-wide; an allocator whose `allocate` is null restores the
// default, Halide's device allocations (cached, reused on the stream they were freed on).
struct CudaAllocator {
  void* (*allocate)(void* context, size_t bytes, void* stream, void** handle) = nullptr;
  void (*release)(void* context, void* handle, void* stream) = nullptr;
  void* context = nullptr;
};
void set_cuda_allocator(const CudaAllocator& allocator);

// Errors a CUDA call on a caller's stream (PoolOptions::cuda_stream) could not know when it
// returned: an invalid unpooling index (max_unpool, max_unpool_backward) is found by the kernel,
// which writes nothing through it and leaves its report in mapped host memory, read once the
// stream has run the kernel. Returns the first such error of the calls whose kernels have run
// (with `wait`: of every call so far, waiting for their kernels) and forgets it; ok when there
// is none. Process-wide, any stream.
Status cuda_check_reports(bool wait = false);

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
