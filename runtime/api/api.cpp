// The small parts of the public API: dtypes, views, introspection, settings.
#include "core/view.hpp"
#include "dispatch/kernel_table.hpp"
#include "ops/op.hpp"
#include "parallel/settings.hpp"
#include "parallel/workers.hpp"

#include <HalideRuntime.h>

#include <cstring>
#include <string>
#include <utility>

extern "C" {
#define POOLGEN_KERNEL(op, nd, k, s, p, layout, value, index, device, capability, cells, \
                       prefetches, name)
#include "kernel_table.inc"  // for POOLGEN_CPU_TARGET_NAMES, POOLGEN_AVX512_*, POOLGEN_CUDA_TARGET_PREFIX
#undef POOLGEN_KERNEL
}

namespace poolgen {

const char* dtype_name(DType dtype) {
  static const char* const kNames[] = {"f32", "i64", "f64", "f16", "bf16", "i8", "u8", "i16", "i32"};
  const auto i = static_cast<uint32_t>(dtype);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "unknown";
}

size_t dtype_size(DType dtype) {
  const auto i = static_cast<uint32_t>(dtype);
  if (i > static_cast<uint32_t>(DType::i32)) return 0;
  return static_cast<size_t>(detail::element_size(dtype));
}

TensorView contiguous(void* data, DType dtype, Ints shape) {
  TensorView view;
  view.data = data;
  view.dtype = dtype;
  view.shape = std::move(shape);
  return view;
}

TensorView channels_last(void* data, DType dtype, Ints shape, int nd) {
  TensorView view = contiguous(data, dtype, shape);
  const size_t rank = view.shape.size();
  const size_t c = nd > 0 && rank == static_cast<size_t>(nd) + 1 ? 0 : 1;  // batch-less: 0
  if (rank < c + 2) return view;  // no spatial dimension: the call's shape check reports it
  view.strides.assign(rank, 0);
  int64_t stride = 1;
  view.strides[c] = stride;
  stride *= view.shape[c];
  for (size_t d = rank; d-- > 0;) {
    if (d == c) continue;
    view.strides[d] = stride;
    stride *= view.shape[d];
  }
  return view;
}

#define POOLGEN_TYPED_VIEWS(T, dtype)                                                        \
  TensorView contiguous(T* data, Ints shape) { return contiguous(data, dtype, shape); }      \
  TensorView contiguous(const T* data, Ints shape) {                                         \
    return contiguous(const_cast<T*>(data), dtype, shape);                                   \
  }                                                                                          \
  TensorView channels_last(T* data, Ints shape, int nd) {                                   \
    return channels_last(data, dtype, shape, nd);                                            \
  }                                                                                          \
  TensorView channels_last(const T* data, Ints shape, int nd) {                              \
    return channels_last(const_cast<T*>(data), dtype, shape, nd);                            \
  }
POOLGEN_TYPED_VIEWS(float, DType::f32)
POOLGEN_TYPED_VIEWS(double, DType::f64)
POOLGEN_TYPED_VIEWS(f16_t, DType::f16)
POOLGEN_TYPED_VIEWS(bf16_t, DType::bf16)
POOLGEN_TYPED_VIEWS(int8_t, DType::i8)
POOLGEN_TYPED_VIEWS(uint8_t, DType::u8)
POOLGEN_TYPED_VIEWS(int16_t, DType::i16)
POOLGEN_TYPED_VIEWS(int32_t, DType::i32)
POOLGEN_TYPED_VIEWS(int64_t, DType::i64)
#undef POOLGEN_TYPED_VIEWS

PreparedCall::PreparedCall() = default;
PreparedCall::~PreparedCall() = default;
PreparedCall::PreparedCall(PreparedCall&&) noexcept = default;
PreparedCall& PreparedCall::operator=(PreparedCall&&) noexcept = default;

Status PreparedCall::run(void* first, void* second, void* third) {
  if (!state_) {
    return detail::fail(Code::invalid_argument, "call",
                        ": expected a prepared call, got an empty PreparedCall");
  }
  return detail::without_exceptions([&] { return state_->run({first, second, third}); });
}

std::vector<KernelInfo> compiled_kernels() {
  std::vector<KernelInfo> kernels;
  for (const detail::KernelTable* table : detail::registered_kernel_tables()) {
    for (const detail::Kernel& k : table->kernels()) {
      std::vector<std::string> targets = {POOLGEN_CPU_TARGET_NAMES};
      for (const char* wide : {POOLGEN_AVX512_KERNEL_NAMES}) {  // the families AVX-512 pays for
        if (std::strcmp(wide, k.name) == 0) targets.insert(targets.begin(), POOLGEN_AVX512_TARGET);
      }
      if (k.avx512_only) targets = {POOLGEN_AVX512_TARGET, targets.back()};  // and the floor
      if (k.device == Device::cuda) {
        targets = {POOLGEN_CUDA_TARGET_PREFIX + std::to_string(k.capability)};
      }
      kernels.push_back({k.name, detail::op_name(k.op), k.nd, k.layout, k.value, k.index,
                         targets, k.device, k.capability});
    }
  }
  return kernels;
}

// The workers end here (after a call in progress) and the next shared call starts the new
// count. A process forked after they started has none of them, and runs every call on its
// calling thread.
void set_num_threads(int threads) {
  if (detail::in_child_of_workers()) return;
  detail::stop_workers();
  halide_set_num_threads(threads);  // where the count lives (thread_count)
  detail::note_thread_count();
  detail::note_settings_change();
}

}  // namespace poolgen
