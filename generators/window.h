// Window geometry shared by the pooling and unpooling algorithms (docs/semantics.md).
#pragma once

#include "Halide.h"
#include "poolgen/layout.hpp"

#include <map>
#include <string>
#include <vector>

namespace poolgen {

// The algorithms index tensors in logical coordinates; the layout (poolgen/layout.hpp, the API's
// own) only decides which argument is a buffer's dimension 0 (stride 1): the innermost spatial
// one (contiguous) or the channel (channels_last).
inline const std::map<std::string, Layout> kLayoutNames = {
    {"contiguous", Layout::contiguous}, {"channels_last", Layout::channels_last}};

// A divisor of numerators in [0, 2^31): Halide's division, or, with a magic pair (multiplier,
// shift: the runtime's magic_divisor computes it for a divisor given at run time), a multiply
// and a shift. GPUs have no integer divider (a 32-bit division is an emulated sequence of about
// 20 instructions), so GPU kernels take the pairs of their runtime divisors; constants need
// none (Halide strength-reduces them). Exact (Granlund and Montgomery): with l = ceil(log2 d),
// multiplier = ceil(2^(31+l) / d) < 2^32 and shift = 31 + l, n / d == (n * multiplier) >> shift
// for every n below 2^31.
struct Divisor {
  Halide::Expr d, multiplier, shift;  // multiplier and shift uint32, or undefined

  Halide::Expr divide(const Halide::Expr& n) const {
    using Halide::cast;
    if (!multiplier.defined()) return n / d;
    return cast<int32_t>((cast<uint64_t>(n) * cast<uint64_t>(multiplier)) >> cast<uint64_t>(shift));
  }
  Halide::Expr remainder(const Halide::Expr& n) const { return n - divide(n) * d; }
};

// One spatial dimension of a pooling window. Fields are Exprs so a window can be a runtime
// input or a compile-time constant alike; the divisors carry their magic pairs where given.
struct Window1D {
  Halide::Expr kernel, stride, padding, dilation;
  Divisor stride_divisor, dilation_divisor;

  Window1D() = default;
  Window1D(Halide::Expr k, Halide::Expr s, Halide::Expr p, Halide::Expr d)
      : kernel(k), stride(s), padding(p), dilation(d), stride_divisor{s}, dilation_divisor{d} {}

  // First tap of output position o (may lie in the padding).
  Halide::Expr start(const Halide::Expr& o) const { return o * stride - padding; }

  // The start stepped forward by the dilation until it is in bounds (it may pass the end). The
  // numerator is positive where the select takes it.
  Halide::Expr first_in_bounds(const Halide::Expr& o) const {
    Halide::Expr s = start(o);
    return Halide::select(s < 0, s + dilation_divisor.divide(dilation - 1 - s) * dilation, s);
  }
};

// The magic pairs of runtime divisors, as a GPU kernel's inputs (name_magic_<i>, name_shift_<i>
// per spatial dimension, innermost first), in the order the runtime passes them (MagicArgs).
struct MagicInputs {
  std::vector<Halide::GeneratorInput<uint32_t>*> multiplier, shift;
  bool used = false;  // the kernel divides with them (the gpu_magic knob), else with `/`

  template <typename Generator>
  void add_to(Generator* generator, const std::string& name, int rank) {
    multiplier.clear();
    shift.clear();
    for (int i = 0; i < rank; ++i) {
      const std::string suffix = std::to_string(i);
      multiplier.push_back(generator->template add_input<uint32_t>(name + "_magic_" + suffix));
      shift.push_back(generator->template add_input<uint32_t>(name + "_shift_" + suffix));
    }
  }
  Divisor of(const Halide::Expr& d, int i) const {
    if (!used || multiplier.empty()) return {d};
    return {d, *multiplier[i], *shift[i]};
  }
};

// A window given at run time: kernel, stride, padding and dilation scalars for each spatial
// dimension (suffix 0 innermost, as Halide orders dimensions), in the order the runtime passes
// them (runtime's WindowArgs). max_pool and the pooling gradient's window gather take them alike.
// On GPU targets the strides' and dilations' magic pairs follow (MagicInputs, "stride" then
// "dilation").
struct WindowInputs {
  std::vector<Halide::GeneratorInput<int32_t>*> kernel, stride, padding, dilation;
  MagicInputs stride_magic, dilation_magic;

