#include "execute/scatter.hpp"

#include "core/float16.hpp"
#include "execute/memory.hpp"
#include "execute/staging.hpp"
#include "parallel/settings.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>

namespace poolgen::detail {

// Cold, as scatter_large and gather_large are (planes of 2^31 elements and more): compiled for
// size, off the calls' path (the gradient's slabs paid for their code with this).
[[gnu::cold]] Status invalid_index_error(const View& indices, int64_t plane,
                                         int64_t first_position) {
  Status status;
  for_each_element(indices, [&](int64_t position, int64_t offset) {
    const int64_t index = indices.dtype == DType::i32
                              ? static_cast<const int32_t*>(indices.data)[offset]
                              : static_cast<const int64_t*>(indices.data)[offset];
    if (status.ok() && (index < 0 || index >= plane)) {
      status = invalid_index_at(first_position + position, index, plane);
    }
  });
  return status;
}

Status declined_at_index(const Kernel& kernel, const View& indices, int64_t plane) {
  const Status invalid = invalid_index_error(indices, plane);
  return invalid.ok() ? kernel_failed(kernel, "stopped at an index, yet none is invalid")
                      : invalid;
}

int64_t by_index_bytes(const View& values, DType index, int64_t plane, int64_t slot_plane) {
  const int64_t elements = values.elements();
  const int64_t slots = plane > 0 ? elements / plane * slot_plane : 0;
  return elements * element_size(index) + (elements + slots) * element_size(values.dtype);
}

int64_t slab_stride(const Window& w) {
  const int64_t extent = (w.kernel[0] - 1) * w.dilation[0] + 1;
  return w.padding[0] == 0 && extent <= w.stride[0] ? w.stride[0] : 0;
}

// Planes per scatter call: a group's output stays in cache between the runtime's zero and the
// kernel's scatter, and there are enough groups to keep `cores` threads busy. In channels-last a
// plane's elements lie C apart, interleaved with the other channels': groups are whole images,
// split into channel blocks of whole cache lines only when there are fewer images than cores
// and the call moves at least kSplitLeastBytes (`call_bytes`): below that the threads
// contend for the same lines and pages, which the joint zeroing of the blocks (scatter())
// does not make up for (Zen 4 VM, f32 i64 NHWC k3s2p1 unpooling, two threads, split / one
// thread's time, us: 1x64x72x72, 2.3 MB, 113-130 / 97-103; 1x32x112x112, 2.8 MB, 146-163 /
// 114-129; 1x64x80x80, 2.9 MB, 130-154 / 120-126; 1x128x64x64, 3.7 MB, 158-181 / 156-157;
// 1x64x90x90, 3.6 MB, even; 1x64x100x100, 4.5 MB, 178-199 / 182-220; 1x64x128x128, 7.3 MB,
// 249-288 / 313-356; 1x64x160x160 351-397 / 500-544), and at most kSplitBytes: above it each
// thread's half-pixel stripes go to memory twice (zero, then scatter) and two threads measured
// 1.1-1.75x slower than one (1x64x256x256 to 1x64x1024x1024, 29 MB to 470 MB). The
// accumulating scatter (pooling's gradient) never splits an image: split, it measured slower at
// every size (k2s2p0 f32, us on one / two threads: 1x64x90x90 269 / 432, 1x64x128x128 535 /
// 649, 1x64x182x182 1067 / 1163).
// A streaming call whose images go by slabs shares each image's rows instead (scatter()).
// Contiguous groups hold at least 16 KiB of output where the planes allow: a kernel call costs
// more than tiny planes' work (1x64x7x7 f32, four groups of 16 planes -> one, us on one thread,
// four interleaved rounds: unpooling 2.0-2.9 -> 1.4-2.1, pooling's gradient 2.5-4.0 -> 1.7-1.9).
int64_t planes_per_group(const View& o, Layout layout, ScatterMode mode, int64_t cores,
                         int64_t call_bytes) {
  constexpr int64_t kLineBytes = 64;
  constexpr int64_t kSplitLeastBytes = 4 << 20, kSplitBytes = 16 << 20;
  constexpr int64_t kLeastGroupBytes = 16 << 10;
  const int64_t size = element_size(o.dtype);
  const int64_t planes = o.shape[0] * o.shape[1], channels = o.shape[1];
  const int64_t plane_bytes = std::max<int64_t>(1, o.plane() * size);
  if (layout == Layout::channels_last) {
    if (mode == ScatterMode::accumulate || o.shape[0] >= cores ||
        call_bytes < kSplitLeastBytes || call_bytes > kSplitBytes) {
      return channels;
    }
    const int64_t line = std::max<int64_t>(1, kLineBytes / size);
    const int64_t blocks = std::min(cores, std::max<int64_t>(1, channels / line));
    return (channels / blocks + line - 1) / line * line;
  }
  // A call on one thread needs no more groups than the cache asks for: each group is a kernel
  // call (1x64x14x14 unpooling 3.1 -> 2.8 us with one group instead of four).
  const int64_t for_cores = cores > 1 ? (planes + 4 * cores - 1) / (4 * cores) : planes;
  const int64_t least = (kLeastGroupBytes + plane_bytes - 1) / plane_bytes;
  return std::max<int64_t>(
      1, std::min(scatter_group_bytes() / plane_bytes, std::max(least, for_cores)));
}

namespace {

// One Halide task per group of planes: the scatter kernel runs on planes
// [task * planes, (task + 1) * planes) of the (N, C) planes, in one thread.
struct ScatterGroups {
  const Kernel* kernel;
  View values, indices, output;
  int64_t planes;
  const IndexRewrite* rewrite = nullptr;
  bool global = false;  // ONNX's offsets: the unpooling kernel subtracts each plane's first slot
  bool streaming = false;  // outputs beyond the caches: copy_streaming from a scratch
  // Output rows per values row in the outermost spatial dimension where every window lies
  // within its stride there (unpooling's slabs, below); 0: windows may overlap.
  int64_t slab_stride = 0;
  // Tasks per group (> 1: fewer groups than threads, each a whole image taking slabs, whose
  // values rows the tasks share); groups a task sent back whole then run after them.
  int64_t parts = 1;
  std::vector<char> redo;
  std::mutex mutex;
  Status failure;  // the first kernel failure (not a declined run), if any
  Status rewrite_failed;
  int64_t slab = slab_bytes();  // a slab's output bytes at most
  bool prefetch = false;  // the call's: the kernel's prefetches run (scatter_prefetches)
  bool zeroed = false;  // the output was zeroed whole before the groups ran (channel blocks)

