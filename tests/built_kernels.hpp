// What this build compiled (POOLGEN_VALUE_TYPES, POOLGEN_INDEX_TYPES): tests of a dtype the build
// left out are skipped, not failed.
#pragma once

#include "poolgen/poolgen.hpp"

namespace poolgen::test {

// How many kernels compiled_kernels() lists that `matches`.
template <typename Predicate>
int kernels_built(Predicate matches) {
  int count = 0;
  for (const KernelInfo& k : compiled_kernels()) count += matches(k);
  return count;
}

// Whether compiled_kernels() lists one that `matches`.
template <typename Predicate>
bool any_kernel_built(Predicate matches) {
  return kernels_built(matches) > 0;
}

inline bool pool_kernel_built(DType value, DType index) {
  return any_kernel_built([&](const KernelInfo& k) {
    return k.op == "pool" && k.value_dtype == value && k.index_dtype == index;
  });
}

// Whether the build has fixed-window pooling kernels (k2s2p0, k3s2p1) for these types
// (POOLGEN_FIXED_WINDOW_TYPES): the others pool those windows with the general kernels.
inline bool fixed_window_built(DType value, DType index) {
  return any_kernel_built([&](const KernelInfo& k) {
    return k.op == "pool" && k.value_dtype == value && k.index_dtype == index &&
           k.name.find("_k2s2p0") != std::string::npos;
  });
}

inline bool any_pool_kernel(DType value) {
  return pool_kernel_built(value, DType::i64) || pool_kernel_built(value, DType::i32);
}

// Unpooling kernels move bits: one of the same element width serves.
inline bool unpool_kernel_built(DType value, DType index) {
  return any_kernel_built([&](const KernelInfo& k) {
    return k.op.rfind("unpool", 0) == 0 && k.op.find("backward") == std::string::npos &&
           dtype_size(k.value_dtype) == dtype_size(value) && k.index_dtype == index;
  });
}

// The CPU twin of CUDA's unpooling backward (Path::winner); listed once a backward op is linked.
inline bool unpool_backward_twin_built() {
  return any_kernel_built([](const KernelInfo& k) {
    return k.op == "unpool_backward_reporting" && k.device == Device::cpu;
  });
}

// A CPU twin of a kernel only GPUs run (Path::winner; -DPOOLGEN_GPU_TWINS=ON), `op` as
// KernelInfo::op names it ("unpool_winner", "unpool_window_gather").
inline bool cpu_twin_built(const std::string& op, DType index) {
  return any_kernel_built([&](const KernelInfo& k) {
    return k.op == op && k.device == Device::cpu && k.index_dtype == index;
  });
}

// The CPU twin of CUDA's pooling backward, the window gather of any window (Path::winner; f32,
// i64 indices, contiguous, for rank nd).
inline bool backward_window_twin_built(int nd) {
  return any_kernel_built([&](const KernelInfo& k) {
    return k.op == "pool_backward_window_gather" && k.device == Device::cpu && k.nd == nd &&
           k.value_dtype == DType::f32 && k.index_dtype == DType::i64;
  });
}

// The backward ops' CPU kernels (listed once the program links a backward op). Pooling's
// gradient adds in its dtype: one kernel per dtype (the scatter; the window gathers of
// POOLGEN_BACKWARD_WINDOW_TYPES, and by default f32's k2s2p0 ones (channels-last 2-D and 3-D,
// contiguous 1-D and 2-D) and, with AVX-512, its channels-last 2-D k3s2p1 one for i64);
// unpooling's moves bits: one per width. How many windows have a gather for these.
inline int backward_windows_built(DType value, DType index, int nd, Layout layout) {
  return kernels_built([&](const KernelInfo& k) {
    return k.op == "pool_backward_gather" && k.value_dtype == value && k.index_dtype == index &&
           k.nd == nd && k.layout == layout;
  });
}

inline bool pool_backward_kernel_built(DType value, DType index) {
  return any_kernel_built([&](const KernelInfo& k) {
    return k.op == "pool_backward_scatter" && k.device == Device::cpu && k.value_dtype == value &&
           k.index_dtype == index;
  });
}

inline bool unpool_backward_kernel_built(DType value, DType index) {
  return any_kernel_built([&](const KernelInfo& k) {
    return k.op == "unpool_backward" && k.device == Device::cpu &&
           dtype_size(k.value_dtype) == dtype_size(value) && k.index_dtype == index;
  });
}

}  // namespace poolgen::test
