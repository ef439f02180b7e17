#include "cuda.hpp"

#include "shapes.hpp"

#if POOLGEN_WITH_CUDA
#include <HalideRuntimeCuda.h>
#include <dlfcn.h>

#include <mutex>
#endif

namespace poolgen {

bool cuda_available() {
  int capability = 0;
  return detail::cuda_capability(&capability).ok();
}

namespace detail {

Device call_device(Device requested, const TensorView& leading) {
  return requested == Device::cuda || leading.device == Device::cuda ? Device::cuda : Device::cpu;
}

Status check_device_view(const char* argument, const View& view, Layout layout, bool flat) {
  if (view.device != Device::cuda || (fits(view, layout) && (!flat || view.flat_planes(layout)))) {
    return {};
  }
  return fail(Code::unsupported, argument, ": expected a CUDA tensor ", layout_name(layout),
              flat ? " with dense spatial dimensions" : "",
              " as a whole (no packed copies are made on the device), got strides ",
              format_shape(Ints(view.strides, view.strides + view.rank)), " for shape ",
              format_shape(Ints(view.shape, view.shape + view.rank)));
}

#if POOLGEN_WITH_CUDA

namespace {

// Halide's CUDA runtime makes a context of its own by default, but device pointers a caller
// allocated (cudaMalloc, PyTorch) belong to the context current on the caller's thread, usually
// the device's primary context: use that one when there is one. libcuda is then loaded already,
// so it is looked up without loading it (RTLD_NOLOAD).
using GetCurrentContext = int (*)(void** context);
halide_cuda_acquire_context_t halide_acquire = nullptr;
halide_cuda_release_context_t halide_release = nullptr;
thread_local bool took_halide_context = false;

GetCurrentContext current_context_query() {
  static const GetCurrentContext query = [] {
    void* libcuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    return libcuda ? reinterpret_cast<GetCurrentContext>(dlsym(libcuda, "cuCtxGetCurrent"))
                   : nullptr;
  }();
  return query;
}

int acquire_context(void* user_context, void** context, bool create) {
  void* current = nullptr;
  const GetCurrentContext query = current_context_query();
  took_halide_context = !(query && query(&current) == 0 && current);
  if (!took_halide_context) {
    *context = current;
    return 0;
  }
  return halide_acquire(user_context, context, create);
}

int release_context(void* user_context) {
  return took_halide_context ? halide_release(user_context) : 0;
}

// Also keeps freed device allocations for reuse: a call's scratch buffers (the winner
// unpooling's slots, the reports) and host views' device copies would otherwise cost a
// cuMemAlloc and a cuMemFree each, both synchronizing, on every call. Halide frees the cache when
// an allocation fails and on halide_device_release.
void use_callers_context() {
  static std::once_flag installed;
  std::call_once(installed, [] {
    halide_acquire = halide_set_cuda_acquire_context(acquire_context);
    halide_release = halide_set_cuda_release_context(release_context);
    halide_reuse_device_allocations(nullptr, true);
  });
}

}  // namespace

Status cuda_capability(int* capability) {
  use_callers_context();
  int major = 0, minor = 0;
  std::string error;
  const int result = with_error_capture(
      [&](void* user_context) {
        return halide_cuda_device_interface()->compute_capability(user_context, &major, &minor);
      },
      &error);
  // Without libcuda Halide answers capability 0.0 and no error.
  if (result != 0 || major == 0) {
    return fail(Code::unsupported, "device: expected a CUDA device, got none (no CUDA device is ",
                "available: ",
                result == 0 ? "no CUDA driver found"
                            : (error.empty() ? "error " + std::to_string(result) : error),
                ")");
  }
  *capability = 10 * major + minor;
  return {};
}

int run_cuda_kernel(const Kernel& kernel, KernelArgs& args,
                    const CudaBuffers& buffers, std::string* error) {
  use_callers_context();
  return with_error_capture(
      [&](void* user_context) {
        int result = 0;
        // Device views: the pointer becomes the buffer's device allocation; no host copy exists.
        InlineVector<halide_buffer_t*, 5> wrapped;
        for (const CudaBuffer& b : buffers) {
          if (!b.on_device || result != 0) continue;
          const auto pointer = reinterpret_cast<uint64_t>(b.buffer->host);
          b.buffer->host = nullptr;
          result = halide_cuda_wrap_device_ptr(user_context, b.buffer, pointer);
          if (result == 0) wrapped.push_back(b.buffer);
        }
        // Host inputs: Halide copies a buffer to the device only when its host side is dirty.
        for (const CudaBuffer& b : buffers) {
          if (!b.on_device && !b.output) b.buffer->flags |= halide_buffer_flag_host_dirty;
        }
        if (result == 0) {
          args[0] = &user_context;
          result = kernel.entry(args.data());
        }
        // Host outputs come back; device outputs are complete when the call returns, as the
        // caller may read them on another stream.
        for (const CudaBuffer& b : buffers) {
          if (result != 0 || !b.output) continue;
          result = b.on_device ? halide_device_sync(user_context, b.buffer)
                               : halide_copy_to_host(user_context, b.buffer);
        }
        for (const CudaBuffer& b : buffers) {
          if (b.on_device) continue;
          // Host views got device copies from the kernel: free them.
          if (b.buffer->device) halide_device_free(user_context, b.buffer);
        }
        for (halide_buffer_t* b : wrapped) halide_cuda_detach_device_ptr(user_context, b);
        return result;
      },
      error);
}

#else  // a build without CUDA kernels (POOLGEN_CUDA_CAPABILITIES empty)

Status cuda_capability(int*) {
  return fail(Code::unsupported, "device: expected a CUDA device, got none (no CUDA device is ",
              "available: this build has no CUDA kernels, CMake option ",
              "POOLGEN_CUDA_CAPABILITIES is empty)");
}

int run_cuda_kernel(const Kernel&, KernelArgs&, const CudaBuffers&,
                    std::string* error) {
  *error = "this build has no CUDA kernels";
  return -1;
}

#endif

}  // namespace detail
}  // namespace poolgen
