// poolgen as an OpenVINO extension (core.add_extension, by poolgen.openvino): ONNX's MaxPool with
// an Indices output and MaxUnpool (opsets 9 and 11, with and without output_shape) become
// poolgen's ops, which OpenVINO's CPU device runs through their evaluate(), with ONNX Runtime's
// results bit for bit (pool_rule onnx_runtime, first-tap maxima, ONNX's index formats; unpooling's
// output size as ONNX Runtime computes it: docs/semantics.md). OpenVINO cannot convert
// MaxUnpool at all without it. A MaxPool without an Indices output stays OpenVINO's own (opset
// 8's MaxPool, as its ONNX frontend converts it). Built against the installed openvino wheel
// (python/setup.py).
#include <openvino/core/extension.hpp>
#include <openvino/core/op_extension.hpp>
#include <openvino/frontend/extension/decoder_transformation.hpp>
#include <openvino/frontend/onnx/extension/conversion.hpp>
#include <openvino/op/constant.hpp>
#include <openvino/op/max_pool.hpp>
#include <openvino/op/op.hpp>
#include <openvino/op/util/framework_node.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "../bridge/bridge.hpp"

namespace poolgen_openvino {
namespace {

using Ints = std::vector<int64_t>;

// Calls served, for poolgen.openvino.stats(): pooling's, unpooling's.
std::atomic<int64_t> served[2];

// poolgen runs on one thread inside OpenVINO unless set_num_threads says otherwise: evaluate()
// runs on one of OpenVINO's threads while its other workers wait spinning, and poolgen's own
// threads competing with them made every op slower (docs/openvino.md, "Speed").
std::atomic<bool> threads_chosen{false};
void choose_threads(int n) {
  threads_chosen = true;
  poolgen_set_num_threads(n);
}
void default_threads() {
  if (!threads_chosen.load(std::memory_order_relaxed)) choose_threads(1);
}

int dtype_of(const ov::element::Type& t) {
  switch (t) {
    case ov::element::f32: return POOLGEN_F32;
    case ov::element::f64: return POOLGEN_F64;
    case ov::element::f16: return POOLGEN_F16;
    case ov::element::bf16: return POOLGEN_BF16;
    case ov::element::i8: return POOLGEN_I8;
    case ov::element::u8: return POOLGEN_U8;
    case ov::element::i16: return POOLGEN_I16;
    case ov::element::i32: return POOLGEN_I32;
    case ov::element::i64: return POOLGEN_I64;
    default: return -1;  // poolgen names it in its refusal
  }
}

// A contiguous NC(spatial) tensor as poolgen's view (data null for shape questions).
poolgen_tensor view(const void* data, const ov::element::Type& type, const ov::Shape& shape) {
  poolgen_tensor t{};
  t.data = const_cast<void*>(data);
  t.dtype = dtype_of(type);
  t.rank = int32_t(shape.size());
  int64_t stride = 1;
  for (int d = t.rank - 1; d >= 0; --d) {
    t.shape[d] = int64_t(shape[d]);
    t.strides[d] = stride;
    stride *= int64_t(shape[d]);
  }
  return t;
}

// Runs one poolgen call, f(message, size); a failure is OpenVINO's exception with poolgen's
// message, or where `quiet`, false.
template <typename F>
bool call(const char* op, F f, bool quiet = false) {
  const poolgen_bridge::Outcome r = poolgen_bridge::call(f);
  if (!r.ok() && !quiet) OPENVINO_THROW("poolgen ", op, ": ", r.message);
  return r.ok();
}

// A shape for validate_and_infer_types: `compute(&shape, quiet)`'s where poolgen accepts the
// call's arguments, else of unknown extents (poolgen's error comes when the op runs, in
// OpenVINO's exception, rather than lost in the frontend's conversion report).
template <typename F>
ov::PartialShape shape_or_dynamic(const ov::PartialShape& in, F compute) {
  ov::Shape shape;
  return in.is_static() && compute(in.to_shape(), &shape) ? ov::PartialShape(shape)
                                                           : ov::PartialShape::dynamic(in.rank());
}

// ONNX's window attributes, kept as the node has them.
struct Window {
  Ints kernel, strides, pads, dilations;
  std::string auto_pad = "NOTSET";
  int64_t ceil_mode = 0, storage_order = 0;

