// Running the kernels that move elements by index over flat planes (the runtime hands each
// kernel its (n, c) planes flat, Halide arguments (values, indices, output)):
// - the scatter, shared by max_unpool (each value stored into the slot its index names, the
//   latest duplicate winning) and max_pool_backward (each gradient added to its slot in input
//   order, indices outside the plane dropped): plane groups sized for the cache, one group per
//   task, and a plain loop for planes beyond a kernel's buffers;
// (The GPU algorithms' runs, which report their first invalid index instead of stopping, are
// execute/gpu_algorithms.hpp's.)
#pragma once

#include "core/view.hpp"
#include "dispatch/launch.hpp"
#include "execute/direct_run.hpp"
#include "parallel/settings.hpp"
#include "validate/views.hpp"

#include <functional>
#include <memory>

namespace poolgen::detail {

enum class ScatterMode { store, accumulate };

// The bytes a by-index call moves: `values` elements and as many indices, and the slots of
// their planes (each of `plane` values elements gives `slot_plane` slots).
int64_t by_index_bytes(const View& values, DType index, int64_t plane, int64_t slot_plane);

// Names the first index, in input order, that lies outside its output plane (ok when none does);
// the view's first element is element `first_position` of the call.
Status invalid_index_error(const View& indices, int64_t plane, int64_t first_position = 0);

// The error of `kernel`, which declined (Launch::run) at an index: the first invalid one, named,
// or an internal error where every index is valid.
Status declined_at_index(const Kernel& kernel, const View& indices, int64_t plane);

// Indices of another format rewritten into plane offsets: src, part of the indices (one image's
// channels from plane (n, c)), into dst, a packed view of its shape and dtype.
using IndexRewrite =
    std::function<Status(const View& src, const View& dst, int64_t n, int64_t c)>;

// Runs a scatter kernel (max_unpool_scatter, accumulating for ScatterMode::accumulate) over flat
// planes in its layout, through packed copies where needed; the call moves `call_bytes` in all.
// store: an invalid index is index_out_of_range naming the first in input order. With a
// `rewrite`, each group's indices are rewritten just before its kernel runs (in cache, on the
// group's thread); where a rewrite fails, its error (some group's, not necessarily the first in
// input order) is the result. `global` (store only): the indices are ONNX's offsets in the whole
// output, which the kernels take as they are (the rewrite then serves only planes beyond the
// kernels' buffers); an index outside its plane is index_out_of_range (not naming it).
// `slab_stride`: the output rows per values row in the outermost spatial dimension when every
// window lies within its stride there (slab_stride(), below), so that a streamed output may be
// scattered by slabs of rows; 0 where windows may overlap.
Status scatter(const Kernel& kernel, ScatterMode mode, const View& values, const View& indices,
               const View& output, int64_t call_bytes, const IndexRewrite* rewrite = nullptr,
               bool global = false, int64_t slab_stride = 0);

// The (n, c) planes one scatter kernel call takes (a group, one task's), for an output `o` in
// `layout` of a call moving `call_bytes` on `cores` threads: contiguous groups hold at least 16
// KiB and at most scatter_group_bytes() of output (fewer where the cores want more groups);
// channels-last ones whole images, but for unpooling's images split into blocks of whole cache
// lines when there are fewer images than cores and the call moves 4 to 16 MiB (scatter.cpp has
// the measurements).
int64_t planes_per_group(const View& o, Layout layout, ScatterMode mode, int64_t cores,
                         int64_t call_bytes);

// Whether a scatter's output goes to memory by copy_streaming (at least streaming_bytes()): the
// one rule the scatter's groups, its direct run and the choice of a gather over it follow.
inline bool output_streams(const View& output) { return output.bytes() >= streaming_bytes(); }

// Whether a scatter kernel's prefetches run on a call moving `call_bytes` (its flag, where it
// takes one): the channels-last kernels' of pixels out of cache (prefetch_pays), the contiguous
// ones' of elements where they pay, in cache or out (element_prefetches_pay).
inline bool scatter_prefetches(const Kernel& kernel, int64_t call_bytes) {
  return kernel.layout == Layout::contiguous ? element_prefetches_pay()
                                             : prefetch_pays(call_bytes);
}

// A scatter kernel's launch over flat views (values, indices, output) in its layout; the
// unpooling kernel takes its plane origin and stride between the indices and the output.
struct ScatterLaunch : Launch {
  // `prefetch`: the call's scatter_prefetches, for kernels that take the flag.
  ScatterLaunch(const Kernel& kernel, const View& v, const View& i, const View& o,
                int64_t origin = 0, int64_t stride = 0, bool prefetch = false);
};

// A CPU scatter in one kernel call (no index rewrite): built once for a call that repeats its
// shapes, so that a repeat sets three data pointers, zeroes the output and calls the kernel,
// without the copies, groups and tasks scatter() decides each time. make() gives null where
// scatter() would do more than one kernel call on the views as they are (copies, more than a
// group's bytes, streaming); run() leaves to scatter() a call that would now share threads or
// stream, or whose kernel fails (scatter() names the index).
class DirectScatter : public DirectRun {
 public:
  static std::unique_ptr<DirectScatter> make(const Kernel& kernel, ScatterMode mode,
                                             const Views& views, int64_t slab_stride);
  Status run(void* const (&data)[3]) override;  // (values, indices, output)

 private:
  DirectScatter(const Kernel& kernel, ScatterMode mode, const Views& views, int64_t call_bytes,
                int64_t slab_stride);
  const Kernel& kernel_;
  ScatterMode mode_;
  View views_[3];
  int64_t call_bytes_, slab_stride_;
  bool output_packed_;  // asked once: a tenth of a 1x1x2x2 unpooling's repeated call
  ScatterLaunch call_;  // plane offsets (origin and stride 0); the call's scatter_prefetches
};

// The window's stride in its outermost spatial dimension where every window lies within it
// there (its dilated extent at most the stride, no padding before it), else 0: scatter()'s
// `slab_stride`.
int64_t slab_stride(const Window& window);

// The scatter on planes beyond a kernel's buffers (a hand-written kernel: docs/design.md,
// "Hand-written compute"), one thread, 64-bit offsets: each plane of flat views in `layout`
// zeroed, then every value stored at its index (the latest duplicate winning; every index
// checked first, the first invalid one in input order the error) or added (indices outside the
// plane dropped).
Status scatter_large(ScatterMode mode, const View& values, const View& indices,
                     const View& output, Layout layout);

// The gather by index (max_unpool_backward) on planes beyond a kernel's buffers (a hand-written
// kernel, as scatter()'s loop for such planes: docs/design.md, "Hand-written compute"), one thread,
// 64-bit offsets: output[j] = values[indices[j]] in each (n, c) plane of flat views in `layout`,
// after every index is checked (the first invalid one in input order is the error; the views'
// first plane is plane `first_plane` of the call).
Status gather_large(const View& values, const View& indices, const View& output, Layout layout,
                    int64_t first_plane);

}  // namespace poolgen::detail
