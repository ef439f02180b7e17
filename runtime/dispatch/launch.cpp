#include "dispatch/launch.hpp"

#include "dispatch/cpu.hpp"
#include "dispatch/cuda.hpp"

#include <algorithm>
#include <new>

namespace poolgen::detail {

void Launch::add_view(const View& view, DType type, Access access) {
  HalideView& v =
      *new (&views_[view_count_++].view) HalideView(view, kernel_.layout, type, flat_);
  args_.push_back(&v.buffer);
  if (access != Access::read) written_ |= 1u << (view_count_ - 1);
  if (kernel_.device != Device::cuda) return;
  cuda_.push_back({&v.buffer, view.device == Device::cuda, access != Access::read,
                   access == Access::write_some});
}

void Launch::add_scalar(int64_t value) {
  Scalar& s = scalars_[scalar_count_++];
  s.value = value;
  args_.push_back(&s.value);
}

void Launch::add_int32(int32_t value) {
  Scalar& s = scalars_[scalar_count_++];
  s.int32 = value;
  args_.push_back(&s.int32);
}

void Launch::add_flag(bool value) {
  Scalar& s = scalars_[scalar_count_++];
  s.flag = value;
  args_.push_back(&s.flag);
}

[[gnu::noinline]] int Launch::run_on_cuda(std::string* error) {
  if (!flat_) {
    halide_buffer_t* buffers[kViews];
    for (int k = 0; k < view_count_; ++k) buffers[k] = &views_[k].view.buffer;
    merge_planes(buffers, view_count_, kernel_.layout);
  }
  return run_cuda_kernel(kernel_, args_, cuda_, error);
}

Status Launch::run(int64_t call_bytes, bool* declined) {
  if (declined) *declined = false;
  // Only a view without elements may come without data (check_data). To a kernel a null host
  // asks for its bounds, or, built without that query (no_bounds_query), is an error: either
  // way such a launch runs nothing.
  if (kernel_.device != Device::cuda) {
    for (int k = 0; k < view_count_; ++k) {
      if (!views_[k].view.buffer.host) return {};
    }
  }
  if (lanes_ >= 0 && kernel_.in_cache_only) entry_ = variant_for(kernel_, lanes_, call_bytes);
  std::string error;
  const int result = kernel_.device == Device::cuda
                         ? run_on_cuda(&error)
                         : run_on_cpu(entry_, args_, &error, call_bytes);
  return result == 0 ? Status() : failed(result, error, declined);
}

Status Launch::failed(int result, const std::string& error, bool* declined) const {
  if (declined && (result == halide_error_code_requirement_failed ||
                   result == halide_error_code_specialize_fail ||
                   result == halide_error_code_constraint_violated)) {
    *declined = true;
    return {};
  }
  return kernel_failed(kernel_, error);
}

Status Launch::within_views(bool* within) {
  // A null host (and no device memory) makes every buffer a query, which the kernel answers
  // with the regions it needs instead of running.
  struct Saved {
    halide_buffer_t buffer;
    halide_dimension_t dims[5];
  } saved[kViews];
  for (int k = 0; k < view_count_; ++k) {
    halide_buffer_t& b = views_[k].view.buffer;
    saved[k].buffer = b;
    std::copy(b.dim, b.dim + b.dimensions, saved[k].dims);
    b.host = nullptr;
  }
  std::string error;
  const int result = run_on_cpu(entry_, args_, &error, 0);
  *within = true;
  for (int k = 0; k < view_count_; ++k) {
    halide_buffer_t& b = views_[k].view.buffer;
    const bool written = written_ >> k & 1;
    for (int d = 0; d < b.dimensions; ++d) {
      const halide_dimension_t &asked = saved[k].dims[d], &needed = b.dim[d];
      if (needed.min < asked.min || needed.min + needed.extent > asked.min + asked.extent ||
          (written && (needed.min != asked.min || needed.extent != asked.extent))) {
        *within = false;
      }
      b.dim[d] = asked;
    }
    b.host = saved[k].buffer.host;
    b.flags = saved[k].buffer.flags;
  }
  // The answer may also be that the region needed breaks the buffers' constraints (their
  // spatial minimums at 0): outside the views, too.
  if (result == halide_error_code_constraints_make_required_region_smaller) *within = false;
  else if (result != 0) return kernel_failed(kernel_, error);
  return {};
}

Status kernel_failed(const Kernel& kernel, const std::string& error) {
  return fail(Code::internal, "internal", ": expected kernel ", kernel.name, " to succeed, got: ",
              error);
}

}  // namespace poolgen::detail