  // Adds the inputs to `generator` (from its configure()); `magic`: the divisors' pairs too.
  template <typename Generator>
  void add_to(Generator* generator, int rank, bool magic) {
    for (auto* list : {&kernel, &stride, &padding, &dilation}) list->clear();
    for (int i = 0; i < rank; ++i) {
      const std::string suffix = std::to_string(i);
      kernel.push_back(generator->template add_input<int32_t>("kernel_" + suffix));
      stride.push_back(generator->template add_input<int32_t>("stride_" + suffix));
      padding.push_back(generator->template add_input<int32_t>("padding_" + suffix));
      dilation.push_back(generator->template add_input<int32_t>("dilation_" + suffix));
    }
    if (magic) {
      stride_magic.add_to(generator, "stride", rank);
      dilation_magic.add_to(generator, "dilation", rank);
    }
  }
  void use_magic(bool use) { stride_magic.used = dilation_magic.used = use; }
  Window1D operator[](int i) const {
    Window1D w(*kernel[i], *stride[i], *padding[i], *dilation[i]);
    w.stride_divisor = stride_magic.of(w.stride, i);
    w.dilation_divisor = dilation_magic.of(w.dilation, i);
    return w;
  }
};

// A window fixed at compile time (kernel = fixed_kernel, stride = fixed_stride, padding =
// fixed_padding, dilation 1, every dimension), as GeneratorParams of the generator holding it;
// fixed_kernel = 0 keeps the window the runtime inputs. The inputs exist either way, so every
// kernel of a generator has the same signature.
struct FixedWindow {
  Halide::GeneratorParam<int> kernel{"fixed_kernel", 0};
  Halide::GeneratorParam<int> stride{"fixed_stride", 0};
  Halide::GeneratorParam<int> padding{"fixed_padding", 0};