  // Planes [first, first + count) of `v` (never crossing a batch).
  [[gnu::noinline]] static View part(const View& v, int64_t first, int64_t count) {
    const int64_t n = first / v.shape[1], c = first % v.shape[1];
    return slice(slice(v, 0, n, 1), 1, c, std::min(count, v.shape[1] - c));
  }

  // A streaming call's group that takes no slabs (below) goes to a scratch in cache, then to
  // the output bypassing it; a group larger than kStagingBytes (a channels-last image) would
  // leave its scratch's cache itself: 3-D NDHWC 2x16x32x64x64, images of 8 MiB, measured 1.7 ->
  // 2.9 ms on two threads staged.
  static constexpr int64_t kStagingBytes = 4 << 20;

  int run(int task) {
    if (parts > 1) {  // values rows [q0, q1) of one group, no rewrite (scatter() checks)
      const int64_t group = task / parts, share = task % parts, first = group * planes;
      const View v = part(values, first, planes);
      const int64_t q0 = v.shape[2] * share / parts, q1 = v.shape[2] * (share + 1) / parts;
      if (!run_slabs(v, part(indices, first, planes), part(output, first, planes), first, q0,
                     q1)) {
        std::lock_guard<std::mutex> lock(mutex);
        redo[static_cast<size_t>(group)] = 1;
      }
      return 0;
    }
    auto& g = *this;
    const Layout layout = g.kernel->layout;
    const int64_t end = std::min((task + 1) * g.planes, g.output.shape[0] * g.output.shape[1]);
    for (int64_t first = task * g.planes; first < end;) {
      const View v = part(g.values, first, end - first), o = part(g.output, first, end - first);
      View i = part(g.indices, first, end - first);
      thread_local std::vector<char> offsets;  // the group's rewritten indices
      if (g.rewrite && !g.global) {
        offsets.resize(static_cast<size_t>(i.bytes()));
        const View dst = packed(i, layout, offsets.data());
        Status st = (*g.rewrite)(i, dst, first / g.indices.shape[1], first % g.indices.shape[1]);
        if (!st.ok()) {
          std::lock_guard<std::mutex> lock(g.mutex);
          if (g.rewrite_failed.ok()) g.rewrite_failed = std::move(st);
          return 1;
        }
        i = dst;
      }
      if (!(g.streaming && takes_slabs(v, i, o) && run_slabs(v, i, o, first, 0, v.shape[2]))) {
        thread_local std::vector<char> staging;
        const bool stream = g.streaming && is_packed(o, layout) && o.bytes() <= kStagingBytes;
        if (stream) staging.resize(static_cast<size_t>(o.bytes()));
        bool declined = false;
        Status status =
            launch(v, i, stream ? packed(o, layout, staging.data()) : o, first, 0, &declined);
        if (!status.ok() || declined) {
          std::lock_guard<std::mutex> lock(g.mutex);
          if (g.failure.ok()) g.failure = std::move(status);
          return 1;
        }
        if (stream) copy_streaming(o.data, staging.data(), static_cast<size_t>(o.bytes()));
      }
      first += o.shape[1];
    }
    return 0;
  }

