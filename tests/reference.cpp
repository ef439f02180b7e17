// Reference implementation of docs/semantics.md; see reference.hpp.
#include "reference.hpp"

#include "dtypes.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>

namespace poolgen::ref {
namespace {

std::string join(const Ints& v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}

Status invalid(const std::string& message) { return Status(Code::invalid_argument, message); }

// Expands a per-dimension list to nd entries: a single entry applies to every dimension.
// `fallback` is used when the list is empty and empty is allowed (stride, padding, dilation).
Status expand_list(const char* name, int nd, const Ints& list, const Ints* fallback, Ints* out) {
  if (list.empty() && fallback != nullptr) {
    *out = *fallback;
    return Status();
  }
  if (list.size() == 1) {
    *out = Ints(nd, list[0]);
    return Status();
  }
  if (static_cast<int>(list.size()) == nd) {
    *out = list;
    return Status();
  }
  return invalid(std::string(name) + ": expected 1 or " + std::to_string(nd) +
                 " entries, got " + std::to_string(list.size()) + " " + join(list));
}

Status check_min(const char* name, const Ints& v, int64_t min) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] < min) {
      return invalid(std::string(name) + "[" + std::to_string(i) + "] must be at least " +
                     std::to_string(min) + ", got " + std::to_string(v[i]));
    }
  }
  return Status();
}

Status check_nd(int nd) {
  if (nd < 1 || nd > 3) return invalid("nd must be 1, 2 or 3, got " + std::to_string(nd));
  return Status();
}

// Rank nd+1 (batch-less) or nd+2, every dimension >= 1 except a leading batch of 0.
Status check_shape(const char* name, int nd, const Ints& shape) {
  const int rank = static_cast<int>(shape.size());
  if (rank != nd + 1 && rank != nd + 2) {
    return invalid(std::string(name) + ": expected rank " + std::to_string(nd + 1) + " or " +
                   std::to_string(nd + 2) + " for a " + std::to_string(nd) + "-d op, got rank " +
                   std::to_string(rank) + " " + join(shape));
  }
  for (int i = 0; i < rank; ++i) {
    const bool batch = rank == nd + 2 && i == 0;
    if (shape[i] < (batch ? 0 : 1)) {
      return invalid(std::string(name) + ": dimension " + std::to_string(i) + " must be at least " +
                     std::to_string(batch ? 0 : 1) + ", got " + std::to_string(shape[i]) + " " +
                     join(shape));
    }
  }
  return Status();
}

// The 16-bit floats compare as the f32 values they widen to (exactly), as PyTorch does.
template <typename T>
auto key(T v) {
  if constexpr (std::is_same_v<T, f16_t> || std::is_same_v<T, bf16_t>) {
    return test::to_float(v);
  } else {
    return v;
  }
}

template <typename T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<decltype(key(v))>) {
    return std::isnan(key(v));
  } else {
    return false;
  }
}

template <typename T>
T lowest_value() {
  if constexpr (std::is_same_v<T, f16_t>) {
    return f16_t{0xfc00};  // -inf
  } else if constexpr (std::is_same_v<T, bf16_t>) {
    return bf16_t{0xff80};  // -inf
  } else if constexpr (std::is_floating_point_v<T>) {
    return -std::numeric_limits<T>::infinity();
  } else {
    return std::numeric_limits<T>::lowest();
  }
}

// Spatial extents of `shape` (its last nd entries), left-padded with 1s to three entries.
void spatial3(int nd, const Ints& shape, int64_t e[3]) {
  for (int i = 0; i < 3; ++i) e[i] = 1;
  for (int i = 0; i < nd; ++i) e[3 - nd + i] = shape[shape.size() - nd + i];
}

// a + b in T's arithmetic (reference.hpp: max_pool_backward).
template <typename T>
T add(T a, T b) {
  if constexpr (std::is_same_v<T, f16_t>) {
    return test::to_f16(test::to_float(a) + test::to_float(b));
  } else if constexpr (std::is_same_v<T, bf16_t>) {
    return test::to_bf16(test::to_float(a) + test::to_float(b));
  } else {
    return a + b;
  }
}

