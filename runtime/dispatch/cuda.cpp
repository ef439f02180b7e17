#include "dispatch/cuda.hpp"

#include "dispatch/cpu.hpp"
#include "validate/views.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>

#if POOLGEN_WITH_CUDA
#include <HalideRuntimeCuda.h>
#include <HalideRuntimeOpenCL.h>
#include <dlfcn.h>
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

// GPU launches' plumbing, here to be compiled for size with the rest of it.
void MagicArgs::append(const int64_t* divisors, int count, KernelArgs* args) {
  for (int i = 0; i < count; ++i) {
    const MagicDivisor m(divisors[i]);
    pairs[i][0] = m.multiplier;
    pairs[i][1] = m.shift;
    args->push_back(&pairs[i][0]);
    args->push_back(&pairs[i][1]);
  }
}

Status check_device_views(const char* const (&names)[3], const View (&views)[3], Layout layout,
                          bool flat) {
  for (int k = 0; k < 3; ++k) {
    POOLGEN_RETURN_IF_ERROR(check_device_view(names[k], views[k], layout, flat));
  }
  return {};
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

void merge_planes(halide_buffer_t* const* buffers, int count, Layout layout) {
  if (layout != Layout::contiguous) return;
  auto planes = [](halide_buffer_t* b) {
    return std::make_pair(&b->dim[b->dimensions - 2], &b->dim[b->dimensions - 1]);
  };
  for (int k = 0; k < count; ++k) {
    const auto [c, n] = planes(buffers[k]);  // a channel of one plane has any stride
    if (c->extent > 1 && int64_t{n->stride} != int64_t{c->stride} * c->extent) return;
  }
  for (int k = 0; k < count; ++k) {
    const auto [c, n] = planes(buffers[k]);
    if (c->extent == 1) c->stride = n->stride;
    c->extent *= n->extent;  // below 2^31: the buffer's elements are
    n->extent = 1;
  }
}

namespace {

thread_local void* t_callers_stream = nullptr;

// set_cuda_allocator's: read by every CUDA scratch allocation, changed rarely.
std::mutex allocator_mutex;
CudaAllocator allocator;

[[maybe_unused]] CudaAllocator current_allocator() {  // unused without CUDA kernels
  std::lock_guard<std::mutex> lock(allocator_mutex);
  return allocator;
}

}  // namespace

CudaStreamScope::CudaStreamScope(void* stream) : previous_(t_callers_stream) {
#if !POOLGEN_GPU_OPENCL  // the check build has no CUDA streams: its calls stay synchronous
  t_callers_stream = stream;
#endif
}
CudaStreamScope::~CudaStreamScope() { t_callers_stream = previous_; }
void* callers_stream() { return t_callers_stream; }

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

// Halide's own stream of a context, for calls without one of the caller's.
halide_cuda_get_stream_t halide_get_stream = nullptr;

int get_stream(void* user_context, void* context, void** stream) {
  if (void* callers = callers_stream()) {
    *stream = callers;
    return 0;
  }
  return halide_get_stream(user_context, context, stream);
}

void install_hooks() {
  halide_acquire = halide_set_cuda_acquire_context(acquire_context);
  halide_release = halide_set_cuda_release_context(release_context);
  halide_get_stream = halide_set_cuda_get_stream(get_stream);
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

// The CUDA driver's functions the deferred reports need (libcuda, loaded by Halide's runtime):
// pinned host memory the device writes, and events that say when it has.
struct Driver {
  int (*host_alloc)(void** pointer, size_t bytes, unsigned flags) = nullptr;
  int (*host_device_pointer)(uint64_t* device, void* host, unsigned flags) = nullptr;
  int (*event_create)(void** event, unsigned flags) = nullptr;
  int (*event_record)(void* event, void* stream) = nullptr;
  int (*event_query)(void* event) = nullptr;
  int (*event_synchronize)(void* event) = nullptr;
  int (*event_destroy)(void* event) = nullptr;
  int (*stream_synchronize)(void* stream) = nullptr;
  bool loaded() const { return stream_synchronize != nullptr; }
};

const Driver& driver() {
  static const Driver d = [] {
    Driver d;
    void* libcuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!libcuda) libcuda = dlopen("libcuda.so", RTLD_LAZY | RTLD_NOLOAD);
    if (!libcuda) return d;
    auto find = [&](auto* f, const char* name) {
      *f = reinterpret_cast<std::remove_pointer_t<decltype(f)>>(dlsym(libcuda, name));
      return *f != nullptr;
    };
    Driver found;
    if (find(&found.host_alloc, "cuMemHostAlloc") &&
        find(&found.host_device_pointer, "cuMemHostGetDevicePointer_v2") &&
        find(&found.event_create, "cuEventCreate") && find(&found.event_record, "cuEventRecord") &&
        find(&found.event_query, "cuEventQuery") &&
        find(&found.event_synchronize, "cuEventSynchronize") &&
        find(&found.event_destroy, "cuEventDestroy_v2") &&
        find(&found.stream_synchronize, "cuStreamSynchronize")) {
      return found;
    }
    return d;
  }();
  return d;
}

constexpr unsigned kHostAllocPortableMapped = 0x01 | 0x02;  // CU_MEMHOSTALLOC_PORTABLE | DEVICEMAP
constexpr unsigned kEventDisableTiming = 0x02;
constexpr int kCudaNotReady = 600;  // CUDA_ERROR_NOT_READY

// The deferred reports of calls on callers' streams: slots of one pinned, mapped host slab (a
// report's position and index, written by the kernel), each queued with an event recorded on
// the call's stream after its kernel, read once the event has completed.
class DeferredReports {
 public:
  static constexpr int kSlots = 4096;

  // A free slot and its device address, or -1 where pinned memory is not to be had.
  int take(uint64_t* device) {
    std::lock_guard<std::mutex> lock(mutex_);
    const Driver& d = driver();
    if (!d.loaded()) return -1;
    if (!slab_) {
      void* slab = nullptr;
      if (d.host_alloc(&slab, kSlots * 2 * sizeof(int64_t), kHostAllocPortableMapped) != 0) {
        return -1;
      }
      slab_ = static_cast<int64_t*>(slab);
      for (int s = 0; s < kSlots; ++s) free_[s] = s;
      free_count_ = kSlots;
    }
    while (free_count_ == 0) collect(true, true);  // a full slab: the oldest report, waited for
    const int slot = free_[free_count_ - 1];
    if (d.host_device_pointer(device, slab_ + 2 * slot, 0) != 0) return -1;
    --free_count_;
    slab_[2 * slot] = std::numeric_limits<int64_t>::max();
    return slot;
  }

  void give_back(int slot) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_[free_count_++] = slot;
  }

  // Queues `slot`'s report behind the work now on `stream`; where the driver gives no event,
  // the stream is waited for instead (the report is then complete, as one without an event).
  void queue(int slot, void* stream, int64_t first_position, int64_t bound, bool i32) {
    std::lock_guard<std::mutex> lock(mutex_);
    const Driver& d = driver();
    void* event = nullptr;
    if (d.event_create(&event, kEventDisableTiming) != 0 || d.event_record(event, stream) != 0) {
      if (event) d.event_destroy(event);
      event = nullptr;
      d.stream_synchronize(stream);
    }
    pending_[(first_pending_ + pending_count_++) % kSlots] = {event, slot, first_position, bound,
                                                               i32};
  }

  // The first error among the reports whose kernels have run (wait: among all, waiting), in
  // the order the calls queued them; reports read without an error are forgotten.
  Status check(bool wait) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (held_.ok()) collect(wait, false);
    Status found = std::move(held_);
    held_ = Status();
    return found;
  }

 private:
  struct Pending {
    void* event;
    int slot;
    int64_t first_position, bound;
    bool i32;
  };

  // Reads pending reports in order while their events have completed (or, with wait, waiting
  // for them), stopping at the first error, which is held for check() (later reports wait
  // behind it); with `one` (a full slab), just the oldest, whose error counts only if none is
  // held.
  void collect(bool wait, bool one) {
    const Driver& d = driver();
    while (pending_count_ > 0 && (one || held_.ok())) {
      Pending& p = pending_[first_pending_];
      if (p.event) {
        const int state = wait ? d.event_synchronize(p.event) : d.event_query(p.event);
        if (state == kCudaNotReady) return;
        d.event_destroy(p.event);
      }
      const int64_t position = slab_[2 * p.slot];
      int64_t index = slab_[2 * p.slot + 1];
      if (p.i32) {
        int32_t narrow;
        std::memcpy(&narrow, &slab_[2 * p.slot + 1], sizeof narrow);
        index = narrow;
      }
      free_[free_count_++] = p.slot;
      if (position != std::numeric_limits<int64_t>::max() && held_.ok()) {
        held_ = invalid_index_at(p.first_position + position, index, p.bound);
      }
      first_pending_ = (first_pending_ + 1) % kSlots;
      --pending_count_;
      if (one) return;
    }
  }

  std::mutex mutex_;
  Status held_;  // the first error read and not yet returned by check()
  int64_t* slab_ = nullptr;  // kSlots x (position, index); kept for the process
  int free_[kSlots], free_count_ = 0;
  Pending pending_[kSlots];  // a ring: pending_count_ from first_pending_, in queue order
  int first_pending_ = 0, pending_count_ = 0;
};

