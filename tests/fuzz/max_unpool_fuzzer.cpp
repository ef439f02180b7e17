// libFuzzer target: max unpooling through the C++ and C APIs, its output-shape and kernel-name
// queries, and its gradient (max_unpool_backward, poolgen_max_unpool_backward). Every call must
// either succeed with the reference's output, bit for bit (zeros where nothing is scattered, the
// latest of duplicate indices winning; the gradient gathered from every index's slot), or fail
// with a well-formed error of a class the call deserves: index_out_of_range naming the first
// invalid index and the plane size when one is invalid. No write may leave the output view
// (guard pages, canaries, sentinels) and the inputs are read-only during the call.
#include "fuzz_common.hpp"

namespace poolgen::fuzz {
namespace {

// A backward call reuses the forward call's views: the values' becomes grad_values, the
// output's grad_output (both then take gradient dtypes), the indices' stay.
struct UnpoolCase {
  bool c_api = false;
  bool prepared = false;  // C++: prepared on its views, then run (decoded last)
  int nd = 2;
  UnpoolOptions o;  // C API: what the struct below means (poolgen.h)
  poolgen_unpool_options co{};
  ViewSpec values, indices, output;
  DataRecipe data;
  IndexRecipe index_recipe;
  uint8_t underrun = 0;
  CTensorFaults faults;
  CMessage message;
  ShapeModel model;
  Alias alias;  // an output placed on another argument's memory
  // max_unpool_backward(grad_output = output, indices, grad_values = values).
  bool backward = false;
};

// The CPU kernels Path::winner runs (op "unpool_winner", or "unpool_backward_reporting" for
// the gradient: the GPU algorithms' twins) built for this width and index type: in how many
// layouts.
int winner_layouts(DType value, DType index, const char* op = "unpool_winner") {
  std::set<Layout> layouts;
  for (const KernelInfo& k : compiled_kernels()) {
    if (k.op == op && k.device == Device::cpu &&
        dtype_size(k.value_dtype) == dtype_size(value) && k.index_dtype == index) {
      layouts.insert(k.layout);
    }
  }
  return static_cast<int>(layouts.size());
}

// poolgen.h's meaning of the C options, as C++ options.
UnpoolOptions from_c(int nd, const poolgen_unpool_options& c) {
  auto list = [&](const int64_t* a) { return Ints(a, a + nd); };
  auto zero = [&](const int64_t* a) { return std::all_of(a, a + nd, [](int64_t v) { return !v; }); };
  UnpoolOptions o;
  // An all-zero kernel_size with an output_size: by the indices alone.
  o.kernel_size = c.output_size_len > 0 && zero(c.kernel_size) ? Ints{} : list(c.kernel_size);
  o.stride = zero(c.stride) ? Ints{} : list(c.stride);
  o.padding = list(c.padding);
  const int n = std::clamp<int32_t>(c.output_size_len, 0, 5);
  o.output_size = Ints(c.output_size, c.output_size + n);
  o.device = static_cast<Device>(c.device);
  return o;
}

// The default unpooled extent of spatial dimension i, (in - 1) * s - 2p + k, where the options
// are plain numbers (else 0).
int64_t default_extent(const UnpoolCase& c, int i) {
  const int nd = shape_nd(c.nd);
  const Ints& shape = c.values.shape;
  if (shape.size() < size_t(nd)) return 0;
  const i128 in = shape[shape.size() - nd + i];
  const i128 k = entry(c.o.kernel_size, i, 0);
  const i128 s = c.o.stride.empty() ? k : entry(c.o.stride, i, 0);
  const i128 p = entry(c.o.padding, i, 0);
  const i128 d = (in - 1) * s - 2 * p + k;
  return d > kI64Max || d < -kI64Max ? 0 : static_cast<int64_t>(d);
}

UnpoolCase decode(FuzzInput& in) {
  UnpoolCase c;
  c.c_api = in.chance(25);
  c.nd = decode_nd(in);
  const int snd = shape_nd(c.nd);
  UnpoolOptions& o = c.o;
  o.kernel_size = decode_list(in, snd, c.c_api, [](FuzzInput& in, int) {
    static constexpr int64_t kK[] = {2, 3, 1, 4, 2, 3, 5};
    return in.pick(kK);
  });
  if (in.chance(65)) {
    o.stride = decode_list(in, snd, c.c_api, [](FuzzInput& in, int) {
      static constexpr int64_t kS[] = {2, 1, 3, 2, 1, 4};
      return in.pick(kS);
    });
  }
  if (in.chance(50)) {
    o.padding = decode_list(in, snd, c.c_api, [](FuzzInput& in, int) {
      static constexpr int64_t kP[] = {0, 1, 0, 2};
      return in.pick(kP);
    });
  } else if (in.chance(20)) {
    o.padding.clear();
  }
  static constexpr Path kPaths[] = {Path::automatic, Path::general, Path::automatic, Path::winner};
  o.path = in.pick(kPaths);
  o.device = static_cast<Device>(decode_device(in));

  c.values.shape = decode_shape(in, snd);
  c.values.dtype = decode_value_dtype(in);
  c.values.strides = decode_strides(in, snd, c.values.shape, !c.c_api, &c.values.kind);
  c.values.device = decode_device(in);
  c.values.null_data = in.chance(2);

  // output_size: none, nd extents or nd + 2 entries, each inside (default - s, default + s)
  // mostly; sometimes another count or out-of-range extents.
  const uint8_t form = in.byte() % 8;
  if (form >= 4) {
    const size_t count = form < 6 ? snd : form == 6 ? snd + 2 : in.pick({size_t(1), size_t(4), size_t(6), size_t(0)});
    const size_t lead = count == size_t(snd) + 2 ? 2 : 0;
    for (size_t j = 0; j < count; ++j) {
      if (j < lead || j - lead >= size_t(snd)) {
        o.output_size.push_back(in.chance(10) ? edge_int(in) : in.range(0, 9));
        continue;
      }
      const int i = static_cast<int>(j - lead);
      const int64_t dflt = default_extent(c, i);
      const int64_t s = std::clamp<int64_t>(c.o.stride.empty() ? entry(c.o.kernel_size, i, 1)
                                                                : entry(c.o.stride, i, 1),
                                            1, 64);
      const i128 near = in.chance(8) ? (in.boolean() ? i128(dflt) + s : i128(dflt) - s)  // just outside
                                     : i128(dflt) + in.range(-(s - 1), s - 1);
      int64_t e = saturate(near);
      if (take_edge(in, 3)) e = edge_int(in);
      o.output_size.push_back(e);
    }
  }
  if (c.c_api) {
    poolgen_unpool_options& co = c.co;
    auto fill = [&](int64_t* a, const Ints& l) {
      for (int i = 0; i < 3; ++i) {
        a[i] = i < snd ? entry(l, i, 0) : (in.chance(30) ? edge_int(in) : 0);
      }
    };
    fill(co.kernel_size, o.kernel_size);
    fill(co.stride, o.stride);
    fill(co.padding, o.padding);
    co.output_size_len = static_cast<int32_t>(std::min<size_t>(o.output_size.size(), 5));
    for (int i = 0; i < 5; ++i) {
      co.output_size[i] = i < co.output_size_len ? o.output_size[i] : (in.chance(30) ? edge_int(in) : 0);
    }
    if (in.chance(3)) {
      static constexpr int32_t kLens[] = {-1, 6, 0x7fffffff, 4, 2};
      co.output_size_len = in.pick(kLens);
    }
    co.device = static_cast<int32_t>(o.device);
    o = from_c(snd, co);  // the C API has no path: automatic
    normalise_for_c(&c.values);
  }

  c.model = model_unpool_shape(c.nd, c.values.shape, o);
  const Ints out = c.model.valid && c.model.representable ? c.model.out : c.values.shape;
  c.indices = decode_view(in, snd, c.values.shape, decode_index_dtype(in), c.c_api);
  c.output = decode_view(in, snd, out, in.chance(3) ? in.pick(kAnyDtype) : c.values.dtype, c.c_api);
  c.data = decode_recipe(in);
  c.index_recipe = decode_index_recipe(in);
  c.underrun = in.byte();
  if (c.c_api) {
    c.faults = decode_c_faults(in);
    c.message = decode_message_buffer(in);
  }
  c.alias = decode_alias(in, 3, 1);
  // The backward op, decoded last: older corpus inputs, nearly all exhausted by then, keep
  // their meaning (forward calls).
  c.backward = in.chance(50);
  if (c.backward) {
    c.output.dtype = decode_gradient_dtype(in);                            // grad_output
    c.values.dtype = in.chance(3) ? in.pick(kAnyDtype) : c.output.dtype;  // grad_values
    decode_grad_output_shape(in, snd, &c.output);
    c.alias = decode_alias(in, 3, 1);  // in the backward call's argument order
  } else if (in.chance(30)) {
    // Other frameworks' options (forward calls; decoded after all the rest, for the same
    // reason). The index format: make_indices' plane offsets in it (ONNX's plus each plane's
    // first slot, so that invalid ones may land in other planes, which ONNX allows; TensorFlow's
    // may name other channels). Then now and then an output_size rule and an end padding, after
    // which the shape model runs again and the output's view is drawn for the shape it gives.
    static constexpr IndexFormat kFormats[] = {
        IndexFormat::onnx, IndexFormat::tensorflow, IndexFormat::onnx,
        IndexFormat::tensorflow_with_batch, IndexFormat::onnx_column_major, IndexFormat::plane};
    o.index_format = in.pick(kFormats);
    c.co.index_format = static_cast<int32_t>(o.index_format);
    if (in.chance(50)) {
      static constexpr OutputSizeRule kRules[] = {
          OutputSizeRule::onnx_runtime, OutputSizeRule::onnx, OutputSizeRule::any,
          OutputSizeRule::pytorch};
      o.output_size_rule =
          in.chance(5) ? static_cast<OutputSizeRule>(in.byte() % 8) : in.pick(kRules);
      c.co.output_size_rule = static_cast<int32_t>(o.output_size_rule);
      if (in.chance(40)) {
        o.padding_end = decode_list(in, snd, c.c_api, [](FuzzInput& in, int) {
          static constexpr int64_t kP[] = {0, 1, 0, 2};
          return in.pick(kP);
        });
        if (c.c_api) o.padding_end = c_padding_end(in, snd, o.padding_end, &c.co);
      }
      c.model = model_unpool_shape(c.nd, c.values.shape, o);
      const Ints shape = c.model.valid && c.model.representable ? c.model.out : c.values.shape;
      c.output = decode_view(in, snd, shape, c.output.dtype, c.c_api);
    }
  }
  c.prepared = !c.c_api && in.chance(30);  // last: earlier inputs keep their meaning
  return c;
}

std::string describe(const UnpoolCase& c) {
  std::ostringstream os;
  os << (c.c_api ? "C API" : c.prepared ? "C++ API, prepared" : "C++ API");
  if (c.backward) {
    os << " max_unpool_backward nd " << c.nd << "; " << describe("grad_output", c.output) << "; "
       << describe("indices", c.indices) << "; " << describe("grad_values", c.values);
  } else {
    os << " max_unpool nd " << c.nd << "; " << describe("values", c.values) << "; "
       << describe("indices", c.indices) << "; " << describe("output", c.output);
  }
  os << "; kernel_size " << str(c.o.kernel_size) << " stride "
     << str(c.o.stride) << " padding " << str(c.o.padding) << " output_size "
     << str(c.o.output_size) << " path " << static_cast<int>(c.o.path) << " device "
     << static_cast<int>(c.o.device) << "; indices style "
     << static_cast<int>(c.index_recipe.style) << " index_format "
     << static_cast<int>(c.o.index_format) << " output_size_rule "
     << static_cast<int>(c.o.output_size_rule) << " padding_end " << str(c.o.padding_end);
  if (c.c_api) os << " output_size_len " << c.co.output_size_len;
  if (c.faults.rank_view >= 0) os << "; C rank of tensor " << c.faults.rank_view << " = " << c.faults.rank;
  if (c.faults.null_view >= 0) os << "; C tensor " << c.faults.null_view << " is NULL";
  os << "; model " << (c.model.valid ? "valid " + str(c.model.out) : "invalid (" + c.model.why + ")")
     << (c.model.huge ? " huge" : "");
  return os.str();
}

bool ref_safe(const UnpoolCase& c) {
  return within(c.values.shape, kRefBound) && within(c.o.kernel_size, kRefBound) &&
         within(c.o.stride, kRefBound) && within(c.o.padding, kRefBound) &&
         within(c.o.output_size, kRefBound);
}

// The C API's output_size_len must be 0 to 5 (then the entries are judged as output_size).
bool bad_output_size_len(const UnpoolCase& c) {
  return c.c_api && (c.co.output_size_len < 0 || c.co.output_size_len > 5);
}

void check_queries(const UnpoolCase& c) {
  ShapeModel m = c.model;
  if (ref_safe(c)) check_model_against_reference(c.nd, c.values.shape, c.o, m, ref::max_unpool_output_shape);
  if (c.c_api) {
    const int32_t rank = c.faults.rank_view == 0 ? c.faults.rank : static_cast<int32_t>(c.values.shape.size());
    const size_t n = static_cast<size_t>(std::clamp<int32_t>(rank, 0, 8));
    GuardedBuffer shape_in(n * 8), shape_out(std::min<size_t>(n, 5) * 8);
    for (size_t i = 0; i < n; ++i) {
      const int64_t e = i < c.values.shape.size() ? c.values.shape[i] : 1;
      std::memcpy(shape_in.data() + 8 * i, &e, 8);
    }
    shape_in.protect();
    FuzzInput none(nullptr, 0);
    const CMessage msg = decode_message_buffer(none);  // 1024 bytes
    const int32_t rc = poolgen_max_unpool_output_shape(
        c.nd, rank, reinterpret_cast<const int64_t*>(shape_in.data()), &c.co,
        reinterpret_cast<int64_t*>(shape_out.data()), msg.ptr(), msg.size);
    bool full = false;
    const Status st = c_status(rc, msg, &full);
    Ints out;
    if (st.ok()) {
      out.resize(c.values.shape.size());
      std::memcpy(out.data(), shape_out.data(), out.size() * 8);
    }
    if (c.faults.rank_view == 0 || bad_output_size_len(c)) {
      const bool limit = m.limit;
      m = ShapeModel{};
      m.why = "C rank or output_size_len";
      m.limit = limit;
    }
    check_shape_query("poolgen_max_unpool_output_shape", m, st, out, full);
  } else {
    Ints out;
    const Status st = max_unpool_output_shape(c.nd, c.values.shape, c.o, &out);
    check_shape_query("max_unpool_output_shape", m, st, out);
  }
  if (avoided("empty_huge") && c.model.valid && empty_huge(c.model.out)) return;
  std::string name;
  if (c.backward) {
    const Status st =
        max_unpool_backward_kernel_name(c.nd, to_cpp(c.output, nullptr),
                                        static_cast<DType>(c.indices.dtype), c.values.shape,
                                        c.o, &name);
    check_message(st);
    if (st.ok() && (name.empty() || !c.model.valid)) {
      violation("max_unpool_backward_kernel_name accepted: " + name);
    }
    return;
  }
  Status st = max_unpool_kernel_name(c.nd, to_cpp(c.values, nullptr),
                                     static_cast<DType>(c.indices.dtype), c.o, &name);
  check_message(st);
  if (st.ok() && (name.empty() || !c.model.valid)) violation("max_unpool_kernel_name accepted: " + name);
  name.clear();
  st = max_unpool_kernel_name(c.nd, c.values.shape, c.o, &name);
  check_message(st);
  if (st.ok() && (name.empty() || !c.model.valid)) {
    violation("max_unpool_kernel_name(shape) accepted: " + name);
  }
}

// What the shapes, the options and the C API's faults alone say (either op).
Expect shape_expectations(const UnpoolCase& c) {
  Expect e;
  const ShapeModel& m = c.model;
  if (!m.valid) e.add(&e.invalid, "shape rules: " + m.why);
  if (m.limit) {
    e.add(&e.invalid_ok, "beyond the library's limits");
    e.add(&e.unsupported_ok, "beyond the library's limits");
  }
  if (m.valid && !m.representable) e.add(&e.fail, "output extent beyond int64");
  if (bad_output_size_len(c)) e.add(&e.invalid, "C output_size_len");
  if (c.faults.rank_view >= 0) e.add(&e.invalid, "C rank " + std::to_string(c.faults.rank));
  if (c.faults.null_view >= 0) e.add(&e.invalid, "C tensor NULL");
  if (c.o.device == Device::cuda) e.add(&e.fail, "options.device cuda (no CUDA here)");
  return e;
}

Expect expectations(const UnpoolCase& c) {
  Expect e = shape_expectations(c);
  const ShapeModel& m = c.model;
  const bool i64_or_i32 = c.indices.dtype == 1 || c.indices.dtype == 8;
  if (!valid_dtype(c.values.dtype)) e.add(&e.invalid, "values dtype code");
  if (!i64_or_i32) e.add(&e.invalid, "index dtype");
  const Ints* out = m.valid && m.representable ? &m.out : nullptr;
  expect_view(e, "values", c.values, c.values.dtype, nullptr, false);
  expect_view(e, "indices", c.indices, c.indices.dtype, &c.values.shape, false);
  expect_view(e, "output", c.output, c.values.dtype, out, true);
  if (m.valid && c.indices.dtype == 8 && plane_of(shape_nd(c.nd), m.out) > kI32Max) {
    e.add(&e.invalid, "i32 indices for a plane of 2^31 or more");
  }
  const bool rewritten = c.o.index_format != IndexFormat::plane ||
                         (c.o.output_size_rule == OutputSizeRule::onnx && !c.o.output_size.empty());
  if (rewritten && c.o.path == Path::winner) {
    e.add(&e.fail, "indices rewritten (another format or ONNX's frame) with Path::winner (the "
                   "CPU's scatter only)");
  }
  if (valid_dtype(c.values.dtype) && i64_or_i32) {
    const DType v = static_cast<DType>(c.values.dtype), i = static_cast<DType>(c.indices.dtype);
    if (!test::unpool_kernel_built(v, i)) e.add(&e.needs_unsupported, "no kernel built for this width");
    // Which layout's kernel a view takes is the library's choice: with a winner kernel in one
    // layout only, any call may be refused.
    const int layouts = c.o.path == Path::winner ? winner_layouts(v, i) : 2;
    if (layouts == 0) e.add(&e.needs_unsupported, "no winner kernel built");
    if (layouts == 1) e.add(&e.unsupported_ok, "winner kernel built in one layout only");
  }
  return e;
}

// The backward call: grad_output (the output's view) a float of the unpooled shape, the
// indices of grad_values' shape (the values' view), grad_values in grad_output's dtype.
// Path::winner runs the reporting kernel's CPU twin where the build has one (-DPOOLGEN_GPU_TWINS:
// 32-bit, contiguous), and is unsupported elsewhere; other paths take the one CPU kernel.
Expect backward_expectations(const UnpoolCase& c) {
  Expect e = shape_expectations(c);
  const ShapeModel& m = c.model;
  const ViewSpec &grad = c.output, &grad_values = c.values;
  const bool i64_or_i32 = c.indices.dtype == 1 || c.indices.dtype == 8;
  const bool float_grad = valid_dtype(grad.dtype) && is_float_dtype(static_cast<DType>(grad.dtype));
  if (!valid_dtype(grad.dtype)) e.add(&e.invalid, "grad_output dtype code");
  if (valid_dtype(grad.dtype) && !float_grad) e.add(&e.invalid, "grad_output not a float");
  if (!i64_or_i32) e.add(&e.invalid, "index dtype");
  const Ints* out = m.valid && m.representable ? &m.out : nullptr;
  expect_view(e, "grad_output", grad, grad.dtype, out, false);
  expect_view(e, "indices", c.indices, c.indices.dtype, &grad_values.shape, false);
  expect_view(e, "grad_values", grad_values, grad.dtype, nullptr, true);
  if (m.valid && c.indices.dtype == 8 && plane_of(shape_nd(c.nd), m.out) > kI32Max) {
    e.add(&e.invalid, "i32 indices for a plane of 2^31 or more");
  }
  if (float_grad && i64_or_i32) {
    const DType v = static_cast<DType>(grad.dtype), i = static_cast<DType>(c.indices.dtype);
    if (!test::unpool_backward_kernel_built(v, i)) {
      e.add(&e.needs_unsupported, "no kernel built for this width");
    }
    if (!c.c_api && c.o.path == Path::winner) {  // the C API has no path
      const int layouts = winner_layouts(v, i, "unpool_backward_reporting");
      if (layouts == 0) e.add(&e.needs_unsupported, "no CPU twin of the reporting kernel");
      if (layouts == 1) e.add(&e.unsupported_ok, "CPU twin built in one layout only");
    }
  }
  return e;
}

// The index values (int64, logical order of the values) for `count` elements of values of
// their shape, unpooled into planes of the model's output (a window of the unpooling's each).
std::vector<int64_t> make_indices(const UnpoolCase& c, size_t count) {
  const bool known = c.model.valid && c.model.representable;
  std::vector<int64_t> idx =
      fuzz::make_indices(c.index_recipe, shape_nd(c.nd), c.values.shape,
                         known ? &c.model.out : nullptr,
                         {&c.o.kernel_size, &c.o.stride, &c.o.padding, nullptr}, count);
  const int nd = shape_nd(c.nd);
  const i128 in_plane = plane_of(nd, c.values.shape);
  if (!known || c.o.index_format == IndexFormat::plane || in_plane <= 0) return idx;
  const i128 out_plane = plane_of(nd, c.model.out);
  const i128 channels = c.values.shape[c.values.shape.size() - nd - 1];
  for (size_t k = 0; k < idx.size(); ++k) {
    // Element k's plane (n, c) in the values' logical order, its offset p in the output's.
    const i128 plane_index = static_cast<i128>(k) / in_plane, p = idx[k];
    const i128 n = plane_index / channels, ch = plane_index % channels;
    i128 v = p;
    switch (c.o.index_format) {
      case IndexFormat::onnx: v = plane_index * out_plane + p; break;
      case IndexFormat::onnx_column_major: {  // the first spatial dimension fastest
        i128 rest = p, q = 0, scale = 1;
        const size_t first = c.model.out.size() - nd;
        Ints x(nd);
        for (int i = nd - 1; i >= 0; --i) {
          const i128 e = std::max<int64_t>(c.model.out[first + i], 1);
          x[i] = static_cast<int64_t>(rest % e);
          rest /= e;
        }
        for (int i = 0; i < nd; ++i) {
          q += x[i] * scale;
          scale = sat_mul(scale, std::max<int64_t>(c.model.out[first + i], 1));
        }
        v = plane_index * out_plane + (p < 0 || p >= out_plane ? p : q);
        break;
      }
      case IndexFormat::tensorflow: v = sat_mul(p, channels) + ch; break;
      case IndexFormat::tensorflow_with_batch:
        v = sat_mul(sat_mul(n, out_plane) + p, channels) + ch;
        break;
      default: break;
    }
    idx[k] = static_cast<int64_t>(std::clamp<i128>(v, -kI64Max - 1, kI64Max));
  }
  return idx;
}

// Where an index names no output element: outside its plane, or with ONNX's global indices
// outside the output (the bound index_out_of_range names).
int64_t index_bound(const UnpoolCase& c) {
  const i128 plane = plane_of(shape_nd(c.nd), c.model.out);
  if (c.o.index_format != IndexFormat::onnx) return static_cast<int64_t>(plane);
  const i128 in_plane = plane_of(shape_nd(c.nd), c.values.shape);
  const i128 planes = in_plane > 0 ? static_cast<i128>(geometry(c.values).elements) / in_plane : 0;
  return static_cast<int64_t>(std::min<i128>(sat_mul(planes, plane), kI64Max));
}

void check_call(const UnpoolCase& c) {
  Expect e = expectations(c);
  const ViewSpec* views[] = {&c.values, &c.indices, &c.output};
  const char* names[] = {"values", "indices", "output"};
  const bool materialise =
      std::all_of(views, views + 3, [](const ViewSpec* v) { return materialisable(*v); });
  Memory mem[3];
  allocate_views(views, names, 3, 1, materialise, c.underrun, e, mem);

  apply_alias(c.alias, views, mem);
  expect_apart(views, names, mem, 3, 1, e);
  // Values and indices into their (read-only) memory; the packed copies the reference gets.
  const DType vt = static_cast<DType>(c.values.dtype);
  std::vector<uint8_t> packed_values;
  std::vector<int64_t> packed_indices;
  if (mem[0].buffer && !mem[0].offsets.empty()) {
    scatter_into(mem[0], make_values(vt, mem[0].elem, mem[0].offsets.size(), c.data));
    packed_values = gather(mem[0]);
  }
  if (mem[1].buffer && !mem[1].offsets.empty()) {
    packed_indices =
        write_indices(mem[1], c.indices.dtype, make_indices(c, mem[1].offsets.size()));
  }
  // The first invalid index in input order, where the call is otherwise valid and has memory.
  // PyTorch's rule with plane offsets or ONNX's global ones has a model of its own here; other
  // frameworks' rules and formats ask the reference, before the call, whether one is invalid
  // (not beyond the library's limits, which it refuses first).
  const bool modelled = c.o.output_size_rule == OutputSizeRule::pytorch &&
                        c.o.padding_end.empty() &&
                        (c.o.index_format == IndexFormat::plane ||
                         c.o.index_format == IndexFormat::onnx);
  bool index_error = false;
  int64_t first_bad = 0, plane = 0;
  if (materialise && !e.must_fail() && c.model.valid && !mem[1].offsets.empty()) {
    if (modelled) {
      plane = index_bound(c);
      index_error = first_invalid_index(packed_indices, plane, &first_bad);
    } else if (!c.model.limit) {
      std::vector<uint8_t> ignored;
      index_error = ref_unpool(c.nd, vt, c.values.shape, packed_values, packed_indices, c.o,
                               &ignored)
                        .code() == Code::index_out_of_range;
    }
  }
  if (index_error) feature("index_error");
  context() = describe(c) + "; expect " + (e.reasons.empty() ? "success" : e.reasons) +
              (index_error ? "; invalid index " + std::to_string(first_bad) : "");

  if (mem[0].buffer) mem[0].buffer->protect();  // any write to values or indices faults
  if (mem[1].buffer) mem[1].buffer->protect();
  Status st;
  bool known = true;
  if (c.c_api) {
    void* const data[3] = {mem[0].data, mem[1].data, mem[2].data};
    const CTensors t(views, data, c.faults);
    const int32_t rc = poolgen_max_unpool(c.nd, t.at(0), t.at(1), t.at(2), &c.co, c.message.ptr(),
                                          c.message.size);
    st = c_status(rc, c.message, &known);
  } else {
    const TensorView values = to_cpp(c.values, mem[0].data),
                     indices = to_cpp(c.indices, mem[1].data),
                     output = to_cpp(c.output, mem[2].data);
    st = c.prepared ? run_prepared(prepare_max_unpool, c.nd, values, indices, output, c.o)
                    : max_unpool(c.nd, values, indices, output, c.o);
  }
  if (mem[0].buffer) mem[0].buffer->unprotect();
  if (mem[1].buffer) mem[1].buffer->unprotect();
  for (int i = 0; i < 3; ++i) check_canary(mem[i], names[i], st);
  check_message(st, known);
  check_outcome(st, e, index_error);
  feature(std::string("outcome:") + code_name(st.code()) +
          (c.c_api ? ":c" : c.prepared ? ":prepared" : ":cpp") +
          (c.o.path == Path::winner ? ":winner" : ""));
  if (st.code() == Code::index_out_of_range) {
    // docs/semantics.md: the message names the first invalid index and the plane size.
    if (known && modelled && (st.message().find(std::to_string(first_bad)) == std::string::npos ||
                  st.message().find(std::to_string(plane)) == std::string::npos)) {
      violation("index_out_of_range does not name the first invalid index " +
                std::to_string(first_bad) + " and the plane size " + std::to_string(plane) +
                ": " + st.message());
    }
    check_outside_view(mem[2], kSentinel, "output");  // the view itself may be written
    return;
  }
  if (!st.ok()) {
    check_untouched(mem[2], kSentinel, "output", st);
    return;
  }

  std::string name;
  const Status kn = max_unpool_kernel_name(c.nd, to_cpp(c.values, nullptr),
                                           static_cast<DType>(c.indices.dtype), c.o, &name);
  if (!kn.ok()) violation("max_unpool succeeded but max_unpool_kernel_name refuses: " + kn.message());
  if (c.o.device != Device::cpu) {
    note("options.device code accepted",
         "an unknown options.device code " + std::to_string(static_cast<int>(c.o.device)) +
             " runs on the CPU");
  }
  feature("ok:" + name + (c.index_recipe.style == IndexStyle::window ? ":window" : ""));
  if (!materialise || geometry(c.output).elements == 0) return;

  std::vector<uint8_t> want;
  const Status rs = ref_unpool(c.nd, vt, c.values.shape, packed_values, packed_indices, c.o, &want);
  if (!rs.ok()) violation("library succeeded, reference refuses: " + rs.message());
  const std::vector<uint8_t> got = gather(mem[2]);
  const size_t es = dtype_size(vt), n = want.size() / es;
  if (got.size() != want.size()) violation("output element count");
  for (size_t i = 0; i < n; ++i) {
    // Unpooling moves bits: exact, NaN payloads included.
    if (!same_element(vt, &got[i * es], &want[i * es], false)) {
      violation("output element " + std::to_string(i) + " (of " + std::to_string(n) + ") is " +
                element_str(vt, &got[i * es]) + ", reference " + element_str(vt, &want[i * es]) +
                " (kernel " + name + ")");
    }
  }
  check_outside_view(mem[2], kSentinel, "output");
}

// max_unpool_backward (poolgen_max_unpool_backward): grad_values gathered from grad_output, exact
// bits; an index outside grad_output's plane is index_out_of_range naming the first.
void check_backward(const UnpoolCase& c) {
  BackwardCall b;
  b.op = "unpool_backward";
  const ViewSpec* views[] = {&c.output, &c.indices, &c.values};
  const char* names[] = {"grad_output", "indices", "grad_values"};
  std::copy(views, views + 3, b.views);
  std::copy(names, names + 3, b.names);
  b.expect = backward_expectations(c);
  b.materialise =
      std::all_of(views, views + 3, [](const ViewSpec* v) { return materialisable(*v); });
  b.underrun = c.underrun;
  b.alias = c.alias;
  b.data = c.data;
  if (c.model.valid && c.model.representable) {
    b.index_plane = saturate(plane_of(shape_nd(c.nd), c.model.out));
  }
  b.unknown_option_device = unknown_device(c.o.device);
  b.description = describe(c);
  b.indices = [&](size_t count) { return make_indices(c, count); };
  b.call = [&](void* const data[3], bool* known) -> Status {
    if (c.c_api) {
      const CTensors t(views, data, c.faults);
      const int32_t rc = poolgen_max_unpool_backward(c.nd, t.at(0), t.at(1), t.at(2), &c.co,
                                                     c.message.ptr(), c.message.size);
      return c_status(rc, c.message, known);
    }
    const TensorView g = to_cpp(c.output, data[0]), i = to_cpp(c.indices, data[1]),
                     gv = to_cpp(c.values, data[2]);
    return c.prepared ? run_prepared(prepare_max_unpool_backward, c.nd, g, i, gv, c.o)
                      : max_unpool_backward(c.nd, g, i, gv, c.o);
  };
  b.kernel_name = [&](std::string* name) {
    return max_unpool_backward_kernel_name(c.nd, to_cpp(c.output, nullptr),
                                           static_cast<DType>(c.indices.dtype), c.values.shape,
                                           c.o, name);
  };
  b.reference = [&](const std::vector<uint8_t>& grad, const std::vector<int64_t>& indices,
                    std::vector<uint8_t>* want) {
    return ref_unpool_backward(c.nd, static_cast<DType>(c.output.dtype), c.values.shape, grad,
                               indices, c.o, want);
  };
  check_backward_call(b);
}

int run(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  const UnpoolCase c = decode(in);
  context() = describe(c);
  if (verbose()) std::fprintf(stderr, "poolgen-fuzz: %s\n", context().c_str());
  const std::string op = c.backward ? "backward:" : "";
  const std::string nd = c.nd >= 1 && c.nd <= 3 ? std::to_string(c.nd) : "X";
  feature(op + "api:" + (c.c_api ? "c" : "cpp") + ":nd" + nd + ":rank" +
          std::to_string(c.values.shape.size()));
  feature(op + "layout:" + stride_kind_name(c.values.kind) + "/" +
          stride_kind_name(c.output.kind));
  feature(op + "dtype:" + dtype_str(c.backward ? c.output.dtype : c.values.dtype) + "/" +
          dtype_str(c.indices.dtype));
  feature("model:" + (c.model.valid ? std::string("valid") : c.model.why) +
          (c.model.huge ? ":huge" : "") + ":os" + std::to_string(c.o.output_size.size()));
  check_queries(c);
  if (avoided("empty_huge") && c.model.valid && empty_huge(c.model.out)) return 0;
  if (c.backward) {
    check_backward(c);
  } else {
    check_call(c);
  }
  return 0;
}

}  // namespace
}  // namespace poolgen::fuzz

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  poolgen::fuzz::maybe_make_seeds(*argc, *argv, poolgen::fuzz::run);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return poolgen::fuzz::run(data, size);
}
