// convert_indices: pooling indices rewritten from one system's convention to another's. Every
// format goes through the plane offset (PyTorch's), a row of the pooled tensor at a time: each
// format's arithmetic is one loop over a row, and in-place conversion reads a row before writing
// it.
#include "conventions/index_formats.hpp"

#include "execute/memory.hpp"
#include "parallel/settings.hpp"
#include "validate/views.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

namespace poolgen {

using namespace detail;

const char* index_format_name(IndexFormat format) {
  switch (format) {
    case IndexFormat::plane: return "plane";
    case IndexFormat::onnx: return "onnx";
    case IndexFormat::onnx_column_major: return "onnx_column_major";
    case IndexFormat::tensorflow: return "tensorflow";
    case IndexFormat::tensorflow_with_batch: return "tensorflow_with_batch";
    case IndexFormat::window: return "window";
  }
  return "unknown";
}

namespace detail {
namespace {

// Division of values in [0, 2^59) (poolgen's element counts) by a fixed divisor d >= 1, where a
// 64-bit division takes tens of cycles: floor(v * m / 2^(59+l)) with m = ceil(2^(59+l) / d),
// l = ceil(log2 d), exact for every such value (Granlund and Montgomery's bound:
// m d - 2^(59+l) < d <= 2^l). m < 2^61, so v * 2^5 * m is the high word of one 64x64-bit
// multiplication, shifted by the constant l: no 128-bit shift by a variable. Other values, or a
// compiler without 128-bit integers, divide.
struct Divider {
  static constexpr int kBits = 59;
  int64_t d = 1;
  uint64_t magic = 0;
  int shift = 0;  // l
  explicit Divider(int64_t divisor = 1) : d(std::max<int64_t>(divisor, 1)) {
#ifdef __SIZEOF_INT128__
    while ((int64_t{1} << shift) < d) ++shift;
    magic = static_cast<uint64_t>(((static_cast<unsigned __int128>(1) << (kBits + shift)) + d - 1) /
                                  static_cast<unsigned __int128>(d));
#endif
  }
  int64_t quotient(int64_t v) const {
#ifdef __SIZEOF_INT128__
    if (static_cast<uint64_t>(v) < (uint64_t{1} << kBits)) {
      const auto high = static_cast<uint64_t>(
          (static_cast<unsigned __int128>(static_cast<uint64_t>(v) << (64 - kBits)) * magic) >>
          64);
      return static_cast<int64_t>(high >> shift);
    }
#endif
    return v / d;
  }
};

// Division by a fixed d = odd * 2^k where it is exact, as TensorFlow's (offset * C + c) is by C:
// a shift and one multiplication by the odd part's inverse modulo 2^64, with no test of the
// remainder. quotient(v) is v / d where d divides v (v read as unsigned); elsewhere it is outside
// [0, 2^59 / d), the range of every quotient poolgen asks for (d times a count of elements):
// with low bits set it is negative; with v >> k not a multiple of odd, q * odd >= 2^64 for the
// q with q * odd = v >> k (mod 2^64), so q >= 2^64 / odd; with d | v but v >= 2^63 (a wrapped
// negative difference), q >= 2^63 / d.
struct ExactDivider {
  int twos = 0;
  uint64_t low = 0, inverse = 1;
  explicit ExactDivider(int64_t divisor = 1) {
    uint64_t odd = static_cast<uint64_t>(std::max<int64_t>(divisor, 1));
    for (; (odd & 1) == 0; odd >>= 1) ++twos;
    low = (uint64_t{1} << twos) - 1;
    // Newton's iteration x <- x (2 - odd x) doubles the correct low bits; odd itself is its own
    // inverse modulo 2^3.
    inverse = odd;
    for (int i = 0; i < 5; ++i) inverse *= 2 - odd * inverse;
  }
  int64_t quotient(uint64_t v) const {
    return static_cast<int64_t>(((v >> twos) * inverse) | (0 - (v & low)));
  }
  // quotient where d is a power of two (inverse 1): a shift, which vectorizes where a 64-bit
  // multiplication does not pay on baseline x86-64.
  int64_t power_of_two_quotient(uint64_t v) const {
    return static_cast<int64_t>((v >> twos) | (0 - (v & low)));
  }
};

// What the indices address: the pooling input (the unpooled output), N x C planes of the
// spatial extents; with the window format, the windows of the pooled elements.
struct Frame {
  int nd = 0;
  int64_t batch = 1, channels = 1;
  int64_t extent[3] = {1, 1, 1};  // spatial, outermost first
  Divider by_extent[3];
  ExactDivider by_channels;
  int64_t plane = 1;
  Window window;  // IndexFormat::window only
  Divider by_kernel_height;
  int64_t taps = 1;

