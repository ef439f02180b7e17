// One kernel call, on the CPU or on CUDA alike: its arguments in its generator's order (the
// user context, buffers over views in the kernel's layout, scalars, buffers of the call's own),
// then the run on the kernel's device, whose failures come back as a Status. Every op and
// driver launches its kernels through it.
#pragma once

#include "dispatch/arguments.hpp"

#include <string>

namespace poolgen::detail {

// How a kernel uses a view's buffer.
enum class Access {
  read,
  write,
  // Written where the kernel decides (a gated kernel's output): on CUDA, a host view's data
  // goes to the device first, so that what the kernel leaves comes back unchanged.
  write_some,
};

// The arguments point into the object, which therefore stays where it is made.
class Launch {
 public:
  // flat: the views' spatial dimensions as one (the kernels over flat planes).
  explicit Launch(const Kernel& kernel, bool flat = false)
      : kernel_(kernel), entry_(kernel.entry), flat_(flat) {}
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;

  const Kernel& kernel() const { return kernel_; }

  // Appends a buffer over `view` in the kernel's layout, typed as `type` (the kernel's value or
  // index dtype); at most kViews of them.
  static constexpr int kViews = 3;
  void add_view(const View& view, DType type, Access access);
  // Appends the window's scalars (WindowArgs).
  void add_window(const Window& window) { window_.append(window, kernel_, &args_); }
  // Appends the magic pairs of `count` divisors, which GPU kernels take (none for CPU kernels).
  void add_magic(const int64_t* divisors, int count) {
    if (kernel_.device == Device::cuda) magic_.append(divisors, count, &args_);
  }
  // Appends a 64-bit scalar, a 32-bit one or a flag (at most kScalars in all).
  static constexpr int kScalars = 2;
  void add_scalar(int64_t value);
  void add_int32(int32_t value);
  void add_flag(bool value);
  // Appends a buffer of the call's own (a count, a gate, a report), as CUDA takes it.
  void add_buffer(const CudaBuffer& buffer) {
    args_.push_back(buffer.buffer);
    if (kernel_.device == Device::cuda) cuda_.push_back(buffer);
  }

  // A CPU call runs the variant that pays for the extent its vectors run along (variant_for):
  // the channels of channels-last `output`, else its rows; and for the bytes it moves (run).
  void fit_variant(const View& output) {
    lanes_ = kernel_.layout == Layout::channels_last ? output.shape[1]
                                                      : output.shape[output.rank - 1];
    entry_ = variant_for(kernel_, lanes_, 0);
  }

  // View k's buffer (in the order added), to move its data or its coordinates.
  halide_buffer_t& view_buffer(int k) { return views_[k].view.buffer; }
  void set_data(int k, void* data) { views_[k].view.buffer.host = static_cast<uint8_t*>(data); }

  // Runs the kernel on its device. On the CPU the call moves `call_bytes` (inputs and outputs),
  // which decide whether its parallel loops are shared (run_on_cpu); on CUDA a contiguous
  // call's dense planes are merged into one dimension first (merge_planes). A kernel that stops
  // at one of its own requirements (Halide's requirement_failed: an unpooling gather at an index
  // outside its window, the scatter or unpooling's gradient at an invalid index), whose
  // schedule has no case for the call (specialize_fail: a gather's rows not a whole number of
  // windows) or whose buffers' constraints the views break (constraint_violated: a gather built
  // for windows that cover their slots alone, on an output of another extent) has declined:
  // with `declined` given that is no error (*declined is set, and its caller decides what
  // follows); every other failure is an internal error naming the kernel and Halide's message.
  Status run(int64_t call_bytes, bool* declined = nullptr);

  // Whether a CPU kernel reads nothing outside its views and writes exactly its written ones:
  // Halide's bounds query (the region of every buffer the kernel would touch). A schedule's
  // vectors can widen it past a narrow view (a channels-last gather past fewer channels than
  // its lanes), and such a launch fails its bounds checks. A buffer constraint narrows it
  // instead (a gather built for windows that tile its output, on 113 columns from 56 cells),
  // since the query fills in the constrained extent rather than failing, and such a launch
  // declines on every run after Halide has formatted its message. Either way the kernel must
  // not be planned. A constrained input cannot be told from one read in part, so its callers
  // check such constraints themselves. The views are left as they were. Only the gathers'
  // kernels answer the query: the others are built without it (no_bounds_query,
  // cmake/PoolgenKernels.cmake).
  [[gnu::cold]] Status within_views(bool* within);

 private:
  int run_on_cuda(std::string* error);
  [[gnu::cold]] Status failed(int result, const std::string& error, bool* declined) const;

  const Kernel& kernel_;
  KernelEntry entry_;  // CPU: the wrapper, or the variant fit_variant chose
  int64_t lanes_ = -1;  // fit_variant's lanes (-1: the wrapper serves every call)
  bool flat_;
  // Made by add_view: constructed up front, unused ones too, they cost a small call more than
  // 100 instructions.
  union ViewSlot {
    ViewSlot() {}
    ~ViewSlot() {}
    HalideView view;
  } views_[kViews];
  int view_count_ = 0;
  unsigned written_ = 0;  // bit k: view k is written
  KernelArgs args_{nullptr};
  CudaBuffers cuda_;  // CUDA kernels' buffers
  WindowArgs window_;
  MagicArgs magic_;
  union Scalar {
    int64_t value;
    int32_t int32;
    bool flag;
  } scalars_[kScalars];
  int scalar_count_ = 0;
};

// The internal error of a kernel that failed with Halide's message `error`.
[[gnu::cold]] Status kernel_failed(const Kernel& kernel, const std::string& error);

}  // namespace poolgen::detail