  bool fixed() const { return kernel > 0; }
  // Dimension i's window: the constants, or `inputs`'.
  Window1D of(const WindowInputs& inputs, int i) const {
    if (!fixed()) return inputs[i];
    return Window1D(int(kernel), int(stride), int(padding), 1);
  }
};

// Row-major offset of `coords` inside one plane of `extents`; both innermost first, as Halide
// orders dimensions. Computed in `index_type` so large planes do not overflow.
inline Halide::Expr flat_offset(const std::vector<Halide::Expr>& coords,
                                const std::vector<Halide::Expr>& extents,
                                const Halide::Type& index_type) {
  Halide::Expr flat = Halide::cast(index_type, 0);
  for (int i = static_cast<int>(coords.size()) - 1; i >= 0; --i) {
    flat = flat * Halide::cast(index_type, extents[i]) + Halide::cast(index_type, coords[i]);
  }
  return flat;
}

// Calls f(offset) for every offset in [0, extent)^nd, in row-major order (offset[0] fastest,
// matching Halide's innermost-first dimensions): a fixed window's taps.
template <typename F>
void for_each_tap(int nd, int extent, F f) {
  std::vector<int> offset(nd, 0);
  while (true) {
    f(offset);
    int i = 0;
    while (i < nd && ++offset[i] == extent) offset[i++] = 0;
    if (i == nd) return;
  }
}

// A fixed window's cell index as its offset inside the window (whose taps lie at 0..span in a
// plane of `extents`), narrowed to 32 bits: clamped to -1..span+1 first, so that any index
// outside the window lands on a value no tap has, and compared in 32-bit lanes.
inline Halide::Expr offset_in_window(const Halide::Expr& index,
                                     const std::vector<Halide::Expr>& window_start,
                                     const std::vector<Halide::Expr>& extents, int kernel) {
  const std::vector<Halide::Expr> last_tap(window_start.size(), kernel - 1);
  const Halide::Expr span = flat_offset(last_tap, extents, Halide::Int(32));
  const Halide::Type t = index.type();
  return Halide::cast<int32_t>(Halide::clamp(index - flat_offset(window_start, extents, t),
                                             Halide::cast(t, -1), Halide::cast(t, span + 1)));
}

// The smallest value of `t`: the running maximum starts here (-inf for floats).
inline Halide::Expr lowest(const Halide::Type& t) {
  return t.is_float() ? Halide::cast(t, Halide::Expr(-std::numeric_limits<double>::infinity()))
                      : t.min();
}

// Whether a later tap's value takes the running maximum from an earlier one's: where it is
// greater, or NaN (PyTorch's scan, docs/semantics.md).
inline Halide::Expr later_wins(const Halide::Expr& earlier, const Halide::Expr& later) {
  const Halide::Expr greater = later > earlier;
  return later.type().is_float() ? greater || Halide::is_nan(later) : greater;
}

// The bits PyTorch gives a NaN narrowed from f32 to the 16-bit float `t`: c10::BFloat16 rounds
// every NaN to 0x7fc0; c10::Half narrows as x86's F16C does (the sign, the quiet bit and the
// payload's top bits), which Halide's software narrowing (SSE4.1, no F16C) would make infinite.
inline Halide::Expr pytorch_nan(const Halide::Type& t, const Halide::Expr& f32) {
  using Halide::cast;
  if (t.is_bfloat()) return Halide::reinterpret(t, cast<uint16_t>(0x7fc0));
  const Halide::Expr b = Halide::reinterpret<uint32_t>(f32);
  return Halide::reinterpret(t, cast<uint16_t>(((b >> 16) & 0x8000) | 0x7e00 | ((b >> 13) & 0x3ff)));
}

// a + b the way PyTorch's CPU kernels add tensors of a's type: f32 and f64 natively; the 16-bit
// floats widen to f32, add, and round back to their type (to nearest, ties to even) after every
// addition, as c10::Half and c10::BFloat16 do, NaN bits included (docs/semantics.md,
// "Gradients").
inline Halide::Expr add_in_type(const Halide::Expr& a, const Halide::Expr& b) {
  const Halide::Type t = a.type();
  if (t.is_float() && t.bits() == 16) {
    Halide::Expr sum = Halide::cast<float>(a) + Halide::cast<float>(b);
    return Halide::select(Halide::is_nan(sum), pytorch_nan(t, sum), Halide::cast(t, sum));
  }
  return a + b;
}

// first <= index < first + extent as one unsigned comparison of the offset from first (wrapped
// below it): one compare and branch an element instead of two.
inline Halide::Expr in_range(const Halide::Expr& index, const Halide::Expr& first,
                             const Halide::Expr& extent) {
  const Halide::Type u = index.type().with_code(halide_type_uint);
  auto as_unsigned = [&](const Halide::Expr& e) { return Halide::reinterpret(u, e); };
  return as_unsigned(index) - as_unsigned(Halide::cast(index.type(), first)) <
         as_unsigned(Halide::cast(index.type(), extent));
}

// Halide's order of a tensor's arguments: spatial (innermost first), channel, batch; in
// channels-last, the channel comes first.
template <typename T>
struct Same { using type = T; };  // keeps c and n out of T's deduction

template <typename T>
std::vector<T> tensor_args(const std::vector<T>& spatial, const typename Same<T>::type& c,
                           const typename Same<T>::type& n, Layout layout = Layout::contiguous) {
  std::vector<T> args;
  if (layout == Layout::channels_last) args.push_back(c);
  args.insert(args.end(), spatial.begin(), spatial.end());
  if (layout == Layout::contiguous) args.push_back(c);
  args.push_back(n);
  return args;
}

// A fixed window's marked cells, checked a group at a time: a row of cells along the innermost
// spatial dimension, or in channels-last one cell's channels (the vectors), which a schedule can
// check right before the group is read. group_ok is the lanes' "and" of ok(mark) over the group
// (a vectorizable reduction along *along, over `extent`: dimension 0 of the cells' buffer, in
// either layout), group_checked its one scalar require. Returns the group of the cell at
// `cell_vars` (with c and n), the arguments of group_ok and group_checked.
template <typename Ok>
std::vector<Halide::Expr> check_cell_groups(Halide::Func marked, Halide::Func group_ok,
                                            Halide::Func group_checked,
                                            const std::vector<Halide::Var>& cell_vars,
                                            const Halide::Var& c, const Halide::Var& n,
                                            Layout layout, const Halide::Expr& extent, Ok ok,
                                            const std::string& message, Halide::RDom* along) {
  using Halide::Expr;
  const bool channels_last = layout == Layout::channels_last;
  std::vector<Expr> group(cell_vars.begin() + (channels_last ? 0 : 1), cell_vars.end());
  if (!channels_last) group.push_back(c);
  group.push_back(n);
  *along = Halide::RDom(0, extent, channels_last ? "along_cell" : "along_row");
  std::vector<Expr> member(cell_vars.begin(), cell_vars.end());  // the group's cell `along`
  if (!channels_last) member[0] = (*along)[0];
  member = tensor_args(member, channels_last ? Expr((*along)[0]) : Expr(c), Expr(n), layout);
  group_ok(group) = Halide::Internal::const_true();
  group_ok(group) = group_ok(group) && ok(marked(member));
  group_checked(group) = Halide::require(group_ok(group), 0, message);
  return group;
}

// Estimates of a representative call for the autoschedulers: the benchmark's shapes (1-D
// 8x64x65536, 2-D 8x64x112x112, 3-D 2x16x32x64x64), spatial extents divided by `shrink` (2: the
// pooled tensor of a stride-2 window); flat planes when `flat`. Halide's argument order.
inline Halide::Region representative_region(int rank, Layout layout, int shrink = 1,
                                            bool flat = false) {
  const std::vector<int> n_c_spatial =
      rank == 1 ? std::vector<int>{8, 64, 65536}
                : rank == 2 ? std::vector<int>{8, 64, 112, 112} : std::vector<int>{2, 16, 32, 64, 64};
  std::vector<Halide::Range> spatial;
  for (int i = rank - 1; i >= 0; --i) spatial.push_back({0, n_c_spatial[2 + i] / shrink});
  if (flat) {
    int plane = 1;
    for (const auto& r : spatial) plane *= *Halide::Internal::as_const_int(r.extent);
    spatial = {{0, plane}};
  }
  return tensor_args<Halide::Range>(spatial, {0, n_c_spatial[1]}, {0, n_c_spatial[0]}, layout);
}

// The buffer dimension holding spatial dimension i (innermost first).
inline int spatial_dim(int i, Layout layout) { return layout == Layout::channels_last ? i + 1 : i; }

}  // namespace poolgen