  // Row-major coordinates of a plane offset, and back.
  void unravel(int64_t p, int64_t* x) const {
    for (int i = nd - 1; i > 0; --i) {
      const int64_t q = by_extent[i].quotient(p);
      x[i] = p - q * extent[i];
      p = q;
    }
    x[0] = p;
  }
  int64_t ravel(const int64_t* x) const {
    int64_t p = 0;
    for (int i = 0; i < nd; ++i) p = p * extent[i] + x[i];
    return p;
  }
  // The plane offset with the first spatial dimension fastest (ONNX's storage_order 1), both
  // ways: the reverse of the dimensions' order.
  int64_t to_column_major(int64_t p) const {
    int64_t x[3];
    unravel(p, x);
    int64_t q = 0;
    for (int i = nd - 1; i >= 0; --i) q = q * extent[i] + x[i];
    return q;
  }
  int64_t from_column_major(int64_t q) const {
    int64_t x[3];
    for (int i = 0; i < nd - 1; ++i) {
      const int64_t next = by_extent[i].quotient(q);
      x[i] = q - next * extent[i];
      q = next;
    }
    x[nd - 1] = q;
    return ravel(x);
  }
  // The largest index `format` can give.
  int64_t largest(IndexFormat format) const {
    switch (format) {
      case IndexFormat::onnx:
      case IndexFormat::onnx_column_major:
      case IndexFormat::tensorflow_with_batch:
        return batch * channels * plane - 1;
      case IndexFormat::tensorflow: return batch == 0 ? -1 : channels * plane - 1;
      case IndexFormat::window: return taps - 1;
      case IndexFormat::plane: break;
    }
    return plane - 1;
  }
};

// One row of the pooled tensor: plane (n, c), outer pooled coordinates o[0..nd-2]; its elements
// step through the innermost pooled dimension from `first`.
struct Row {
  int64_t n = 0, c = 0;
  int64_t o[3] = {};
  int64_t first = 0;
  // 2-D windows over whole planes: the elements run through the plane from its position
  // `first`, in pooled rows of this width (0: one row of the innermost dimension).
  int64_t pooled_width = 0;
};

// The pooled coordinates of a row's elements, one after the other: through a whole plane, the
// outer one advances where a pooled row ends (no division per element).
struct PooledCursor {
  int64_t o[3] = {};
  int64_t width = 0;
  int last = 0;
  PooledCursor(const Frame& fr, const Row& row)
      : o{row.o[0], row.o[1], row.o[2]}, width(row.pooled_width), last(fr.nd - 1) {
    o[last] = row.first;
    if (width > 0) {
      o[0] = row.first / width;
      o[1] = row.first % width;
    }
  }
  void next() {
    if (++o[last] == width) {
      o[last] = 0;
      ++o[last - 1];
    }
  }
};

// The first window tap of pooled coordinate o in spatial dimension i.
int64_t window_origin(const Window& w, int i, int64_t o) { return o * w.stride[i] - w.padding[i]; }

// A row's indices as i64: the view's own memory where it holds i64 at a unit step, else a copy
// in `buffer`.
const int64_t* load_row(const View& v, int64_t offset, int64_t step, int64_t count,
                        int64_t* buffer) {
  if (v.dtype == DType::i64 && step == 1) return static_cast<const int64_t*>(v.data) + offset;
  for (int64_t j = 0; j < count; ++j) {
    buffer[j] = v.dtype == DType::i32 ? static_cast<const int32_t*>(v.data)[offset + j * step]
                                      : static_cast<const int64_t*>(v.data)[offset + j * step];
  }
  return buffer;
}

// Where a row's new indices go: straight into the view where it holds i64 at a unit step, else
// into `buffer`, which store_row then copies out.
int64_t* row_target(const View& v, int64_t offset, int64_t step, int64_t* buffer) {
  return v.dtype == DType::i64 && step == 1 ? static_cast<int64_t*>(v.data) + offset : buffer;
}

void store_row(const View& v, int64_t offset, int64_t step, int64_t count, const int64_t* row) {
  if (v.dtype == DType::i64 && step == 1) return;  // row_target put it there
  for (int64_t j = 0; j < count; ++j) {
    if (v.dtype == DType::i32) {
      static_cast<int32_t*>(v.data)[offset + j * step] = static_cast<int32_t>(row[j]);
    } else {
      static_cast<int64_t*>(v.data)[offset + j * step] = row[j];
    }
  }
}

// Plane offsets of a row's indices in format f; false when some index names no element of its
// own plane (no tap of its window inside the plane).
bool decode_row(IndexFormat f, const Frame& fr, const Row& row, const int64_t* in, int64_t* p,
                int64_t count) {
  // Locals, not fr's fields: stores through p could alias those, which would keep the loops
  // scalar.
  const int64_t plane = fr.plane, channels = fr.channels;
  const int64_t plane_base = (row.n * channels + row.c) * plane;
  // Offsets in [0, plane) leave the sign bit of p | (plane - 1 - p) clear: a test that
  // vectorizes, where comparisons of 64-bit integers do not on baseline x86-64. Any index may
  // come in, so the differences wrap (unsigned) instead of overflowing.
  const auto minus = [](int64_t a, int64_t b) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
  };
  int64_t outside = 0;
  bool bad = false;
  switch (f) {
    case IndexFormat::plane:
      for (int64_t j = 0; j < count; ++j) {
        p[j] = in[j];
        outside |= p[j] | minus(plane - 1, p[j]);
      }
      bad = outside < 0;
      break;
    case IndexFormat::onnx:
    case IndexFormat::onnx_column_major:
      for (int64_t j = 0; j < count; ++j) {
        p[j] = minus(in[j], plane_base);
        outside |= p[j] | minus(plane - 1, p[j]);
      }
      bad = outside < 0;
      if (!bad && f == IndexFormat::onnx_column_major && fr.nd == 2) {  // unrolled: h + w * H
        const Divider by_height = fr.by_extent[0];
        const int64_t height = fr.extent[0], width = fr.extent[1];
        for (int64_t j = 0; j < count; ++j) {
          const int64_t w = by_height.quotient(p[j]);
          p[j] = (p[j] - w * height) * width + w;
        }
      } else if (!bad && f == IndexFormat::onnx_column_major && fr.nd > 1) {
        for (int64_t j = 0; j < count; ++j) p[j] = fr.from_column_major(p[j]);
      }
      break;
    case IndexFormat::tensorflow:
    case IndexFormat::tensorflow_with_batch: {
      // (offset * C + c), plus n * plane * C with the batch.
      const int64_t base = (f == IndexFormat::tensorflow ? 0 : row.n * plane * channels) + row.c;
      const ExactDivider by_channels = fr.by_channels;
      for (int64_t j = 0; j < count; ++j) {
        p[j] = by_channels.quotient(static_cast<uint64_t>(in[j]) - static_cast<uint64_t>(base));
        outside |= p[j] | minus(plane - 1, p[j]);
      }
      bad = outside < 0;
      break;
    }
    case IndexFormat::window: {
      const Window& w = fr.window;
      PooledCursor at(fr, row);
      if (fr.nd == 2) {  // unrolled, the window in locals (stores through p could alias fr)
        const int64_t kh = w.kernel[0], sy = w.stride[0], sx = w.stride[1], dy = w.dilation[0];
        const int64_t dx = w.dilation[1], py = w.padding[0], px = w.padding[1];
        const int64_t height = fr.extent[0], width = fr.extent[1], taps = fr.taps;
        const Divider by_kh = fr.by_kernel_height;
        int64_t outside = 0;
        for (int64_t j = 0; j < count; ++j, at.next()) {
          const int64_t t = in[j];
          if (t < 0 || t >= taps) return false;
          const int64_t kx = by_kh.quotient(t), ky = t - kx * kh;  // XNNPACK's kx * kh + ky
          const int64_t y = at.o[0] * sy - py + ky * dy, x = at.o[1] * sx - px + kx * dx;
          outside |= y | (height - 1 - y) | x | (width - 1 - x);
          p[j] = y * width + x;
        }
        bad = outside < 0;
        break;
      }
      for (int64_t j = 0; j < count && !bad; ++j, at.next()) {
        int64_t t = in[j], x[3];
        bad = t < 0 || t >= fr.taps;
        for (int i = 0; i < fr.nd && !bad; ++i) {
          x[i] = window_origin(w, i, at.o[i]) + (t % w.kernel[i]) * w.dilation[i];
          t /= w.kernel[i];
          bad = x[i] < 0 || x[i] >= fr.extent[i];
        }
        if (!bad) p[j] = fr.ravel(x);
      }
      break;
    }
  }
  return !bad;
}

// decode_row, and the position of the first bad index (found element by element: the call
// fails), or -1.
int64_t decode(IndexFormat f, const Frame& fr, const Row& row, const int64_t* in, int64_t* p,
               int64_t count) {
  if (decode_row(f, fr, row, in, p, count)) return -1;
  for (int64_t j = 0; j < count; ++j) {
    Row one = row;
    one.first = row.first + j;
    int64_t offset = 0;
    if (!decode_row(f, fr, one, in + j, &offset, 1)) return j;
  }
  return -1;
}

// Indices of format f for a row's plane offsets (valid ones): the position of the first offset
// no tap of its window reaches (window), or -1.
int64_t encode(IndexFormat f, const Frame& fr, const Row& row, const int64_t* p, int64_t* out,
               int64_t count) {
  const int64_t plane = fr.plane, channels = fr.channels;  // locals: as in decode_row
  const int64_t plane_base = (row.n * channels + row.c) * plane;
  switch (f) {
    case IndexFormat::plane:
      for (int64_t j = 0; j < count; ++j) out[j] = p[j];
      return -1;
    case IndexFormat::onnx:
      for (int64_t j = 0; j < count; ++j) out[j] = plane_base + p[j];
      return -1;
    case IndexFormat::onnx_column_major:
      if (fr.nd == 2) {  // unrolled, as decode_row's
        const Divider by_width = fr.by_extent[1];
        const int64_t height = fr.extent[0], width = fr.extent[1];
        for (int64_t j = 0; j < count; ++j) {
          const int64_t h = by_width.quotient(p[j]);
          out[j] = plane_base + (p[j] - h * width) * height + h;
        }
        return -1;
      }
      for (int64_t j = 0; j < count; ++j) {
        out[j] = plane_base + fr.to_column_major(p[j]);
      }
      return -1;
    case IndexFormat::tensorflow:
    case IndexFormat::tensorflow_with_batch: {
      const int64_t base = f == IndexFormat::tensorflow ? 0 : row.n * plane, c = row.c;
      for (int64_t j = 0; j < count; ++j) out[j] = (base + p[j]) * channels + c;
      return -1;
    }
    case IndexFormat::window: {
      const Window& w = fr.window;
      PooledCursor at(fr, row);
      if (fr.nd == 2) {  // as decode_row's
        const int64_t kh = w.kernel[0], kw = w.kernel[1], sy = w.stride[0], sx = w.stride[1];
        const int64_t dy = w.dilation[0], dx = w.dilation[1], py = w.padding[0];
        const int64_t px = w.padding[1], width = fr.extent[1];
        const Divider by_width = fr.by_extent[1];
        for (int64_t j = 0; j < count; ++j, at.next()) {
          const int64_t y = by_width.quotient(p[j]), x = p[j] - y * width;
          const int64_t from_y = y - (at.o[0] * sy - py), from_x = x - (at.o[1] * sx - px);
          const int64_t ky = dy == 1 ? from_y : from_y / dy, kx = dx == 1 ? from_x : from_x / dx;
          if (from_y < 0 || from_x < 0 || ky * dy != from_y || kx * dx != from_x || ky >= kh ||
              kx >= kw) {
            return j;
          }
          out[j] = kx * kh + ky;
        }
        return -1;
      }
      for (int64_t j = 0; j < count; ++j, at.next()) {
        int64_t x[3], t = 0;
        fr.unravel(p[j], x);
        for (int i = fr.nd - 1; i >= 0; --i) {
          const int64_t k = x[i] - window_origin(w, i, at.o[i]);
          if (k < 0 || k % w.dilation[i] != 0 || k / w.dilation[i] >= w.kernel[i]) return j;
          t = t * w.kernel[i] + k / w.dilation[i];
        }
        out[j] = t;
      }
      return -1;
    }
  }
  return -1;
}

// The frame of a checked frame_shape, with the window (resolved padding) where given.
Frame frame_of(int nd, const Ints& frame_shape, const Window* window) {
  Frame fr;
  fr.nd = nd;
  const size_t first = frame_shape.size() - nd;
  if (first == 2) fr.batch = frame_shape[0];
  fr.channels = frame_shape[first - 1];
  fr.by_channels = ExactDivider(fr.channels);
  for (int i = 0; i < nd; ++i) {
    fr.extent[i] = frame_shape[first + i];
    fr.by_extent[i] = Divider(fr.extent[i]);
  }
  fr.plane = spatial_elements(nd, frame_shape);
  if (window) {
    fr.window = *window;
    fr.by_kernel_height = Divider(window->kernel[0]);
    for (int i = 0; i < nd; ++i) fr.taps *= window->kernel[i];
  }
  return fr;
}

// The frame from its shape and, for the window format, the pooling options (then `pooled` must
// be the shape they give).
Status make_frame(int nd, const Ints& frame_shape, const Ints& pooled, const PoolOptions* options,
                  bool windowed, Frame* fr) {
  POOLGEN_RETURN_IF_ERROR(check_input_shape("convert_indices", nd, "frame_shape", frame_shape));
  *fr = frame_of(nd, frame_shape, nullptr);
  if (!windowed) return {};
  if (!options) {
    return fail(Code::invalid_argument, "window", ": expected the pooling options for the window ",
                "format, got a null pointer");
  }
  POOLGEN_RETURN_IF_ERROR(pool_window(nd, *options, &fr->window));
  Ints expected;
  POOLGEN_RETURN_IF_ERROR(pool_output_shape(&fr->window, frame_shape, &expected, "frame_shape"));
  if (pooled != expected) {
    return fail(Code::invalid_argument, "from", ": expected the pooled shape ",
                format_shape(expected), " of frame_shape ", format_shape(frame_shape),
                " with the window's options, got ", format_shape(pooled));
  }
  *fr = frame_of(nd, frame_shape, &fr->window);
  return {};
}

// The pooled tensor's shape: the frame's rank, batch and channels, any spatial extents.
Status check_pooled_shape(int nd, const Ints& frame_shape, const Ints& pooled) {
  const size_t lead = frame_shape.size() - nd;
  bool ok = pooled.size() == frame_shape.size() &&
            std::equal(pooled.begin(), pooled.begin() + lead, frame_shape.begin());
  for (size_t i = lead; ok && i < pooled.size(); ++i) ok = pooled[i] >= 0;
  if (ok) return {};
  return fail(Code::invalid_argument, "from", ": expected a shape of rank ", frame_shape.size(),
              " whose ", lead == 2 ? "batch and channels" : "channels", " are frame_shape's ",
              format_shape(Ints(frame_shape.begin(), frame_shape.begin() + lead)),
              " and spatial extents >= 0, got ", format_shape(pooled));
}

Status check_index_view(const char* argument, const TensorView& view) {
  if (view.dtype != DType::i64 && view.dtype != DType::i32) {
    return fail(Code::invalid_argument, argument, ": expected indices of dtype i64 or i32, got ",
                dtype_name(view.dtype));
  }
  if (view.device != Device::cpu) {
    return fail(Code::unsupported, argument, ": expected host memory (convert_indices runs on ",
                "the CPU), got a CUDA view");
  }
  return {};
}

// Whether the spatial dimensions of `v` are one dimension of the innermost one's step.
bool flat_spatial(const View& v) {
  for (int d = 2; d + 1 < v.rank; ++d) {
    if (v.strides[d] != v.strides[d + 1] * v.shape[d + 1]) return false;
  }
  return true;
}

Status check_capacity(const char* argument, DType dtype, IndexFormat format,
                      const Ints& frame_shape, const Frame& fr) {
  if (dtype != DType::i32 || fr.largest(format) <= std::numeric_limits<int32_t>::max()) return {};
  return fail(Code::invalid_argument, argument, ": expected i64 (", index_format_name(format),
              " indices of frame_shape ", format_shape(frame_shape), " reach ",
              fr.largest(format), "), got i32");
}

// The formats whose index is an affine function of the plane offset p and the plane (n, c):
// p * scale + n * per_image + c * per_channel (plane, onnx, tensorflow with and without the
// batch; not the column-major or window ones).
struct Affine {
  bool ok = false;
  int64_t scale = 1, per_image = 0, per_channel = 0;
};

Affine affine(IndexFormat f, const Frame& fr) {
  const int64_t c = fr.channels, p = fr.plane;
  switch (f) {
    case IndexFormat::plane: return {true, 1, 0, 0};
    case IndexFormat::onnx: return {true, 1, c * p, p};
    case IndexFormat::tensorflow: return {true, c, 0, 1};
    case IndexFormat::tensorflow_with_batch: return {true, c, p * c, 1};
    default: return {};
  }
}

// How affine_rewrite's source is divided by its scale: TensorFlow's by C, most often a power of
// two.
enum class Divide { none, by_power_of_two, exactly };

// rewrite's loop where both formats are affine, both views' planes flat in one layout at unit
// steps (channels-last: channels adjacent): a subtraction (and for TensorFlow's source an exact
// division by C), a range test, a multiply-add (kScale: TensorFlow's target) or an addition per
// index, in memory order, where rewrite's rows go through buffers (2.3 ns an index measured
// against 0.5). In place (the same view) each chunk is rewritten into a buffer first and copied
// back only where every index in it is valid, so that an index the formats cannot carry is still
// there to be named. Returns the first such index's (n, c, position in its plane) in src, n -1
// where none is.
struct Found {
  int64_t n = -1, c = 0, p = 0;
};

// x86-64's baseline has 2 lanes of 64-bit integers: the loops are cloned for AVX2's 4, chosen
// by the CPU when the library loads (an ELF ifunc: GCC on Linux; elsewhere the baseline's).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__ELF__)
#define POOLGEN_AVX2_CLONE __attribute__((target_clones("avx2", "default")))
#else
#define POOLGEN_AVX2_CLONE
#endif

template <Divide kDivide, bool kScale>
[[gnu::noinline]] POOLGEN_AVX2_CLONE Found affine_rewrite(const View& src, const View& dst,
                                                         Layout layout, Affine from, Affine to,
                                                         int64_t n0, int64_t c0, int64_t plane) {
  const int64_t* const s = static_cast<const int64_t*>(src.data);
  int64_t* const d = static_cast<int64_t*>(dst.data);
  const bool in_place = src.data == dst.data;
  const int64_t s_step = src.plane_step(layout), d_step = dst.plane_step(layout);
  const int64_t count = src.plane(), planes = src.shape[1];  // locals: stores could alias fields
  const ExactDivider by_scale(from.scale);
  const uint64_t scale = static_cast<uint64_t>(to.scale);
  // `length` indices from `in` into `out`, whose planes' bases step by in_channel and
  // out_channel (channels-last: the formats' per_channel) or not at all (one plane): false
  // where one names no element of its own plane. The bases step by addition, not j * step:
  // 64-bit multiplications are dear in SIMD. As decode_row's, the test is on the sign of
  // p | (plane - 1 - p), which vectorizes on baseline x86-64; any index may come in, so the
  // arithmetic wraps.
  const auto run = [&](const int64_t* in, int64_t* out, int64_t length, uint64_t in_at,
                       uint64_t out_at, uint64_t in_channel, uint64_t out_channel) {
    int64_t outside = 0;
    for (int64_t j = 0; j < length; ++j) {
      uint64_t p = static_cast<uint64_t>(in[j]) - in_at;
      if (kDivide == Divide::exactly) p = static_cast<uint64_t>(by_scale.quotient(p));
      if (kDivide == Divide::by_power_of_two) {
        p = static_cast<uint64_t>(by_scale.power_of_two_quotient(p));
      }
      outside |= static_cast<int64_t>(p | (static_cast<uint64_t>(plane - 1) - p));
      out[j] = static_cast<int64_t>((kScale ? p * scale : p) + out_at);
      in_at += in_channel;
      out_at += out_channel;
    }
    return outside >= 0;
  };
  constexpr int64_t kChunk = 256;
  int64_t buffer[kChunk];
  // A plane's indices or a pixel's channels, kChunk at a time; the position of the first bad
  // index, else -1.
  const auto rewrite_run = [&](const int64_t* in, int64_t* out, int64_t length, int64_t in_base,
                               int64_t out_base, int64_t channel_step) -> int64_t {
    const uint64_t in_channel = static_cast<uint64_t>(channel_step * from.per_channel);
    const uint64_t out_channel = static_cast<uint64_t>(channel_step * to.per_channel);
    for (int64_t first = 0; first < length; first += kChunk) {
      const int64_t chunk = std::min(kChunk, length - first);
      const uint64_t in_at = static_cast<uint64_t>(in_base) + first * in_channel;
      const uint64_t out_at = static_cast<uint64_t>(out_base) + first * out_channel;
      if (run(in + first, in_place ? buffer : out + first, chunk, in_at, out_at, in_channel,
              out_channel)) {
        // A loop, not memcpy, which GCC inlines as `rep movsq`: slow to start on 2 KB.
        if (in_place) std::copy_n(buffer, chunk, out + first);
        continue;
      }
      int64_t j = first;  // the chunk's first bad index, one at a time
      while (j + 1 < first + chunk && run(in + j, buffer, 1, in_at + (j - first) * in_channel, 0,
                                          0, 0)) {
        ++j;
      }
      return j;
    }
    return -1;
  };
  // Runs of indices: in contiguous memory a plane each (unit steps), in channels-last a pixel's
  // channels (adjacent).
  const bool by_pixel = layout == Layout::channels_last;
  const int64_t runs = by_pixel ? count : planes, length = by_pixel ? planes : count;
  const int64_t s_run = by_pixel ? s_step : src.strides[1];
  const int64_t d_run = by_pixel ? d_step : dst.strides[1];
  for (int64_t n = 0; n < src.shape[0]; ++n) {
    const int64_t in_image = (n0 + n) * from.per_image, out_image = (n0 + n) * to.per_image;
    for (int64_t r = 0; r < runs; ++r) {
      const int64_t c = c0 + (by_pixel ? 0 : r);
      const int64_t bad = rewrite_run(s + n * src.strides[0] + r * s_run,
                                      d + n * dst.strides[0] + r * d_run, length,
                                      in_image + c * from.per_channel,
                                      out_image + c * to.per_channel, by_pixel ? 1 : 0);
      if (bad >= 0) return by_pixel ? Found{n, bad, r} : Found{n, r, bad};
    }
  }
  return {};
}

// affine_rewrite where it applies (i64 indices; src apart from dst or the same view): false
// where it does not.
bool try_affine_rewrite(const Frame& fr, const View& src, IndexFormat from_format,
                        const View& dst, IndexFormat to_format, int64_t n0, int64_t c0,
                        Found* found) {
  const Affine from = affine(from_format, fr), to = affine(to_format, fr);
  // i64 only, the frameworks' (i32 indices take the rows' loop: a second copy of these loops
  // would cost the library 8 KB).
  if (!from.ok || !to.ok || src.dtype != DType::i64 || dst.dtype != DType::i64 ||
      (src.data == dst.data && !std::equal(src.strides, src.strides + src.rank, dst.strides))) {
    return false;
  }
  for (const Layout layout : {Layout::contiguous, Layout::channels_last}) {
    if (!src.flat_planes(layout) || !dst.flat_planes(layout) ||
        (layout == Layout::channels_last && (src.strides[1] != 1 || dst.strides[1] != 1))) {
      continue;
    }
    // From TensorFlow's indices, a division by C (a shift for powers of two); into them, a
    // multiplication. TensorFlow's into TensorFlow's (the batch added or dropped) take the
    // general loop.
    const bool by_power_of_two = (from.scale & (from.scale - 1)) == 0;
    const auto rewrite = from.scale == 1 ? (to.scale == 1 ? affine_rewrite<Divide::none, false>
                                                          : affine_rewrite<Divide::none, true>)
                         : to.scale == 1 && by_power_of_two
                             ? affine_rewrite<Divide::by_power_of_two, false>
                             : affine_rewrite<Divide::exactly, true>;
    *found = rewrite(src, dst, layout, from, to, n0, c0, fr.plane);
    return true;
  }
  return false;
}

// The offset (in elements) of element (n, c, plane offset p) of a view, p unravelled over the
// view's own spatial extents.
int64_t element_offset(const View& v, int64_t n, int64_t c, int64_t p) {
  int64_t at = n * v.strides[0] + c * v.strides[1];
  for (int d = v.rank - 1; d >= 2; --d) {
    at += (p % v.shape[d]) * v.strides[d];
    p /= v.shape[d];
  }
  return at;
}

// Coordinates (n, c, spatial...) of element (n, c, p) of a view.
Ints element_coordinates(const View& v, int64_t n, int64_t c, int64_t p) {
  Ints at(v.rank);
  at[0] = n, at[1] = c;
  for (int d = v.rank - 1; d >= 2; --d) {
    at[d] = p % v.shape[d];
    p /= v.shape[d];
  }
  return at;
}

// Not inlined: convert_indices and the ops' rewrite_indices share one copy of the loops.
// (n0, c0): the plane of src's first, where src is part of the frame's tensor (one image's
// channels from c0).
// Neither inlined nor cloned for convert's constant arguments (a second copy: 3 KB).
[[gnu::noinline, gnu::noclone]] Status rewrite(const Frame& fr, const Ints& frame_shape,
                                               const View& src, IndexFormat from_format,
                                               const View& dst, IndexFormat to_format,
                                               bool batchless, const char* argument,
                                               int64_t n0 = 0, int64_t c0 = 0) {
  const auto bad_index = [&](const char* why, int64_t value, Ints at) {
    if (batchless) at.erase(at.begin());
    return fail(Code::index_out_of_range, argument, ": expected ", index_format_name(from_format),
                " indices ", why, " (frame_shape ", format_shape(frame_shape), "), got ", value,
                " at element ", format_shape(at));
  };
  const char* const outside_plane = "naming an element of its own plane";
  if (src.elements() == 0) return {};  // (an empty pooled extent: the loops' divisors are 0)
  Found found;
  if (try_affine_rewrite(fr, src, from_format, dst, to_format, n0, c0, &found)) {
    if (found.n < 0) return {};
    const int64_t value =
        static_cast<const int64_t*>(src.data)[element_offset(src, found.n, found.c, found.p)];
    return bad_index(outside_plane, value, element_coordinates(src, n0 + found.n, c0 + found.c,
                                                              found.p));
  }
  const bool windowed = from_format == IndexFormat::window || to_format == IndexFormat::window;
  // Rows of the innermost pooled dimension; whole planes where both views' spatial dimensions
  // are one flat dimension and no format needs the pooled coordinates, or a 2-D window's
  // cursor follows them (long rows: the per-row work is most of the time on short ones). In
  // channels-last memory (the channel's stride below the rows') the channels of one row are
  // visited together, so that the cache lines a row touches serve all of them.
  const bool channels_inner = src.strides[1] < src.strides[src.rank - 1];
  const bool flat = (!windowed || fr.nd == 2) && !channels_inner && flat_spatial(src) &&
                    flat_spatial(dst);
  const int last = flat ? 2 : src.rank - 1;
  const int64_t length = flat ? src.plane() : src.shape[last];
  constexpr int64_t kChunk = 512;
  int64_t in_buffer[kChunk], p[kChunk], out_buffer[kChunk];  // p: plane offsets
  int64_t outer[3] = {};  // pooled coordinates but the innermost
  const int64_t channels = src.shape[1];
  const int64_t outer_count = src.elements() / (src.shape[0] * channels * length);
  for (int64_t n = 0; n < src.shape[0]; ++n) {
    for (int64_t a = 0; a < channels * outer_count; ++a) {
      const int64_t c = channels_inner ? a % channels : a / outer_count;
      const int64_t r = channels_inner ? a / channels : a % outer_count;
      int64_t rest = r, from_at = n * src.strides[0] + c * src.strides[1],
              to_at = n * dst.strides[0] + c * dst.strides[1];
      for (int d = last - 1; d >= 2; --d) {
        outer[d - 2] = rest % src.shape[d];
        rest /= src.shape[d];
        from_at += outer[d - 2] * src.strides[d];
        to_at += outer[d - 2] * dst.strides[d];
      }
      for (int64_t first = 0; first < length; first += kChunk) {
        const int64_t count = std::min(kChunk, length - first);
        Row row{n0 + n, c0 + c, {outer[0], outer[1], outer[2]}, first,
                flat && windowed ? src.shape[src.rank - 1] : 0};
        const int64_t src_step = src.strides[src.rank - 1], dst_step = dst.strides[dst.rank - 1];
        const int64_t from_offset = from_at + first * src_step;
        const int64_t to_offset = to_at + first * dst_step;
        // The row is read whole before anything is written: `to` may be `from`.
        const int64_t* in = load_row(src, from_offset, src_step, count, in_buffer);
        int64_t bad = decode(from_format, fr, row, in, p, count);
        const char* why = outside_plane;
        if (bad < 0) {
          int64_t* out = row_target(dst, to_offset, dst_step, out_buffer);
          bad = encode(to_format, fr, row, p, out, count);
          why = "naming an element its pooled element's window reaches";
          if (bad < 0) store_row(dst, to_offset, dst_step, count, out);
        }
        if (bad >= 0) {
          // The element's coordinates: the innermost (flat: the plane's) position unravelled.
          Ints at(src.rank);
          at[0] = n0 + n, at[1] = c0 + c;
          int64_t position = first + bad;
          for (int d = src.rank - 1; d >= last; --d) {
            at[d] = position % src.shape[d];
            position /= src.shape[d];
          }
          for (int d = 2; d < last; ++d) at[d] = outer[d - 2];
          // encode stops at the first it cannot write, so an in-place `in` still holds it.
          return bad_index(why, in[bad], std::move(at));
        }
      }
    }
  }
  return {};
}

Status convert(int nd, const Ints& frame_shape, const TensorView& from, IndexFormat from_format,
               const TensorView& to, IndexFormat to_format, const PoolOptions* options) {
  POOLGEN_RETURN_IF_ERROR(check_index_format("from_format", from_format));
  POOLGEN_RETURN_IF_ERROR(check_index_format("to_format", to_format));
  const bool windowed = from_format == IndexFormat::window || to_format == IndexFormat::window;
  Frame fr;
  POOLGEN_RETURN_IF_ERROR(make_frame(nd, frame_shape, from.shape, options, windowed, &fr));
  POOLGEN_RETURN_IF_ERROR(check_pooled_shape(nd, frame_shape, from.shape));
  View src, dst;
  POOLGEN_RETURN_IF_ERROR(check_index_view("from", from));
  POOLGEN_RETURN_IF_ERROR(check_index_view("to", to));
  POOLGEN_RETURN_IF_ERROR(check_capacity("to", to.dtype, to_format, frame_shape, fr));
  POOLGEN_RETURN_IF_ERROR(check_view("from", from, from.dtype, from.shape, nd, &src));
  POOLGEN_RETURN_IF_ERROR(check_view("to", to, to.dtype, from.shape, nd, &dst));
  if (src.elements() == 0) return {};
  POOLGEN_RETURN_IF_ERROR(check_no_overlap("to", dst));
  const bool in_place = src.data == dst.data && src.dtype == dst.dtype &&
                        std::equal(src.strides, src.strides + src.rank, dst.strides);
  if (!in_place) POOLGEN_RETURN_IF_ERROR(check_apart({{"to", &dst}}, {{"from", &src}}));
  return rewrite(fr, frame_shape, src, from_format, dst, to_format,
                 from.shape.size() < static_cast<size_t>(src.rank), "from");
}

}  // namespace

Status check_index_capacity(const char* argument, DType dtype, IndexFormat format, int nd,
                            const Ints& frame_shape, const Window* window) {
  // Every call asks: i64 holds any index without building a frame (its dividers divide).
  if (dtype != DType::i32) return {};
  return check_capacity(argument, dtype, format, frame_shape, frame_of(nd, frame_shape, window));
}

Status rewrite_indices(int nd, const Ints& frame_shape, const Window* window, const View& src,
                       IndexFormat from_format, const View& dst, IndexFormat to_format,
                       bool batchless, int64_t n0, int64_t c0) {
  return rewrite(frame_of(nd, frame_shape, window), frame_shape, src, from_format, dst, to_format,
                 batchless, "indices", n0, c0);
}

Status for_index_blocks(const View& indices, int64_t call_bytes,
                        const std::function<Status(const IndexBlock&)>& pass) {
  const int dim = indices.shape[0] > 1 ? 0 : 1;
  const int64_t extent = indices.shape[dim];
  const bool channels_inner = indices.strides[1] < indices.strides[indices.rank - 1];
  const int threads = sharing_threads(call_bytes);
  // Four blocks a thread, and blocks of at most kBlockBytes of the call (on one thread too): the
  // passes over a block find it in the last-level cache.
  constexpr int64_t kBlockBytes = int64_t{4} << 20;
  const int64_t blocks =
      dim == 1 && channels_inner
          ? 1
          : std::max<int64_t>(threads > 1 ? 4 * threads : 1, call_bytes / kBlockBytes);
  const int tasks = static_cast<int>(std::min<int64_t>(extent, blocks));
  // One block: the passes' own calls may share it.
  if (tasks == 1) return pass({dim, 0, extent, 0, 0});
  std::vector<Status> results(tasks);
  parallel_for(
      tasks,
      [&](int task) {
        const int64_t first = extent * task / tasks, count = extent * (task + 1) / tasks - first;
        results[task] = pass({dim, first, count, dim == 0 ? first : 0, dim == 1 ? first : 0});
        return 0;  // every block runs: the first failing one in order decides
      },
      threads > 1 ? call_bytes : 0);
  for (Status& result : results) {
    if (!result.ok()) return std::move(result);
  }
  return {};
}

Status unpool_plane_offsets(int nd, const Ints& frame_shape, const Ints& output_shape,
                            const View& src, IndexFormat format, const View& dst, bool batchless,
                            int64_t n0, int64_t c0) {
  const Frame fr = frame_of(nd, frame_shape, nullptr);
  const Frame out = frame_of(nd, output_shape, nullptr);
  POOLGEN_RETURN_IF_ERROR(rewrite(fr, frame_shape, src, format, dst, IndexFormat::plane,
                                  batchless, "indices", n0, c0));
  if (out.plane == fr.plane) return {};  // extents at least the frame's: the same frame
  // ONNX's definition: the frame's coordinates, in the larger output.
  const int64_t count = dst.elements();
  for (int64_t j = 0; j < count; ++j) {
    int64_t x[3];
    if (dst.dtype == DType::i32) {
      int32_t* p = static_cast<int32_t*>(dst.data) + j;
      fr.unravel(*p, x);
      *p = static_cast<int32_t>(out.ravel(x));
    } else {
      int64_t* p = static_cast<int64_t*>(dst.data) + j;
      fr.unravel(*p, x);
      *p = out.ravel(x);
    }
  }
  return {};
}

Status unpool_across_planes(int nd, const Ints& frame_shape, const View& values,
                            const View& indices, IndexFormat format, const View& output,
                            bool batchless) {
  const Frame fr = frame_of(nd, frame_shape, nullptr);
  const int64_t batch = values.shape[0], channels = values.shape[1], plane = values.plane();
  const auto size = static_cast<size_t>(element_size(values.dtype));
  char* const out = static_cast<char*>(output.data);
  const char* const in = static_cast<const char*>(values.data);
  for (int64_t j = 0; j < output.elements(); ++j) {
    const int64_t n = j / (channels * output.plane()), rest = j % (channels * output.plane());
    std::memset(out + element_offset(output, n, rest / output.plane(), rest % output.plane()) *
                          static_cast<int64_t>(size),
                0, size);
  }
  const bool nhwc =
      format == IndexFormat::tensorflow || format == IndexFormat::tensorflow_with_batch;
  const int64_t bound = fr.largest(format) + 1;
  for (int64_t n = 0; n < batch; ++n) {
    // The format's order: (c, p) row-major for ONNX's, (p, c) for TensorFlow's NHWC.
    for (int64_t k = 0; k < channels * plane; ++k) {
      const int64_t c = nhwc ? k % channels : k / plane, p = nhwc ? k / channels : k % plane;
      const int64_t from = element_offset(indices, n, c, p);
      const int64_t g = indices.dtype == DType::i32
                            ? static_cast<const int32_t*>(indices.data)[from]
                            : static_cast<const int64_t*>(indices.data)[from];
      if (g < 0 || g >= bound) {
        Ints at = element_coordinates(indices, n, c, p);
        if (batchless) at.erase(at.begin());
        return fail(Code::index_out_of_range, "indices", ": expected ", index_format_name(format),
                    " indices in [0, ", bound, ") (the output frame ", format_shape(frame_shape),
                    "), got ", g, " at element ", format_shape(at));
      }
      int64_t to_n = n, to_c = c, to_p = 0;
      if (nhwc) {
        const int64_t item = fr.plane * fr.channels;
        if (format == IndexFormat::tensorflow_with_batch) to_n = g / item;
        to_p = g % item / fr.channels;
        to_c = g % item % fr.channels;
      } else {
        to_n = g / (fr.channels * fr.plane);
        to_c = g / fr.plane % fr.channels;
        to_p = g % fr.plane;
        if (format == IndexFormat::onnx_column_major) to_p = fr.from_column_major(to_p);
      }
      int64_t x[3];
      fr.unravel(to_p, x);
      int64_t at = to_n * output.strides[0] + to_c * output.strides[1];
      for (int i = 0; i < nd; ++i) at += x[i] * output.strides[2 + i];
      std::memcpy(out + at * static_cast<int64_t>(size),
                  in + element_offset(values, n, c, p) * static_cast<int64_t>(size), size);
    }
  }
  return {};
}

}  // namespace detail

Status convert_indices(int nd, const Ints& frame_shape, const TensorView& from,
                       IndexFormat from_format, const TensorView& to, IndexFormat to_format,
                       const PoolOptions* window) {
  return without_exceptions(
      [&] { return convert(nd, frame_shape, from, from_format, to, to_format, window); });
}

}  // namespace poolgen