  explicit Window(const ov::frontend::NodeContext* c = nullptr) {
    if (!c) return;
    kernel = c->get_attribute<Ints>("kernel_shape");
    strides = c->get_attribute<Ints>("strides", Ints{});
    pads = c->get_attribute<Ints>("pads", Ints{});
    dilations = c->get_attribute<Ints>("dilations", Ints{});
    auto_pad = c->get_attribute<std::string>("auto_pad", "NOTSET");
    ceil_mode = c->get_attribute<int64_t>("ceil_mode", 0);
    storage_order = c->get_attribute<int64_t>("storage_order", 0);
  }
  void visit(ov::AttributeVisitor& v) {
    v.on_attribute("kernel_shape", kernel);
    v.on_attribute("strides", strides);
    v.on_attribute("pads", pads);
    v.on_attribute("dilations", dilations);
    v.on_attribute("auto_pad", auto_pad);
    v.on_attribute("ceil_mode", ceil_mode);
    v.on_attribute("storage_order", storage_order);
  }
  int nd() const { return int(kernel.size()); }
  // Entry i of an ONNX list, or its default where the list is absent.
  static int64_t at(const Ints& v, size_t i, int64_t dflt) { return i < v.size() ? v[i] : dflt; }
  // poolgen's window fields (pooling's and unpooling's share these names); the pads only where
  // auto_pad leaves them to the node.
  template <typename Options>
  void fill(Options& o) const {
    const bool explicit_pads = auto_pad == "NOTSET" || auto_pad.empty();
    for (int i = 0; i < nd() && i < 3; ++i) {
      o.kernel_size[i] = kernel[i];
      o.stride[i] = at(strides, i, 1);
      o.padding[i] = explicit_pads ? at(pads, i, 0) : 0;
      o.padding_end[i] = explicit_pads ? at(pads, nd() + i, 0) : 0;
    }
    o.padding_end_given = explicit_pads;
  }
  poolgen_pool_options pool_options() const {
    poolgen_pool_options o{};
    fill(o);
    for (int i = 0; i < nd() && i < 3; ++i) o.dilation[i] = at(dilations, i, 1);
    o.ceil_mode = int32_t(ceil_mode);
    o.auto_pad = auto_pad == "SAME_UPPER" ? POOLGEN_SAME_UPPER
                 : auto_pad == "SAME_LOWER" ? POOLGEN_SAME_LOWER
                 : auto_pad == "VALID"      ? POOLGEN_VALID
                                            : POOLGEN_EXPLICIT_PADDING;
    o.max_rule = POOLGEN_MAX_FIRST_TAP;
    o.index_format = storage_order ? POOLGEN_INDEX_ONNX_COLUMN_MAJOR : POOLGEN_INDEX_ONNX;
    o.pool_rule = POOLGEN_POOL_RULE_ONNX_RUNTIME;
    return o;
  }
};

// An op's output shape for input extents `in`, by poolgen's query(rank, extents, out, message,
// size); false (`quiet`) or OpenVINO's exception where poolgen refuses the arguments.
template <typename Query>
bool output_shape(const char* op, const ov::Shape& in, ov::Shape* shape, bool quiet,
                  Query query) {
  const poolgen_tensor t = view(nullptr, ov::element::f32, in);
  int64_t out[5] = {};
  const bool ok = call(op, [&](char* m, size_t n) { return query(t.rank, t.shape, out, m, n); },
                       quiet);
  *shape = ov::Shape(out, out + in.size());
  return ok;
}

// ONNX's MaxPool with Indices: (values, int64 indices), both of the pooled shape.
class MaxPool : public ov::op::Op {
 public:
  OPENVINO_OP("PoolgenMaxPool", "poolgen");
  MaxPool() = default;
  MaxPool(const ov::Output<ov::Node>& x, Window w) : Op({x}), window_(std::move(w)) {
    constructor_validate_and_infer_types();
  }

  void validate_and_infer_types() override {
    const ov::PartialShape out = shape_or_dynamic(
        get_input_partial_shape(0),
        [&](const ov::Shape& in, ov::Shape* shape) { return pooled(in, shape, true); });
    set_output_type(0, get_input_element_type(0), out);
    set_output_type(1, ov::element::i64, out);
  }

  std::shared_ptr<ov::Node> clone_with_new_inputs(const ov::OutputVector& args) const override {
    return std::make_shared<MaxPool>(args.at(0), window_);
  }
  bool visit_attributes(ov::AttributeVisitor& v) override {
    window_.visit(v);
    return true;
  }
  bool has_evaluate() const override { return true; }

  bool evaluate(ov::TensorVector& outputs, const ov::TensorVector& inputs) const override {
    default_threads();
    const ov::Tensor& x = inputs[0];
    ov::Shape shape;
    pooled(x.get_shape(), &shape);
    outputs[0].set_shape(shape);
    outputs[1].set_shape(shape);
    const poolgen_tensor in = view(x.data(), x.get_element_type(), x.get_shape()),
                         values = view(outputs[0].data(), x.get_element_type(), shape),
                         indices = view(outputs[1].data(), ov::element::i64, shape);
    const poolgen_pool_options o = window_.pool_options();
    call("MaxPool", [&](char* m, size_t n) {
      return poolgen_max_pool(window_.nd(), &in, &values, &indices, &o, m, n);
    });
    served[0].fetch_add(1, std::memory_order_relaxed);
    return true;
  }