// An invalid index's error, as max_unpool's.
Status index_error(int64_t position, int64_t index, int64_t plane) {
  return Status(Code::index_out_of_range,
                "indices: element " + std::to_string(position) + " (in input order) is " +
                    std::to_string(index) + ", outside the output plane of size " +
                    std::to_string(plane) + " (valid: 0 to " + std::to_string(plane - 1) + ")");
}

template <typename T>
T lowest_finite() {
  if constexpr (std::is_same_v<T, f16_t>) {
    return f16_t{0xfbff};  // -65504
  } else if constexpr (std::is_same_v<T, bf16_t>) {
    return bf16_t{0xff7f};
  } else {
    return std::numeric_limits<T>::lowest();
  }
}

// ONNX Runtime's index for a window with no tap inside: the element at spatial coordinates all
// -1 of plane `pl` (n * C + c), in `format`; in[] the 3-D frame (leading extents of 1 for nd < 3,
// whose coordinates stay 0).
int64_t empty_window_index(IndexFormat format, int nd, int64_t pl, int64_t channels,
                           const int64_t in[3]) {
  const int64_t plane = in[0] * in[1] * in[2];
  int64_t x[3] = {0, 0, 0};
  for (int j = 3 - nd; j < 3; ++j) x[j] = -1;
  const int64_t row_major = (x[0] * in[1] + x[1]) * in[2] + x[2];
  switch (format) {
    case IndexFormat::onnx: return pl * plane + row_major;
    case IndexFormat::onnx_column_major: {
      // The first real spatial dimension fastest.
      int64_t q = 0;
      for (int j = 2; j >= 3 - nd; --j) q = q * in[j] + x[j];
      return pl * plane + q;
    }
    case IndexFormat::tensorflow: return row_major * channels + pl % channels;
    case IndexFormat::tensorflow_with_batch:
      return (pl / channels * plane + row_major) * channels + pl % channels;
    default: return row_major;
  }
}

// The plane offset `index` of plane `pl` (n * C + c) as `format` writes it (docs/semantics.md,
// "Index formats"), in the 3-D terms of max_pool below; -1 where the format has none.
int64_t formatted_index(IndexFormat format, int64_t index, int64_t pl, int64_t channels,
                        const int64_t in[3], const int64_t o[3], const int64_t k[3],
                        const int64_t s[3], const int64_t p[3], const int64_t d[3]) {
  const int64_t plane = in[0] * in[1] * in[2];
  const int64_t x[3] = {index / (in[1] * in[2]), index / in[2] % in[1], index % in[2]};
  if (format == IndexFormat::plane) return index;
  if (index < 0 || index >= plane) return -1;  // an empty window's stepped start
  switch (format) {
    case IndexFormat::plane: return index;
    case IndexFormat::onnx: return pl * plane + index;
    case IndexFormat::onnx_column_major:
      // The first spatial dimension fastest (the 3-D frame's leading extents of 1 add nothing).
      return pl * plane + x[0] + (x[1] + x[2] * in[1]) * in[0];
    case IndexFormat::tensorflow: return index * channels + pl % channels;
    case IndexFormat::tensorflow_with_batch:
      return (pl / channels * plane + index) * channels + pl % channels;
    case IndexFormat::window: {
      // The tap, the first spatial dimension fastest.
      int64_t t = 0;
      for (int j = 2; j >= 0; --j) {
        const int64_t offset = x[j] - (o[j] * s[j] - p[j]);
        if (offset < 0 || offset % d[j] != 0 || offset / d[j] >= k[j]) return -1;
        t = t * k[j] + offset / d[j];
      }
      return t;
    }
  }
  return -1;
}

}  // namespace

int64_t numel(const Ints& shape) {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  return n;
}

int64_t pool_extent(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  return pool_extent(in, k, s, p, p, d, ceil_mode);
}

int64_t pool_extent(int64_t in, int64_t k, int64_t s, int64_t p, int64_t p_end, int64_t d,
                    bool ceil_mode, PoolRule rule) {
  const int64_t rest = in + p + p_end - d * (k - 1) - 1;  // what the window leaves
  int64_t out = 0;
  if (rule == PoolRule::tensorflow) {
    out = (rest + s) / s;  // C++ truncates, as TensorFlow's own division does
  } else if (rule == PoolRule::onnx_runtime) {
    // ONNX Runtime: ceil(rest / s) in floating point with ceil_mode, else truncation; both
    // round toward zero below 0.
    out = (ceil_mode ? static_cast<int64_t>(std::ceil(static_cast<double>(rest) / s))
                     : rest / s) + 1;
  } else {
    const int64_t num = rest + (ceil_mode ? s - 1 : 0);
    // Floor division (num may be negative).
    int64_t q = num / s;
    if ((num % s != 0) && ((num < 0) != (s < 0))) --q;
    out = q + 1;
  }
  if (ceil_mode && out > 0 && (out - 1) * s >= in + p) --out;
  return out;
}

