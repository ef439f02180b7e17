// The XNNPACK peer (Debian's 2022-02 snapshot): xnn_*_argmax_pooling2d_nhwc_f32 and
// xnn_*_unpooling2d_nhwc_x32, 2-D NHWC f32 only, on a pthreadpool of the row's thread count
// (1 thread: none, the calling thread). Its argmax pooling has stride == pooling size and no
// dilation (padding is left out here) and returns uint32 offsets inside the window, which its
// unpooling takes: so it runs for channels-last 2-D f32 cases with s == k, p == 0 (k2s2p0),
// whatever our index type, and unpools its own argmax output of the same input; elsewhere "n/a".
//
// Timed region: xnn_run_operator alone. Operators are created in setup(); xnn_setup_* (which
// binds the buffers and the threadpool, whose size decides the work split) runs in prepare().
#include "bench.h"

#include <xnnpack.h>

#include <cstdio>
#include <map>

namespace bench {

namespace {

class XnnpackPeer : public Peer {
 public:
  XnnpackPeer() : ok_(xnn_initialize(nullptr) == xnn_status_success) {
    if (!ok_) std::fprintf(stderr, "poolgen_bench: xnn_initialize failed: no XNNPACK rows\n");
  }
  ~XnnpackPeer() override {
    release();
    for (auto& [threads, tp] : pools_)
      if (tp) pthreadpool_destroy(tp);
  }
  const char* name() const override { return "xnnpack"; }
  const char* title() const override { return "XNNPACK"; }

  bool has(const Case& c, Op op) const override {
    const bool pool = ok_ && c.nd == 2 && c.cl && c.vt == DType::f32 && c.s == c.k && c.p == 0;
    // Its unpooling writes (H/k*k) x (W/k*k) pixels: the same image only when k divides both.
    const bool whole = c.shape[2] % c.k == 0 && c.shape[3] % c.k == 0;
    return pool && (op == Op::pool || (op == Op::unpool && whole));  // no backward passes
  }

  void setup(Spec& sp) override {
    sp_ = &sp;
    const size_t C = sp.shape[1], k = sp.k;
    values_.assign(sp.out_elems(), 0.0f);
    offsets_.assign(sp.out_elems(), 0);
    if (!check(xnn_create_argmax_pooling2d_nhwc_f32(0, 0, 0, 0, k, k, C, C, C, 0, &pool_op_),
               "create argmax pooling") ||
        !check(prepare_status(false, nullptr), "setup argmax pooling") ||
        !check(xnn_run_operator(pool_op_, nullptr), "run argmax pooling"))
      return;
    const int64_t ties = check_pool(sp);
    if (ties > 0)
      sp.notes.push_back("XNNPACK: " + std::to_string(ties) + " window(s) holding the maximum "
                         "twice, where it picks another tap than PyTorch (it scans a window "
                         "column by column); checked as ties");
    if (!sp.times(Op::unpool) || !has(sp, Op::unpool)) return;
    output_.assign(sp.in_elems(), 0.0f);
    if (!check(xnn_create_unpooling2d_nhwc_x32(0, 0, 0, 0, k, k, C, C, C, 0, &unpool_op_),
               "create unpooling") ||
        !check(prepare_status(true, nullptr), "setup unpooling") ||
        !check(xnn_run_operator(unpool_op_, nullptr), "run unpooling"))
      return;
    // Move each tie's value to PyTorch's tap, then the image must be ours (= the reference's).
    for (const auto& [ours, theirs] : ties_) std::swap(output_[ours], output_[theirs]);
    if (std::memcmp(output_.data(), sp.expect.data(), sp.expect.size()) != 0)
      g_problems.push_back(sp.what() + ": XNNPACK unpool differs from the reference");
  }

  void release() override {
    for (xnn_operator_t* op : {&pool_op_, &unpool_op_})
      if (*op) xnn_delete_operator(*op), *op = nullptr;
    for (auto* v : {&values_, &output_}) std::vector<float>().swap(*v);
    std::vector<uint32_t>().swap(offsets_);
    ties_.clear();
  }