 private:
  bool pooled(const ov::Shape& in, ov::Shape* shape, bool quiet = false) const {
    const poolgen_pool_options o = window_.pool_options();
    return output_shape("MaxPool", in, shape, quiet,
                        [&](int32_t rank, const int64_t* extents, int64_t* out, char* m,
                            size_t n) {
                          return poolgen_max_pool_output_shape(window_.nd(), rank, extents, &o,
                                                               out, m, n);
                        });
  }

  Window window_;
};

// ONNX's MaxUnpool: X at I in a zero tensor of output_shape (input 2, the whole shape) or of
// the size ONNX Runtime computes from the window.
class MaxUnpool : public ov::op::Op {
 public:
  OPENVINO_OP("PoolgenMaxUnpool", "poolgen");
  MaxUnpool() = default;
  MaxUnpool(const ov::OutputVector& inputs, Window w) : Op(inputs), window_(std::move(w)) {
    constructor_validate_and_infer_types();
  }

  void validate_and_infer_types() override {
    Ints given;
    if (get_input_size() == 3) {
      const auto size = ov::as_type_ptr<ov::op::v0::Constant>(
          input_value(2).get_node_shared_ptr());
      if (size) given = size->cast_vector<int64_t>();
    }
    const bool known = get_input_size() < 3 || !given.empty();
    const ov::PartialShape out = shape_or_dynamic(
        get_input_partial_shape(0), [&](const ov::Shape& in, ov::Shape* shape) {
          return known && unpooled(in, given.empty() ? nullptr : &given, shape, true);
        });
    set_output_type(0, get_input_element_type(0), out);
  }

  std::shared_ptr<ov::Node> clone_with_new_inputs(const ov::OutputVector& args) const override {
    return std::make_shared<MaxUnpool>(args, window_);
  }
  bool visit_attributes(ov::AttributeVisitor& v) override {
    window_.visit(v);
    return true;
  }
  bool has_evaluate() const override { return true; }

  bool evaluate(ov::TensorVector& outputs, const ov::TensorVector& inputs) const override {
    default_threads();
    const ov::Tensor &x = inputs[0], &i = inputs[1];
    Ints given;
    if (inputs.size() == 3) {
      // (OpenVINO's CPU device may hand int64 tensors over as int32.)
      const ov::Tensor& s = inputs[2];
      if (s.get_element_type() == ov::element::i32) {
        given.assign(s.data<const int32_t>(), s.data<const int32_t>() + s.get_size());
      } else {
        OPENVINO_ASSERT(s.get_element_type() == ov::element::i64,
                        "poolgen MaxUnpool: output_shape must be int64, got ",
                        s.get_element_type());
        given.assign(s.data<const int64_t>(), s.data<const int64_t>() + s.get_size());
      }
    }
    ov::Shape shape;
    unpooled(x.get_shape(), inputs.size() == 3 ? &given : nullptr, &shape);
    outputs[0].set_shape(shape);
    const poolgen_tensor values = view(x.data(), x.get_element_type(), x.get_shape()),
                         indices = view(i.data(), i.get_element_type(), i.get_shape()),
                         out = view(outputs[0].data(), x.get_element_type(), shape);
    const poolgen_unpool_options o = options(given.empty() ? nullptr : &given);
    call("MaxUnpool", [&](char* m, size_t n) {
      return poolgen_max_unpool(window_.nd(), &values, &indices, &out, &o, m, n);
    });
    served[1].fetch_add(1, std::memory_order_relaxed);
    return true;
  }

 private:
  poolgen_unpool_options options(const Ints* given) const {
    poolgen_unpool_options o{};
    window_.fill(o);
    o.output_size_rule = POOLGEN_OUTPUT_SIZE_ONNX_RUNTIME;
    o.index_format = POOLGEN_INDEX_ONNX;
    if (given) {
      o.output_size_len = int32_t(std::min<size_t>(given->size(), 5));
      std::copy_n(given->begin(), o.output_size_len, o.output_size);
    }
    return o;
  }

  bool unpooled(const ov::Shape& in, const Ints* given, ov::Shape* shape,
                bool quiet = false) const {
    const poolgen_unpool_options o = options(given);
    return output_shape("MaxUnpool", in, shape, quiet,
                        [&](int32_t rank, const int64_t* extents, int64_t* out, char* m,
                            size_t n) {
                          return poolgen_max_unpool_output_shape(window_.nd(), rank, extents,
                                                                 &o, out, m, n);
                        });
  }

