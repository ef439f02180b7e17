// The ATen peer: PyTorch 1.13's CPU kernels on the same input memory, at::set_num_threads(T).
// 1-D goes through the 2-D kernels on an (N, C, 1, L) view. "n/a" where ATen has no CPU kernel
// for the dtype (ATen 1.13: max_pool and its backward take f32/f64/bf16, max_unpool f32/f64
// only) or the index type (int64 only).
//
// The backward passes are the kernels autograd runs: max_pool{2,3}d_with_indices_backward, and
// for max_unpool's the gather of derivatives.yaml (max_pool_double_backward: grad_output's
// planes flattened, gathered at the indices flattened alike). Channels-last planes flatten to
// strided (N, C, H*W) views without a copy, as autograd's flatten does; the timed call is
// at::gather_out on those views.
//
// What ATen 1.13 does with channels-last data (learned in setup() on every run, printed after the
// table): max_pool2d_with_indices and max_unpool2d have channels-last CPU kernels
// ("max_pool2d_channels_last", "max_unpool2d_channels_last", vectorized across C) and keep the
// format: NHWC input gives NHWC values/indices, NHWC values/indices give an NHWC output. In 3-D
// they have none: max_pool3d_with_indices and max_unpool3d copy an NDHWC input to contiguous and
// return NCDHW outputs (an NDHWC out= tensor is written as if contiguous, i.e. wrongly, for
// pooling and refused, "output must be contiguous", for unpooling), so the 3-D ATen rows time
// that copy plus the NCDHW kernel, into NCDHW outputs. The timed calls are the _out variants into
// output tensors of the layout ATen's own functional call returned, allocated once.
#include "bench.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <map>
#include <tuple>

