// Calls on CUDA: where a call runs, which capability's kernels it may use, and how its buffers
// reach the GPU (device views are wrapped as they are; host views are copied there by Halide and
// outputs copied back).
#pragma once

#include "kernels.hpp"
#include "tensors.hpp"

#include <HalideRuntime.h>

#include <initializer_list>
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
void merge_planes(std::initializer_list<halide_buffer_t*> buffers, Layout layout);

// One buffer of a CUDA call: its data is a device pointer (on_device) or host memory; outputs
// in host memory are copied back after the kernel.
struct CudaBuffer {
  halide_buffer_t* buffer;
  bool on_device;
  bool output;
};
// A call's buffers, held in place (at most five: three tensors and a kernel's report).
using CudaBuffers = InlineVector<CudaBuffer, 5>;

// Runs a CUDA kernel with args[1...] filled: wraps device pointers, runs, copies host outputs
// back, and releases every device allocation and wrapping whatever happened. Returns Halide's
// error code; the first message goes to *error.
int run_cuda_kernel(const Kernel& kernel, KernelArgs& args,
                    const CudaBuffers& buffers, std::string* error);

}  // namespace poolgen::detail
