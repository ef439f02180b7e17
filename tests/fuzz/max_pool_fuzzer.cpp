// libFuzzer target: max pooling with indices through the C++ and C APIs, its output-shape and
// kernel-name queries, and its gradient (max_pool_backward, poolgen_max_pool_backward). Every
// call must either succeed with the reference's values and indices (gradients), bit for bit, or
// fail with a well-formed error of a class the call deserves; no write may leave the outputs
// (guard pages, canaries, sentinels) and inputs are read-only during the call.
#include "fuzz_common.hpp"

namespace poolgen::fuzz {
namespace {

// A backward call reuses the forward call's views: the input's becomes grad_input, the values'
// grad_output (both then take gradient dtypes), the indices' stay.
struct PoolCase {
  bool c_api = false;
  bool prepared = false;  // C++: prepared on its views, then run (decoded last)
  int nd = 2;
  PoolOptions o;  // C API: what the struct below means (poolgen.h)
  poolgen_pool_options co{};
  ViewSpec input, values, indices;
  DataRecipe data;
  uint8_t underrun = 0;  // per view: data flush against the leading guard page
  CTensorFaults faults;  // C API: a bad rank field or a NULL tensor
  CMessage message;
  ShapeModel model;
  Alias alias;  // an output placed on another argument's memory
  bool backward = false;  // max_pool_backward(grad_output = values, indices, grad_input = input)
  IndexRecipe index_recipe;  // the backward call's indices (an input there)
};

// poolgen.h's meaning of the C options, as C++ options.
PoolOptions from_c(int nd, const poolgen_pool_options& c) {
  auto list = [&](const int64_t* a) { return Ints(a, a + nd); };
  auto zero = [&](const int64_t* a) { return std::all_of(a, a + nd, [](int64_t v) { return !v; }); };
  PoolOptions o;
  o.kernel_size = list(c.kernel_size);
  o.stride = zero(c.stride) ? Ints{} : list(c.stride);
  o.padding = list(c.padding);
  o.dilation = zero(c.dilation) ? Ints{1} : list(c.dilation);
  o.ceil_mode = c.ceil_mode != 0;
  o.device = static_cast<Device>(c.device);
  return o;
}

PoolCase decode(FuzzInput& in) {
  PoolCase c;
  c.c_api = in.chance(25);
  c.nd = decode_nd(in);
  const int snd = shape_nd(c.nd);
  PoolOptions& o = c.o;
  o.kernel_size = decode_list(in, snd, c.c_api, [](FuzzInput& in, int) {
    static constexpr int64_t kK[] = {2, 3, 1, 4, 2, 3, 5, 7};
    return in.pick(kK);
  });
  if (in.chance(65)) {
    o.stride = decode_list(in, snd, c.c_api, [](FuzzInput& in, int) {
      static constexpr int64_t kS[] = {2, 1, 3, 2, 1, 4};
      return in.pick(kS);
    });
  } else {
    o.stride.clear();
  }
  if (in.chance(40)) {
    o.dilation = decode_list(in, snd, c.c_api, [](FuzzInput& in, int) {
      static constexpr int64_t kD[] = {1, 2, 3, 1};
      return in.pick(kD);
    });
  } else if (in.chance(20)) {
    o.dilation.clear();
  }
  const Ints kernel = o.kernel_size, dilation = o.dilation;
  if (in.chance(50)) {
    o.padding = decode_list(in, snd, c.c_api, [&](FuzzInput& in, int i) {
      int64_t p = in.byte() % 3;
      if (!in.chance(10)) {  // mostly within the limit of docs/semantics.md
        const i128 k = entry(kernel, i, 1), d = entry(dilation, i, 1);
        const i128 limit = snd == 3 ? k / 2 : (d * (k - 1) + 1) / 2;
        if (limit >= 0 && p > limit) p = static_cast<int64_t>(limit);
      }
      return p;
    });
  } else if (in.chance(20)) {
    o.padding.clear();
  }
  o.ceil_mode = in.chance(40);
  static constexpr Path kPaths[] = {Path::automatic, Path::general, Path::automatic, Path::winner};
  o.path = in.pick(kPaths);
  o.device = static_cast<Device>(decode_device(in));

  if (c.c_api) {
    poolgen_pool_options& co = c.co;
    auto fill = [&](int64_t* a, const Ints& l, int64_t dflt) {
      for (int i = 0; i < 3; ++i) {
        a[i] = i < snd ? (l.empty() ? dflt : entry(l, i, dflt)) : (in.chance(30) ? edge_int(in) : 0);
      }
    };
    fill(co.kernel_size, o.kernel_size, 0);
    fill(co.stride, o.stride, 0);
    fill(co.padding, o.padding, 0);
    fill(co.dilation, o.dilation, 0);
    co.ceil_mode = o.ceil_mode ? (in.chance(20) ? -7 : 1) : 0;
    co.device = static_cast<int32_t>(o.device);
    o = from_c(snd, co);  // the C API has no path: automatic
  }

  c.input.shape = decode_shape(in, snd);
  c.input.dtype = decode_value_dtype(in);
  c.input.strides = decode_strides(in, snd, c.input.shape, !c.c_api, &c.input.kind);
  if (c.c_api) normalise_for_c(&c.input);
  c.input.device = decode_device(in);
  c.input.null_data = in.chance(2);
  const int32_t index_dtype = decode_index_dtype(in);

  c.model = model_pool_shape(c.nd, c.input.shape, o);
  const Ints out = c.model.valid && c.model.representable ? c.model.out : c.input.shape;
  c.values = decode_view(in, snd, out, in.chance(3) ? in.pick(kAnyDtype) : c.input.dtype, c.c_api);
  c.indices = decode_view(in, snd, out, index_dtype, c.c_api);
  c.data = decode_recipe(in);
  c.underrun = in.byte();
  if (c.c_api) {
    c.faults = decode_c_faults(in);
    c.message = decode_message_buffer(in);
  }
  c.alias = decode_alias(in, 3, 2);
  // The backward op, decoded last: older corpus inputs, nearly all exhausted by then, keep
  // their meaning (forward calls).
  c.backward = in.chance(50);
  if (c.backward) {
    c.values.dtype = decode_gradient_dtype(in);                          // grad_output
    c.input.dtype = in.chance(3) ? in.pick(kAnyDtype) : c.values.dtype;  // grad_input
    c.index_recipe = decode_index_recipe(in);
    decode_grad_output_shape(in, snd, &c.values);
    c.alias = decode_alias(in, 3, 1);  // in the backward call's argument order
  } else if (in.chance(40)) {
    // Other frameworks' NaN rule and index formats (forward calls; decoded after all the rest,
    // for the same reason).
    static constexpr MaxRule kRules[] = {MaxRule::first_tap, MaxRule::any_nan};
    static constexpr IndexFormat kFormats[] = {
        IndexFormat::onnx,   IndexFormat::onnx_column_major, IndexFormat::tensorflow,
        IndexFormat::window, IndexFormat::tensorflow_with_batch, IndexFormat::plane};
    o.max_rule = in.pick(kRules);
    o.index_format = in.pick(kFormats);
    // Whose window arithmetic (now and then a bad code).
    static constexpr PoolRule kPoolRules[] = {PoolRule::onnx_runtime, PoolRule::tensorflow,
                                              PoolRule::pytorch};
    o.pool_rule = in.chance(5) ? static_cast<PoolRule>(in.byte() % 8) : in.pick(kPoolRules);
    c.co.max_rule = static_cast<int32_t>(o.max_rule);
    c.co.index_format = static_cast<int32_t>(o.index_format);
    c.co.pool_rule = static_cast<int32_t>(o.pool_rule);
    // Their padding: ONNX's end padding (mostly below the kernel, ONNX Runtime's limit), or
    // auto_pad (SAME or VALID; now and then a bad code, or beside a padding it forbids).
    if (in.chance(60)) {
      if (in.chance(65)) {
        o.padding_end = decode_list(in, snd, c.c_api, [&](FuzzInput& in, int i) {
          const int64_t k = static_cast<int64_t>(std::min<i128>(entry(kernel, i, 1), 8));
          return static_cast<int64_t>(in.byte() % (std::max<int64_t>(k, 1) + in.chance(10)));
        });
        if (c.c_api) o.padding_end = c_padding_end(in, snd, o.padding_end, &c.co);
      } else {
        static constexpr AutoPad kModes[] = {AutoPad::same_upper, AutoPad::same_lower,
                                             AutoPad::valid, AutoPad::same_upper};
        o.auto_pad = in.chance(5) ? static_cast<AutoPad>(in.byte() % 8) : in.pick(kModes);
        if (!in.chance(10)) {  // mostly as these modes want it
          o.padding.clear();
          if (o.auto_pad != AutoPad::valid) o.ceil_mode = false;
          std::fill(c.co.padding, c.co.padding + 3, 0);
          if (!o.ceil_mode) c.co.ceil_mode = 0;
        }
        c.co.auto_pad = static_cast<int32_t>(o.auto_pad);
      }
    }
    // The rule, the padding (and ceil_mode) move the output's shape: the model again, and views
    // of it.
    c.model = model_pool_shape(c.nd, c.input.shape, o);
    const Ints pooled = c.model.valid && c.model.representable ? c.model.out : c.input.shape;
    c.values = decode_view(in, snd, pooled, c.values.dtype, c.c_api);
    c.indices = decode_view(in, snd, pooled, c.indices.dtype, c.c_api);
  }
  c.prepared = !c.c_api && in.chance(30);  // last: earlier inputs keep their meaning
  return c;
}

std::string describe(const PoolCase& c) {
  std::ostringstream os;
  os << (c.c_api ? "C API" : c.prepared ? "C++ API, prepared" : "C++ API");
  if (c.backward) {
    os << " max_pool_backward nd " << c.nd << "; " << describe("grad_output", c.values) << "; "
       << describe("indices", c.indices) << "; " << describe("grad_input", c.input)
       << "; indices style " << static_cast<int>(c.index_recipe.style);
  } else {
    os << " max_pool nd " << c.nd << "; " << describe("input", c.input) << "; "
       << describe("values", c.values) << "; " << describe("indices", c.indices);
  }
  os << "; kernel_size " << str(c.o.kernel_size) << " stride "
     << str(c.o.stride) << " padding " << str(c.o.padding) << " dilation " << str(c.o.dilation)
     << " ceil_mode " << c.o.ceil_mode << " path " << static_cast<int>(c.o.path) << " device "
     << static_cast<int>(c.o.device) << " max_rule " << static_cast<int>(c.o.max_rule)
     << " index_format " << static_cast<int>(c.o.index_format) << " padding_end "
     << str(c.o.padding_end) << " auto_pad " << static_cast<int>(c.o.auto_pad) << " pool_rule "
     << static_cast<int>(c.o.pool_rule);
  if (c.c_api) {
    os << "; C padding_end_given " << c.co.padding_end_given << " padding_end "
       << str(Ints(c.co.padding_end, c.co.padding_end + 3)) << " ceil_mode " << c.co.ceil_mode;
  }
  if (c.faults.rank_view >= 0) os << "; C rank of tensor " << c.faults.rank_view << " = " << c.faults.rank;
  if (c.faults.null_view >= 0) os << "; C tensor " << c.faults.null_view << " is NULL";
  os << "; model " << (c.model.valid ? "valid " + str(c.model.out) : "invalid (" + c.model.why + ")")
     << (c.model.huge ? " huge" : "");
  return os.str();
}

bool ref_safe(const PoolCase& c) {
  return within(c.input.shape, kRefBound) && within(c.o.kernel_size, kRefBound) &&
         within(c.o.stride, kRefBound) && within(c.o.padding, kRefBound) &&
         within(c.o.dilation, kRefBound) && within(c.o.padding_end, kRefBound);
}

// The output-shape and kernel-name queries.
void check_queries(const PoolCase& c) {
  const ShapeModel& m = c.model;
  if (ref_safe(c)) check_model_against_reference(c.nd, c.input.shape, c.o, m, ref::max_pool_output_shape);
  if (c.c_api) {
    const int32_t rank = c.faults.rank_view == 0 ? c.faults.rank : static_cast<int32_t>(c.input.shape.size());
    // Exactly `rank` entries each way (up to 8): reading or writing past them faults.
    const size_t n = static_cast<size_t>(std::clamp<int32_t>(rank, 0, 8));
    GuardedBuffer shape_in(n * 8), shape_out(std::min<size_t>(n, 5) * 8);
    for (size_t i = 0; i < n; ++i) {
      const int64_t e = i < c.input.shape.size() ? c.input.shape[i] : 1;
      std::memcpy(shape_in.data() + 8 * i, &e, 8);
    }
    shape_in.protect();
    FuzzInput none(nullptr, 0);
    const CMessage msg = decode_message_buffer(none);  // 1024 bytes
    const int32_t rc = poolgen_max_pool_output_shape(
        c.nd, rank, reinterpret_cast<const int64_t*>(shape_in.data()), &c.co,
        reinterpret_cast<int64_t*>(shape_out.data()), msg.ptr(), msg.size);
    bool full = false;
    const Status st = c_status(rc, msg, &full);
    Ints out;
    if (st.ok()) {
      out.resize(c.input.shape.size());
      std::memcpy(out.data(), shape_out.data(), out.size() * 8);
    }
    ShapeModel bad_rank;  // a rank override: refused (after the options, which may hit a limit)
    bad_rank.limit = m.limit;
    check_shape_query("poolgen_max_pool_output_shape", c.faults.rank_view == 0 ? bad_rank : m, st, out,
                      full);
  } else {
    Ints out;
    const Status st = max_pool_output_shape(c.nd, c.input.shape, c.o, &out);
    check_shape_query("max_pool_output_shape", m, st, out);
  }
  // Kernel names: never a crash; a refused shape is refused here too.
  if (avoided("empty_huge") && m.valid && empty_huge(m.out)) return;
  std::string name;
  if (c.backward) {
    const Status st =
        max_pool_backward_kernel_name(c.nd, to_cpp(c.values, nullptr),
                                      static_cast<DType>(c.indices.dtype), c.input.shape, c.o,
                                      &name);
    check_message(st);
    if (st.ok() && (name.empty() || !m.valid)) {
      violation("max_pool_backward_kernel_name accepted: " + name);
    }
    return;
  }
  Status st = max_pool_kernel_name(c.nd, to_cpp(c.input, nullptr), static_cast<DType>(c.indices.dtype),
                                   c.o, &name);
  check_message(st);
  if (st.ok() && (name.empty() || !m.valid)) violation("max_pool_kernel_name accepted: " + name);
  name.clear();
  st = max_pool_kernel_name(c.nd, c.input.shape, c.o, &name);
  check_message(st);
  if (st.ok() && (name.empty() || !m.valid)) violation("max_pool_kernel_name(shape) accepted: " + name);
}

// What the shapes, the options and the C API's faults alone say (either op).
Expect shape_expectations(const PoolCase& c) {
  Expect e;
  const ShapeModel& m = c.model;
  if (!m.valid) e.add(&e.invalid, "shape rules: " + m.why);
  if (m.limit) {
    e.add(&e.invalid_ok, "beyond the library's limits");
    e.add(&e.unsupported_ok, "beyond the library's limits");
  }
  if (m.valid && !m.representable) e.add(&e.fail, "output extent beyond int64");
  if (c.faults.rank_view >= 0) e.add(&e.invalid, "C rank " + std::to_string(c.faults.rank));
  if (c.faults.null_view >= 0) e.add(&e.invalid, "C tensor NULL");
  if (c.o.device == Device::cuda) e.add(&e.fail, "options.device cuda (no CUDA here)");
  return e;
}

// The largest index the forward call's index format can write (docs/semantics.md, "Other
// frameworks"): the element count of its frame less one.
i128 largest_index(const PoolCase& c) {
  const int nd = shape_nd(c.nd);
  const Ints& shape = c.input.shape;
  const i128 plane = plane_of(nd, shape);
  const i128 channels = shape[shape.size() - nd - 1];
  const i128 batch = shape.size() == static_cast<size_t>(nd) + 2 ? shape[0] : 1;
  switch (c.o.index_format) {
    case IndexFormat::onnx:
    case IndexFormat::onnx_column_major:
    case IndexFormat::tensorflow_with_batch:
      return sat_mul(sat_mul(batch, channels), plane) - 1;
    case IndexFormat::tensorflow: return batch == 0 ? -1 : sat_mul(channels, plane) - 1;
    case IndexFormat::window: {
      i128 taps = 1;
      for (int i = 0; i < nd; ++i) taps = sat_mul(taps, entry(c.o.kernel_size, i, 1));
      return taps - 1;
    }
    case IndexFormat::plane: break;
  }
  return plane - 1;
}

Expect expectations(const PoolCase& c) {
  Expect e = shape_expectations(c);
  const ShapeModel& m = c.model;
  const bool i64_or_i32 = c.indices.dtype == 1 || c.indices.dtype == 8;
  if (!valid_dtype(c.input.dtype)) e.add(&e.invalid, "input dtype code");
  if (!i64_or_i32) e.add(&e.invalid, "index dtype");
  const Ints* out = m.valid && m.representable ? &m.out : nullptr;
  expect_view(e, "input", c.input, c.input.dtype, nullptr, false);
  expect_view(e, "values", c.values, c.input.dtype, out, true);
  expect_view(e, "indices", c.indices, c.indices.dtype, out, true);
  // The kernels find plane offsets first, whatever the format.
  if (m.valid && c.indices.dtype == 8 && plane_of(shape_nd(c.nd), c.input.shape) > kI32Max) {
    e.add(&e.invalid, "i32 indices for a plane of 2^31 or more");
  }
  if (m.valid && c.indices.dtype == 8 && c.o.index_format != IndexFormat::plane &&
      largest_index(c) > kI32Max) {  // (for plane offsets, the test above)
    e.add(&e.invalid, "i32 indices reaching 2^31 or more in the index format");
  }
  if (valid_dtype(c.input.dtype) && i64_or_i32 &&
      !test::pool_kernel_built(static_cast<DType>(c.input.dtype),
                               static_cast<DType>(c.indices.dtype))) {
    e.add(&e.needs_unsupported, "no kernel built for this dtype");
  }
  return e;
}

// The backward call: grad_output (the values' view) a float, the indices of the pooled shape,
// grad_input (the input's view) in grad_output's dtype.
Expect backward_expectations(const PoolCase& c) {
  Expect e = shape_expectations(c);
  const ShapeModel& m = c.model;
  const ViewSpec &grad = c.values, &grad_input = c.input;
  const bool i64_or_i32 = c.indices.dtype == 1 || c.indices.dtype == 8;
  const bool float_grad = valid_dtype(grad.dtype) && is_float_dtype(static_cast<DType>(grad.dtype));
  if (!valid_dtype(grad.dtype)) e.add(&e.invalid, "grad_output dtype code");
  if (valid_dtype(grad.dtype) && !float_grad) e.add(&e.invalid, "grad_output not a float");
  if (!i64_or_i32) e.add(&e.invalid, "index dtype");
  const Ints* out = m.valid && m.representable ? &m.out : nullptr;
  expect_view(e, "grad_output", grad, grad.dtype, out, false);
  expect_view(e, "indices", c.indices, c.indices.dtype, out, false);
  expect_view(e, "grad_input", grad_input, grad.dtype, nullptr, true);
  if (m.valid && c.indices.dtype == 8 && plane_of(shape_nd(c.nd), grad_input.shape) > kI32Max) {
    e.add(&e.invalid, "i32 indices for a plane of 2^31 or more");
  }
  if (float_grad && i64_or_i32 &&
      !test::pool_backward_kernel_built(static_cast<DType>(grad.dtype),
                                        static_cast<DType>(c.indices.dtype))) {
    e.add(&e.needs_unsupported, "no kernel built for this dtype");
  }
  return e;
}

// Window taps per output element (bounded by the input extents), for the work estimate.
int64_t window_taps(const PoolCase& c) {
  const int nd = shape_nd(c.nd);
  i128 taps = 1;
  for (int i = 0; i < nd; ++i) {
    const i128 k = entry(c.o.kernel_size, i, 1);
    const size_t d = c.input.shape.size() - std::min<size_t>(c.input.shape.size(), nd - i);
    const i128 in = d < c.input.shape.size() ? c.input.shape[d] : 1;
    taps = sat_mul(taps, std::max<i128>(1, std::min(k, in)));
  }
  return saturate(taps);
}

// The volume of the dilated window: the product of d * (k - 1) + 1 over the dimensions.
i128 window_volume(const PoolCase& c) {
  i128 volume = 1;
  for (int i = 0; i < shape_nd(c.nd); ++i) {
    const i128 k = entry(c.o.kernel_size, i, 1), d = entry(c.o.dilation, i, 1);
    volume = sat_mul(volume, d * (k - 1) + 1);
  }
  return volume;
}

void check_call(const PoolCase& c) {
  // POOLGEN_FUZZ_AVOID=big_window: no calls with windows of more than 2^24 elements (the general
  // kernels allocate a buffer of the window's size: internal errors beyond 2^31 bytes,
  // tests/fuzz/regressions).
  if (avoided("big_window") && c.model.valid && window_volume(c) > (i128(1) << 24)) return;
  Expect e = expectations(c);
  const ViewSpec* views[] = {&c.input, &c.values, &c.indices};
  const char* names[] = {"input", "values", "indices"};
  bool materialise = std::all_of(views, views + 3, [](const ViewSpec* v) { return materialisable(*v); });
  if (materialise && c.model.valid) {
    materialise = sat_mul(geometry(c.values).elements, window_taps(c)) <= kMaxWork;
  }
  Memory mem[3];
  allocate_views(views, names, 3, 2, materialise, c.underrun, e, mem);
  apply_alias(c.alias, views, mem);
  expect_apart(views, names, mem, 3, 2, e);
  context() = describe(c) + "; expect " + (e.reasons.empty() ? "success" : e.reasons);

  std::vector<uint8_t> packed_input;
  const DType vt = static_cast<DType>(c.input.dtype);
  if (mem[0].buffer && !mem[0].offsets.empty()) {
    scatter_into(mem[0], make_values(vt, mem[0].elem, mem[0].offsets.size(), c.data));
    packed_input = gather(mem[0]);
  }
  // The reference's results, computed once. A window without a tap inside has no index in
  // another format under PyTorch's rule, none in the window format, and no place under
  // TensorFlow's (docs/semantics.md): refused before anything is written. The reference says,
  // before the call, whether there is one.
  std::vector<uint8_t> want_values;
  std::vector<int64_t> want_indices;
  Status rs;
  bool referenced = false;
  const auto reference = [&]() -> const Status& {
    if (!referenced) {
      rs = ref_pool(c.nd, vt, c.input.shape, packed_input, c.o, &want_values, &want_indices);
      referenced = true;
    }
    return rs;
  };
  // (Not beyond the library's limits, which it refuses first: SAME pads a window of any size,
  // whose taps the reference would walk. A dtype without a kernel may be refused either way.)
  const bool empty_window = materialise &&
                            c.model.valid && !c.model.limit && !e.invalid && !e.fail &&
                            geometry(c.values).elements > 0 &&
                            reference().code() == Code::invalid_argument;
  if (empty_window) {
    feature("empty_window_refused");
    e.add(&e.invalid, "a window without a tap inside, which the rule or format cannot index");
  }

  if (mem[0].buffer) mem[0].buffer->protect();  // any write to the input faults
  Status st;
  bool known = true;
  if (c.c_api) {
    void* const data[3] = {mem[0].data, mem[1].data, mem[2].data};
    const CTensors t(views, data, c.faults);
    const int32_t rc = poolgen_max_pool(c.nd, t.at(0), t.at(1), t.at(2), &c.co, c.message.ptr(),
                                        c.message.size);
    st = c_status(rc, c.message, &known);
  } else {
    const TensorView in = to_cpp(c.input, mem[0].data), values = to_cpp(c.values, mem[1].data),
                     indices = to_cpp(c.indices, mem[2].data);
    st = c.prepared ? run_prepared(prepare_max_pool, c.nd, in, values, indices, c.o)
                    : max_pool(c.nd, in, values, indices, c.o);
  }
  if (mem[0].buffer) mem[0].buffer->unprotect();
  for (int i = 0; i < 3; ++i) check_canary(mem[i], names[i], st);
  check_message(st, known);
  check_outcome(st, e, false);
  feature(std::string("outcome:") + code_name(st.code()) +
          (c.c_api ? ":c" : c.prepared ? ":prepared" : ":cpp"));
  if (st.code() == Code::index_out_of_range) {  // after the kernel: the views may be written
    check_outside_view(mem[1], kSentinel, "values");
    check_outside_view(mem[2], kSentinel, "indices");
    return;
  }
  if (!st.ok()) {
    check_untouched(mem[1], kSentinel, "values", st);
    check_untouched(mem[2], kSentinel, "indices", st);
    return;
  }

  // The kernel-name query agrees that a kernel serves this call.
  std::string name;
  const Status kn = max_pool_kernel_name(c.nd, to_cpp(c.input, nullptr),
                                         static_cast<DType>(c.indices.dtype), c.o, &name);
  if (!kn.ok()) violation("max_pool succeeded but max_pool_kernel_name refuses: " + kn.message());
  if (c.o.device != Device::cpu) {
    note("options.device code accepted",
         "an unknown options.device code " + std::to_string(static_cast<int>(c.o.device)) +
             " runs on the CPU");
  }
  feature("ok:" + name);
  if (!materialise || geometry(c.values).elements == 0) return;

  if (!reference().ok()) violation("library succeeded, reference refuses: " + rs.message());
  const std::vector<uint8_t> got_values = gather(mem[1]);
  const std::vector<uint8_t> got_idx = gather(mem[2]);
  const size_t n = want_indices.size(), es = dtype_size(vt);
  if (got_values.size() != n * es || mem[2].offsets.size() != n) violation("output element count");
  for (size_t i = 0; i < n; ++i) {
    int64_t got_index;
    if (c.indices.dtype == 8) {
      int32_t v;
      std::memcpy(&v, &got_idx[i * 4], 4);
      got_index = v;
    } else {
      std::memcpy(&got_index, &got_idx[i * 8], 8);
    }
    if (!same_element(vt, &got_values[i * es], &want_values[i * es], true) ||
        got_index != want_indices[i]) {
      violation("element " + std::to_string(i) + " (of " + std::to_string(n) + "): value " +
                element_str(vt, &got_values[i * es]) + " index " + std::to_string(got_index) +
                ", reference value " + element_str(vt, &want_values[i * es]) + " index " +
                std::to_string(want_indices[i]) + " (kernel " + name + ")");
    }
  }
  check_outside_view(mem[1], kSentinel, "values");
  check_outside_view(mem[2], kSentinel, "indices");
}

// max_pool_backward (poolgen_max_pool_backward): grad_input against the reference's sums, in
// its order and precision (NaN equal to NaN: payloads of sums may differ), indices outside the
// plane dropped.
void check_backward(const PoolCase& c) {
  if (avoided("big_window") && c.model.valid && window_volume(c) > (i128(1) << 24)) return;
  BackwardCall b;
  b.op = "pool_backward";
  const ViewSpec* views[] = {&c.values, &c.indices, &c.input};
  const char* names[] = {"grad_output", "indices", "grad_input"};
  std::copy(views, views + 3, b.views);
  std::copy(names, names + 3, b.names);
  b.expect = backward_expectations(c);
  b.materialise =
      std::all_of(views, views + 3, [](const ViewSpec* v) { return materialisable(*v); });
  b.underrun = c.underrun;
  b.alias = c.alias;
  b.data = c.data;
  b.nan_equal = true;
  b.unknown_option_device = unknown_device(c.o.device);
  b.description = describe(c);
  const int nd = shape_nd(c.nd);
  const bool known = c.model.valid && c.model.representable;
  b.indices = [&](size_t count) {
    return make_indices(c.index_recipe, nd, known ? c.model.out : c.values.shape,
                        known ? &c.input.shape : nullptr,
                        {&c.o.kernel_size, &c.o.stride, &c.o.padding, &c.o.dilation}, count);
  };
  b.call = [&](void* const data[3], bool* known_message) -> Status {
    if (c.c_api) {
      const CTensors t(views, data, c.faults);
      const int32_t rc = poolgen_max_pool_backward(c.nd, t.at(0), t.at(1), t.at(2), &c.co,
                                                   c.message.ptr(), c.message.size);
      return c_status(rc, c.message, known_message);
    }
    const TensorView g = to_cpp(c.values, data[0]), i = to_cpp(c.indices, data[1]),
                     gi = to_cpp(c.input, data[2]);
    return c.prepared ? run_prepared(prepare_max_pool_backward, c.nd, g, i, gi, c.o)
                      : max_pool_backward(c.nd, g, i, gi, c.o);
  };
  b.kernel_name = [&](std::string* name) {
    return max_pool_backward_kernel_name(c.nd, to_cpp(c.values, nullptr),
                                         static_cast<DType>(c.indices.dtype), c.input.shape, c.o,
                                         name);
  };
  b.reference = [&](const std::vector<uint8_t>& grad, const std::vector<int64_t>& indices,
                    std::vector<uint8_t>* want) {
    return ref_pool_backward(c.nd, static_cast<DType>(c.values.dtype), c.input.shape, grad,
                             indices, c.o, want);
  };
  check_backward_call(b);
}

int run(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  const PoolCase c = decode(in);
  context() = describe(c);
  // Sanitizer reports stop the process before a violation message: say what is being called.
  if (verbose()) std::fprintf(stderr, "poolgen-fuzz: %s\n", context().c_str());
  const std::string op = c.backward ? "backward:" : "";
  const std::string nd = c.nd >= 1 && c.nd <= 3 ? std::to_string(c.nd) : "X";
  feature(op + "api:" + (c.c_api ? "c" : "cpp") + ":nd" + nd + ":rank" +
          std::to_string(c.input.shape.size()));
  feature(op + "layout:" + stride_kind_name(c.input.kind) + "/" +
          stride_kind_name(c.values.kind));
  feature(op + "dtype:" + dtype_str(c.backward ? c.values.dtype : c.input.dtype) + "/" +
          dtype_str(c.indices.dtype));
  feature("model:" + (c.model.valid ? std::string("valid") : c.model.why) +
          (c.model.huge ? ":huge" : ""));
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
