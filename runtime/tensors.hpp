// Tensor views checked against what a call expects, staged into a layout a kernel takes, and
// their halide_buffer_t form.
#pragma once

#include "inline_vector.hpp"
#include "poolgen/poolgen.hpp"
#include "shapes.hpp"

#include <HalideRuntime.h>

#include <functional>
#include <initializer_list>
#include <utility>
#include <vector>

namespace poolgen::detail {

// A view with the batch dimension always present (N = 1 added to batch-less views) and explicit
// strides, in PyTorch order.
struct View {
  void* data = nullptr;
  DType dtype = DType::f32;
  Device device = Device::cpu;
  int rank = 0;
  // Entries [0, rank) only: the rest stay unset, as zeroing five-entry arrays for every view a
  // call builds was a measurable part of its fixed cost.
  int64_t shape[5], strides[5];

  int64_t elements() const {
    int64_t count = 1;
    for (int i = 0; i < rank; ++i) count *= shape[i];
    return count;
  }
  int64_t bytes() const { return elements() * element_size(dtype); }
  // Elements in one (n, c) plane: the product of the spatial extents.
  int64_t plane() const;
  // True when the spatial dimensions form one flat dimension of step plane_step(layout): 1 in
  // contiguous, the innermost stepped spatial stride in channels-last.
  bool flat_planes(Layout layout) const;
  int64_t plane_step(Layout layout) const;
};

// Whether a kernel of `layout` takes `view` as it is: the dimension that layout keeps innermost
// (the last spatial one, or the channel) has stride 1.
bool fits(const View& view, Layout layout);

// The layout whose kernels serve a call on `view` (its input): contiguous when it fits, else
// channels-last when it fits, else contiguous (through a packed copy).
Layout layout_of(const View& view);

// Checks `view` has `dtype` and `shape` and sits on a known device with usable strides; `nd` spatial
// dimensions decide where a missing batch dimension goes. check_view_shape leaves data unchecked.
Status check_view_shape(const char* argument, const TensorView& view, DType dtype,
                        const Ints& shape, int nd, View* out);
Status check_view(const char* argument, const TensorView& view, DType dtype, const Ints& shape,
                  int nd, View* out);
// The rest of check_view, for a view check_view_shape built (`checked`): data where it has
// elements.
Status check_data(const char* argument, const TensorView& view, const View& checked);

// A dtype the API knows (whatever this build compiled).
Status check_dtype(const char* argument, DType dtype);

// f32, f64, f16 or bf16.
bool is_float_dtype(DType dtype);

// Gradients (the backward ops' values) are floats: f32, f64, f16 or bf16.
Status check_gradient_dtype(const char* argument, DType dtype);

// Indices are i64 or i32; i32 ones must be able to name every slot of a plane of `plane` elements.
Status check_index_dtype(const char* argument, DType dtype, int64_t plane);

// The tensor whose dtype and strides choose a call's kernel (pooling's input, unpooling's
// values, the backward ops' grad_output), before any data is read: its dtype, the index dtype
// for planes of `index_plane` elements, and its strides, with `shape` (checked already) as its
// shape.
Status check_leading_view(const char* argument, const TensorView& view, const Ints& shape, int nd,
                          DType index_dtype, int64_t index_plane, View* out);

// An output must not reach one element through two positions (a zero or overlapping stride).
Status check_no_overlap(const char* argument, const View& view);

// A call's argument: its name in messages and its checked view.
using Argument = std::pair<const char*, const View*>;

// Every view of a call must be on the leading view's device: else invalid_argument naming the
// first one that is not.
Status check_same_device(const View& leading, const char* leading_name,
                         std::initializer_list<Argument> others);

// No output may share memory with an input or with another output (inputs may share memory
// with each other): each output's byte span, from its first element's first byte to its last
// element's last byte, must miss every input's and every earlier output's. A span test, as
// PyTorch's: views of one allocation that interleave without sharing an element are refused too.
Status check_apart(std::initializer_list<Argument> outputs, std::initializer_list<Argument> inputs);

// check_apart's spans with their sizes computed once, for a call that repeats its shapes: the
// views' span sizes (a function of shapes, strides and dtypes), outputs first.
struct KeptSpans {
  static constexpr int kMax = 3;
  uint64_t size[kMax] = {};
  int outputs = 0, count = 0;
  // The spans of `outputs` then `inputs`, as check_apart takes them.
  KeptSpans(std::initializer_list<const View*> outputs, std::initializer_list<const View*> inputs);
  // Whether views at `data` (in the same order) pass check_apart: it decides alike, and names
  // the overlap where this says no.
  bool apart(const void* const (&data)[kMax]) const;
};

// One tensor of a call as the call expects it: its name, the caller's view, its dtype and shape.
struct Expected {
  const char* name;
  const TensorView& view;
  DType dtype;
  const Ints& shape;
};

// The views of a call of two inputs and one output (max_unpool and the backward ops): the first,
// the leading view check_leading_view built, with its data checked; the others checked against
// their dtype and shape (check_view); the output's elements kept apart, its memory apart from the
// inputs', and every view on the first input's device.
Status check_views(int nd, const TensorView& first, const Argument& first_view,
                   const Expected& second, const Expected& output, View* second_view,
                   View* output_view);

// check_views' checks of data alone, for views a call with the same key passed them with
// (call_memo.hpp): `views` (first, second, output, named `names`) take the data of `tensors`,
// which must be present, and the output's memory must be apart from the inputs' (tested with
// `spans`, the views' kept sizes in the order (output, first, second), where given).
Status check_views_data(const char* const (&names)[3], const TensorView* const (&tensors)[3],
                        View (&views)[3], const KeptSpans* spans = nullptr);

// `view`'s shape packed in `layout` at `data`: contiguous is row-major; channels-last keeps the
// channel innermost, then the spatial dimensions row-major, then the batch.
View packed(const View& view, Layout layout, void* data);

// Whether `view` is packed(view, layout, its data): one run of memory (extents of 1 aside).
bool is_packed(const View& view, Layout layout);

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
  std::vector<char> scratch_;
};