namespace bench {

namespace {

at::ScalarType aten_type(DType d) {
  switch (d) {
    case DType::f64: return at::kDouble;
    case DType::f16: return at::kHalf;
    case DType::bf16: return at::kBFloat16;
    case DType::i8: return at::kChar;
    case DType::u8: return at::kByte;
    case DType::i16: return at::kShort;
    case DType::i32: return at::kInt;
    case DType::i64: return at::kLong;
    default: return at::kFloat;
  }
}

std::vector<int64_t> aten_shape(const Ints& shape, int nd) {  // 1-D -> (N, C, 1, L)
  std::vector<int64_t> r(shape.begin(), shape.end());
  if (nd == 1) r.insert(r.end() - 1, 1);
  return r;
}

std::vector<int64_t> aten_strides(const std::vector<int64_t>& sh, bool cl) {
  std::vector<int64_t> st(sh.size());
  int64_t m = 1;
  if (!cl) {
    for (size_t i = sh.size(); i-- > 0;) st[i] = m, m *= sh[i];
    return st;
  }
  st[1] = 1, m = sh[1];  // C innermost, then spatial, then N
  for (size_t i = sh.size(); i-- > 2;) st[i] = m, m *= sh[i];
  st[0] = m;
  return st;
}

at::Tensor aten_view(const void* data, const Spec& sp, const Ints& shape, DType dt) {
  const auto sh = aten_shape(shape, sp.nd);
  return at::from_blob(const_cast<void*>(data), sh, aten_strides(sh, sp.cl),
                       at::TensorOptions().dtype(aten_type(dt)));
}

std::string aten_layout(const at::Tensor& t) {
  const bool r5 = t.dim() == 5;
  if (!t.is_contiguous() && t.is_contiguous(r5 ? at::MemoryFormat::ChannelsLast3d
                                               : at::MemoryFormat::ChannelsLast))
    return r5 ? "NDHWC" : "NHWC";
  return t.is_contiguous() ? (r5 ? "NCDHW" : "NCHW") : "strided";
}

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  const at::Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

// (N, C, plane) over a tensor's memory of `shape`: its planes flattened (channels-last: the
// channel stride 1, the plane's C), as autograd's flatten(-nd) views them.
at::Tensor flat_planes(const void* data, const Spec& sp, const Ints& shape, DType dt) {
  const int64_t n = shape[0], c = shape[1];
  int64_t plane = 1;
  for (size_t i = 2; i < shape.size(); ++i) plane *= shape[i];
  const std::vector<int64_t> strides = sp.cl ? std::vector<int64_t>{plane * c, 1, c}
                                             : std::vector<int64_t>{plane * c, plane, 1};
  return at::from_blob(const_cast<void*>(data), {n, c, plane}, strides,
                       at::TensorOptions().dtype(aten_type(dt)));
}

std::string flat_layout(const at::Tensor& t) {  // of an (N, C, plane) tensor
  if (t.is_contiguous()) return "contiguous (N, C, plane)";
  return t.stride(1) == 1 ? "channels-last (N, C, plane)" : "strided (N, C, plane)";
}

at::MemoryFormat case_format(int snd, bool cl) {  // snd: the rank ATen sees (1-D: 2)
  return !cl ? at::MemoryFormat::Contiguous
             : snd == 3 ? at::MemoryFormat::ChannelsLast3d : at::MemoryFormat::ChannelsLast;
}

// The memory format of ATen's pooling outputs for the case's layout (tried on a tiny input).
at::MemoryFormat pooled_format(const Spec& sp) {
  const int snd = sp.nd == 1 ? 2 : sp.nd;
  const std::vector<int64_t> sh(2 + snd, 4), k(snd, 2), one(snd, 1), zero(snd, 0);
  const at::Tensor x = at::zeros(sh, at::TensorOptions().dtype(aten_type(sp.vt)))
                           .contiguous(case_format(snd, sp.cl));
  const auto r = snd == 3 ? at::max_pool3d_with_indices(x, k, k, zero, one, false)
                          : at::max_pool2d_with_indices(x, k, k, zero, one, false);
  return std::get<1>(r).suggest_memory_format();
}

// ATen's kernel tables differ per dtype and layout: try each op once on a tiny tensor.
bool probe(Op op, int nd, DType vt, DType it, bool cl) {
  if (it != DType::i64) return false;  // ATen's indices are int64
  const int snd = nd == 1 ? 2 : nd;
  std::vector<int64_t> sh{1, 2, 4, 4};  // spatial > 1: a layout of its own
  if (snd == 3) sh.push_back(4);
  const auto mf = case_format(snd, cl);
  const std::vector<int64_t> k(snd, 2), one(snd, 1), zero(snd, 0), out(sh.end() - snd, sh.end());
  try {
    at::Tensor x = at::zeros(sh, at::TensorOptions().dtype(aten_type(vt))).contiguous(mf);
    if (op == Op::pool) {
      if (snd == 3) at::max_pool3d_with_indices(x, k, k, zero, one, false);
      else at::max_pool2d_with_indices(x, k, k, zero, one, false);
      return true;
    }
    std::vector<int64_t> psh = sh;
    for (int i = 2; i < static_cast<int>(psh.size()); ++i) psh[i] = 2;
    at::Tensor v = at::zeros(psh, x.options()).contiguous(mf);
    at::Tensor ix = at::zeros(psh, at::TensorOptions().dtype(at::kLong)).contiguous(mf);
    if (op == Op::unpool && snd == 3) at::max_unpool3d(v, ix, out, k, zero);
    else if (op == Op::unpool) at::max_unpool2d(v, ix, out);
    else if (op == Op::pool_backward && snd == 3)
      at::max_pool3d_with_indices_backward(v, x, k, k, zero, one, false, ix);
    else if (op == Op::pool_backward)
      at::max_pool2d_with_indices_backward(v, x, k, k, zero, one, false, ix);
    else
      at::gather(x.flatten(2), 2, ix.flatten(2));
    return true;
  } catch (const std::exception&) {  // c10::Error: "... not implemented for 'Half'"
    return false;
  }
}

class AtenPeer : public Peer {
 public:
  const char* name() const override { return "aten"; }
  const char* title() const override { return "ATen"; }

