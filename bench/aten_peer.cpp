// The ATen peer: PyTorch 1.13's CPU kernels on the same input memory, at::set_num_threads(T).
// 1-D goes through the 2-D kernels on an (N, C, 1, L) view. "n/a" where ATen has no CPU kernel
// for the dtype (ATen 1.13: max_pool takes f32/f64/bf16, max_unpool f32/f64 only) or the index
// type (int64 only).
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

// ATen's kernel tables differ per dtype and layout: try each op once on a tiny tensor.
bool probe(bool unpool, int nd, DType vt, DType it, bool cl) {
  if (it != DType::i64) return false;  // ATen's indices are int64
  const int snd = nd == 1 ? 2 : nd;
  std::vector<int64_t> sh{1, 2, 4, 4};  // spatial > 1: a layout of its own
  if (snd == 3) sh.push_back(4);
  const auto mf = !cl ? at::MemoryFormat::Contiguous
                      : snd == 3 ? at::MemoryFormat::ChannelsLast3d : at::MemoryFormat::ChannelsLast;
  const std::vector<int64_t> k(snd, 2), one(snd, 1), zero(snd, 0), out(sh.end() - snd, sh.end());
  try {
    at::Tensor x = at::zeros(sh, at::TensorOptions().dtype(aten_type(vt))).contiguous(mf);
    if (!unpool) {
      if (snd == 3) at::max_pool3d_with_indices(x, k, k, zero, one, false);
      else at::max_pool2d_with_indices(x, k, k, zero, one, false);
      return true;
    }
    std::vector<int64_t> psh = sh;
    for (int i = 2; i < static_cast<int>(psh.size()); ++i) psh[i] = 2;
    at::Tensor v = at::zeros(psh, x.options()).contiguous(mf);
    at::Tensor ix = at::zeros(psh, at::TensorOptions().dtype(at::kLong)).contiguous(mf);
    if (snd == 3) at::max_unpool3d(v, ix, out, k, zero);
    else at::max_unpool2d(v, ix, out);
    return true;
  } catch (const std::exception&) {  // c10::Error: "... not implemented for 'Half'"
    return false;
  }
}

class AtenPeer : public Peer {
 public:
  const char* name() const override { return "aten"; }
  const char* title() const override { return "ATen"; }

  bool has(const Case& c, bool unpool) const override {
    const auto key = std::make_tuple(unpool, c.nd, c.vt, c.it, c.cl);
    auto it = probed_.find(key);
    if (it == probed_.end()) it = probed_.emplace(key, probe(unpool, c.nd, c.vt, c.it, c.cl)).first;
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
    if (sp.pool && has(sp, false)) {
      const std::vector<int64_t> one(snd_, 1);
      auto r = snd_ == 3 ? at::max_pool3d_with_indices(input_, k_, s_, p_, one, false)
                         : at::max_pool2d_with_indices(input_, k_, s_, p_, one, false);
      values_ = std::get<0>(r);
      indices_ = std::get<1>(r);
      if (sp.cl)
        sp.notes.push_back("ATen pool: " + aten_layout(input_) + " input -> " +
                           aten_layout(values_) + " values, " + aten_layout(indices_) + " indices");
      const void *pv = values_.data_ptr(), *pi = indices_.data_ptr();
      values_.fill_(7);
      indices_.fill_(7);
      run(false);
      if (values_.data_ptr() != pv || indices_.data_ptr() != pi)
        g_problems.push_back(what + ": ATen pool reallocated its out= tensors");
      if (!same_bits(values_, ref_values) || !same_bits(indices_, ref_indices))
        g_problems.push_back(what + ": ATen pool differs from the reference");
    }
    if (sp.unpool && has(sp, true)) {
      output_ = snd_ == 3 ? at::max_unpool3d(uvalues_, uindices_, out_size_, s_, p_)
                          : at::max_unpool2d(uvalues_, uindices_, out_size_);
      if (sp.cl)
        sp.notes.push_back("ATen unpool: " + aten_layout(uvalues_) + " values/indices -> " +
                           aten_layout(output_) + " output");
      const void* po = output_.data_ptr();
      output_.fill_(7);
      run(true);
      if (output_.data_ptr() != po)
        g_problems.push_back(what + ": ATen unpool reallocated its out= tensor");
      if (!same_bits(output_, aten_view(sp.expect.data(), sp, sp.shape, sp.vt)))
        g_problems.push_back(what + ": ATen unpool differs from the reference");
    }
  }

  void release() override {
    for (at::Tensor* t : {&input_, &values_, &indices_, &uvalues_, &uindices_, &output_}) t->reset();
  }

  void prepare(bool, int threads) override { at::set_num_threads(threads); }

  bool run(bool unpool) override {
    if (unpool) {
      if (snd_ == 3) at::max_unpool3d_out(output_, uvalues_, uindices_, out_size_, s_, p_);
      else at::max_unpool2d_out(output_, uvalues_, uindices_, out_size_);
    } else if (snd_ == 3) {
      at::max_pool3d_with_indices_out(values_, indices_, input_, k_, s_, p_, {1, 1, 1}, false);
    } else {
      at::max_pool2d_with_indices_out(values_, indices_, input_, k_, s_, p_, {1, 1}, false);
    }
    return true;
  }

 private:
  using Key = std::tuple<bool, int, DType, DType, bool>;
  mutable std::map<Key, bool> probed_;
  int snd_ = 2;
  at::Tensor input_, values_, indices_;    // pool: input (our memory) -> values, indices (ATen's)
  at::Tensor uvalues_, uindices_, output_;  // unpool: reference values/indices (ours) -> output
  std::vector<int64_t> k_, s_, p_, out_size_;
};

}  // namespace

std::unique_ptr<Peer> make_aten_peer() { return std::make_unique<AtenPeer>(); }

}  // namespace bench