  // The kernel on a group's planes (from plane `first` of the call), its output's flat
  // dimension starting at slot `first_slot` (a slab's).
  // *declined where the store kernel stopped at an invalid index.
  Status launch(const View& v, const View& i, const View& o, int64_t first, int64_t first_slot,
                bool* declined) const {
    const Layout layout = kernel->layout;
    ScatterLaunch call(*kernel, v, i, o, first, global ? o.plane() : 0, prefetch);
    call.view_buffer(2).dim[layout == Layout::channels_last ? 1 : 0].min =
        static_cast<int32_t>(first_slot);
    if (!zeroed) zero_elements(o, layout);  // the CPU kernel scatters into zeroed planes
    // The scatter kernel is serial (the groups are the tasks): no bytes to share.
    return call.run(0, declined);
  }

  // At most 256 KiB of output a slab (its scratch then stays in L2), and no more than the
  // streaming threshold, which the tests lower to 0 to run slabs of one values row (in every
  // group: the gradient's least group is that threshold too, if lower).
  static int64_t slab_bytes() {
    constexpr int64_t kSlabBytes = 256 << 10;
    return std::min(kSlabBytes, std::max<int64_t>(1, streaming_bytes()));
  }

  // Pooling's gradient (the accumulating kernel), not unpooling.
  bool accumulates() const { return kernel->op != Op::unpool_scatter; }

  // A group larger than a slab (a channels-last image, or one large plane) where no window
  // crosses its stride in the outermost spatial dimension (slab_stride): slabs of rows, each
  // the output rows of some values rows, go through a scratch in L2 and out with non-temporal
  // stores, so the output is written once and never read (streaming; otherwise, when an image
  // is shared among threads, each slab goes straight to the output). A slab where some index
  // lies outside it (outside its window, or invalid) ends the route: the group then runs again
  // whole (staged if it fits kStagingBytes), which decides (false), so any indices give the
  // same result, valid ones outside their window at up to twice the cost. A slab writes only
  // inside itself: unpooling's kernel stops at such an index; the accumulating one would drop
  // it, as it drops an empty window's, so pooling's gradient checks each slab's indices after
  // its kernel has brought them into cache (indices_within, on packed indices: checked first,
  // they cost what the slabs gained). Streaming, unpooling takes slabs for every group above a
  // slab, pooling's gradient only for groups too large to stage whole: docs/kernels.md,
  // "Streaming outputs", has the measurements.
  // takes_slabs: whether a group may go this route (run_slabs).
  [[gnu::noinline]] bool takes_slabs(const View& v, const View& i, const View& o) const {
    const Layout layout = kernel->layout;
    return slab_stride != 0 && is_packed(o, layout) &&
           (!accumulates() ||
            (is_packed(i, layout) &&
             (!streaming || o.bytes() > std::min(kStagingBytes, streaming_bytes())))) &&
           (layout != Layout::contiguous || o.shape[1] == 1) && o.bytes() > slab &&
           v.shape[2] > 0;
  }

