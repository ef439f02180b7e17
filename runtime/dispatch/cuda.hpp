// Calls on CUDA: where a call runs, which capability's kernels it may use, and how its buffers
// reach the GPU (device views are wrapped as they are; host views are copied there by Halide and
// outputs copied back).
#pragma once

#include "core/view.hpp"
#include "dispatch/kernel_table.hpp"
#include "dispatch/arguments.hpp"

#include <HalideRuntime.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace poolgen::detail {

// The device a call runs on: cuda when the options ask for it or the leading view (pooling's
// input, unpooling's values) lives there.
Device call_device(Device requested, const TensorView& leading);

// The compute capability of the current CUDA device (86 for sm_86), or an unsupported error
// saying why there is none (no CUDA kernels in this build, no driver, no device).
Status cuda_capability(int* capability);

// A device view must fit the kernel's layout as it is (with flat planes, if asked): the runtime
// makes no packed copies on the device.
Status check_device_view(const char* argument, const View& view, Layout layout, bool flat);
// check_device_view for each of a call's views, named `names`.
Status check_device_views(const char* const (&names)[3], const View (&views)[3], Layout layout,
                          bool flat);

// CUDA's grid holds at most 65535 blocks in y and z, where the kernels built with the planes grid
// (schedules/gpu_schedules.h, GpuGrid) put a contiguous call's (n, c) planes and a channels-last
// call's batch: pooling and the window gathers run in pieces that fit (any kernel takes them).
constexpr int64_t kCudaGridPlanes = 65535;
bool fits_cuda_grid(const View& view, Layout layout);
bool fits_cuda_grid(const Views& views, Layout layout);

// A contiguous call's kernel buffers with their (c, n) dimensions (Halide's last two) as one
// dimension of N * C planes, where every buffer's n stride is C times its c stride (dense
// tensors): the planes grid then needs no division to find a block's plane. Nothing changes
// otherwise.
void merge_planes(halide_buffer_t* const* buffers, int count, Layout layout);

// Runs a CUDA kernel with args[1...] filled: wraps device pointers, runs, copies host outputs
// back, and releases every device allocation and wrapping whatever happened. Device outputs are
// complete when it returns, but on a caller's stream (CudaStreamScope), where it returns once
// the kernel is queued. Returns Halide's error code; the first message goes to *error.
int run_cuda_kernel(const Kernel& kernel, KernelArgs& args,
                    const CudaBuffers& buffers, std::string* error);

// The caller's stream (PoolOptions::cuda_stream) of the thread's CUDA calls for the scope's
// lifetime, which Halide's stream hook gives every kernel and copy; null keeps Halide's.
class CudaStreamScope {
 public:
  explicit CudaStreamScope(void* stream);
  ~CudaStreamScope();
  CudaStreamScope(const CudaStreamScope&) = delete;
  CudaStreamScope& operator=(const CudaStreamScope&) = delete;

 private:
  void* previous_;
};
void* callers_stream();  // the thread's, or null

// Memory that one call's kernels hand each other (the count that gates a fallback kernel, the
// winner unpooling's slots, a deferred report), released when the call ends: on CUDA device
// memory from the caller's allocator (set_cuda_allocator), else Halide's device allocations;
// host memory for CPU calls (the GPU algorithms' twins) and in the OpenCL check build, where
// Halide copies it to and from the device around each kernel.
class KernelScratch {
 public:
  struct Buffer {
    halide_buffer_t buffer{};
    halide_dimension_t dims[3]{};
    bool on_device = false;
    // Its memory: the caller's allocator's (handle), Halide's (owner), or host memory.
    void* handle = nullptr;
    halide_buffer_t owner{};
    halide_dimension_t owner_dim{};
    std::unique_ptr<uint8_t[]> host;
  };
  explicit KernelScratch(Device device) : device_(device) {}
  ~KernelScratch();
  KernelScratch(const KernelScratch&) = delete;
  KernelScratch& operator=(const KernelScratch&) = delete;

  // A buffer of `type` over `extents` (Halide's order: innermost first; none: a scalar); at
  // most kBuffers a scratch.
  static constexpr int kBuffers = 2;
  Status make(halide_type_t type, std::initializer_list<int32_t> extents, Buffer** made);
  // `b` as a kernel's buffer, written by the kernel or read.
  static CudaBuffer use(Buffer* b, bool written) {
    return {&b->buffer, b->on_device, written && !b->on_device};
  }

 private:
  Device device_;
  Buffer buffers_[kBuffers];
  int count_ = 0;
};

// A reporting kernel's report (its first invalid element's position and index: the outputs
// invalid_position and invalid_index). A synchronous call reads it back when the kernel has
// run; a call on a caller's stream (CUDA) has the kernel write it into mapped host memory and
// queues it, to be read once the stream has run the kernel (cuda_check_reports).
class KernelReport {
 public:
  KernelReport(Device device, DType index);
  ~KernelReport();
  KernelReport(const KernelReport&) = delete;
  KernelReport& operator=(const KernelReport&) = delete;
  halide_buffer_t* position() { return &position_; }
  halide_buffer_t* index() { return &index_; }
  CudaBuffer position_buffer() { return {&position_, deferred(), !deferred()}; }
  CudaBuffer index_buffer() { return {&index_, deferred(), !deferred()}; }
  // After the kernel ran (or was queued): the error for an invalid index, as element
  // `first_position` + the report's position of the call, in planes of `bound` slots; a
  // deferred report is queued instead and ok returned.
  Status finish(int64_t first_position, int64_t bound);

 private:
  bool deferred() const { return slot_ >= 0; }
  halide_buffer_t position_{}, index_{};
  int64_t position_value_ = 0, index_value_ = 0;
  int slot_ = -1;  // the mapped host slot of a deferred report
  bool i32_;
};

}  // namespace poolgen::detail