Status expand_pool_options(int nd, const PoolOptions& options, PoolWindow* w) {
  Status st = check_nd(nd);
  if (!st.ok()) return st;
  if (!(st = expand_list("kernel_size", nd, options.kernel_size, nullptr, &w->kernel)).ok()) return st;
  if (!(st = expand_list("stride", nd, options.stride, &w->kernel, &w->stride)).ok()) return st;
  const Ints zeros(nd, 0), ones(nd, 1);  // an empty padding/dilation list means the default
  if (!(st = expand_list("padding", nd, options.padding, &zeros, &w->padding)).ok()) return st;
  if (!(st = expand_list("dilation", nd, options.dilation, &ones, &w->dilation)).ok()) return st;
  if (!(st = check_min("kernel_size", w->kernel, 1)).ok()) return st;
  if (!(st = check_min("stride", w->stride, 1)).ok()) return st;
  if (!(st = check_min("padding", w->padding, 0)).ok()) return st;
  if (!(st = check_min("dilation", w->dilation, 1)).ok()) return st;
  w->ceil_mode = options.ceil_mode;
  if (options.pool_rule < PoolRule::pytorch || options.pool_rule > PoolRule::tensorflow) {
    return invalid("pool_rule: unknown value");
  }
  if (options.pool_rule == PoolRule::tensorflow && options.ceil_mode) {
    return invalid("ceil_mode: TensorFlow has none");
  }
  if (options.auto_pad != AutoPad::explicit_padding) {
    // Both sides come from the input extent (max_pool_output_shape).
    if (options.auto_pad < AutoPad::explicit_padding || options.auto_pad > AutoPad::valid) {
      return invalid("auto_pad: unknown value");
    }
    if (!options.padding_end.empty() || *std::max_element(w->padding.begin(), w->padding.end()) != 0) {
      return invalid("padding: given with auto_pad");
    }
    if (options.ceil_mode && options.auto_pad != AutoPad::valid) {
      return invalid("ceil_mode: given with auto_pad SAME");
    }
    w->padding_end = w->padding;
    return Status();
  }
  if (!options.padding_end.empty()) {
    // ONNX's asymmetric padding: each side below the undilated kernel (ONNX Runtime's check).
    if (!(st = expand_list("padding_end", nd, options.padding_end, &zeros, &w->padding_end)).ok()) {
      return st;
    }
    if (!(st = check_min("padding_end", w->padding_end, 0)).ok()) return st;
    for (int i = 0; i < nd; ++i) {
      if (w->padding[i] >= w->kernel[i] || w->padding_end[i] >= w->kernel[i]) {
        return invalid("padding[" + std::to_string(i) + "]: both sides must be below the kernel");
      }
    }
    return Status();
  }
  w->padding_end = w->padding;
  for (int i = 0; i < nd; ++i) {
    // 1-D/2-D: half the dilated kernel; 3-D: half the raw kernel (as PyTorch).
    const int64_t limit = nd == 3 ? w->kernel[i] / 2
                                  : (w->dilation[i] * (w->kernel[i] - 1) + 1) / 2;
    if (w->padding[i] > limit) {
      return invalid("padding[" + std::to_string(i) + "] must be at most half the " +
                     (nd == 3 ? std::string("kernel size") : std::string("effective kernel size")) +
                     " (" + std::to_string(limit) + "), got " + std::to_string(w->padding[i]));
    }
  }
  return Status();
}

