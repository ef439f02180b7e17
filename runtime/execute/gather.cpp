#include "execute/gather.hpp"

#include "dispatch/launch.hpp"
#include "execute/staging.hpp"

namespace poolgen::detail {

namespace {

struct GatherLaunch : Launch {
  GatherLaunch(const Kernel& kernel, const Views& views, int64_t plane_stride = 0)
      : Launch(kernel) {
    add_view(views[0], kernel.value, Access::read);
    add_view(views[1], kernel.index, Access::read);
    if (kernel.op == Op::unpool_gather) add_scalar(plane_stride);  // the gradient's: offsets only
    add_view(views[2], kernel.value, Access::write);
    fit_variant(views[2]);
  }
};

}  // namespace

Status gather_takes(const Kernel& kernel, const Views& views, bool* takes) {
  *takes = takes_whole({&views[0], &views[1], &views[2]}, kernel.layout);
  if (!*takes) return {};
  return GatherLaunch(kernel, views).within_views(takes);
}

Status gather_if_served(const Kernel& kernel, const Views& views, int64_t call_bytes,
                        bool* served, int64_t plane_stride) {
  bool declined = false;
  POOLGEN_RETURN_IF_ERROR(GatherLaunch(kernel, views, plane_stride).run(call_bytes, &declined));
  *served = !declined;
  return {};
}

}  // namespace poolgen::detail
