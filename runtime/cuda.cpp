#include "cuda.hpp"

#include "shapes.hpp"

#if POOLGEN_WITH_CUDA
#include <HalideRuntimeCuda.h>
#include <HalideRuntimeOpenCL.h>
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
#if POOLGEN_GPU_OPENCL
  if (view.device == Device::cuda) {
    return fail(Code::unsupported, argument, ": expected host memory (this build runs its CUDA ",
                "kernels on OpenCL, POOLGEN_GPU_API=opencl, which takes no CUDA device ",
                "pointers), got a CUDA view");
  }
#endif
  if (view.device != Device::cuda || (fits(view, layout) && (!flat || view.flat_planes(layout)))) {
    return {};
  }
  return fail(Code::unsupported, argument, ": expected a CUDA tensor ", layout_name(layout),
              flat ? " with dense spatial dimensions" : "",
              " as a whole (no packed copies are made on the device), got strides ",
              format_shape(Ints(view.strides, view.strides + view.rank)), " for shape ",
              format_shape(Ints(view.shape, view.shape + view.rank)));
}

bool fits_cuda_grid(const View& view, Layout layout) {
  return (layout == Layout::contiguous ? view.shape[0] * view.shape[1] : view.shape[0]) <=
         kCudaGridPlanes;
}

bool fits_cuda_grid(const Views& views, Layout layout) {
  for (const View& v : views) {
    if (!fits_cuda_grid(v, layout)) return false;
  }
  return true;
}

void merge_planes(std::initializer_list<halide_buffer_t*> buffers, Layout layout) {
  if (layout != Layout::contiguous) return;
  auto planes = [](halide_buffer_t* b) {
    return std::make_pair(&b->dim[b->dimensions - 2], &b->dim[b->dimensions - 1]);
  };
  for (halide_buffer_t* b : buffers) {
    const auto [c, n] = planes(b);  // a channel of one plane has any stride
    if (c->extent > 1 && int64_t{n->stride} != int64_t{c->stride} * c->extent) return;
  }
  for (halide_buffer_t* b : buffers) {
    const auto [c, n] = planes(b);
    if (c->extent == 1) c->stride = n->stride;
    c->extent *= n->extent;  // below 2^31: the buffer's elements are
    n->extent = 1;
  }
}

#if POOLGEN_WITH_CUDA

namespace {

#if POOLGEN_GPU_OPENCL
// The OpenCL check build (POOLGEN_GPU_API=opencl): every "CUDA" kernel is OpenCL code, which any
// OpenCL device runs, so the device meets every capability built; views are host memory only.
constexpr int kOpenClCapability = 1000;
const halide_device_interface_t* gpu_interface() { return halide_opencl_device_interface(); }

void install_hooks() {
  // Halide's OpenCL code calls atomic_cmpxchg on 64-bit integers (the winner's atomic max),
  // which OpenCL 1.2 names atom_cmpxchg (cl_khr_int64_base_atomics); PoCL resolves the former to
  // its 32-bit overloads only ("ambiguous"). Its builtins are renamed macros, so the 64-bit name
  // can be put in place of the other.
  halide_opencl_set_build_options("-D_cl_atomic_cmpxchg=_cl_atom_cmpxchg");
}

int wrap_device_pointer(void* user_context, halide_buffer_t*, uint64_t) {
  halide_error(user_context, "device views are refused in the OpenCL check build");
  return halide_error_code_generic_error;
}
int detach_device_pointer(void*, halide_buffer_t*) { return 0; }
#else
const halide_device_interface_t* gpu_interface() { return halide_cuda_device_interface(); }

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

void install_hooks() {
  halide_acquire = halide_set_cuda_acquire_context(acquire_context);
  halide_release = halide_set_cuda_release_context(release_context);
}

int wrap_device_pointer(void* user_context, halide_buffer_t* buffer, uint64_t pointer) {
  return halide_cuda_wrap_device_ptr(user_context, buffer, pointer);
}
int detach_device_pointer(void* user_context, halide_buffer_t* buffer) {
  return halide_cuda_detach_device_ptr(user_context, buffer);
}
#endif

// The hooks, once; also keeps freed device allocations for reuse: a call's scratch buffers (the
// winner unpooling's slots, the reports) and host views' device copies would otherwise cost a
// cuMemAlloc and a cuMemFree each, both synchronizing, on every call. Halide frees the cache when
// an allocation fails and on halide_device_release.
void use_callers_context() {
  static std::once_flag installed;
  std::call_once(installed, [] {
    install_hooks();
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
        return gpu_interface()->compute_capability(user_context, &major, &minor);
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
#if POOLGEN_GPU_OPENCL
  *capability = kOpenClCapability;
#else
  *capability = 10 * major + minor;
#endif
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
          result = wrap_device_pointer(user_context, b.buffer, pointer);
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
        for (halide_buffer_t* b : wrapped) detach_device_pointer(user_context, b);
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