// The padding auto_pad gives for `input_shape` (SAME: the padding an undilated window needs for
// ceil(in / s) outputs, the odd one after the end for SAME_UPPER). TensorFlow clamps it at 0;
// ONNX Runtime does not, and halves a negative one toward zero: SAME_UPPER trunc(need / 2),
// SAME_LOWER trunc((need + 1) / 2) before the start, the rest after the end.
Status resolve_padding(int nd, const Ints& input_shape, const PoolOptions& options,
                       PoolWindow* w) {
  const AutoPad auto_pad = options.auto_pad;
  if (auto_pad != AutoPad::same_upper && auto_pad != AutoPad::same_lower) return Status();
  for (int i = 0; i < nd; ++i) {
    const int64_t in = input_shape[input_shape.size() - nd + i], s = w->stride[i];
    const int64_t outputs = (in + s - 1) / s;
    int64_t needed = (outputs - 1) * s + w->kernel[i] - in;
    if (options.pool_rule != PoolRule::onnx_runtime) needed = std::max<int64_t>(0, needed);
    const int64_t halved = auto_pad == AutoPad::same_upper ? needed : needed + 1;
    w->padding[i] = halved >= 0 ? halved / 2 : -(-halved / 2);
    w->padding_end[i] = needed - w->padding[i];
  }
  return Status();
}

Status expand_unpool_options(int nd, const UnpoolOptions& options, PoolWindow* w) {
  Status st = check_nd(nd);
  if (!st.ok()) return st;
  if (!(st = expand_list("kernel_size", nd, options.kernel_size, nullptr, &w->kernel)).ok()) return st;
  if (!(st = expand_list("stride", nd, options.stride, &w->kernel, &w->stride)).ok()) return st;
  const Ints zeros(nd, 0);
  if (!(st = expand_list("padding", nd, options.padding, &zeros, &w->padding)).ok()) return st;
  if (!(st = check_min("kernel_size", w->kernel, 1)).ok()) return st;
  if (!(st = check_min("stride", w->stride, 1)).ok()) return st;
  if (!(st = check_min("padding", w->padding, 0)).ok()) return st;
  w->padding_end = w->padding;
  if (!options.padding_end.empty()) {
    if (!(st = expand_list("padding_end", nd, options.padding_end, &zeros, &w->padding_end)).ok()) {
      return st;
    }
    if (!(st = check_min("padding_end", w->padding_end, 0)).ok()) return st;
  }
  w->dilation = Ints(nd, 1);
  w->ceil_mode = false;
  return Status();
}

Status max_pool_output_shape(int nd, const Ints& input_shape, const PoolOptions& options,
                             Ints* output_shape) {
  PoolWindow w;
  Status st = expand_pool_options(nd, options, &w);
  if (!st.ok()) return st;
  if (!(st = check_shape("input", nd, input_shape)).ok()) return st;
  if (!(st = resolve_padding(nd, input_shape, options, &w)).ok()) return st;
  Ints out = input_shape;
  const size_t first = input_shape.size() - nd;
  for (int i = 0; i < nd; ++i) {
    const int64_t in = input_shape[first + i];
    const int64_t e = pool_extent(in, w.kernel[i], w.stride[i], w.padding[i], w.padding_end[i],
                                  w.dilation[i], w.ceil_mode, options.pool_rule);
    if (e < (options.pool_rule == PoolRule::pytorch ? 1 : 0)) {
      return invalid("output size of spatial dimension " + std::to_string(i) +
                     " would be " + std::to_string(e) + " (input extent " + std::to_string(in) +
                     ", kernel_size " + std::to_string(w.kernel[i]) + ", stride " +
                     std::to_string(w.stride[i]) + ", padding " + std::to_string(w.padding[i]) +
                     ", dilation " + std::to_string(w.dilation[i]) + "); it must be at least 1");
    }
    out[first + i] = e;
  }
  *output_shape = out;
  return Status();
}