  void prepare(Op op, int threads) override {
    tp_ = threadpool(threads);
    if (xnn_status st = prepare_status(op == Op::unpool, tp_); st != xnn_status_success)
      std::fprintf(stderr, "poolgen_bench: XNNPACK setup failed (status %d)\n", st);
  }

  bool run(Op op) override {
    return xnn_run_operator(op == Op::unpool ? unpool_op_ : pool_op_, tp_) == xnn_status_success;
  }

 private:
  xnn_status prepare_status(bool unpool, pthreadpool_t tp) {
    const Spec& sp = *sp_;
    if (unpool)
      return xnn_setup_unpooling2d_nhwc_x32(unpool_op_, sp.shape[0], sp.pooled[2], sp.pooled[3],
                                            values_.data(), offsets_.data(), output_.data(), tp);
    return xnn_setup_argmax_pooling2d_nhwc_f32(pool_op_, sp.shape[0], sp.shape[2], sp.shape[3],
                                               sp.input.as<float>(), values_.data(),
                                               offsets_.data(), tp);
  }

  bool check(xnn_status st, const char* what) {
    if (st == xnn_status_success) return true;
    g_problems.push_back(sp_->what() + ": XNNPACK " + what + " failed (status " +
                         std::to_string(st) + ")");
    return false;
  }

  // Values must equal the reference's bit for bit; offsets name the reference's tap or, where
  // the window holds the maximum twice, another tap of that value (kept in ties_ as (ours,
  // theirs) output positions for the unpool check). Returns the number of ties.
  int64_t check_pool(const Spec& sp) {
    if (std::memcmp(values_.data(), sp.values.data(), sp.values.size()) != 0)
      g_problems.push_back(sp.what() + ": XNNPACK pool values differ from the reference");
    const int64_t C = sp.shape[1], H = sp.shape[2], W = sp.shape[3], OH = sp.pooled[2],
                  OW = sp.pooled[3], k = sp.k;
    const float* in = sp.input.as<float>();
    int64_t wrong = 0, cell = 0;
    for (int64_t n = 0; n < sp.shape[0]; ++n)
      for (int64_t oy = 0; oy < OH; ++oy)
        for (int64_t ox = 0; ox < OW; ++ox)
          for (int64_t c = 0; c < C; ++c, ++cell) {
            const uint32_t o = offsets_[cell];  // column-major in the window: kx * k + ky
            const int64_t theirs = (oy * k + o % k) * W + ox * k + o / k;
            const int64_t ours = sp.it == DType::i32 ? sp.indices.as<int32_t>()[cell]
                                                     : sp.indices.as<int64_t>()[cell];
            if (theirs == ours) continue;
            const int64_t base = n * H * W * C + c;  // (n, 0, 0, c)
            if (o < k * k && in[base + theirs * C] == in[base + ours * C])
              ties_.emplace_back(base + ours * C, base + theirs * C);
            else
              ++wrong;
          }
    if (wrong)
      g_problems.push_back(sp.what() + ": XNNPACK pool picks " + std::to_string(wrong) +
                           " maxima elsewhere than the reference");
    return static_cast<int64_t>(ties_.size());
  }

  pthreadpool_t threadpool(int threads) {
    if (threads <= 1) return nullptr;
    auto& tp = pools_[threads];
    if (!tp) tp = pthreadpool_create(threads);
    return tp;
  }

  bool ok_;
  const Spec* sp_ = nullptr;
  xnn_operator_t pool_op_ = nullptr, unpool_op_ = nullptr;
  std::vector<float> values_, output_;
  std::vector<uint32_t> offsets_;
  std::vector<std::pair<int64_t, int64_t>> ties_;
  std::map<int, pthreadpool_t> pools_;
  pthreadpool_t tp_ = nullptr;
};

}  // namespace

std::unique_ptr<Peer> make_xnnpack_peer() { return std::make_unique<XnnpackPeer>(); }

}  // namespace bench