DeferredReports& deferred_reports() {
  static DeferredReports* reports = new DeferredReports;  // outlives every call
  return *reports;
}

}  // namespace

Status check_deferred_reports(bool wait) { return deferred_reports().check(wait); }

int take_report_slot(uint64_t* device) { return deferred_reports().take(device); }
void give_back_report_slot(int slot) { deferred_reports().give_back(slot); }
void queue_report(int slot, int64_t first_position, int64_t bound, bool i32) {
  deferred_reports().queue(slot, callers_stream(), first_position, bound, i32);
}

// Device memory for a scratch buffer: the caller's allocator's, else Halide's (its buffer
// `owner` then holds it); the raw device pointer, or an error.
Status device_scratch(size_t bytes, halide_buffer_t* owner, void** handle, uint8_t** pointer) {
  const CudaAllocator a = current_allocator();
  std::string error = "none from the allocator set with set_cuda_allocator";
  if (a.allocate) {
    *pointer = static_cast<uint8_t*>(a.allocate(a.context, bytes, callers_stream(), handle));
  } else {
    use_callers_context();
    const int result = with_error_capture(
        [&](void* user_context) {
          return halide_device_malloc(user_context, owner, gpu_interface());
        },
        &error);
    *pointer = result == 0 ? reinterpret_cast<uint8_t*>(owner->device) : nullptr;
  }
  if (*pointer) return {};
  return fail(Code::internal, "device memory", ": expected ", bytes, " bytes of scratch, got ",
              error);
}