Status max_unpool_output_shape(int nd, const Ints& input_shape, const UnpoolOptions& options,
                               Ints* output_shape) {
  // No kernel_size but an output_size: unpooling by the indices alone (no window).
  const bool by_indices = options.kernel_size.empty() && !options.output_size.empty();
  PoolWindow w;
  Status st = by_indices ? check_nd(nd) : expand_unpool_options(nd, options, &w);
  if (!st.ok()) return st;
  if (by_indices && !options.stride.empty()) return invalid("stride: given without kernel_size");
  if (by_indices) {  // zeros allowed, in a list of the usual length
    const Ints zeros(nd, 0);
    Ints padding;
    if (!(st = expand_list("padding", nd, options.padding, &zeros, &padding)).ok()) return st;
    for (int64_t p : padding) {
      if (p != 0) return invalid("padding: given without kernel_size");
    }
  }
  // Other frameworks' conventions: known codes; ONNX's rules and the end padding need a window.
  const OutputSizeRule rule = options.output_size_rule;
  const bool onnx = rule == OutputSizeRule::onnx || rule == OutputSizeRule::onnx_runtime;
  if (rule < OutputSizeRule::pytorch || rule > OutputSizeRule::any) {
    return invalid("output_size_rule: unknown code " + std::to_string(static_cast<int>(rule)));
  }
  if (options.index_format < IndexFormat::plane || options.index_format >= IndexFormat::window) {
    return invalid("index_format: unknown code, or window taps (no slot without the windows)");
  }
  if (by_indices && onnx) return invalid("kernel_size: ONNX's output_size rules need one");
  if (by_indices && !options.padding_end.empty()) {
    return invalid("padding_end: given without kernel_size");
  }
  if (!(st = check_shape("values", nd, input_shape)).ok()) return st;
  const Ints& os = options.output_size;
  const int n_os = static_cast<int>(os.size());
  if (n_os != 0 && n_os != nd && n_os != nd + 2) {
    return invalid("output_size: expected 0, " + std::to_string(nd) + " or " +
                   std::to_string(nd + 2) + " entries, got " + std::to_string(n_os) + " " +
                   join(os));
  }
  if (n_os == nd + 2 && rule != OutputSizeRule::pytorch &&
      (input_shape.size() != static_cast<size_t>(nd) + 2 || os[0] != input_shape[0] ||
       os[1] != input_shape[1])) {
    return invalid("output_size: a full shape's N and C must be the values'");
  }
  Ints out = input_shape;
  const size_t first = input_shape.size() - nd;
  if (by_indices) {  // output_size alone says where the values go
    for (int i = 0; i < nd; ++i) {
      const int64_t e = os[n_os - nd + i];
      if (e < 1) {
        return invalid("output size of spatial dimension " + std::to_string(i) + " would be " +
                       std::to_string(e) + "; it must be at least 1");
      }
      out[first + i] = e;
    }
    *output_shape = out;
    return Status();
  }

  int64_t default_count = 1, count = 1;
  for (int i = 0; i < nd; ++i) {
    const int64_t in = input_shape[first + i];
    const int64_t def = (in - 1) * w.stride[i] - w.padding[i] - w.padding_end[i] + w.kernel[i];
    if (onnx && def < 1) return invalid("ONNX's default extent must be at least 1");
    int64_t e = def;
    if (n_os != 0) {
      e = os[n_os - nd + i];
      const int64_t lo = def - w.stride[i], hi = def + w.stride[i];
      if (rule == OutputSizeRule::pytorch && !(lo < e && e < hi)) {
        return invalid("output_size[" + std::to_string(n_os - nd + i) + "] (spatial dimension " +
                       std::to_string(i) + ") must lie strictly between " + std::to_string(lo) +
                       " and " + std::to_string(hi) + ", got " + std::to_string(e));
      }
      if (rule == OutputSizeRule::onnx && e < def) {
        return invalid("output_size: under ONNX's rule each extent is at least the default");
      }
    }
    if (e < 1) {
      return invalid("output size of spatial dimension " + std::to_string(i) + " would be " +
                     std::to_string(e) + "; it must be at least 1");
    }
    out[first + i] = e;
    // Products saturate at 2^59 (the library's element limit) instead of overflowing.
    const auto times = [](int64_t a, int64_t b) {
      constexpr int64_t kLimit = int64_t{1} << 59;
      int64_t r = 0;
      return __builtin_mul_overflow(a, b, &r) || r > kLimit ? kLimit : r;
    };
    default_count = times(default_count, std::max<int64_t>(def, 0));
    count = times(count, e);
  }
  if (rule == OutputSizeRule::onnx_runtime && count < default_count) {
    return invalid("output_size: under ONNX Runtime's rule at least the default's elements");
  }
  *output_shape = out;
  return Status();
}

