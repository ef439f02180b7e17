// The checks of a call's tensors: dtypes, shapes, strides, devices, data, and outputs apart from
// every other argument; the invalid-index error every op reports alike.
#pragma once

#include "core/status.hpp"
#include "core/view.hpp"

#include <initializer_list>
#include <utility>

namespace poolgen::detail {

// Checks `view` has `dtype` and `shape` and sits on a known device with usable strides; `nd` spatial
// dimensions decide where a missing batch dimension goes. check_view_shape leaves data unchecked.
Status check_view_shape(const char* argument, const TensorView& view, DType dtype,
                        const Ints& shape, int nd, View* out);
Status check_view(const char* argument, const TensorView& view, DType dtype, const Ints& shape,
                  int nd, View* out);
// The rest of check_view, for a view check_view_shape built (`checked`): data where it has
// elements.
Status check_data(const char* argument, const TensorView& view, const View& checked);
// check_data's condition, for callers on the repeated calls' path: a Status built and destroyed
// per view there cost more than the test.
inline bool has_data(const TensorView& view, const View& checked) {
  return view.data != nullptr || checked.elements() == 0;
}

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

// check_apart for a call's three views in call order, named `names`, the last `outputs` of them
// (1 or 2) outputs.
Status check_views_apart(const char* const (&names)[3], const View (&views)[3], int outputs);

// check_views_apart's spans with their sizes computed once, for a call that repeats its shapes:
// the views' span sizes (a function of shapes, strides and dtypes).
struct KeptSpans {
  uint64_t size[3] = {};  // outputs first
  int order[3] = {};      // the call-order index of each
  int outputs = 0;
  // The spans of `views` in call order, the last `outputs` of them outputs.
  KeptSpans(const Views& views, int outputs);
  // Whether views at `data` (in call order) pass check_views_apart: it decides alike, and names
  // the overlap where this says no.
  bool apart(const void* const (&data)[3]) const;
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

// The error for element `position` (in input order) holding `index`, outside a plane of `plane`.
Status invalid_index_at(int64_t position, int64_t index, int64_t plane);

}  // namespace poolgen::detail