  Window window_;
};

// Whether some ONNX MaxPool with an Indices output reads each tensor (by name) that MaxPool
// nodes read, in the model being read on this thread. A converter sees a node's attributes and
// inputs but not its outputs; the decoded model (ONNX's nodes still whole) shows the outputs, and
// a tensor name is what both stages know of a node.
thread_local std::map<std::string, bool> indices_wanted;

bool note_indices_wanted(std::shared_ptr<ov::Model> decoded) {
  indices_wanted.clear();
  for (const auto& node : decoded->get_ordered_ops()) {
    const auto onnx = ov::as_type_ptr<ov::op::util::FrameworkNode>(node);
    if (!onnx || onnx->get_attrs().get_type_name() != "MaxPool") continue;
    for (const std::string& name : node->input_value(0).get_names()) {
      indices_wanted[name] = indices_wanted[name] || node->get_output_size() > 1;
    }
  }
  return false;  // the model is unchanged
}

// OpenVINO's own MaxPool for a node without Indices, as its ONNX frontend makes it.
ov::Output<ov::Node> openvino_max_pool(const ov::Output<ov::Node>& x, const Window& w) {
  const size_t nd = w.kernel.size();
  ov::Strides strides(nd), dilations(nd);
  ov::Shape begin(nd), end(nd), kernel(nd);
  for (size_t i = 0; i < nd; ++i) {
    strides[i] = size_t(Window::at(w.strides, i, 1));
    dilations[i] = size_t(Window::at(w.dilations, i, 1));
    begin[i] = size_t(Window::at(w.pads, i, 0));
    end[i] = size_t(Window::at(w.pads, nd + i, 0));
    kernel[i] = size_t(w.kernel[i]);
  }
  const ov::op::PadType pad = w.auto_pad == "SAME_UPPER"   ? ov::op::PadType::SAME_UPPER
                              : w.auto_pad == "SAME_LOWER" ? ov::op::PadType::SAME_LOWER
                              : w.auto_pad == "VALID"      ? ov::op::PadType::VALID
                                                           : ov::op::PadType::EXPLICIT;
  return std::make_shared<ov::op::v8::MaxPool>(
             x, strides, dilations, begin, end, kernel,
             w.ceil_mode ? ov::op::RoundingType::CEIL : ov::op::RoundingType::FLOOR, pad)
      ->output(0);
}

ov::OutputVector convert_max_pool(const ov::frontend::NodeContext& c) {
  const Window w(&c);
  const ov::Output<ov::Node> x = c.get_input(0);
  bool wanted = false, known = false;  // (a tensor the decoded model did not name: poolgen's)
  for (const std::string& name : x.get_names()) {
    const auto found = indices_wanted.find(name);
    if (found == indices_wanted.end()) continue;
    known = true;
    wanted = wanted || found->second;
  }
  if (known && !wanted) return {openvino_max_pool(x, w)};
  const auto pool = std::make_shared<MaxPool>(x, w);
  return {pool->output(0), pool->output(1)};
}

ov::OutputVector convert_max_unpool(const ov::frontend::NodeContext& c) {
  ov::OutputVector inputs;
  for (size_t i = 0; i < c.get_input_size(); ++i) inputs.push_back(c.get_input(int(i)));
  return {std::make_shared<MaxUnpool>(inputs, Window(&c))->output(0)};
}

}  // namespace
}  // namespace poolgen_openvino

OPENVINO_CREATE_EXTENSIONS(std::vector<ov::Extension::Ptr>({
    std::make_shared<ov::OpExtension<poolgen_openvino::MaxPool>>(),
    std::make_shared<ov::OpExtension<poolgen_openvino::MaxUnpool>>(),
    std::make_shared<ov::frontend::onnx::ConversionExtension>(
        "MaxPool", poolgen_openvino::convert_max_pool),
    std::make_shared<ov::frontend::onnx::ConversionExtension>(
        "MaxUnpool", poolgen_openvino::convert_max_unpool),
    std::make_shared<ov::frontend::DecoderTransformationExtension>(
        poolgen_openvino::note_indices_wanted),
}));

// For poolgen.openvino.set_num_threads() (ctypes): the threads of the extension's poolgen
// (OpenVINO's own thread settings do not reach ops run through evaluate()).
extern "C" __attribute__((visibility("default"))) void poolgen_openvino_set_num_threads(int n) {
  poolgen_openvino::choose_threads(n);
}

// For poolgen.openvino.stats() (ctypes): calls served by pooling (0) and unpooling (1).
extern "C" __attribute__((visibility("default"))) int64_t poolgen_openvino_served(int which) {
  return which == 0 || which == 1 ? poolgen_openvino::served[which].load() : -1;
}
