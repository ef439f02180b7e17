#include "tensors.hpp"

#include "shapes.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>
#define POOLGEN_SSE2 1
#if defined(__GNUC__)
#include <cpuid.h>
#endif
#endif

namespace poolgen::detail {

int64_t total_bytes(const Views& views) {
  int64_t total = 0;
  for (const View& view : views) total += view.bytes();
  return total;
}

int64_t View::plane() const {
  int64_t count = 1;
  for (int i = 2; i < rank; ++i) count *= shape[i];
  return count;
}

int64_t View::plane_step(Layout layout) const {
  if (layout == Layout::contiguous) return 1;
  for (int i = rank - 1; i >= 2; --i) {
    if (shape[i] > 1) return strides[i];
  }
  return 1;
}

bool View::flat_planes(Layout layout) const {
  // Extents of 1 are never stepped along, whatever their strides.
  int64_t expected = plane_step(layout);
  for (int i = rank - 1; i >= 2; --i) {
    if (shape[i] > 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

bool fits(const View& v, Layout layout) {
  const int d = layout == Layout::contiguous ? v.rank - 1 : 1;
  return v.strides[d] == 1 || v.shape[d] == 1;
}

Layout layout_of(const View& v) {
  return !fits(v, Layout::contiguous) && fits(v, Layout::channels_last) ? Layout::channels_last
                                                                        : Layout::contiguous;
}

Status check_no_overlap(const char* argument, const View& view) {
  // Sorted by stride, each dimension must step over everything the finer ones cover.
  std::pair<int64_t, int64_t> dims[5];  // (stride, extent); on the stack: this runs every call
  int count = 0;
  for (int i = 0; i < view.rank; ++i) {
    if (view.shape[i] <= 1) continue;
    int at = count++;  // insertion sort: at most five entries
    for (; at > 0 && dims[at - 1] > std::make_pair(view.strides[i], view.shape[i]); --at) {
      dims[at] = dims[at - 1];
    }
    dims[at] = {view.strides[i], view.shape[i]};
  }
  int64_t covered = 1;
  for (int i = 0; i < count; ++i) {
    const auto [stride, extent] = dims[i];
    if (stride < covered) {
      return fail(Code::invalid_argument, argument, ": expected strides that keep elements apart",
                  ", got stride ", stride, " where ", covered, " or more is needed (shape ",
                  format_shape(Ints(view.shape, view.shape + view.rank)), ", strides ",
                  format_shape(Ints(view.strides, view.strides + view.rank)), ")");
    }
    covered = stride * extent;
  }
  return {};
}

namespace {

// The bytes from a view's first element to the end of its last; none without elements. Strides
// are non-negative and reach at most kMaxElements (check_view_shape), so nothing overflows.
struct ByteSpan {
  uintptr_t begin = 0;
  uint64_t size = 0;
};

ByteSpan byte_span(const View& v) {
  ByteSpan span{reinterpret_cast<uintptr_t>(v.data), 0};
  int64_t last = 0;
  for (int i = 0; i < v.rank; ++i) {
    if (v.shape[i] == 0) return span;
    last += (v.shape[i] - 1) * v.strides[i];
  }
  span.size = static_cast<uint64_t>((last + 1) * element_size(v.dtype));
  return span;
}

// Bytes two spans share, computed without forming an end address (which could wrap).
uint64_t shared_bytes(ByteSpan a, ByteSpan b) {
  if (a.begin > b.begin) std::swap(a, b);
  const uint64_t gap = b.begin - a.begin;
  return gap >= a.size ? 0 : std::min(a.size - gap, b.size);
}

// "input's", "values'".
std::string possessive(const std::string& name) {
  return name + (name.back() == 's' ? "'" : "'s");
}

// The error for two arguments whose spans share bytes (off the hot path: spans recomputed).
Status overlap_error(const Argument& output, const Argument& other) {
  const ByteSpan out = byte_span(*output.second), in = byte_span(*other.second);
  return fail(Code::invalid_argument, output.first, ": expected memory apart from ",
              possessive(other.first), ", got an overlap of ", shared_bytes(out, in), " bytes (",
              output.first, " spans ", out.size, " bytes from ",
              reinterpret_cast<const void*>(out.begin), ", ", other.first, " ", in.size,
              " bytes from ", reinterpret_cast<const void*>(in.begin), ")");
}

// The first output, with the argument whose span it shares bytes with, of `spans` (outputs first,
// then inputs, `count` in all): each output against every input, then every earlier output. -1
// when all are apart.
std::pair<int, int> first_overlap(const ByteSpan* spans, int outputs, int count) {
  for (int o = 0; o < outputs; ++o) {
    if (spans[o].size == 0) continue;
    for (int k = outputs; k < count; ++k) {
      if (shared_bytes(spans[o], spans[k]) != 0) return {o, k};
    }
    for (int k = 0; k < o; ++k) {
      if (shared_bytes(spans[o], spans[k]) != 0) return {o, k};
    }
  }
  return {-1, -1};
}

}  // namespace

Status check_apart(std::initializer_list<Argument> outputs, std::initializer_list<Argument> inputs) {
  // Each span once (a call has at most three outputs and three inputs).
  InlineVector<ByteSpan, 6> spans;
  InlineVector<const Argument*, 6> arguments;
  for (auto list : {outputs, inputs}) {
    for (const Argument& argument : list) {
      spans.push_back(byte_span(*argument.second));
      arguments.push_back(&argument);
    }
  }
  const auto [o, k] = first_overlap(spans.data(), static_cast<int>(outputs.size()),
                                    static_cast<int>(spans.size()));
  return o < 0 ? Status() : overlap_error(*arguments[o], *arguments[k]);
}

namespace {
const char* device_name(Device device) { return device == Device::cuda ? "cuda" : "cpu"; }
}  // namespace

KeptSpans::KeptSpans(std::initializer_list<const View*> outs,
                     std::initializer_list<const View*> ins)
    : outputs(static_cast<int>(outs.size())) {
  for (auto list : {outs, ins}) {
    for (const View* v : list) size[count++] = byte_span(*v).size;
  }
}

bool KeptSpans::apart(const void* const (&data)[kMax]) const {
  ByteSpan spans[kMax];
  for (int k = 0; k < count; ++k) spans[k] = {reinterpret_cast<uintptr_t>(data[k]), size[k]};
  return first_overlap(spans, outputs, count).first < 0;
}

Status check_same_device(const View& leading, const char* leading_name,
                         std::initializer_list<Argument> others) {
  for (const auto& [name, view] : others) {
    if (view->device != leading.device) {
      return fail(Code::invalid_argument, name, ": expected a tensor on device ",
                  device_name(leading.device), " as ", leading_name, ", got device ",
                  device_name(view->device), " (", static_cast<int>(view->device), ")");
    }
  }
  return {};
}

Status check_views(int nd, const TensorView& first, const Argument& first_view,
                   const Expected& second, const Expected& output, View* b, View* out) {
  const auto& [first_name, a] = first_view;
  POOLGEN_RETURN_IF_ERROR(check_data(first_name, first, *a));
  POOLGEN_RETURN_IF_ERROR(check_view(second.name, second.view, second.dtype, second.shape, nd, b));
  POOLGEN_RETURN_IF_ERROR(
      check_view(output.name, output.view, output.dtype, output.shape, nd, out));
  POOLGEN_RETURN_IF_ERROR(check_no_overlap(output.name, *out));
  POOLGEN_RETURN_IF_ERROR(
      check_same_device(*a, first_name, {{second.name, b}, {output.name, out}}));
  return check_apart({{output.name, out}}, {first_view, {second.name, b}});
}

Status check_views_data(const char* const (&names)[3], const TensorView* const (&tensors)[3],
                        View (&views)[3], const KeptSpans* spans) {
  for (int k = 0; k < 3; ++k) {
    views[k].data = tensors[k]->data;
    POOLGEN_RETURN_IF_ERROR(check_data(names[k], *tensors[k], views[k]));
  }
  if (spans && spans->apart({views[2].data, views[0].data, views[1].data})) return {};
  return check_apart({{names[2], &views[2]}}, {{names[0], &views[0]}, {names[1], &views[1]}});
}

Status check_dtype(const char* argument, DType dtype) {
  if (static_cast<uint32_t>(dtype) > static_cast<uint32_t>(DType::i32)) {
    return fail(Code::invalid_argument, argument, ": expected a dtype code from 0 to ",
                static_cast<int>(DType::i32), ", got ", static_cast<int>(dtype));
  }
  return {};
}

bool is_float_dtype(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f64 || dtype == DType::f16 || dtype == DType::bf16;
}

Status check_gradient_dtype(const char* argument, DType dtype) {
  POOLGEN_RETURN_IF_ERROR(check_dtype(argument, dtype));
  if (is_float_dtype(dtype)) return {};
  return fail(Code::invalid_argument, argument, ": expected a floating dtype (f32, f64, f16 or ",
              "bf16: gradients are floats), got ", dtype_name(dtype));
}

Status check_index_dtype(const char* argument, DType dtype, int64_t plane) {
  if (dtype != DType::i64 && dtype != DType::i32) {
    POOLGEN_RETURN_IF_ERROR(check_dtype(argument, dtype));
    return fail(Code::invalid_argument, argument, ": expected dtype i64 or i32, got ",
                dtype_name(dtype));
  }
  if (dtype == DType::i32 && plane > std::numeric_limits<int32_t>::max()) {
    return fail(Code::invalid_argument, argument, ": expected i64 indices for a plane of ", plane,
                " elements (i32 names at most 2^31-1 slots), got i32");
  }
  return {};
}

Status check_view_shape(const char* argument, const TensorView& view, DType dtype,
                        const Ints& shape, int nd, View* out) {
  if (view.device != Device::cpu && view.device != Device::cuda) {
    return fail(Code::unsupported, argument, ": expected device cpu (0) or cuda (1), got device ",
                static_cast<int>(view.device));
  }
  POOLGEN_RETURN_IF_ERROR(check_dtype(argument, view.dtype));
  if (view.dtype != dtype) {
    return fail(Code::invalid_argument, argument, ": expected dtype ", dtype_name(dtype),
                ", got ", dtype_name(view.dtype));
  }
  if (view.shape != shape) {
    return fail(Code::invalid_argument, argument, ": expected shape ", format_shape(shape),
                ", got ", format_shape(view.shape));
  }
  const int rank = static_cast<int>(shape.size());
  if (rank < nd + 1 || rank > nd + 2) {  // callers pass checked shapes: a last line of defence
    return fail(Code::invalid_argument, argument, ": expected rank ", nd + 1, " or ", nd + 2,
                ", got rank ", rank);
  }
  if (!view.strides.empty() && view.strides.size() != shape.size()) {
    return fail(Code::invalid_argument, argument, ": expected ", rank, " strides, got ",
                view.strides.size(), " (", format_shape(view.strides), ")");
  }
  const int missing = nd + 2 - rank;  // 1 for a batch-less view
  // Built in place: a zeroed local View and its copy were a fifth of a small call's checks.
  View& v = *out;
  v.data = view.data;
  v.dtype = dtype;
  v.device = view.device;
  v.rank = nd + 2;
  int64_t packed = 1;
  for (int i = rank - 1; i >= 0; --i) {
    v.shape[i + missing] = shape[i];
    v.strides[i + missing] = view.strides.empty() ? packed : view.strides[i];
    packed *= shape[i];
  }
  if (missing) {
    v.shape[0] = 1;
    v.strides[0] = packed;
  }
  // Offsets are 64-bit: the farthest element must lie within kMaxElements of data.
  int64_t reach = 0;
  for (int i = 0; i < v.rank; ++i) {
    int64_t step = 0;
    if (v.strides[i] < 0) {
      return fail(Code::unsupported, argument, ": expected strides >= 0, got stride ",
                  v.strides[i], " in dimension ", i - missing);
    }
    if (v.shape[i] > 1 &&
        (!multiply_within(v.shape[i] - 1, v.strides[i], kMaxElements, &step) ||
         (reach += step) > kMaxElements)) {
      return fail(Code::invalid_argument, argument, ": expected strides that keep every element ",
                  "within 2^59 elements of data, got strides ", format_shape(view.strides),
                  " for shape ", format_shape(shape));
    }
  }
  // A dimension of extent 1 is never stepped along: its stride may be anything, so it is set to
  // what lets the view fit a layout.
  if (v.shape[1] == 1) v.strides[1] = 1;
  if (v.shape[v.rank - 1] == 1) v.strides[v.rank - 1] = 1;
  return {};
}

Status check_leading_view(const char* argument, const TensorView& view, const Ints& shape, int nd,
                          DType index_dtype, int64_t index_plane, View* out) {
  POOLGEN_RETURN_IF_ERROR(check_dtype(argument, view.dtype));
  POOLGEN_RETURN_IF_ERROR(check_index_dtype("indices", index_dtype, index_plane));
  return check_view_shape(argument, view, view.dtype, shape, nd, out);
}

Status check_data(const char* argument, const TensorView& view, const View& checked) {
  if (view.data == nullptr && checked.elements() > 0) {
    return fail(Code::invalid_argument, argument, ": expected data for a tensor of shape ",
                format_shape(view.shape), ", got a null pointer");
  }
  return {};
}

Status check_view(const char* argument, const TensorView& view, DType dtype, const Ints& shape,
                  int nd, View* out) {
  POOLGEN_RETURN_IF_ERROR(check_view_shape(argument, view, dtype, shape, nd, out));
  return check_data(argument, view, *out);
}

View packed(const View& view, Layout layout, void* data) {
  View p = view;
  p.data = data;
  int64_t stride = 1;
  if (layout == Layout::channels_last) {
    p.strides[1] = 1;
    stride = p.shape[1];
  }
  for (int d = p.rank - 1; d >= 0; --d) {
    if (layout == Layout::channels_last && d == 1) continue;
    p.strides[d] = stride;
    stride *= p.shape[d];
  }
  return p;
}

bool is_packed(const View& view, Layout layout) {
  const View p = packed(view, layout, view.data);
  for (int d = 0; d < view.rank; ++d) {
    if (view.shape[d] > 1 && view.strides[d] != p.strides[d]) return false;
  }
  return true;
}

Staged::Staged(const View& view, Layout layout, bool flat, Role role)
    : original_(view), staged_(view), role_(role) {
  if (fits(view, layout) && (!flat || view.flat_planes(layout))) return;
  scratch_.resize(static_cast<size_t>(view.bytes()));
  staged_ = packed(view, layout, scratch_.data());
  if (role == input) copy_elements(original_, staged_);
}

void Staged::finish() const {
  if (role_ == output && !scratch_.empty()) copy_elements(staged_, original_);
}

namespace {

// The dimensions of `v` as a kernel of `layout` sees them, innermost first: (extent, stride).
int halide_dims(const View& v, Layout layout, bool flat, int64_t (*dims)[2]) {
  int count = 0;
  auto add = [&](int64_t extent, int64_t stride) {
    // An extent of 1 is never stepped along: a stride whose span Halide would refuse (over
    // 2 GiB at 8 bytes an element) is irrelevant.
    constexpr int64_t kLargest = std::numeric_limits<int32_t>::max() / 8;
    dims[count][0] = extent;
    dims[count++][1] = extent == 1 && stride > kLargest ? 0 : stride;
  };
  if (layout == Layout::channels_last) add(v.shape[1], v.strides[1]);
  if (flat) {
    add(v.plane(), v.plane_step(layout));
  } else {
    for (int i = v.rank - 1; i >= 2; --i) add(v.shape[i], v.strides[i]);
  }
  if (layout == Layout::contiguous) add(v.shape[1], v.strides[1]);
  add(v.shape[0], v.strides[0]);
  return count;
}

}  // namespace

bool fits_kernel(const View& v, Layout layout, bool flat) {
  // Nearly every call's views are far below the limits: with fewer than 2^30 bytes of elements
  // and of offsets, every extent is below 2^30 and every stride, and each dimension's span
  // (at most the last element's offset plus one stride), below 2^31 bytes. Extents of 1, whose
  // strides are free, reach Halide at most 2^31 / 8 (halide_dims).
  constexpr int64_t kSmall = int64_t{1} << 30;
  int64_t count = 1, last = 0;
  for (int i = 0; i < v.rank; ++i) {
    count *= v.shape[i];
    last += (v.shape[i] - 1) * v.strides[i];
  }
  const int64_t bytes = element_size(v.dtype);
  if (count > 0 && count * bytes < kSmall && (last + 1) * bytes < kSmall) return true;
  // Without Halide's large_buffers feature a buffer's extents, strides, the span of each
  // dimension and its element count must stay below 2^31 (bytes, for the last two); extents
  // stay below 2^30 so that coordinates plus a window's reach do too.
  // Extents and strides are tested against 2^30 and 2^31 before they multiply, so no product
  // overflows 64 bits: elements stays below 2^31 * 2^30, a span below 2^30 * 8 * 2^31.
  constexpr uint64_t kLimit = std::numeric_limits<int32_t>::max();
  const auto size = static_cast<uint64_t>(bytes);
  int64_t dims[5][2];
  uint64_t elements = size;
  const int dimensions = halide_dims(v, layout, flat, dims);
  for (int d = 0; d < dimensions; ++d) {
    const auto extent = static_cast<uint64_t>(dims[d][0]);
    const auto stride = static_cast<uint64_t>(dims[d][1]);
    if (extent > kMaxKernelExtent || stride > kLimit) return false;
    elements *= extent;
    if (elements > kLimit || extent * size * stride > kLimit) return false;
  }
  return true;
}

bool fits_kernel(const Views& views, Layout layout, bool flat) {
  for (const View& v : views) {
    if (!fits_kernel(v, layout, flat)) return false;
  }
  return true;
}

bool takes_whole(std::initializer_list<const View*> views, Layout layout) {
  for (const View* v : views) {
    if (!fits(*v, layout) || !fits_kernel(*v, layout)) return false;
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

HalideView::HalideView(const View& v, Layout layout, DType type, bool flat) {
  static const halide_type_t kTypes[] = {
      {halide_type_float, 32}, {halide_type_int, 64},  {halide_type_float, 64},
      {halide_type_float, 16}, {halide_type_bfloat, 16}, {halide_type_int, 8},
      {halide_type_uint, 8},   {halide_type_int, 16},  {halide_type_int, 32}};
  buffer.host = static_cast<uint8_t*>(v.data);
  buffer.type = kTypes[static_cast<int>(type)];
  buffer.dim = dims;
  int64_t extents[5][2];
  buffer.dimensions = halide_dims(v, layout, flat, extents);
  for (int d = 0; d < buffer.dimensions; ++d) {
    dims[d] = {0, static_cast<int32_t>(extents[d][0]), static_cast<int32_t>(extents[d][1]), 0};
  }
}

void for_each_element(const View& v, const std::function<void(int64_t, int64_t)>& f) {
  if (v.elements() == 0) return;
  int64_t position = 0, index[5] = {};
  while (true) {
    int64_t offset = 0;
    for (int i = 0; i < v.rank; ++i) offset += index[i] * v.strides[i];
    f(position++, offset);
    int i = v.rank - 1;
    while (i >= 0 && ++index[i] == v.shape[i]) index[i--] = 0;
    if (i < 0) return;
  }
}

void add_to_indices(const View& indices, int64_t offset) {
  for_each_element(indices, [&](int64_t, int64_t at) {
    if (indices.dtype == DType::i32) {
      static_cast<int32_t*>(indices.data)[at] += static_cast<int32_t>(offset);
    } else {
      static_cast<int64_t*>(indices.data)[at] += offset;
    }
  });
}

namespace {

// Copies rows of the innermost dimension with element type T (an integer of the dtype's width).
template <typename T>
void copy_rows(const View& from, const View& to) {
  const int last = from.rank - 1;
  const int64_t n = from.shape[last], fs = from.strides[last], ts = to.strides[last];
  int64_t index[5] = {};
  const auto* src = static_cast<const T*>(from.data);
  auto* dst = static_cast<T*>(to.data);
  while (true) {
    int64_t f = 0, t = 0;
    for (int i = 0; i < last; ++i) {
      f += index[i] * from.strides[i];
      t += index[i] * to.strides[i];
    }
    for (int64_t k = 0; k < n; ++k) dst[t + k * ts] = src[f + k * fs];
    int i = last - 1;
    while (i >= 0 && ++index[i] == from.shape[i]) index[i--] = 0;
    if (i < 0) return;
  }
}

}  // namespace

void copy_elements(const View& from, const View& to) {
  if (from.elements() == 0) return;
  switch (element_size(from.dtype)) {
    case 1: return copy_rows<uint8_t>(from, to);
    case 2: return copy_rows<uint16_t>(from, to);
    case 4: return copy_rows<uint32_t>(from, to);
    default: return copy_rows<uint64_t>(from, to);
  }
}

void zero_elements(const View& view, Layout layout) {
  if (is_packed(view, layout)) {
    std::memset(view.data, 0, static_cast<size_t>(view.bytes()));
    return;
  }
  static const uint64_t zero = 0;  // every element's source, at stride 0
  View zeros = view;
  zeros.data = const_cast<uint64_t*>(&zero);
  for (int d = 0; d < zeros.rank; ++d) zeros.strides[d] = 0;
  copy_elements(zeros, view);
}

void copy_streaming(void* to, const void* from, size_t bytes) {
#ifdef POOLGEN_SSE2
  auto* dst = static_cast<char*>(to);
  const auto* src = static_cast<const char*>(from);
  const size_t head = std::min(bytes, (16 - reinterpret_cast<uintptr_t>(dst) % 16) % 16);
  std::memcpy(dst, src, head);
  size_t at = head;
  for (; at + 64 <= bytes; at += 64) {  // a cache line a step: four stores fill it whole
    const auto* s = reinterpret_cast<const __m128i*>(src + at);
    auto* d = reinterpret_cast<__m128i*>(dst + at);
    const __m128i a = _mm_loadu_si128(s), b = _mm_loadu_si128(s + 1),
                  c = _mm_loadu_si128(s + 2), e = _mm_loadu_si128(s + 3);
    _mm_stream_si128(d, a);
    _mm_stream_si128(d + 1, b);
    _mm_stream_si128(d + 2, c);
    _mm_stream_si128(d + 3, e);
  }
  for (; at + 16 <= bytes; at += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + at),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + at)));
  }
  std::memcpy(dst + at, src + at, bytes - at);
  _mm_sfence();  // the streamed lines are visible to whoever reads the output next
#else
  std::memcpy(to, from, bytes);
#endif
}

#if defined(POOLGEN_SSE2) && defined(__GNUC__)
namespace {
// The largest data or unified cache that a deterministic-cache-parameters leaf lists (Intel's 4,
// AMD's 0x8000001D: same layout, and each reads as empty on the other vendor's processors).
// glibc's sysconf(_SC_LEVEL3_CACHE_SIZE) is no substitute: on the AMD EPYC VM of 2026-11-27 it
// gave 320 MiB, the socket's ten L3s together, for the 32 MiB a core shares. Cold: it runs once,
// and optimized for speed its loop unrolled into 4 KB.
[[gnu::cold]] int64_t largest_cache(unsigned leaf) {
  if (__get_cpuid_max(leaf & 0x80000000u, nullptr) < leaf) return 0;
  int64_t largest = 0;
  for (unsigned level = 0; level < 16; ++level) {
    unsigned a, b, c, d;
    __cpuid_count(leaf, level, a, b, c, d);
    const unsigned type = a & 31;  // 0: no more caches; 2: an instruction cache
    if (type == 0) break;
    if (type == 2) continue;
    const int64_t ways = ((b >> 22) & 0x3ff) + 1, partitions = ((b >> 12) & 0x3ff) + 1,
                  line = (b & 0xfff) + 1, sets = int64_t{c} + 1;
    largest = std::max(largest, ways * partitions * line * sets);
  }
  return largest;
}
}  // namespace

int64_t default_streaming_bytes() {
  static const int64_t bytes = [] {
    const int64_t intel = largest_cache(4), cache = intel > 0 ? intel : largest_cache(0x8000001D);
    return cache > 0 ? cache : int64_t{8} << 20;
  }();
  return bytes;
}
#elif defined(POOLGEN_SSE2)
int64_t default_streaming_bytes() { return int64_t{8} << 20; }
#else
int64_t default_streaming_bytes() { return std::numeric_limits<int64_t>::max(); }
#endif

bool indices_within(const void* indices, DType dtype, int64_t count, int64_t lo, int64_t hi) {
  const bool wide = dtype == DType::i64;
#ifdef POOLGEN_SSE2
  // As 32-bit words (x86 is little-endian): an i64 index lies within iff its low word does and
  // its high word is 0, so the words alternate between two ranges, each tested as an unsigned
  // `word - base < span`, which SSE2 does as the signed (span ^ sign) > ((word - base) ^ sign).
  const auto low = static_cast<uint32_t>(lo), span = static_cast<uint32_t>(hi - lo);
  const uint32_t base[2] = {low, wide ? 0u : low}, spans[2] = {span, wide ? 1u : span};
  const auto* words = static_cast<const uint32_t*>(indices);
  const int64_t n = count * (wide ? 2 : 1);
  auto lanes = [](const uint32_t pair[2]) {
    return _mm_setr_epi32(static_cast<int32_t>(pair[0]), static_cast<int32_t>(pair[1]),
                          static_cast<int32_t>(pair[0]), static_cast<int32_t>(pair[1]));
  };
  const __m128i sign = _mm_set1_epi32(std::numeric_limits<int32_t>::min());
  const __m128i bases = lanes(base), limits = _mm_xor_si128(lanes(spans), sign);
  auto within = [&](const uint32_t* at) {
    const __m128i word = _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
    return _mm_cmpgt_epi32(limits, _mm_xor_si128(_mm_sub_epi32(word, bases), sign));
  };
  // A cache line a step, in four independent chains (twice as fast as one from L2).
  __m128i inside[4] = {_mm_set1_epi32(-1), _mm_set1_epi32(-1), _mm_set1_epi32(-1),
                       _mm_set1_epi32(-1)};
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    for (int j = 0; j < 4; ++j) inside[j] = _mm_and_si128(inside[j], within(words + k + 4 * j));
  }
  for (; k + 4 <= n; k += 4) inside[0] = _mm_and_si128(inside[0], within(words + k));
  const __m128i all = _mm_and_si128(_mm_and_si128(inside[0], inside[1]),
                                    _mm_and_si128(inside[2], inside[3]));
  if (_mm_movemask_epi8(all) != 0xFFFF) return false;
  for (; k < n; ++k) {
    if (words[k] - base[k % 2] >= spans[k % 2]) return false;
  }
#else
  for (int64_t k = 0; k < count; ++k) {
    const int64_t index = wide ? static_cast<const int64_t*>(indices)[k]
                               : static_cast<const int32_t*>(indices)[k];
    if (index < lo || index >= hi) return false;
  }
#endif
  return true;
}

}  // namespace poolgen::detail