void release_device_scratch(void* handle, halide_buffer_t* owner) {
  const CudaAllocator a = current_allocator();
  if (handle) {
    if (a.release) a.release(a.context, handle, callers_stream());
    return;
  }
  std::string error;
  with_error_capture(
      [&](void* user_context) { return halide_device_free(user_context, owner); }, &error);
}

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
    return fail_as(ErrorKind::no_device, Code::unsupported, "device",
                   ": expected a CUDA device, got none (no CUDA device is available: ",
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
        // It returns to `host` afterwards (a scratch buffer serves several kernels).
        InlineVector<std::pair<halide_buffer_t*, uint8_t*>, 8> wrapped;
        for (const CudaBuffer& b : buffers) {
          if (!b.on_device || result != 0) continue;
          uint8_t* pointer = b.buffer->host;
          b.buffer->host = nullptr;
          result = wrap_device_pointer(user_context, b.buffer, reinterpret_cast<uint64_t>(pointer));
          if (result == 0) wrapped.push_back({b.buffer, pointer});
          if (result != 0) b.buffer->host = pointer;
        }
        // Host inputs: Halide copies a buffer to the device only when its host side is dirty.
        for (const CudaBuffer& b : buffers) {
          if (!b.on_device && (!b.output || b.kept)) b.buffer->flags |= halide_buffer_flag_host_dirty;
        }
        if (result == 0) {
          args[0] = &user_context;
          result = kernel.entry(args.data());
        }
        // Host outputs come back; device outputs are complete when the call returns, as the
        // caller may read them on another stream (but on the caller's own stream, which orders
        // its later work after them).
        for (const CudaBuffer& b : buffers) {
          if (result != 0 || !b.output || (b.on_device && callers_stream())) continue;
          result = b.on_device ? halide_device_sync(user_context, b.buffer)
                               : halide_copy_to_host(user_context, b.buffer);
        }
        for (const CudaBuffer& b : buffers) {
          if (b.on_device) continue;
          // Host views got device copies from the kernel: free them.
          if (b.buffer->device) halide_device_free(user_context, b.buffer);
        }
        for (auto [b, pointer] : wrapped) {
          detach_device_pointer(user_context, b);
          b->host = pointer;
        }
        return result;
      },
      error);
}

#else  // a build without CUDA kernels (POOLGEN_CUDA_CAPABILITIES empty)