// Whether a kernel of `layout` can address `v` (with flat planes, if asked): Halide's buffers
// hold 32-bit extents and strides and, without its large_buffers feature, span less than 2 GiB.
// Larger calls are split into pieces that fit.
bool fits_kernel(const View& v, Layout layout, bool flat = false);

// Elements [start, start + count) of dimension `dim` of `v`. Inline: the scatter's groups slice
// their planes twice per view, and out of line each slice was a copied view.
inline View slice(const View& v, int dim, int64_t start, int64_t count) {
  View s = v;
  s.data = static_cast<char*>(v.data) + start * v.strides[dim] * element_size(v.dtype);
  s.shape[dim] = count;
  return s;
}

// A call's views, which share their batch and channel extents (N and C).
using Views = InlineVector<View, 3>;
// The call's piece `p` (every view sliced alike), its first plane in (n, c) order.
using PieceFn = std::function<Status(const Views& p, int64_t first_plane)>;

// The bytes of all of a call's views together.
int64_t total_bytes(const Views& views);

// fits_kernel for every view of a call.
bool fits_kernel(const Views& views, Layout layout, bool flat = false);

// Whether a kernel of `layout` takes each of `views` whole, as it is: fits and fits_kernel (the
// fast paths that leave other calls to a general kernel).
bool takes_whole(std::initializer_list<const View*> views, Layout layout);

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

// A halide_buffer_t over a View of `layout` (Halide's dimension order: innermost first), typed
// as `type` (unpooling kernels move any dtype of their width). With flat, the spatial
// dimensions are presented as one (flat_planes(layout) must hold). fits_kernel must hold.
struct HalideView {
  halide_buffer_t buffer{};
  halide_dimension_t dims[5]{};
  HalideView(const View& view, Layout layout, DType type, bool flat = false);
};

// Calls f(position, offset) for every element in row-major order: position counts elements,
// offset is the element's distance from data in elements.
void for_each_element(const View& view, const std::function<void(int64_t, int64_t)>& f);

// Adds `offset` to every element of a host view of i32 or i64 indices.
void add_to_indices(const View& indices, int64_t offset);

// Copies every element of `from` into `to` (same shape and dtype, any strides).
void copy_elements(const View& from, const View& to);

// Sets every element of a host view to zero bits: one memset when it is packed in `layout`.
void zero_elements(const View& view, Layout layout);

// Copies `bytes` from `from` to `to` with non-temporal stores where the target has them (x86-64:
// SSE2's, 16 bytes at a time after an aligning head), ordered before the function returns; a
// plain memcpy elsewhere.
void copy_streaming(void* to, const void* from, size_t bytes);

// streaming_bytes()'s default (kernels.hpp): where copy_streaming has non-temporal stores, the
// size of the largest data cache a core reaches (x86-64: cpuid's cache parameters; 8 MiB if it
// lists none), so an output that a cache could still hold for its consumer stays there; elsewhere
// no output streams, copy_streaming being a plain copy. Read from the processor once.
int64_t default_streaming_bytes();

// Whether each of the `count` i32 or i64 indices at `indices` lies in [lo, hi), where
// 0 <= lo <= hi < 2^31 (x86-64: SSE2, four 32-bit words a step; no early exit).
bool indices_within(const void* indices, DType dtype, int64_t count, int64_t lo, int64_t hi);

}  // namespace poolgen::detail
