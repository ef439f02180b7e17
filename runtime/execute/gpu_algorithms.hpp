// Running the GPU algorithms (on CUDA, and on the CPU as their twins with Path::winner): the
// kernels over flat planes, the window gathers, the fallbacks gated behind them on the device
// and the kernels that report their first invalid index instead of stopping. Launch plumbing,
// run once per kernel call (compiled for size, runtime/CMakeLists.txt).
#pragma once

#include "core/view.hpp"
#include "dispatch/kernel_table.hpp"
#include "validate/window.hpp"

namespace poolgen::detail {

// Runs `kernel` on flat views (its three buffers, in argument order) in its layout, on its
// device (on the CPU its parallel loops shared as the views' bytes decide); `declined` as
// Launch::run takes it.
Status run_flat(const Kernel& kernel, const Views& views, bool* declined = nullptr);

// The CPU twin of pooling's gradient gather (max_pool_backward_gather, Path::winner) over views
// (grad_output, indices, grad_input) dense in its layout: *done false when it cannot take them
// or found an index outside its window (the scatter then runs).
Status window_gather(const Kernel& kernel, const Window& window, const View& values,
                     const View& indices, const View& output, bool* done);
// The GPU algorithms that move elements by index, on CUDA and as the CPU twins: `kernel` over
// flat planes, in pieces of planes one launch takes (its buffers; with a gather, CUDA's grid):
// - the winner unpooling (`kernel`: unpool_winner) and CUDA's pooling gradient (its
//   accumulating scatter) behind the window gather (`gather` with its `window`, where one is
//   built), gated by the gather's count of the indices it cannot serve where the count lies
//   (on the device): the kernel runs where the count is not 0, always where no gather ran, so
//   no count is read back between the two;
// - the unpooling gradient's reporting gather alone (no gather, no gate).
// The reporting kernels (the winner, the unpooling gradient) give an index outside [0, bound)
// as index_out_of_range naming the first in input order (on a caller's stream, later:
// cuda_check_reports). Host views go through packed copies where needed, device views were
// checked to need none; planes too large for a kernel's buffers are unsupported, naming
// `indexed`, the argument whose planes the indices address.
Status run_gpu_algorithm(const Kernel* gather, const Window* window, const Kernel& kernel,
                         Device device, const Views& views, int64_t bound, const char* indexed);

}  // namespace poolgen::detail