  // Values rows [q0, q1) of a group that takes_slabs, by slabs (false: the group must run whole).
  bool run_slabs(const View& v, const View& i, const View& o, int64_t first, int64_t q0,
                 int64_t q1) const {
    const Layout layout = kernel->layout;
    const int64_t rows = o.shape[2], value_rows = v.shape[2];
    const int64_t row_bytes = o.bytes() / rows, row_slots = o.plane() / rows;
    const int64_t per_slab = std::max<int64_t>(1, slab / (slab_stride * row_bytes));
    thread_local std::vector<char> staging;
    for (int64_t q = q0; q < q1; q += per_slab) {
      const int64_t count = std::min(per_slab, q1 - q);
      // The last slab also takes the rows past the last window (a larger output_size).
      const int64_t top = std::min(q * slab_stride, rows);
      const int64_t bottom =
          q + count == value_rows ? rows : std::min((q + count) * slab_stride, rows);
      const View out = slice(o, 2, top, bottom - top);
      if (out.elements() == 0) return false;
      if (streaming) staging.resize(static_cast<size_t>(out.bytes()));
      const View indices = slice(i, 2, q, count);
      bool declined = false;
      // The check after the kernel, which brought the indices into cache. A slab that failed
      // sends its group back whole, whose run reports the failure.
      if (!launch(slice(v, 2, q, count), indices,
                  streaming ? packed(out, layout, staging.data()) : out, first, top * row_slots,
                  &declined)
               .ok() ||
          declined ||
          (accumulates() && !indices_within(indices.data, indices.dtype, indices.elements(),
                                         top * row_slots, bottom * row_slots))) {
        return false;
      }
      if (streaming) copy_streaming(out.data, staging.data(), static_cast<size_t>(out.bytes()));
    }
    return true;
  }
};

// The slot `to` plus the value `from` in the arithmetic of `dtype` (add_in_type's, generators/
// window.h): the huge-plane loop's counterpart of the accumulating kernel.
void add_element(DType dtype, char* to, const char* from) {
  auto add = [&](auto zero, auto widen, auto narrow) {
    decltype(zero) a, b;
    std::memcpy(&a, to, sizeof a);
    std::memcpy(&b, from, sizeof b);
    a = narrow(widen(a) + widen(b));
    std::memcpy(to, &a, sizeof a);
  };
  auto same = [](auto v) { return v; };
  switch (dtype) {
    case DType::f32: return add(0.0f, same, same);
    case DType::f64: return add(0.0, same, same);
    case DType::f16: return add(uint16_t{0}, f16_to_float, float_to_f16);
    default: return add(uint16_t{0}, bf16_to_float, float_to_bf16);  // bf16
  }
}

// Plane (n, c) of a flat view in `layout`, for the loops over planes beyond a kernel's buffers:
// its first byte, and the bytes from one element to the next.
struct FlatPlane {
  char* data;
  int64_t step;
  FlatPlane(const View& view, Layout layout, int64_t n, int64_t c)
      : data(static_cast<char*>(slice(slice(view, 0, n, 1), 1, c, 1).data)),
        step(view.plane_step(layout) * element_size(view.dtype)) {}
  char* at(int64_t j) const { return data + j * step; }
  int64_t index(int64_t j, DType dtype) const {  // an indices plane's element j
    return dtype == DType::i32 ? *reinterpret_cast<const int32_t*>(at(j))
                               : *reinterpret_cast<const int64_t*>(at(j));
  }
};

}  // namespace

// Planes too large for a kernel's buffers (flat views in `layout`), one thread, 64-bit offsets:
// each output plane is zeroed, then every value goes to its slot in input order, stored (the
// latest duplicate wins; every index is checked first, the first invalid one in input order
// being the error) or added (indices outside the plane dropped).
[[gnu::cold]] Status scatter_large(ScatterMode mode, const View& values, const View& indices,
                                   const View& output, Layout layout) {
  if (mode == ScatterMode::store) {
    POOLGEN_RETURN_IF_ERROR(invalid_index_error(indices, output.plane()));
  }
  const auto size = static_cast<size_t>(element_size(values.dtype));
  for (int64_t n = 0; n < output.shape[0]; ++n) {
    for (int64_t c = 0; c < output.shape[1]; ++c) {
      const FlatPlane from(values, layout, n, c), index(indices, layout, n, c),
          to(output, layout, n, c);
      if (to.step == static_cast<int64_t>(size)) {
        std::memset(to.data, 0, static_cast<size_t>(output.plane()) * size);
      } else {
        for (int64_t j = 0; j < output.plane(); ++j) std::memset(to.at(j), 0, size);
      }
      for (int64_t j = 0; j < values.plane(); ++j) {
        const int64_t at = index.index(j, indices.dtype);
        if (mode == ScatterMode::store) {
          std::memcpy(to.at(at), from.at(j), size);
        } else if (at >= 0 && at < output.plane()) {
          add_element(values.dtype, to.at(at), from.at(j));
        }
      }
    }
  }
  return {};
}


Status scatter(const Kernel& kernel, ScatterMode mode, const View& values, const View& indices,
               const View& output, int64_t call_bytes, const IndexRewrite* rewrite,
               bool global, int64_t slab_stride) {
  const Staged v(values, kernel.layout, true, Staged::input),
      i(indices, kernel.layout, true, Staged::input),
      o(output, kernel.layout, true, Staged::output);
  // Groups never cross an image: the most channels of one image a kernel's buffers hold.
  auto image_fits = [&](int64_t channels) {
    for (const View* view : {&v.view(), &i.view(), &o.view()}) {
      if (!fits_kernel(slice(slice(*view, 0, 0, 1), 1, 0, channels), kernel.layout, true)) {
        return false;
      }
    }
    return true;
  };
  const int64_t channels = o.view().shape[1];
  const int64_t fitting =
      image_fits(channels) ? channels : largest_fitting(channels, image_fits);
  if (fitting == 0) {
    std::vector<char> offsets;  // the whole rewrite first: planes this large are rare
    View plane_offsets = i.view();
    if (rewrite) {
      offsets.resize(static_cast<size_t>(plane_offsets.bytes()));
      plane_offsets = packed(i.view(), kernel.layout, offsets.data());
      POOLGEN_RETURN_IF_ERROR((*rewrite)(i.view(), plane_offsets, 0, 0));
    }
    POOLGEN_RETURN_IF_ERROR(scatter_large(mode, v.view(), plane_offsets, o.view(), kernel.layout));
    o.finish();
    return {};
  }
  const int cores = sharing_threads(call_bytes);
  ScatterGroups groups{&kernel, v.view(), i.view(), o.view(),
                       std::min(fitting, planes_per_group(o.view(), kernel.layout, mode, cores,
                                                          call_bytes)),
                       rewrite, global, output_streams(o.view()), slab_stride,
                       1, {}, {}, {}, {}};
  groups.prefetch = scatter_prefetches(kernel, call_bytes);
  const int64_t planes = output.shape[0] * output.shape[1];
  // Halide numbers tasks with an int.
  groups.planes = std::max(groups.planes, planes / std::numeric_limits<int32_t>::max() + 1);
  // Fewer images than threads, taking slabs: whole images, each one's values rows shared among
  // several tasks (rather than its channels, whose half-pixel stripes go to memory apart, or not
  // at all: pooling's gradient and large unpoolings keep an image to one task otherwise).
  const int64_t image = kernel.layout == Layout::channels_last ? channels : 1;
  const int64_t images = planes / image;
  if ((!rewrite || global) && image <= fitting && images < cores) {
    // An image of a call worth sharing but smaller than two slabs still gives each thread one.
    const int64_t slab = groups.slab;
    groups.slab = std::min(slab, o.view().bytes() / std::max<int64_t>(images, 1) / cores);
    if (groups.takes_slabs(ScatterGroups::part(v.view(), 0, image),
                           ScatterGroups::part(i.view(), 0, image),
                           ScatterGroups::part(o.view(), 0, image))) {
      groups.planes = image;
      groups.parts = (cores + images - 1) / images;
      groups.redo.assign(static_cast<size_t>(images), 0);
    } else {
      groups.slab = slab;
    }
  }
  // Channel blocks of an image (planes_per_group) zeroed one by one cleared a block's stripe
  // of each pixel with a copy of its own (NHWC k3s2p1 unpooling of 1x64x80x80 took twice as
  // long on two threads as on one): the threads zero the packed output by runs first.
  if (image > groups.planes && is_packed(o.view(), kernel.layout)) {
    zero_elements_shared(o.view(), kernel.layout);
    groups.zeroed = true;
  }
  const int tasks = static_cast<int>((planes + groups.planes - 1) / groups.planes * groups.parts);
  int failed = parallel_for(tasks, [&](int task) { return groups.run(task); }, call_bytes);
  if (failed == 0 && groups.parts > 1) {  // the images some part sent back, whole, one by one
    groups.parts = 1;
    groups.slab_stride = 0;
    for (size_t image_index = 0; image_index < groups.redo.size() && failed == 0; ++image_index) {
      if (groups.redo[image_index]) failed = groups.run(static_cast<int>(image_index));
    }
  }
  if (failed != 0) {
    if (!groups.rewrite_failed.ok()) return groups.rewrite_failed;
    if (!groups.failure.ok()) return groups.failure;
    // The store kernel declined: it stopped at an invalid index.
    if (global) return fail(Code::index_out_of_range, "indices", ": some index outside its plane");
    return declined_at_index(kernel, indices, output.plane());
  }
  o.finish();
  return {};
}

ScatterLaunch::ScatterLaunch(const Kernel& kernel, const View& v, const View& i, const View& o,
                             int64_t origin, int64_t stride, bool prefetch)
    : Launch(kernel, true) {
  add_view(v, kernel.value, Access::read);
  add_view(i, kernel.index, Access::read);
  if (kernel.op == Op::unpool_scatter) {  // the accumulating kernel has no origin
    add_scalar(origin);
    add_scalar(stride);
  }
  if (kernel.prefetches) add_flag(prefetch);
  add_view(o, kernel.value, Access::write);
  fit_variant(o);
}

std::unique_ptr<DirectScatter> DirectScatter::make(const Kernel& kernel, ScatterMode mode,
                                                   const Views& views, int64_t slab_stride) {
  const View& o = views[2];
  if (!takes_flat(views, kernel.layout)) return nullptr;
  // One group: the cache's (ScatterGroups) on one thread.
  const int64_t call_bytes = total_bytes(views);
  if (o.elements() == 0 || o.bytes() > scatter_group_bytes() || output_streams(o) ||
      sharing_threads(call_bytes) > 1) {
    return nullptr;
  }
  return std::unique_ptr<DirectScatter>(
      new DirectScatter(kernel, mode, views, call_bytes, slab_stride));
}

DirectScatter::DirectScatter(const Kernel& kernel, ScatterMode mode, const Views& views,
                             int64_t call_bytes, int64_t slab_stride)
    : DirectRun(KeptSpans(views, 1)),
      kernel_(kernel),
      mode_(mode),
      views_{views[0], views[1], views[2]},
      call_bytes_(call_bytes),
      slab_stride_(slab_stride),
      output_packed_(is_packed(views[2], kernel.layout)),
      call_(kernel, views[0], views[1], views[2], 0, 0, scatter_prefetches(kernel, call_bytes)) {}

Status DirectScatter::run(void* const (&data)[3]) {
  for (int k = 0; k < 3; ++k) views_[k].data = data[k];
  if (sharing_threads(call_bytes_) <= 1 && !output_streams(views_[2])) {
    for (int k = 0; k < 3; ++k) call_.set_data(k, data[k]);
    zero_elements(views_[2], output_packed_);
    bool declined = false;  // at an invalid index, which scatter() names
    POOLGEN_RETURN_IF_ERROR(call_.run(0, &declined));
    if (!declined) return {};
  }
  return scatter(kernel_, mode_, views_[0], views_[1], views_[2], call_bytes_, nullptr, false,
                 slab_stride_);
}

[[gnu::cold]] Status gather_large(const View& values, const View& indices, const View& output,
                                  Layout layout, int64_t first_plane) {
  POOLGEN_RETURN_IF_ERROR(
      invalid_index_error(indices, values.plane(), first_plane * indices.plane()));
  const auto size = static_cast<size_t>(element_size(values.dtype));
  for (int64_t n = 0; n < output.shape[0]; ++n) {
    for (int64_t c = 0; c < output.shape[1]; ++c) {
      const FlatPlane from(values, layout, n, c), index(indices, layout, n, c),
          to(output, layout, n, c);
      for (int64_t j = 0; j < output.plane(); ++j) {
        std::memcpy(to.at(j), from.at(index.index(j, indices.dtype)), size);
      }
    }
  }
  return {};
}

}  // namespace poolgen::detail