template <typename T>
Status max_pool(int nd, const Ints& input_shape, const std::vector<T>& input,
                const PoolOptions& options, Ints* output_shape, std::vector<T>* values,
                std::vector<int64_t>* indices) {
  Ints oshape;
  Status st = ref::max_pool_output_shape(nd, input_shape, options, &oshape);
  if (!st.ok()) return st;
  if (static_cast<int64_t>(input.size()) != numel(input_shape)) {
    return invalid("input: data has " + std::to_string(input.size()) + " elements, shape " +
                   join(input_shape) + " needs " + std::to_string(numel(input_shape)));
  }
  PoolWindow w;
  expand_pool_options(nd, options, &w);
  resolve_padding(nd, input_shape, options, &w);
  // Work in 3-D: missing leading spatial dimensions get extent 1 and a trivial window.
  int64_t k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, p[3] = {0, 0, 0}, d[3] = {1, 1, 1};
  for (int i = 0; i < nd; ++i) {
    k[3 - nd + i] = w.kernel[i];
    s[3 - nd + i] = w.stride[i];
    p[3 - nd + i] = w.padding[i];
    d[3 - nd + i] = w.dilation[i];
  }
  int64_t in[3], out[3];
  spatial3(nd, input_shape, in);
  spatial3(nd, oshape, out);
  const int64_t in_plane = in[0] * in[1] * in[2];
  const int64_t out_plane = out[0] * out[1] * out[2];
  const int64_t planes = numel(input_shape) / in_plane;  // N*C (may be 0)
  const int64_t channels = input_shape[input_shape.size() - nd - 1];

  std::vector<T> vals(static_cast<size_t>(planes * out_plane));
  std::vector<int64_t> idxs(static_cast<size_t>(planes * out_plane));
  bool empty_window = false;
  for (int64_t pl = 0; pl < planes; ++pl) {
    const T* src = input.data() + pl * in_plane;
    for (int64_t od = 0; od < out[0]; ++od) {
      for (int64_t oh = 0; oh < out[1]; ++oh) {
        for (int64_t ow = 0; ow < out[2]; ++ow) {
          const int64_t o[3] = {od, oh, ow};
          int64_t start[3], end[3];
          for (int j = 0; j < 3; ++j) {
            start[j] = o[j] * s[j] - p[j];
            end[j] = std::min(start[j] + d[j] * (k[j] - 1) + 1, in[j]);
            while (start[j] < 0) start[j] += d[j];
          }
          T best = lowest_value<T>();
          int64_t best_index = (start[0] * in[1] + start[1]) * in[2] + start[2];
          bool scanned = false;  // first_tap: the first tap is taken as it is
          for (int64_t id = start[0]; id < end[0]; id += d[0]) {
            for (int64_t ih = start[1]; ih < end[1]; ih += d[1]) {
              for (int64_t iw = start[2]; iw < end[2]; iw += d[2]) {
                const int64_t flat = (id * in[1] + ih) * in[2] + iw;
                const T v = src[flat];
                const bool wins = options.max_rule == MaxRule::first_tap
                                      ? !scanned || key(v) > key(best)
                                      : key(v) > key(best) || is_nan(v);
                if (wins) {
                  best = v;
                  best_index = flat;
                }
                scanned = true;
              }
            }
          }
          const int64_t at = pl * out_plane + (od * out[1] + oh) * out[2] + ow;
          empty_window = empty_window || !scanned;
          if (!scanned && options.pool_rule != PoolRule::pytorch) {
            // No tap inside: ONNX Runtime's lowest finite value and coordinates (n, c, -1, ...)
            // (TensorFlow's windows always hold one: refused below).
            vals[at] = lowest_finite<T>();
            idxs[at] = empty_window_index(options.index_format, nd, pl, channels, in);
            continue;
          }
          // PyTorch's bf16 kernels narrow the f32 maximum back: a NaN comes out as 0x7fc0.
          // ONNX Runtime and TensorFlow (first_tap) copy the winning element as it is.
          if constexpr (std::is_same_v<T, bf16_t>) {
            if (is_nan(best) && options.max_rule == MaxRule::any_nan) best = bf16_t{0x7fc0};
          }
          vals[at] = best;
          idxs[at] = formatted_index(options.index_format, best_index, pl, channels, in, o, k, s,
                                     p, d);
        }
      }
    }
  }
  // PyTorch's index for a window without a tap inside (its first tap's, which may name another
  // row's element) has no form in another format.
  if (((options.pool_rule == PoolRule::pytorch && options.index_format != IndexFormat::plane) ||
       options.index_format == IndexFormat::window) &&
      empty_window) {
    return invalid("indices: an empty window's index has no form in index format " +
                   std::to_string(static_cast<int>(options.index_format)));
  }
  if (options.pool_rule == PoolRule::tensorflow && empty_window) {
    return invalid("padding: a window without a tap inside, which TensorFlow never has");
  }
  *output_shape = oshape;
  *values = std::move(vals);
  *indices = std::move(idxs);
  return Status();
}