  bool has(const Case& c, Op op) const override {
    const auto key = std::make_tuple(op, c.nd, c.vt, c.it, c.cl);
    auto it = probed_.find(key);
    if (it == probed_.end()) it = probed_.emplace(key, probe(op, c.nd, c.vt, c.it, c.cl)).first;
    return it->second;
  }

  // Learns ATen's output layouts from its functional calls, then runs the _out calls once into
  // those outputs and checks them (and that they were written in place) against the reference.
  void setup(Spec& sp) override {
    snd_ = sp.nd == 1 ? 2 : sp.nd;
    k_.assign(snd_, sp.k);
    s_.assign(snd_, sp.s);
    p_.assign(snd_, sp.p);
    if (sp.nd == 1) k_[0] = s_[0] = 1, p_[0] = 0;
    const auto in_sh = aten_shape(sp.shape, sp.nd);
    out_size_.assign(in_sh.end() - snd_, in_sh.end());
    input_ = aten_view(sp.input.data(), sp, sp.shape, sp.vt);
    const at::Tensor ref_values = aten_view(sp.values.data(), sp, sp.pooled, sp.vt);
    const at::Tensor ref_indices = aten_view(sp.indices.data(), sp, sp.pooled, sp.it);
    uvalues_ = ref_values;
    uindices_ = ref_indices;
    at::set_num_threads(all_threads());
    const std::string what = sp.what();
    // The first run of op into outs, which the functional call allocated: in place and equal to
    // the reference's results (`expected`), else a problem.
    auto check = [&](Op op, std::vector<at::Tensor*> outs, std::vector<at::Tensor> expected) {
      std::vector<const void*> data;
      for (at::Tensor* t : outs) data.push_back(t->data_ptr()), t->fill_(7);
      run(op);
      const std::string who = what + ": ATen " + op_name(op);
      for (size_t i = 0; i < outs.size(); ++i) {
        if (outs[i]->data_ptr() != data[i]) g_problems.push_back(who + " reallocated its out=");
        if (!same_bits(*outs[i], expected[i]))
          g_problems.push_back(who + " differs from the reference");
      }
    };
    auto layouts = [&](Op op, const std::string& from, const std::string& to) {
      if (sp.cl) sp.notes.push_back(std::string("ATen ") + op_name(op) + ": " + from + " -> " + to);
    };
    const std::vector<int64_t> one(snd_, 1);
    if (sp.times(Op::pool) && has(sp, Op::pool)) {
      auto r = snd_ == 3 ? at::max_pool3d_with_indices(input_, k_, s_, p_, one, false)
                         : at::max_pool2d_with_indices(input_, k_, s_, p_, one, false);
      values_ = std::get<0>(r);
      indices_ = std::get<1>(r);
      layouts(Op::pool, aten_layout(input_) + " input",
              aten_layout(values_) + " values, " + aten_layout(indices_) + " indices");
      check(Op::pool, {&values_, &indices_}, {ref_values, ref_indices});
    }
    if (sp.times(Op::unpool) && has(sp, Op::unpool)) {
      output_ = snd_ == 3 ? at::max_unpool3d(uvalues_, uindices_, out_size_, s_, p_)
                          : at::max_unpool2d(uvalues_, uindices_, out_size_);
      layouts(Op::unpool, aten_layout(uvalues_) + " values/indices",
              aten_layout(output_) + " output");
      check(Op::unpool, {&output_}, {aten_view(sp.expect.data(), sp, sp.shape, sp.vt)});
    }
    if (sp.times(Op::pool_backward) && has(sp, Op::pool_backward)) {
      // grad_output and indices in the layout of ATen's own pooling outputs, which autograd
      // hands on: NCDHW for NDHWC input (its 3-D backward reads NDHWC indices as if contiguous:
      // wrong gradients). Copied here, once, where that layout is not ours.
      const auto format = pooled_format(sp);
      grad_pooled_ = aten_view(sp.grad_pooled.data(), sp, sp.pooled, sp.vt).contiguous(format);
      bindices_ = ref_indices.contiguous(format);
      grad_input_ =
          snd_ == 3
              ? at::max_pool3d_with_indices_backward(grad_pooled_, input_, k_, s_, p_, one, false,
                                                     bindices_)
              : at::max_pool2d_with_indices_backward(grad_pooled_, input_, k_, s_, p_, one, false,
                                                     bindices_);
      const bool copied = grad_pooled_.data_ptr() != sp.grad_pooled.data();
      layouts(Op::pool_backward,
              aten_layout(grad_pooled_) + " grad_output/indices" + (copied ? " (copies)" : ""),
              aten_layout(grad_input_) + " grad_input");
      check(Op::pool_backward, {&grad_input_},
            {aten_view(sp.expect_grad_input.data(), sp, sp.shape, sp.vt)});
    }
    if (sp.times(Op::unpool_backward) && has(sp, Op::unpool_backward)) {
      flat_grad_ = flat_planes(sp.grad_unpooled.data(), sp, sp.shape, sp.vt);
      flat_indices_ = flat_planes(sp.indices.data(), sp, sp.pooled, sp.it);
      grad_values_ = at::gather(flat_grad_, 2, flat_indices_);
      layouts(Op::unpool_backward, flat_layout(flat_grad_) + " grad_output/indices",
              flat_layout(grad_values_) + " grad_values");
      check(Op::unpool_backward, {&grad_values_},
            {flat_planes(sp.expect_grad_values.data(), sp, sp.pooled, sp.vt)});
    }
  }

