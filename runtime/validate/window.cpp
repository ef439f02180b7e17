#include "validate/window.hpp"

#include <algorithm>
#include <cstring>

namespace poolgen::detail {

namespace {

Status check_nd(int nd) {
  if (nd < 1 || nd > 3) return fail(Code::invalid_argument, "nd", ": expected 1, 2 or 3, got ", nd);
  return {};
}

// Expands a PyTorch-style int-or-tuple list to nd entries (empty takes `fallback`).
Status expand(const char* name, const Ints& list, int nd, const int64_t* fallback, int64_t* out) {
  if (list.empty() && fallback) {
    for (int i = 0; i < nd; ++i) out[i] = fallback[i];
    return {};
  }
  if (list.size() != 1 && list.size() != static_cast<size_t>(nd)) {
    return fail(Code::invalid_argument, name, ": expected 1 or ", nd, " entries, got ",
                list.size(), " (", format_shape(list), ")");
  }
  for (int i = 0; i < nd; ++i) out[i] = list.size() == 1 ? list[0] : list[i];
  return {};
}

// Every entry >= minimum (invalid_argument) and at most kMaxWindowParameter (unsupported).
Status check_range(const char* name, const int64_t* values, int nd, int64_t minimum) {
  for (int i = 0; i < nd; ++i) {
    if (values[i] < minimum) {
      return fail(Code::invalid_argument, name, ": expected every entry >= ", minimum, ", got ",
                  values[i], " in spatial dimension ", i);
    }
    if (values[i] > kMaxWindowParameter) {
      return fail(Code::unsupported, name, ": expected every entry <= 2^31-1, got ", values[i],
                  " in spatial dimension ", i);
    }
  }
  return {};
}

}  // namespace

Status expand_option(const char* option, const Ints& list, int nd, int64_t* out) {
  struct Rule {
    const char* name;  // static: the error names it
    int64_t minimum;
    bool optional;
  };
  static const Rule kRules[] = {
      {"kernel_size", 1, false}, {"stride", 1, true}, {"padding", 0, true}, {"dilation", 1, true}};
  POOLGEN_RETURN_IF_ERROR(check_nd(nd));
  for (const Rule& rule : kRules) {
    if (std::strcmp(option, rule.name) != 0) continue;
    const int64_t zeros[3] = {0, 0, 0};
    POOLGEN_RETURN_IF_ERROR(expand(rule.name, list, nd, rule.optional ? zeros : nullptr, out));
    return list.empty() ? Status() : check_range(rule.name, out, nd, rule.minimum);
  }
  return fail(Code::invalid_argument, "option",
              ": expected kernel_size, stride, padding or dilation, got ", option);
}

namespace {

Status common_window(int nd, const Ints& kernel, const Ints& stride, const Ints& padding,
                     Window* w) {
  POOLGEN_RETURN_IF_ERROR(check_nd(nd));
  w->nd = nd;
  if (kernel.empty()) {
    return fail(Code::invalid_argument, "kernel_size", ": expected 1 or ", nd, " entries, got 0");
  }
  POOLGEN_RETURN_IF_ERROR(expand("kernel_size", kernel, nd, nullptr, w->kernel));
  POOLGEN_RETURN_IF_ERROR(expand("stride", stride, nd, w->kernel, w->stride));
  const int64_t zeros[3] = {0, 0, 0};
  POOLGEN_RETURN_IF_ERROR(expand("padding", padding, nd, zeros, w->padding));
  POOLGEN_RETURN_IF_ERROR(check_range("kernel_size", w->kernel, nd, 1));
  POOLGEN_RETURN_IF_ERROR(check_range("stride", w->stride, nd, 1));
  return check_range("padding", w->padding, nd, 0);
}

Status check_device_option(Device device) {
  if (device != Device::cpu && device != Device::cuda) {
    return fail(Code::unsupported, "device", ": expected cpu (0) or cuda (1), got ",
                static_cast<int>(device));
  }
  return {};
}

// floor(a / b) for b > 0.
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

}  // namespace

namespace {

// padding_end and auto_pad: the window's end padding, or the mode that computes both sides from
// the input (pool_output_shape).
Status padding_mode(int nd, const PoolOptions& o, Window* w) {
  const int64_t zeros[3] = {0, 0, 0};
  const auto known = [](AutoPad a) {
    return a >= AutoPad::explicit_padding && a <= AutoPad::valid;
  };
  if (!known(o.auto_pad)) {
    return fail(Code::invalid_argument, "auto_pad", ": expected an AutoPad (0 to 3), got ",
                static_cast<int>(o.auto_pad));
  }
  w->auto_pad = o.auto_pad;
  if (o.auto_pad != AutoPad::explicit_padding) {
    if (std::any_of(w->padding, w->padding + nd, [](int64_t p) { return p != 0; }) ||
        !o.padding_end.empty()) {
      return fail(Code::invalid_argument, "padding",
                  ": expected 0 and no padding_end with auto_pad ",
                  static_cast<int>(o.auto_pad), " (the padding is computed), got padding ",
                  format_shape(o.padding), " and padding_end ", format_shape(o.padding_end));
    }
    if (o.ceil_mode && o.auto_pad != AutoPad::valid) {
      return fail(Code::invalid_argument, "ceil_mode", ": expected false with auto_pad ",
                  static_cast<int>(o.auto_pad), " (SAME sizes the output), got true");
    }
    return {};
  }
  if (o.padding_end.empty()) {
    std::copy(w->padding, w->padding + nd, w->padding_end);
    return {};
  }
  POOLGEN_RETURN_IF_ERROR(expand("padding_end", o.padding_end, nd, zeros, w->padding_end));
  return check_range("padding_end", w->padding_end, nd, 0);
}

}  // namespace

Status check_index_format(const char* argument, IndexFormat format) {
  if (format >= IndexFormat::plane && format <= IndexFormat::window) return {};
  return fail(Code::invalid_argument, argument, ": expected an IndexFormat (0 to 5), got ",
              static_cast<int>(format));
}

Status pool_window(int nd, const PoolOptions& o, Window* w) {
  POOLGEN_RETURN_IF_ERROR(common_window(nd, o.kernel_size, o.stride, o.padding, w));
  const int64_t ones[3] = {1, 1, 1};
  POOLGEN_RETURN_IF_ERROR(expand("dilation", o.dilation, nd, ones, w->dilation));
  POOLGEN_RETURN_IF_ERROR(check_range("dilation", w->dilation, nd, 1));
  w->ceil_mode = o.ceil_mode;
  POOLGEN_RETURN_IF_ERROR(check_device_option(o.device));
  POOLGEN_RETURN_IF_ERROR(padding_mode(nd, o, w));
  if (o.max_rule != MaxRule::any_nan && o.max_rule != MaxRule::first_tap) {
    return fail(Code::invalid_argument, "max_rule", ": expected a MaxRule (0 or 1), got ",
                static_cast<int>(o.max_rule));
  }
  POOLGEN_RETURN_IF_ERROR(check_index_format("index_format", o.index_format));
  if (o.pool_rule < PoolRule::pytorch || o.pool_rule > PoolRule::tensorflow) {
    return fail(Code::invalid_argument, "pool_rule", ": expected a PoolRule (0 to 2), got ",
                static_cast<int>(o.pool_rule));
  }
  if (o.pool_rule == PoolRule::tensorflow && o.ceil_mode) {
    return fail(Code::invalid_argument, "ceil_mode",
                ": expected false with pool_rule tensorflow (TensorFlow has none), got true");
  }
  w->pool_rule = o.pool_rule;
  int64_t volume = 1;
  for (int i = 0; i < nd; ++i) {
    // Parameters are below 2^31: this cannot overflow. auto_pad's padding is below the span.
    const int64_t span = w->dilation[i] * (w->kernel[i] - 1) + 1;
    const int64_t pads = w->auto_pad == AutoPad::explicit_padding
                             ? w->padding[i] + w->padding_end[i]
                             : span - 1;
    const int64_t reach = span + w->stride[i] + pads;
    if (reach > kMaxWindowReach) {
      return fail(Code::unsupported, "kernel_size",
                  ": expected a window whose dilated span, stride ",
                  "and padding add up to at most 2^29, got ", reach,
                  " in spatial dimension ", i, " (kernel_size ", w->kernel[i], ", dilation ",
                  w->dilation[i], ", stride ", w->stride[i], ", padding ", w->padding[i], ")");
    }
    // At most 2^26 so far times a span below 2^29: no overflow.
    volume *= span;
    if (volume > kMaxWindowVolume) {
      return fail(Code::unsupported, "kernel_size", ": expected a window spanning at most 2^26 ",
                  "elements (the product of its dilated spans), got at least ", volume,
                  " (spatial dimensions 0 to ", i, ")");
    }
    if (!o.padding_end.empty()) {
      // ONNX Runtime's limit: each side below the (undilated) kernel.
      for (const auto& [name, pad] : {std::pair{"padding", w->padding[i]},
                                      std::pair{"padding_end", w->padding_end[i]}}) {
        if (pad >= w->kernel[i]) {
          return fail(Code::invalid_argument, name, ": expected less than kernel_size (",
                      w->kernel[i], ") with padding_end given, in spatial dimension ", i,
                      ", got ", pad);
        }
      }
      continue;
    }
    // PyTorch bounds the padding by half the dilated kernel, but by half the raw kernel in 3-D.
    const int64_t limit = nd == 3 ? w->kernel[i] / 2 : span / 2;
    if (w->padding[i] > limit) {
      return fail(Code::invalid_argument, "padding", ": expected at most half the ",
                  nd == 3 ? "kernel" : "effective kernel", " (", limit,
                  ") in spatial dimension ", i, ", got ", w->padding[i]);
    }
  }
  return {};
}

// Unpooling's conventions: the output_size rule, the index format, the end padding.
Status unpool_conventions(int nd, const UnpoolOptions& o, Window* w) {
  if (o.output_size_rule < OutputSizeRule::pytorch || o.output_size_rule > OutputSizeRule::any) {
    return fail(Code::invalid_argument, "output_size_rule",
                ": expected an OutputSizeRule (0 to 3), ",
                "got ", static_cast<int>(o.output_size_rule));
  }
  w->size_rule = o.output_size_rule;
  POOLGEN_RETURN_IF_ERROR(check_index_format("index_format", o.index_format));
  if (o.index_format == IndexFormat::window) {
    return fail(Code::invalid_argument, "index_format",
                ": expected plane, onnx, onnx_column_major, ",
                "tensorflow or tensorflow_with_batch for unpooling (window taps name no slot ",
                "without the pooling's windows), got window");
  }
  if (o.padding_end.empty()) {
    std::copy(w->padding, w->padding + nd, w->padding_end);
    return {};
  }
  const int64_t zeros[3] = {0, 0, 0};
  POOLGEN_RETURN_IF_ERROR(expand("padding_end", o.padding_end, nd, zeros, w->padding_end));
  return check_range("padding_end", w->padding_end, nd, 0);
}

Status unpool_window(int nd, const UnpoolOptions& o, Window* w) {
  POOLGEN_RETURN_IF_ERROR(check_device_option(o.device));
  if (!o.kernel_size.empty() || o.output_size.empty()) {
    POOLGEN_RETURN_IF_ERROR(common_window(nd, o.kernel_size, o.stride, o.padding, w));
    return unpool_conventions(nd, o, w);
  }
  if (o.output_size_rule == OutputSizeRule::onnx ||
      o.output_size_rule == OutputSizeRule::onnx_runtime) {
    return fail(Code::invalid_argument, "kernel_size", ": expected one with output_size_rule ",
                static_cast<int>(o.output_size_rule), " (ONNX's rules compare with the default ",
                "extent), got none");
  }
  if (!o.padding_end.empty()) {
    return fail(Code::invalid_argument, "padding_end", ": expected none without a kernel_size ",
                "(unpooling by the indices alone), got ", format_shape(o.padding_end));
  }
  // By the indices alone: a stride or padding would describe a window there is none of.
  POOLGEN_RETURN_IF_ERROR(check_nd(nd));
  w->nd = nd;
  w->by_indices = true;
  if (!o.stride.empty()) {
    return fail(Code::invalid_argument, "stride",
                ": expected none without a kernel_size (unpooling ",
                "by the indices alone), got ", format_shape(o.stride));
  }
  const int64_t zeros[3] = {0, 0, 0};
  POOLGEN_RETURN_IF_ERROR(expand("padding", o.padding, nd, zeros, w->padding));
  if (std::any_of(w->padding, w->padding + nd, [](int64_t p) { return p != 0; })) {
    return fail(Code::invalid_argument, "padding", ": expected 0 without a kernel_size (unpooling ",
                "by the indices alone), got ", format_shape(o.padding));
  }
  return unpool_conventions(nd, o, w);
}

bool implied_window(int nd, const Ints& in, const Ints& out, Window* w) {
  const size_t first = in.size() - nd;
  *w = Window();
  w->nd = nd;
  for (int i = 0; i < nd; ++i) {
    const int64_t from = in[first + i], to = out[first + i];
    if (from < 1 || to % from != 0 || to / from > kMaxWindowParameter) return false;
    w->kernel[i] = w->stride[i] = to / from;
  }
  return true;
}

bool windows_tile(const Window& w, const Ints& in, const Ints& out) {
  const size_t first = in.size() - w.nd, out_first = out.size() - w.nd;
  for (int i = 0; i < w.nd; ++i) {
    if (out[out_first + i] != in[first + i] * w.kernel[i]) return false;
  }
  return true;
}

int64_t spatial_elements(int nd, const Ints& shape) {
  int64_t count = 1;
  for (size_t i = shape.size() - std::min<size_t>(nd, shape.size()); i < shape.size(); ++i) {
    count *= shape[i];
  }
  return count;
}

namespace {

// At most kMaxElements in all, empty dimensions aside: strides and plane sizes, products of
// extents, stay in range even for a tensor with N = 0 (extents already checked non-negative).
Status check_elements(const char* argument, const Ints& shape) {
  int64_t count = 1;
  for (int64_t extent : shape) {
    if (!multiply_within(count, std::max<int64_t>(extent, 1), kMaxElements, &count)) {
      return fail(Code::invalid_argument, argument, ": expected at most 2^59 elements, got shape ",
                  format_shape(shape));
    }
  }
  return {};
}

}  // namespace

Status check_input_shape(const char* op, int nd, const char* argument, const Ints& shape) {
  const int rank = static_cast<int>(shape.size());
  if (rank != nd + 1 && rank != nd + 2) {
    return fail(Code::invalid_argument, argument, ": expected rank ", nd + 1, " or ", nd + 2,
                " for ", op, nd, "d, got rank ", rank, " (shape ", format_shape(shape), ")");
  }
  for (int i = 0; i < rank; ++i) {
    const bool is_batch = rank == nd + 2 && i == 0;
    if (shape[i] < (is_batch ? 0 : 1)) {
      return fail(Code::invalid_argument, argument, ": expected dimension ", i, " to be ",
                  is_batch ? ">= 0" : ">= 1", ", got ", shape[i], " (shape ",
                  format_shape(shape), ")");
    }
  }
  return check_elements(argument, shape);
}

Status pool_output_shape(Window* window, const Ints& in, Ints* out, const char* input) {
  Window& w = *window;
  const size_t first = in.size() - w.nd;
  *out = in;
  for (int i = 0; i < w.nd; ++i) {
    const int64_t extent = in[first + i], s = w.stride[i];
    const int64_t span = w.dilation[i] * (w.kernel[i] - 1) + 1;
    if (w.auto_pad == AutoPad::same_upper || w.auto_pad == AutoPad::same_lower) {
      // SAME: the padding an undilated window needs for ceil(in / s) outputs, halved with C++'s
      // truncation (the odd one at the end for same_upper), then the dilated window's output
      // count. ONNX Runtime does not clamp a negative need (a stride past the kernel): its
      // windows then start inside the input (max_pool crops what none reaches).
      int64_t needed = ((extent + s - 1) / s - 1) * s + w.kernel[i] - extent;
      if (w.pool_rule != PoolRule::onnx_runtime) needed = std::max<int64_t>(0, needed);
      w.padding[i] = w.auto_pad == AutoPad::same_upper ? needed / 2 : (needed + 1) / 2;
      w.padding_end[i] = needed - w.padding[i];
    }
    // What the window leaves of the padded input, then the extent by the rule's division.
    const int64_t rest = extent + w.padding[i] + w.padding_end[i] - span;
    int64_t o = 0;
    switch (w.pool_rule) {
      case PoolRule::pytorch: o = floor_div(rest + (w.ceil_mode ? s - 1 : 0), s) + 1; break;
      case PoolRule::onnx_runtime:  // truncating, and ceil_mode's rounding only when it fits
        o = (rest >= 0 ? (rest + (w.ceil_mode ? s - 1 : 0)) / s : rest / s) + 1;
        break;
      case PoolRule::tensorflow: o = (rest + s) / s; break;
    }
    // The last window must start inside the input or its left padding.
    if (w.ceil_mode && o > 0 && (o - 1) * s >= extent + w.padding[i]) --o;
    if (o < (w.pool_rule == PoolRule::pytorch ? 1 : 0)) {
      return fail(Code::invalid_argument, input, ": expected spatial dimension ", i,
                  " to hold a window of kernel_size ", w.kernel[i], ", dilation ", w.dilation[i],
                  ", padding ", w.padding[i], " and ", w.padding_end[i], ", got extent ", extent,
                  " (output extent would be ", o, ")");
    }
    (*out)[first + i] = o;
    if ((o - 1) * s - w.padding[i] + span > extent) w.overhangs = true;
  }
  return {};
}

Status unpool_output_shape(const Window& w, const Ints& in, const Ints& output_size, Ints* out,
                           const char* output) {
  const size_t first = in.size() - w.nd;
  const size_t given = output_size.size();
  if (given != 0 && given != static_cast<size_t>(w.nd) && given != static_cast<size_t>(w.nd) + 2) {
    return fail(Code::invalid_argument, "output_size", ": expected 0, ", w.nd, " or ", w.nd + 2,
                " entries, got ", given, " (", format_shape(output_size), ")");
  }
  const bool onnx_rule =
      w.size_rule == OutputSizeRule::onnx || w.size_rule == OutputSizeRule::onnx_runtime;
  if (given == static_cast<size_t>(w.nd) + 2 && w.size_rule != OutputSizeRule::pytorch) {
    // Other frameworks' full shapes are the output's: its N and C are the values'.
    const Ints lead(output_size.begin(), output_size.begin() + 2);
    const Ints values_lead(in.begin(), in.end() - w.nd);
    if (values_lead.size() != 2 || lead != values_lead) {
      return fail(Code::invalid_argument, "output_size", ": expected the values' ",
                  values_lead.size() == 2 ? "batch and channels " : "rank ",
                  format_shape(values_lead), " leading a full shape (output_size_rule ",
                  static_cast<int>(w.size_rule), "), got ", format_shape(output_size));
    }
  }
  *out = in;
  int64_t default_count = 1, count = 1;  // spatial elements, for onnx_runtime
  for (int i = 0; i < w.nd; ++i) {
    const int64_t s = w.stride[i];
    // Window parameters are below 2^31 and extents below 2^59: only the product can overflow.
    int64_t span = 0;
    if (!multiply_within(in[first + i] - 1, s, kMaxElements, &span)) {
      return fail(Code::invalid_argument, output, ": expected an unpooled extent of at most 2^59, ",
                  "got (", in[first + i], " - 1) * stride ", s, " in spatial dimension ", i);
    }
    const int64_t natural = span - w.padding[i] - w.padding_end[i] + w.kernel[i];
    if (onnx_rule && natural < 1) {
      return fail(Code::invalid_argument, "kernel_size",
                  ": expected a default extent >= 1 (ONNX's ",
                  "rules), got ", natural, " in spatial dimension ", i, " (input extent ",
                  in[first + i], ", stride ", s, ", padding ", w.padding[i], " and ",
                  w.padding_end[i], ")");
    }
    int64_t extent = natural;
    if (given) {
      extent = output_size[given - w.nd + i];
      // By the indices alone any extent goes; after a window, those its last cell reaches.
      if (w.size_rule == OutputSizeRule::pytorch && !w.by_indices &&
          (extent <= natural - s || extent >= natural + s)) {
        return fail(Code::invalid_argument, "output_size", ": expected spatial dimension ", i,
                    " between ", natural - s + 1, " and ", natural + s - 1, ", got ", extent);
      }
      if (w.size_rule == OutputSizeRule::onnx && extent < natural) {
        return fail(Code::invalid_argument, "output_size", ": expected spatial dimension ", i,
                    " at least the default extent ", natural, " (output_size_rule onnx), got ",
                    extent);
      }
    }
    if (extent < 1 && w.by_indices) {
      return fail(Code::invalid_argument, "output_size", ": expected spatial dimension ", i,
                  " to be >= 1, got extent ", extent);
    }
    if (extent < 1) {
      return fail(Code::invalid_argument, "output_size", ": expected spatial dimension ", i,
                  " to be >= 1, got extent ", extent, " (input extent ", in[first + i],
                  ", kernel_size ", w.kernel[i], ", stride ", s, ", padding ", w.padding[i],
                  ")");
    }
    (*out)[first + i] = extent;
    if (onnx_rule) {  // below 2^59 each, checked above: the products saturate instead
      default_count = multiply_within(default_count, natural, kMaxElements, &default_count)
                          ? default_count : kMaxElements;
      count = multiply_within(count, extent, kMaxElements, &count) ? count : kMaxElements;
    }
  }
  if (w.size_rule == OutputSizeRule::onnx_runtime && count < default_count) {
    return fail(Code::invalid_argument, "output_size", ": expected at least the default shape's ",
                default_count, " elements per plane (output_size_rule onnx_runtime), got ",
                format_shape(output_size), " with ", count);
  }
  return check_elements(output, *out);
}


int unit_leading_dims(const Window& w, const int64_t* spatial_extents) {
  int count = 0;
  while (count < w.nd - 1 && spatial_extents[count] == 1 && w.kernel[count] == 1 &&
         w.padding[count] == 0 && w.padding_end[count] == 0) {
    ++count;
  }
  return count;
}

Window without_leading_dims(const Window& window, int count) {
  Window w = window;
  w.nd -= count;
  for (int64_t* list : {w.kernel, w.stride, w.padding, w.dilation, w.padding_end}) {
    std::copy(list + count, list + 3, list);
  }
  return w;
}

}  // namespace poolgen::detail