template <typename T>
Status max_unpool(int nd, const Ints& input_shape, const std::vector<T>& values,
                  const std::vector<int64_t>& indices, const UnpoolOptions& options,
                  Ints* output_shape, std::vector<T>* output) {
  Ints oshape;
  Status st = ref::max_unpool_output_shape(nd, input_shape, options, &oshape);
  if (!st.ok()) return st;
  const int64_t total = numel(input_shape);
  if (static_cast<int64_t>(values.size()) != total ||
      static_cast<int64_t>(indices.size()) != total) {
    return invalid("values/indices: data sizes " + std::to_string(values.size()) + "/" +
                   std::to_string(indices.size()) + " do not match shape " + join(input_shape));
  }
  int64_t in[3], out[3];
  spatial3(nd, input_shape, in);
  spatial3(nd, oshape, out);
  const int64_t in_plane = in[0] * in[1] * in[2];
  const int64_t out_plane = out[0] * out[1] * out[2];
  const int64_t planes = total / in_plane;
  const int64_t channels = input_shape[input_shape.size() - nd - 1];
  const int64_t batch = planes / channels;

  // The frame the indices address: the output, or under ONNX's rule the default-sized one.
  int64_t frame[3] = {out[0], out[1], out[2]};
  if (options.output_size_rule == OutputSizeRule::onnx) {
    UnpoolOptions without_size = options;
    without_size.output_size.clear();
    Ints default_shape;
    ref::max_unpool_output_shape(nd, input_shape, without_size, &default_shape);
    spatial3(nd, default_shape, frame);
  }
  const int64_t frame_plane = frame[0] * frame[1] * frame[2];
  const IndexFormat f = options.index_format;
  const bool nhwc = f == IndexFormat::tensorflow || f == IndexFormat::tensorflow_with_batch;
  const int64_t bound = f == IndexFormat::plane        ? frame_plane
                        : f == IndexFormat::tensorflow ? frame_plane * channels
                                                       : batch * channels * frame_plane;
  // Each element in the format's order (TensorFlow's: NHWC), its index read as (the target
  // plane, the frame's coordinates); validate every index first, then write, later overwriting.
  std::vector<std::pair<int64_t, int64_t>> moves;  // (source element, output element)
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t k = 0; k < channels * in_plane; ++k) {
      const int64_t c = nhwc ? k % channels : k / in_plane, p = nhwc ? k / channels : k % in_plane;
      const int64_t src = (n * channels + c) * in_plane + p, idx = indices[src];
      if (idx < 0 || idx >= bound) return index_error(src, idx, bound);
      int64_t to_n = n, to_c = c, offset = idx;  // offset: in the frame's plane
      if (f == IndexFormat::onnx || f == IndexFormat::onnx_column_major) {
        to_n = idx / (channels * frame_plane);
        to_c = idx / frame_plane % channels;
        offset = idx % frame_plane;
      } else if (nhwc) {
        if (f == IndexFormat::tensorflow_with_batch) to_n = idx / (frame_plane * channels);
        offset = idx / channels % frame_plane;
        to_c = idx % channels;
      }
      int64_t x[3];  // coordinates in the frame (3-D terms: unused dimensions are 1)
      if (f == IndexFormat::onnx_column_major) {  // the first of the nd dimensions fastest
        int64_t q = offset;
        x[0] = x[1] = x[2] = 0;
        for (int d = 3 - nd; d < 3; ++d) {
          x[d] = q % frame[d];
          q /= frame[d];
        }
      } else {
        x[0] = offset / (frame[1] * frame[2]);
        x[1] = offset / frame[2] % frame[1];
        x[2] = offset % frame[2];
      }
      const int64_t at = (x[0] * out[1] + x[1]) * out[2] + x[2];
      moves.emplace_back(src, (to_n * channels + to_c) * out_plane + at);
    }
  }
  std::vector<T> result(static_cast<size_t>(planes * out_plane), T{});  // all bits zero
  for (const auto& [src, dst] : moves) result[dst] = values[src];
  *output_shape = oshape;
  *output = std::move(result);
  return Status();
}