  void release() override {
    for (at::Tensor* t : {&input_, &values_, &indices_, &uvalues_, &uindices_, &output_,
                          &grad_pooled_, &bindices_, &grad_input_, &flat_grad_, &flat_indices_,
                          &grad_values_})
      t->reset();
  }

  void prepare(Op, int threads) override { at::set_num_threads(threads); }

  bool run(Op op) override {
    const bool d3 = snd_ == 3;
    switch (op) {
      case Op::pool:
        if (d3)
          at::max_pool3d_with_indices_out(values_, indices_, input_, k_, s_, p_, {1, 1, 1}, false);
        else
          at::max_pool2d_with_indices_out(values_, indices_, input_, k_, s_, p_, {1, 1}, false);
        break;
      case Op::unpool:
        if (d3) at::max_unpool3d_out(output_, uvalues_, uindices_, out_size_, s_, p_);
        else at::max_unpool2d_out(output_, uvalues_, uindices_, out_size_);
        break;
      case Op::pool_backward:
        if (d3)
          at::max_pool3d_with_indices_backward_out(grad_input_, grad_pooled_, input_, k_, s_, p_,
                                                   {1, 1, 1}, false, bindices_);
        else
          at::max_pool2d_with_indices_backward_out(grad_input_, grad_pooled_, input_, k_, s_, p_,
                                                   {1, 1}, false, bindices_);
        break;
      case Op::unpool_backward:
        at::gather_out(grad_values_, flat_grad_, 2, flat_indices_);
        break;
    }
    return true;
  }

 private:
  using Key = std::tuple<Op, int, DType, DType, bool>;
  mutable std::map<Key, bool> probed_;
  int snd_ = 2;
  at::Tensor input_, values_, indices_;    // pool: input (our memory) -> values, indices (ATen's)
  at::Tensor uvalues_, uindices_, output_;  // unpool: reference values/indices (ours) -> output
  // pool backward: grad_output, reference indices (ours or copies), input (its shape) -> grad_input
  at::Tensor grad_pooled_, bindices_, grad_input_;
  at::Tensor flat_grad_, flat_indices_, grad_values_;  // unpool backward: flat planes -> gather
  std::vector<int64_t> k_, s_, p_, out_size_;
};

}  // namespace

std::unique_ptr<Peer> make_aten_peer() { return std::make_unique<AtenPeer>(); }

}  // namespace bench