Status cuda_capability(int*) {
  return fail_as(ErrorKind::no_device, Code::unsupported, "device",
                 ": expected a CUDA device, got none (no CUDA device is available: this build ",
                 "has no CUDA kernels, CMake option POOLGEN_CUDA_CAPABILITIES is empty)");
}

int run_cuda_kernel(const Kernel&, KernelArgs&, const CudaBuffers&,
                    std::string* error) {
  *error = "this build has no CUDA kernels";
  return -1;
}

Status check_deferred_reports(bool) { return {}; }
int take_report_slot(uint64_t*) { return -1; }
void give_back_report_slot(int) {}
void queue_report(int, int64_t, int64_t, bool) {}
Status device_scratch(size_t, halide_buffer_t*, void**, uint8_t**) {
  return fail_as(ErrorKind::no_device, Code::unsupported, "device memory",
                 ": this build has no CUDA kernels");
}
void release_device_scratch(void*, halide_buffer_t*) {}

#endif

// ---------------------------------------------------------------------------------------------
// Scratch and reports (every build: the CPU twins take host memory).

KernelScratch::~KernelScratch() {
  for (int k = 0; k < count_; ++k) {
    Buffer& b = buffers_[k];
    if (b.handle || b.owner.device) release_device_scratch(b.handle, &b.owner);
  }
}

Status KernelScratch::make(halide_type_t type, std::initializer_list<int32_t> extents,
                           Buffer** made) {
  if (count_ == kBuffers) return fail(Code::internal, "scratch", ": full");
  Buffer& b = buffers_[count_];
  b.buffer.type = type;
  b.buffer.dimensions = static_cast<int32_t>(extents.size());
  b.buffer.dim = b.dims;
  int64_t elements = 1;
  int d = 0;
  for (int32_t extent : extents) {
    b.dims[d++] = {0, extent, static_cast<int32_t>(elements), 0};
    elements *= extent;
  }
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(1, elements)) * (type.bits / 8);
#if POOLGEN_WITH_CUDA && !POOLGEN_GPU_OPENCL
  if (device_ == Device::cuda) {
    b.owner_dim = {0, static_cast<int32_t>(bytes), 1, 0};
    b.owner.type = {halide_type_uint, 8};
    b.owner.dimensions = 1;
    b.owner.dim = &b.owner_dim;
    POOLGEN_RETURN_IF_ERROR(device_scratch(bytes, &b.owner, &b.handle, &b.buffer.host));
    b.on_device = true;
  }
#endif
  if (!b.on_device) {
    b.host.reset(new uint8_t[bytes]());
    b.buffer.host = b.host.get();
  }
  ++count_;
  *made = &b;
  return {};
}

KernelReport::KernelReport(Device device, DType index) : i32_(index == DType::i32) {
  position_.type = {halide_type_int, 64};
  index_.type = {halide_type_int, static_cast<uint8_t>(i32_ ? 32 : 64)};
  position_.host = reinterpret_cast<uint8_t*>(&position_value_);
  index_.host = reinterpret_cast<uint8_t*>(&index_value_);
  uint64_t device_address = 0;
  if (device == Device::cuda && callers_stream() &&
      (slot_ = take_report_slot(&device_address)) >= 0) {
    position_.host = reinterpret_cast<uint8_t*>(device_address);
    index_.host = reinterpret_cast<uint8_t*>(device_address + sizeof(int64_t));
  }
}

KernelReport::~KernelReport() {
  if (deferred()) give_back_report_slot(slot_);  // the call failed before its kernel ran
}

Status KernelReport::finish(int64_t first_position, int64_t bound) {
  if (deferred()) {
    queue_report(slot_, first_position, bound, i32_);
    slot_ = -1;
    return {};
  }
  int64_t index = index_value_;
  if (i32_) {
    int32_t narrow;
    std::memcpy(&narrow, &index_value_, sizeof narrow);
    index = narrow;
  }
  if (position_value_ == std::numeric_limits<int64_t>::max()) return {};
  return invalid_index_at(first_position + position_value_, index, bound);
}

}  // namespace detail

void set_cuda_allocator(const CudaAllocator& a) {
  std::lock_guard<std::mutex> lock(detail::allocator_mutex);
  detail::allocator = a.allocate ? a : CudaAllocator{};
}

Status cuda_check_reports(bool wait) { return detail::check_deferred_reports(wait); }

namespace detail {

}  // namespace detail
}  // namespace poolgen
