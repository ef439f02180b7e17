#include "validate/views.hpp"

#include "core/limits.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

namespace poolgen::detail {

[[gnu::cold]] Status check_no_overlap(const char* argument, const View& view) {
  // Sorted by stride, each dimension must step over everything the finer ones cover.
  std::pair<int64_t, int64_t> dims[5];  // (stride, extent); on the stack: this runs every call
  int count = 0;
  if (view.elements() == 0) return {};  // no element to overlap another
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

// Whether two spans share a byte: shared_bytes(a, b) != 0, in a few compares and no branch
// (a prepared call asks it of every pair on every run).
bool overlap(ByteSpan a, ByteSpan b) {
  const bool a_first = a.begin <= b.begin;
  const uint64_t gap = a_first ? b.begin - a.begin : a.begin - b.begin;
  return gap < (a_first ? a.size : b.size) && (a_first ? b.size : a.size) != 0;
}

// "input's", "values'".
std::string possessive(const std::string& name) {
  return name + (name.back() == 's' ? "'" : "'s");
}

// The error for two arguments whose spans share bytes (off the hot path: spans recomputed).
[[gnu::cold, gnu::noinline]] Status overlap_error(const Argument& output, const Argument& other) {
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
      if (overlap(spans[o], spans[k])) return {o, k};
    }
    for (int k = 0; k < o; ++k) {
      if (overlap(spans[o], spans[k])) return {o, k};
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

KeptSpans::KeptSpans(const Views& views, int outs) : outputs(outs) {
  for (int k = 0; k < 3; ++k) {
    order[k] = (k + 3 - outputs) % 3;
    size[k] = byte_span(views[order[k]]).size;
  }
}

bool KeptSpans::apart(const void* const (&data)[3]) const {
  ByteSpan spans[3];
  for (int k = 0; k < 3; ++k) spans[k] = {reinterpret_cast<uintptr_t>(data[order[k]]), size[k]};
  // first_overlap's pairs: the first output against the rest, the second (if any) against the
  // input. Non-short-circuit ors: no branch per pair.
  return !(overlap(spans[0], spans[1]) | overlap(spans[0], spans[2]) |
           (outputs == 2 && overlap(spans[1], spans[2])));
}

[[gnu::cold]] Status check_same_device(const View& leading, const char* leading_name,
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

[[gnu::cold]] Status check_views(int nd, const TensorView& first, const Argument& first_view,
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

Status check_views_apart(const char* const (&names)[3], const View (&views)[3], int outputs) {
  const Argument a{names[0], &views[0]}, b{names[1], &views[1]}, c{names[2], &views[2]};
  return outputs == 2 ? check_apart({b, c}, {a}) : check_apart({c}, {a, b});
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

[[gnu::cold]] Status check_view_shape(const char* argument, const TensorView& view, DType dtype,
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

[[gnu::cold]] Status check_leading_view(const char* argument, const TensorView& view,
                                        const Ints& shape, int nd,
                          DType index_dtype, int64_t index_plane, View* out) {
  POOLGEN_RETURN_IF_ERROR(check_dtype(argument, view.dtype));
  POOLGEN_RETURN_IF_ERROR(check_index_dtype("indices", index_dtype, index_plane));
  return check_view_shape(argument, view, view.dtype, shape, nd, out);
}

Status check_data(const char* argument, const TensorView& view, const View& checked) {
  if (!has_data(view, checked)) {
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

// The error for element `position` (in input order) holding `index`, outside a plane of `plane`.
Status invalid_index_at(int64_t position, int64_t index, int64_t plane) {
  return fail(Code::index_out_of_range, "indices", ": expected indices in [0, ", plane - 1,
              "] (an output plane of ", plane, " elements), got ", index, " at element ", position,
              " (in input order)");
}


}  // namespace poolgen::detail