template <typename T>
Status max_pool_backward(int nd, const Ints& input_shape, const std::vector<T>& grad_output,
                         const std::vector<int64_t>& indices, const PoolOptions& options,
                         std::vector<T>* grad_input) {
  Ints oshape;
  Status st = ref::max_pool_output_shape(nd, input_shape, options, &oshape);
  if (!st.ok()) return st;
  const int64_t total = numel(oshape);
  if (static_cast<int64_t>(grad_output.size()) != total ||
      static_cast<int64_t>(indices.size()) != total) {
    return invalid("grad_output/indices: data sizes " + std::to_string(grad_output.size()) + "/" +
                   std::to_string(indices.size()) + " do not match shape " + join(oshape));
  }
  int64_t in[3], out[3];
  spatial3(nd, input_shape, in);
  spatial3(nd, oshape, out);
  const int64_t in_plane = in[0] * in[1] * in[2], out_plane = out[0] * out[1] * out[2];
  std::vector<T> result(static_cast<size_t>(numel(input_shape)), T{});  // +0.0
  for (int64_t o = 0; o < total; ++o) {  // planes, then each plane's outputs, in order
    const int64_t index = indices[o];
    if (index < 0 || index >= in_plane) continue;
    T& slot = result[(o / out_plane) * in_plane + index];
    slot = add(slot, grad_output[o]);
  }
  *grad_input = std::move(result);
  return Status();
}

template <typename T>
Status max_unpool_backward(int nd, const Ints& values_shape, const std::vector<T>& grad_output,
                           const std::vector<int64_t>& indices, const UnpoolOptions& options,
                           std::vector<T>* grad_values) {
  Ints oshape;
  Status st = ref::max_unpool_output_shape(nd, values_shape, options, &oshape);
  if (!st.ok()) return st;
  const int64_t total = numel(values_shape);
  if (static_cast<int64_t>(grad_output.size()) != numel(oshape) ||
      static_cast<int64_t>(indices.size()) != total) {
    return invalid("grad_output/indices: data sizes " + std::to_string(grad_output.size()) + "/" +
                   std::to_string(indices.size()) + " do not match shapes " + join(oshape) +
                   " and " + join(values_shape));
  }
  int64_t in[3], out[3];
  spatial3(nd, values_shape, in);
  spatial3(nd, oshape, out);
  const int64_t in_plane = in[0] * in[1] * in[2], out_plane = out[0] * out[1] * out[2];
  std::vector<T> result(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i) {
    if (indices[i] < 0 || indices[i] >= out_plane) return index_error(i, indices[i], out_plane);
    result[i] = grad_output[(i / in_plane) * out_plane + indices[i]];
  }
  *grad_values = std::move(result);
  return Status();
}

#define POOLGEN_REF_INSTANTIATE(T)                                                            \
  template Status max_pool<T>(int, const Ints&, const std::vector<T>&, const PoolOptions&,    \
                              Ints*, std::vector<T>*, std::vector<int64_t>*);                 \
  template Status max_unpool<T>(int, const Ints&, const std::vector<T>&,                      \
                                const std::vector<int64_t>&, const UnpoolOptions&, Ints*,     \
                                std::vector<T>*);

POOLGEN_REF_FOR_EACH_TYPE(POOLGEN_REF_INSTANTIATE)

#undef POOLGEN_REF_INSTANTIATE

#define POOLGEN_REF_INSTANTIATE_BACKWARD(T)                                                   \
  template Status max_pool_backward<T>(int, const Ints&, const std::vector<T>&,               \
                                       const std::vector<int64_t>&, const PoolOptions&,       \
                                       std::vector<T>*);                                      \
  template Status max_unpool_backward<T>(int, const Ints&, const std::vector<T>&,             \
                                         const std::vector<int64_t>&, const UnpoolOptions&,   \
                                         std::vector<T>*);

POOLGEN_REF_FOR_EACH_GRADIENT_TYPE(POOLGEN_REF_INSTANTIATE_BACKWARD)

#undef POOLGEN_REF_INSTANTIATE_BACKWARD

}  // namespace poolgen::ref
