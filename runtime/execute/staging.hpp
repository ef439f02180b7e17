// What a kernel gets for a call's views: the views themselves, or packed copies in its layout
// (written back for outputs), and the pieces of planes its buffers hold.
#pragma once

#include "core/status.hpp"
#include "core/view.hpp"
#include "dispatch/launch.hpp"

#include <functional>
#include <initializer_list>
#include <memory>
#include <vector>

namespace poolgen::detail {

// What a kernel of `layout` gets for `view`: the view itself when it fits (with flat planes, if
// asked), else a packed copy in `layout` that finish() writes back (outputs).
class Staged {
 public:
  enum Role { input, output };
  Staged(const View& view, Layout layout, bool flat, Role role);
  const View& view() const { return staged_; }
  void finish() const;  // outputs: copy a packed copy back into the caller's view

 private:
  View original_, staged_;
  Role role_;
  std::unique_ptr<char[]> scratch_;
};

// The call's piece `p` (every view sliced alike), its first plane in (n, c) order.
using PieceFn = std::function<Status(const Views& p, int64_t first_plane)>;

// Whether a kernel of `layout` takes each of `views` whole, as it is: fits and fits_kernel (the
// fast paths that leave other calls to a general kernel).
bool takes_whole(std::initializer_list<const View*> views, Layout layout);
// The same for the kernels over flat planes: each view fits, with flat planes, as it is.
bool takes_flat(const Views& views, Layout layout);

// Runs `run` on pieces of whole (n, c) planes of `views`, in input order, each as many planes as
// `fits` allows; a single plane that does not fit goes to `run_plane` (in channels-last, all
// the planes of its image).
Status split_pieces(const Views& views, const std::function<bool(const Views&)>& fits,
                    const PieceFn& run, const PieceFn& run_plane);
// split_pieces, but a call that fits whole (nearly all) runs without building its std::functions.
template <typename Fits, typename Run, typename RunPlane>
Status for_each_piece(const Views& views, const Fits& fits, const Run& run,
                      const RunPlane& run_plane) {
  if (fits(views)) return run(views, 0);
  return split_pieces(views, fits, run, run_plane);
}

// The largest count in [0, extent] for which fits(count) holds (fits is monotone: true up to
// some count, false beyond).
int64_t largest_fitting(int64_t extent, const std::function<bool(int64_t)>& fits);


}  // namespace poolgen::detail
