// The small parts of the public API: views, introspection, threads.
#include "kernels.hpp"

#include <HalideRuntime.h>

extern "C" {
#define POOLGEN_KERNEL(op, nd, k, s, p, name)
#include "kernel_table.inc"
#undef POOLGEN_KERNEL
}

namespace poolgen {

namespace {
TensorView view_of(const void* data, DType dtype, Ints shape) {
  TensorView view;
  view.data = const_cast<void*>(data);
  view.dtype = dtype;
  view.shape = std::move(shape);
  return view;
}
}  // namespace

TensorView contiguous(float* data, Ints shape) { return view_of(data, DType::f32, shape); }
TensorView contiguous(int64_t* data, Ints shape) { return view_of(data, DType::i64, shape); }
TensorView contiguous(const float* data, Ints shape) { return view_of(data, DType::f32, shape); }
TensorView contiguous(const int64_t* data, Ints shape) {
  return view_of(data, DType::i64, shape);
}

std::vector<KernelInfo> compiled_kernels() {
  std::vector<KernelInfo> kernels;
  for (const detail::Kernel& k : detail::kernel_table()) {
    kernels.push_back({k.name, {POOLGEN_CPU_TARGET_NAMES}});
  }
  return kernels;
}

// Halide's pool keeps the workers it has started busy whatever the new count, so it is shut
// down first and restarts with `threads` on the next kernel call.
void set_num_threads(int threads) {
  halide_shutdown_thread_pool();
  halide_set_num_threads(threads);
}

}  // namespace poolgen
