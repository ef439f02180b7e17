#include "execute/staging.hpp"

#include "execute/memory.hpp"

namespace poolgen::detail {

Staged::Staged(const View& view, Layout layout, bool flat, Role role)
    : original_(view), staged_(view), role_(role) {
  if (fits(view, layout) && (!flat || view.flat_planes(layout))) return;
  // Uninitialized: an input's copy or the kernel writes every byte.
  scratch_.reset(new char[static_cast<size_t>(view.bytes())]);
  staged_ = packed(view, layout, scratch_.get());
  if (role == input) copy_elements_shared(original_, staged_);
}

void Staged::finish() const {
  if (role_ == output && scratch_) copy_elements_shared(staged_, original_);
}

bool takes_whole(std::initializer_list<const View*> views, Layout layout) {
  for (const View* v : views) {
    if (!fits(*v, layout) || !fits_kernel(*v, layout)) return false;
  }
  return true;
}

bool takes_flat(const Views& views, Layout layout) {
  for (const View& v : views) {
    if (!fits(v, layout) || !v.flat_planes(layout) || !fits_kernel(v, layout, true)) return false;
  }
  return true;
}

int64_t largest_fitting(int64_t extent, const std::function<bool(int64_t)>& fits) {
  int64_t lo = 0, hi = extent;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

namespace {

Views slice_all(const Views& views, int dim, int64_t start, int64_t count) {
  Views s;
  for (const View& v : views) s.push_back(slice(v, dim, start, count));
  return s;
}

// Splits along dimension `dim` (0: N, 1: C); planes of `views` start at plane `first_plane`.
Status split_planes(const Views& views, int dim, int64_t first_plane,
                    const std::function<bool(const Views&)>& fits, const PieceFn& run,
                    const PieceFn& run_plane) {
  if (fits(views)) return run(views, first_plane);
  if (dim == 2) return run_plane(views, first_plane);
  const View& v = views.front();
  const int64_t extent = v.shape[dim], planes_per_step = dim == 0 ? v.shape[1] : 1;
  const int64_t count = largest_fitting(
      extent, [&](int64_t k) { return fits(slice_all(views, dim, 0, k)); });
  // Channels-last planes interleave (channel stride 1): when not one fits, the image's planes
  // go together, split by rows rather than one channel at a time.
  if (count == 0 && dim == 1 && v.strides[1] == 1) return run_plane(views, first_plane);
  for (int64_t start = 0; start < extent; start += std::max<int64_t>(count, 1)) {
    const int64_t first = first_plane + start * planes_per_step;
    if (count == 0) {
      POOLGEN_RETURN_IF_ERROR(
          split_planes(slice_all(views, dim, start, 1), dim + 1, first, fits, run, run_plane));
    } else {
      POOLGEN_RETURN_IF_ERROR(
          run(slice_all(views, dim, start, std::min(count, extent - start)), first));
    }
  }
  return {};
}

}  // namespace

Status split_pieces(const Views& views, const std::function<bool(const Views&)>& fits,
                    const PieceFn& run, const PieceFn& run_plane) {
  return split_planes(views, 0, 0, fits, run, run_plane);
}


}  // namespace poolgen::detail
