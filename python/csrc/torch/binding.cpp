#include "binding.hpp"

#include <poolgen/poolgen.h>

#include <ATen/EmptyTensor.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/strides.h>
#if POOLGEN_TORCH_CUDA
#include <c10/core/Allocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <vector>
#include <sstream>

#ifndef _WIN32
#include <pthread.h>
#endif
#ifdef __linux__
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace poolgen_torch {
namespace {

constexpr int kMaxRank = 5;  // poolgen_tensor's arrays

using poolgen_bridge::call;
using poolgen_bridge::fail;

std::string list_text(at::IntArrayRef list) {
  std::ostringstream text;
  text << '[';
  for (size_t i = 0; i < list.size(); ++i) text << (i ? ", " : "") << list[i];
  text << ']';
  return text.str();
}

// ---------------------------------------------------------------------------------------------
// What the installed PyTorch does, asked of its own kernels (POOLGEN_STOCK, which bypass the
// dispatcher and so the drop-in): which output memory format each op gives a channels-last
// input, which dtypes each takes, and which exception it raises for a dtype it lacks.

constexpr int kStockOps = 6;
constexpr int kDevices = 2;  // CPU, CUDA

int device_slot(at::DeviceType device) { return device == at::kCUDA ? 1 : 0; }

// Deterministic mode off for a probe of PyTorch's kernels, which would refuse (or warn about)
// its unpooling kernels there: what is asked is what they take, whenever the probe runs.
class DeterminismOff {
 public:
  DeterminismOff()
      : on_(at::globalContext().deterministicAlgorithms()),
        warn_only_(at::globalContext().deterministicAlgorithmsWarnOnly()) {
    if (on_) at::globalContext().setDeterministicAlgorithms(false, false);
  }
  ~DeterminismOff() {
    if (on_) at::globalContext().setDeterministicAlgorithms(true, warn_only_);
  }

 private:
  bool on_, warn_only_;
};

// Runs the stock op on tensors of `shape` (all zero, indices i64) on `device` and returns its
// output; `batchless`: on those tensors with their leading extent (1) squeezed away.
at::Tensor run_stock(StockOp op, at::IntArrayRef shape, at::ScalarType dtype,
                     at::MemoryFormat format, at::DeviceType device, bool batchless = false) {
  const DeterminismOff probe;
  const auto options = at::TensorOptions().dtype(dtype).memory_format(format).device(device);
  at::Tensor x = at::empty(shape, options).zero_();
  at::Tensor i = at::empty(shape, options.dtype(at::kLong)).zero_();
  if (batchless) {
    x = x.squeeze(0);
    i = i.squeeze(0);
  }
  const std::vector<int64_t> ones(shape.size() - 2, 1), zeros(shape.size() - 2, 0);
  switch (op) {
    case StockOp::pool2d:
      return std::get<0>(
          POOLGEN_STOCK(device, max_pool2d_with_indices, x, ones, ones, zeros, ones, false));
    case StockOp::pool3d:
      return std::get<0>(
          POOLGEN_STOCK(device, max_pool3d_with_indices, x, ones, ones, zeros, ones, false));
    case StockOp::pool2d_backward:
      return POOLGEN_STOCK(device, max_pool2d_with_indices_backward, x, x, ones, ones, zeros,
                           ones, false, i);
    case StockOp::pool3d_backward:
      return POOLGEN_STOCK(device, max_pool3d_with_indices_backward, x, x, ones, ones, zeros,
                           ones, false, i);
    case StockOp::unpool2d:
      return POOLGEN_STOCK(device, max_unpool2d, x, i, shape.slice(2));
    case StockOp::unpool3d:
      return POOLGEN_STOCK(device, max_unpool3d, x, i, shape.slice(2), ones, zeros);
  }
  return {};
}

// Whether `op` on `device` gives a channels-last input a channels-last output (PyTorch 1.13's
// 3-D pooling does not, 2.x's does); `batchless`: whether it gives an input without its batch
// extent, whose unsqueeze(0) is channels-last, the output of that unsqueezed input, squeezed
// (2.x's 3-D pooling does; other ops and versions give such inputs contiguous outputs). Asked
// once per triple.
bool keeps_channels_last(StockOp op, at::DeviceType device, bool batchless) {
  static std::array<std::atomic<int8_t>, kStockOps * kDevices * 2> known{};  // 0 unknown, 1, 2
  std::atomic<int8_t>& answer =
      known[(static_cast<int>(op) * kDevices + device_slot(device)) * 2 + batchless];
  if (answer.load(std::memory_order_relaxed) == 0) {
    const bool d3 = is_3d(op);
    const auto format = d3 ? at::MemoryFormat::ChannelsLast3d : at::MemoryFormat::ChannelsLast;
    bool keeps = false;
    try {
      at::Tensor out =
          run_stock(op, d3 ? at::IntArrayRef{1, 2, 2, 2, 2} : at::IntArrayRef{1, 2, 2, 2},
                    at::kFloat, format, device, batchless);
      if (batchless) out = out.unsqueeze(0);
      keeps = !out.is_contiguous() && out.is_contiguous(format);
    } catch (const c10::Error&) {
    }
    answer.store(keeps ? 1 : 2, std::memory_order_relaxed);
  }
  return answer.load(std::memory_order_relaxed) == 1;
}

// PyTorch 2.x raises NotImplementedError for a dtype a kernel lacks, 1.13 RuntimeError.
bool dtype_errors_are_not_implemented() {
  static const bool answer = [] {
    try {
      run_stock(StockOp::pool2d, {1, 1, 1, 1}, at::kBool, at::MemoryFormat::Contiguous, at::kCPU);
    } catch (const c10::NotImplementedError&) {
      return true;
    } catch (const c10::Error&) {
    }
    return false;
  }();
  return answer;
}

// ---------------------------------------------------------------------------------------------
// Tensors and arguments for the C API.

constexpr int kDtypeUnknown = -1;

int poolgen_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return POOLGEN_F32;
    case at::kDouble: return POOLGEN_F64;
    case at::kHalf: return POOLGEN_F16;
    case at::kBFloat16: return POOLGEN_BF16;
    case at::kChar: return POOLGEN_I8;
    case at::kByte: return POOLGEN_U8;
    case at::kShort: return POOLGEN_I16;
    case at::kInt: return POOLGEN_I32;
    case at::kLong: return POOLGEN_I64;
    default: return kDtypeUnknown;
  }
}

Outcome check_tensor(const char* argument, const at::Tensor& t) {
  if (t.dim() > kMaxRank) {
    return fail(POOLGEN_INVALID_ARGUMENT, POOLGEN_ERROR_TENSOR, argument,
                ": expected rank 2 to 5, got rank ", t.dim(), " (shape ", list_text(t.sizes()),
                ")");
  }
  if (poolgen_dtype(t.scalar_type()) == kDtypeUnknown) {
    return fail(POOLGEN_UNSUPPORTED, POOLGEN_ERROR_NO_KERNEL, argument,
                ": expected a real dtype (float, double, half, bfloat16, int8, uint8, int16, ",
                "int32 or int64), got ", t.scalar_type());
  }
  return {};
}

// The C API's view of `t` (check_tensor passed). Its strides all zero would mean contiguous there:
// an expanded tensor of such strides is passed as a contiguous copy (kept alive in *keep).
poolgen_tensor view_of(const at::Tensor& t, at::Tensor* keep) {
  const at::Tensor& s = [&]() -> const at::Tensor& {
    const auto strides = t.strides();
    if (t.numel() > 1 && std::all_of(strides.begin(), strides.end(), [](int64_t v) { return v == 0; })) {
      *keep = t.contiguous();
      return *keep;
    }
    return t;
  }();
  poolgen_tensor v{};
  v.data = s.data_ptr();
  v.dtype = poolgen_dtype(s.scalar_type());
  // Whole lists rather than size(d) and stride(d), which wrap and check each dimension.
  const at::IntArrayRef sizes = s.sizes(), strides = s.strides();
  v.rank = static_cast<int32_t>(sizes.size());
  std::copy(sizes.begin(), sizes.end(), v.shape);
  std::copy(strides.begin(), strides.end(), v.strides);
  v.device = s.is_cuda() ? POOLGEN_CUDA : POOLGEN_CPU;
  return v;
}

// ---------------------------------------------------------------------------------------------
// CUDA tensors: poolgen runs on the tensors' device, made current as PyTorch's kernels make it,
// queueing its kernels on that device's current stream, with scratch memory from PyTorch's
// caching allocator (which keeps each block for its stream's later work).

#if POOLGEN_TORCH_CUDA
void* allocate_scratch(void*, size_t bytes, void*, void** handle) {
  auto* block = new c10::DataPtr(c10::GetAllocator(c10::DeviceType::CUDA)->allocate(bytes));
  *handle = block;
  return block->get();
}
void release_scratch(void*, void* handle, void*) { delete static_cast<c10::DataPtr*>(handle); }
[[maybe_unused]] const bool allocator_set = [] {
  poolgen_set_cuda_allocator(allocate_scratch, release_scratch, nullptr);
  return true;
}();
#endif

// Where a call runs: the CPU, or a CUDA device (current for the object's lifetime) and its
// current stream.
struct Execution {
  c10::OptionalDeviceGuard guard;
  void* stream = nullptr;
  explicit Execution(const at::Tensor& leading) {
#if POOLGEN_TORCH_CUDA
    if (!leading.is_cuda()) return;
    guard.reset_device(leading.device());
    stream = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)
                 ->getStream(leading.device())
                 .native_handle();
    raise_cuda_reports(false);
#else
    (void)leading;
#endif
  }
};

// A PyTorch int-or-tuple list expanded into `out` by poolgen's own rule (1 or nd entries, each
// at least the option's minimum; empty: the option's default, zeros in the C options).
Outcome expand(const char* option, at::IntArrayRef list, int nd, int64_t* out) {
  return call([&](char* m, size_t n) {
    return poolgen_expand_option(option, list.data(), static_cast<int32_t>(list.size()), nd,
                                 out, m, n);
  });
}

// PyTorch bounds the padding by half the kernel as given (also with dilation, in every rank):
// stricter than poolgen, which lets 1-D and 2-D windows pad up to half the dilated kernel, so
// PyTorch's own rule, PyTorch's message.
Outcome check_pytorch_padding(int nd, const int64_t* kernel, const int64_t* padding) {
  for (int i = 0; i < nd; ++i) {
    if (padding[i] > kernel[i] / 2) {
      return fail(POOLGEN_INVALID_ARGUMENT, POOLGEN_ERROR_OPTION, "padding",
                  ": expected at most half the kernel (", kernel[i] / 2,
                  ") in spatial dimension ", i, ", got ", padding[i]);
    }
  }
  return {};
}

// A call's arguments as one key: nd, a flag, then each list's length and entries (at most ten
// lists: a pooling window's four, and its gradient's three tensors' sizes and strides). A list
// longer than kMaxRank makes no key (the options refuse it anyway).
class WindowKey {
 public:
  // The lists' slots are written as they are added (zeroing them all cost a tiny call 1%).
  WindowKey(int nd, int64_t flag) : size_(2) {
    values_[0] = nd;
    values_[1] = flag;
  }
  void add(at::IntArrayRef list) {
    if (list.size() > kMaxRank || size_ + 1 + list.size() > kCapacity) {
      keyed_ = false;
      return;
    }
    values_[size_++] = static_cast<int64_t>(list.size());
    for (int64_t v : list) values_[size_++] = v;
  }
  void refuse() { keyed_ = false; }
  bool keyed() const { return keyed_; }
  bool operator==(const WindowKey& other) const {
    return size_ == other.size_ &&
           std::memcmp(values_, other.values_, sizeof(int64_t) * size_) == 0;
  }

 private:
  static constexpr size_t kCapacity = 2 + 10 * (kMaxRank + 1);
  int64_t values_[kCapacity];
  size_t size_;
  bool keyed_ = true;
};

// `convert`'s options for `key`, remembered per thread for the latest window: models repeat
// their windows, and expanding its lists through the C API costs a fifth of a tiny call.
template <typename Options, typename Convert>
Outcome remembered(const WindowKey& key, Options* o, Convert convert) {
  struct Latest {
    WindowKey key{0, 0};
    Options options;
    bool valid = false;
  };
  thread_local Latest latest;
  if (latest.valid && key.keyed() && latest.key == key) {
    *o = latest.options;
    return {};
  }
  Outcome r = convert(o);
  if (r.ok() && key.keyed()) latest = {key, *o, true};
  return r;
}

Outcome pool_options(const PoolWindow& w, poolgen_pool_options* o) {
  WindowKey key(w.nd, w.ceil_mode);
  for (at::IntArrayRef list : {w.kernel_size, w.stride, w.padding, w.dilation}) key.add(list);
  return remembered(key, o, [&](poolgen_pool_options* o) {
    std::memset(o, 0, sizeof *o);  // padding too: output_shape compares options bytewise
    Outcome r;
    if (!(r = expand("kernel_size", w.kernel_size, w.nd, o->kernel_size)).ok() ||
        !(r = expand("stride", w.stride, w.nd, o->stride)).ok() ||
        !(r = expand("padding", w.padding, w.nd, o->padding)).ok() ||
        !(r = expand("dilation", w.dilation, w.nd, o->dilation)).ok()) {
      return r;
    }
    o->ceil_mode = w.ceil_mode;
    return check_pytorch_padding(w.nd, o->kernel_size, o->padding);
  });
}

Outcome unpool_options(const UnpoolWindow& w, poolgen_unpool_options* o) {
  const bool by_indices = w.kernel_size.empty();  // all zero in the C API
  WindowKey key(w.nd, w.output_size.has_value());
  for (at::IntArrayRef list : {w.kernel_size, w.stride, w.padding}) key.add(list);
  if (w.output_size.has_value()) key.add(*w.output_size);
  return remembered(key, o, [&](poolgen_unpool_options* o) {
    std::memset(o, 0, sizeof *o);  // padding too: output_shape compares options bytewise
    Outcome r;
    if ((!by_indices && !(r = expand("kernel_size", w.kernel_size, w.nd, o->kernel_size)).ok()) ||
        !(r = expand("stride", w.stride, w.nd, o->stride)).ok() ||
        !(r = expand("padding", w.padding, w.nd, o->padding)).ok()) {
      return r;
    }
    if (w.output_size.has_value()) {
      const at::IntArrayRef size = *w.output_size;
      if (size.size() > kMaxRank) {  // the C options' array (poolgen checks the rest)
        return fail(POOLGEN_INVALID_ARGUMENT, POOLGEN_ERROR_OPTION, "output_size",
                    ": expected 0, ", w.nd, " or ", w.nd + 2, " entries, got ", size.size(),
                    " (", list_text(size), ")");
      }
      o->output_size_len = static_cast<int32_t>(size.size());
      std::copy(size.begin(), size.end(), o->output_size);
    }
    return Outcome{};
  });
}

// ---------------------------------------------------------------------------------------------
// Threads: poolgen follows torch.set_num_threads. Resizing is safe while other calls run (it
// waits for the one holding poolgen's workers); the mutex only keeps two threads that notice
// the same change from resizing twice, or out of order.

std::mutex resize_mutex;
std::atomic<int> pool_threads{-1};

// poolgen's shared calls run on PyTorch's intra-op threads (at::parallel_for), at most
// `threads` ranges of tasks, not on workers of its own: OpenMP's idle threads spin on the cores
// after PyTorch's parallel ops, and poolgen's workers woken beside them waited (1x64x56x56 NHWC
// unpooling's gradient through autograd, PyTorch 2.15, two threads: 54 us, 37 us with
// OMP_WAIT_POLICY=PASSIVE, against 48 on one thread; docs/pytorch.md).
// OpenMP's pool does not survive a fork (a child's parallel region waits for threads it does
// not have), so a forked child runs the tasks on its calling thread, as before.
std::atomic<bool> forked_child{false};
void run_on_torch_threads(int32_t count, int32_t threads, void (*task)(int32_t, void*),
                          void* task_context, void*) {
  const auto run = [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) task(static_cast<int32_t>(t), task_context);
  };
  if (forked_child.load(std::memory_order_relaxed)) return run(0, count);
  at::parallel_for(0, count, (int64_t{count} + threads - 1) / threads, run);
}
[[maybe_unused]] const bool parallel_for_set = [] {
#ifndef _WIN32
  pthread_atfork(nullptr, nullptr, [] { forked_child.store(true, std::memory_order_relaxed); });
#endif
  poolgen_set_parallel_for(run_on_torch_threads, nullptr);
  return true;
}();

void follow_torch_threads() {
  const int wanted = at::get_num_threads();
  if (wanted == pool_threads.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> resize(resize_mutex);
  if (wanted != pool_threads.load(std::memory_order_relaxed)) {
    poolgen_set_num_threads(wanted);
    pool_threads.store(wanted, std::memory_order_release);
  }
}


// The C API's output shape (`query`: poolgen_max_pool_output_shape or its unpooling twin) for
// options `o` on an input of `self`'s extents (rank at most kMaxRank), remembered per thread for
// the latest arguments: calls repeat their shapes, and the query costs as much as a tiny kernel.
template <typename Options, typename Query>
Outcome output_shape(Query query, int nd, const at::Tensor& self, const Options& o,
                     int64_t* shape) {
  struct Latest {
    int nd = 0, rank = -1;
    int64_t sizes[kMaxRank], shape[kMaxRank];
    Options options;
  };
  thread_local Latest latest;
  const at::IntArrayRef sizes = self.sizes();
  const int rank = static_cast<int>(sizes.size());
  if (latest.nd == nd && latest.rank == rank &&
      std::equal(sizes.begin(), sizes.end(), latest.sizes) &&
      std::memcmp(&latest.options, &o, sizeof o) == 0) {
    std::copy(latest.shape, latest.shape + rank, shape);
    return {};
  }
  const Outcome r = call(
      [&](char* m, size_t n) { return query(nd, rank, sizes.data(), &o, shape, m, n); });
  if (r.ok()) {
    latest.nd = nd;
    latest.rank = rank;
    std::copy(sizes.begin(), sizes.end(), latest.sizes);
    std::copy(shape, shape + rank, latest.shape);
    std::memcpy(&latest.options, &o, sizeof o);
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// Calls on the CPU run prepared (poolgen_prepare_*): each op keeps, per thread, its latest call
// prepared with the views and options it was prepared for, and a call whose views but their data
// and options are the same runs it on its data alone, skipping the C API's conversions and the
// runtime's comparison of the call with its last one (docs/pytorch.md). CUDA calls go whole.

bool same_but_data(const poolgen_tensor& a, const poolgen_tensor& b) {
  return a.dtype == b.dtype && a.rank == b.rank && a.device == b.device &&
         std::equal(a.shape, a.shape + a.rank, b.shape) &&
         std::equal(a.strides, a.strides + a.rank, b.strides);
}

template <typename Options>
class LatestPrepared {
 public:
  LatestPrepared() = default;
  LatestPrepared(const LatestPrepared&) = delete;
  LatestPrepared& operator=(const LatestPrepared&) = delete;
  ~LatestPrepared() { poolgen_prepared_free(prepared_); }

  // Runs the call of `views` and `o`, prepared by `prepare` unless it is the latest's. With
  // `stamp`: in, the stamp of a preparation the caller knows `views` and `o` match but for
  // their data (0: none), which skips the comparison while it is still the latest; out, the
  // stamp of the preparation this call ran (never 0).
  template <typename Prepare>
  Outcome run(Prepare prepare, int nd, const poolgen_tensor (&views)[3], const Options& o,
              uint64_t* stamp) {
    const bool known = stamp && prepared_ && *stamp == stamp_;
    if (!known && !(prepared_ && nd == nd_ && same_but_data(views[0], views_[0]) &&
                    same_but_data(views[1], views_[1]) && same_but_data(views[2], views_[2]) &&
                    std::memcmp(&o, &options_, sizeof o) == 0)) {
      poolgen_prepared_free(prepared_);
      prepared_ = nullptr;
      const Outcome r = call([&](char* m, size_t n) {
        return prepare(nd, &views[0], &views[1], &views[2], &o, &prepared_, m, n);
      });
      if (!r.ok()) return r;
      nd_ = nd;
      std::copy(views, views + 3, views_);
      std::memcpy(&options_, &o, sizeof o);
      ++stamp_;
    }
    if (stamp) *stamp = stamp_;
    return call([&](char* m, size_t n) {
      return poolgen_prepared_run(prepared_, views[0].data, views[1].data, views[2].data, m, n);
    });
  }

 private:
  poolgen_prepared* prepared_ = nullptr;
  uint64_t stamp_ = 0;  // preparations made
  int nd_ = 0;
  poolgen_tensor views_[3];
  Options options_;
};

// The op's call (`whole`, its C entry point) on `views`, prepared (`prepare`) on the CPU
// (`stamp`: LatestPrepared::run's).
template <auto whole, auto prepare, typename Options>
Outcome run_op(int nd, const poolgen_tensor (&views)[3], const Options& o,
               uint64_t* stamp = nullptr) {
  if (views[0].device != POOLGEN_CPU) {
    return call([&](char* m, size_t n) {
      return whole(nd, &views[0], &views[1], &views[2], &o, m, n);
    });
  }
  thread_local LatestPrepared<Options> latest;
  return latest.run(prepare, nd, views, o, stamp);
}

// ---------------------------------------------------------------------------------------------
// A CPU output, from PyTorch's CPU allocator as its own kernels get theirs (at::empty would pass
// the dispatcher, a sixth of a tiny call), on transparent huge pages from 4 MiB, as NumPy gives
// its arrays. A fresh large tensor is a fresh mapping whose pages fault in as the kernel first
// writes them; 4 KiB at a time those faults cost more than the kernel (PyTorch 1.13, one thread,
// 1-D 8x64x65536 unpooling gradient, ms: stock gather 55, poolgen 64, into a written tensor 12;
// docs/pytorch.md). Advice only: where the system runs THP `never`, or no aligned 2 MiB lies in
// the range, the pages stay as they were.
at::Tensor cpu_output(at::IntArrayRef sizes, const at::TensorOptions& options) {
  at::Tensor out(at::detail::empty_cpu(sizes, options));
#ifdef MADV_HUGEPAGE
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  constexpr size_t kLeastBytes = size_t{4} << 20;
  const size_t bytes = out.nbytes();
  if (bytes >= kLeastBytes) {
    const auto begin = reinterpret_cast<uintptr_t>(out.data_ptr());
    const uintptr_t first = (begin + page - 1) & ~(page - 1);
    const uintptr_t end = (begin + bytes) & ~(page - 1);
    madvise(reinterpret_cast<void*>(first), end - first, MADV_HUGEPAGE);
  }
#endif
  return out;
}

// Outputs as PyTorch allocates them: `op`'s memory-format rule applied to `like` (the input; a
// 1-D op's unsqueezed at `dim`, as PyTorch runs 1-D ops through 2-D kernels). Batch-less, where
// the op runs such tensors batched (keeps_channels_last), the output is channels-last when
// `batchless_like` is dense channels-last and not also contiguous (extents of 1 can make it
// both) (the input, or in pooling's gradient, grad_output: PyTorch 2 follows it there); else
// contiguous, as are other ranks.
at::Tensor allocate(const int64_t* shape, int rank, const at::TensorOptions& options, StockOp op,
                    const at::Tensor& like, int nd, int64_t dim, const at::Tensor& batchless_like) {
  int64_t sizes[kMaxRank + 2];
  sizes[0] = 1;  // the batch extent a batch-less input is given
  std::copy(shape, shape + rank, sizes + 1);
  at::Tensor as = like;
  int extents = rank;
  if (nd == 1) {
    as = as.unsqueeze(dim);
    std::copy_backward(sizes + 1 + rank + dim + 1, sizes + 1 + rank, sizes + 1 + rank + 1);
    sizes[1 + rank + dim + 1] = 1;
    ++extents;
  }
  const at::DeviceType device = like.device().type();
  const int batched_rank = nd == 3 ? 5 : 4;
  const auto channels_last =
      nd == 3 ? at::MemoryFormat::ChannelsLast3d : at::MemoryFormat::ChannelsLast;
  at::MemoryFormat format = at::MemoryFormat::Contiguous;
  bool batchless = false;
  if (as.dim() == batched_rank) {
    if (keeps_channels_last(op, device, false)) format = as.suggest_memory_format();
  } else if (as.dim() == batched_rank - 1 && keeps_channels_last(op, device, true)) {
    const at::Tensor rule = nd == 1 ? batchless_like.unsqueeze(dim) : batchless_like;
    if (!rule.is_contiguous() && rule.unsqueeze(0).is_contiguous(channels_last)) {
      batchless = true;
      format = channels_last;
      ++extents;
    }
  }
  const at::TensorOptions with_format = options.memory_format(format);
  const at::IntArrayRef sized(sizes + !batchless, extents);
  at::Tensor out = like.is_cuda() ? at::empty(sized, with_format) : cpu_output(sized, with_format);
  if (batchless) out = out.squeeze(0);
  return nd == 1 ? out.squeeze(dim) : out;
}

StockOp pool_op(int nd) { return nd == 3 ? StockOp::pool3d : StockOp::pool2d; }
StockOp pool_backward_op(int nd) {
  return nd == 3 ? StockOp::pool3d_backward : StockOp::pool2d_backward;
}
StockOp unpool_op(int nd) { return nd == 3 ? StockOp::unpool3d : StockOp::unpool2d; }

// A given output must have the result's shape and dtype (the drop-in's out= forms check that).
Outcome check_output(const char* argument, const at::Tensor& out, const int64_t* shape, int rank,
                     at::ScalarType dtype) {
  if (out.sizes() != at::IntArrayRef(shape, rank) || out.scalar_type() != dtype) {
    return fail(POOLGEN_INVALID_ARGUMENT, POOLGEN_ERROR_TENSOR, argument, ": expected shape ",
                list_text(at::IntArrayRef(shape, rank)), " and dtype ", dtype, ", got ",
                list_text(out.sizes()), " and ", out.scalar_type());
  }
  return {};
}

}  // namespace

// ---------------------------------------------------------------------------------------------

[[noreturn]] void raise(const Outcome& outcome) {
  const std::string& m = outcome.message;
  if (outcome.code == POOLGEN_INVALID_ARGUMENT && outcome.argument == "output_size") {
    TORCH_CHECK_VALUE(false, m);
  }
  // A dtype without a kernel: one torch has and poolgen does not, or one this build left out.
  if (outcome.kind == POOLGEN_ERROR_NO_KERNEL && dtype_errors_are_not_implemented()) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, m);
  }
  TORCH_CHECK(false, m);
}

void raise_as_stock(const Outcome& outcome, const std::function<void()>& stock) {
  std::string pytorch;
  {
    const DeterminismOff asked;
    try {
      stock();
    } catch (const c10::Error& e) {
      pytorch = e.what_without_backtrace();
    }
  }
  if (pytorch.empty()) raise(outcome);
  Outcome as_pytorch = outcome;
  as_pytorch.message = pytorch + " (poolgen: " + outcome.message + ")";
  raise(as_pytorch);
}

void raise_cuda_reports(bool wait) {
  char message[1024];
  message[0] = '\0';
  const int32_t code = poolgen_cuda_check_reports(wait, message, sizeof message);
  if (code != POOLGEN_OK) {
    const poolgen_error e = poolgen_last_error();
    raise({code, e.kind, e.argument,
           std::string("an earlier call on CUDA found an invalid index once its kernels had run "
                       "(nothing was written through it): ") + message});
  }
}

bool pytorch_takes(StockOp op, at::ScalarType dtype, at::DeviceType device) {
  constexpr int kTypes = static_cast<int>(at::ScalarType::NumOptions);
  static std::array<std::atomic<int8_t>, kStockOps * kTypes * kDevices> known{};  // 0, 1 yes, 2 no
  std::atomic<int8_t>& answer =
      known[(static_cast<int>(op) * kTypes + static_cast<int>(dtype)) * kDevices +
            device_slot(device)];
  if (answer.load(std::memory_order_relaxed) == 0) {
    bool takes = true;
    try {
      run_stock(op, is_3d(op) ? at::IntArrayRef{1, 1, 1, 1, 1} : at::IntArrayRef{1, 1, 1, 1},
                dtype, at::MemoryFormat::Contiguous, device);
    } catch (const c10::Error&) {
      takes = false;
    }
    answer.store(takes ? 1 : 2, std::memory_order_relaxed);
  }
  return answer.load(std::memory_order_relaxed) == 1;
}

namespace {

// This thread's latest call of an op on the CPU that allocated its outputs, below 4 MiB (larger
// ones are given huge pages, cpu_output): its arguments as PyTorch gave them (the key: window,
// dtypes, the tensors' sizes and strides), and what they made of them: the C options, the
// outputs' sizes and strides (pooling's two outputs share them), and the views but their data.
// A call of the same arguments allocates the same outputs and runs the call prepared for those
// views on them, skipping the conversions (1x1x2x2 F.max_pool2d under PyTorch 1.13: 12,890
// instructions a call before, 7,229 now, stock 7,067; docs/pytorch.md).
template <typename Options>
struct LatestCall {
  WindowKey key{0, 0};
  bool valid = false;
  Options options;
  std::vector<int64_t> sizes, strides;
  bool contiguous = false;  // those strides are the sizes' contiguous ones
  uint64_t prepared = 0;    // the stamp of the call prepared for these views (LatestPrepared::run)
  poolgen_tensor views[3];

  bool repeats(const WindowKey& k) const { return valid && k.keyed() && key == k; }

  // An output of the remembered shape: contiguous ones allocated as aten's own kernels allocate
  // theirs, not from strides (set_sizes_and_strides, the storage's extent from them: 5% of a
  // tiny call).
  at::Tensor output(at::ScalarType dtype) const {
    return contiguous ? at::detail::empty_cpu(sizes, dtype)
                      : at::detail::empty_strided_cpu(sizes, strides, dtype);
  }

  // Runs the remembered call on these tensors' data (views' order: inputs, then outputs).
  template <auto whole, auto prepare>
  Outcome rerun(int nd, const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
    poolgen_tensor v[3] = {views[0], views[1], views[2]};
    v[0].data = a.data_ptr();
    v[1].data = b.data_ptr();
    v[2].data = c.data_ptr();
    follow_torch_threads();
    return run_op<whole, prepare>(nd, v, options, &prepared);
  }

  // The call of `v` and `o`, run here on those views (on PyTorch's thread count), remembered
  // where `keep` (the outcome allowed it: keyed, succeeded, no copy of an expanded tensor)
  // holds and its output `out`, of every output's strides, is small.
  template <auto whole, auto prepare>
  Outcome run(int nd, const poolgen_tensor (&v)[3], const Options& o, const WindowKey& k,
              const at::Tensor& out, bool keep) {
    prepared = 0;  // views not known to match the latest preparation's
    follow_torch_threads();
    const Outcome r = run_op<whole, prepare>(nd, v, o, &prepared);
    valid = keep && r.ok() && k.keyed() && out.nbytes() < (size_t{4} << 20);
    if (valid) {
      key = k;
      options = o;
      sizes.assign(out.sizes().begin(), out.sizes().end());
      strides.assign(out.strides().begin(), out.strides().end());
      // Exactly empty_cpu's strides (is_contiguous() also holds for other strides of unit dims).
      contiguous = out.strides().equals(c10::contiguous_strides(out.sizes()));
      std::copy(v, v + 3, views);
    }
    return r;
  }
};

// The key of a call (LatestCall): the window's lists, the tensors' dtypes in the flag, their
// sizes and strides; none where a tensor is off the CPU.
WindowKey key_of(int nd, int64_t flag, std::initializer_list<at::IntArrayRef> lists,
                 std::initializer_list<const at::Tensor*> tensors) {
  for (const at::Tensor* t : tensors) flag = flag * 64 + static_cast<int64_t>(t->scalar_type());
  WindowKey key(nd, flag);
  for (at::IntArrayRef list : lists) key.add(list);
  for (const at::Tensor* t : tensors) {
    if (!t->device().is_cpu()) key.refuse();
    key.add(t->sizes());
    key.add(t->strides());
  }
  return key;
}

}  // namespace

Outcome max_pool(const at::Tensor& self, const PoolWindow& w, at::Tensor* values,
                 at::Tensor* indices) {
  thread_local LatestCall<poolgen_pool_options> latest;
  const bool keyed = !values->defined() && self.device().is_cpu();
  const WindowKey key =
      keyed ? key_of(w.nd, w.ceil_mode, {w.kernel_size, w.stride, w.padding, w.dilation}, {&self})
            : WindowKey(0, 0);
  if (keyed && latest.repeats(key)) {
    *values = latest.output(self.scalar_type());
    *indices = latest.output(at::kLong);
    return latest.rerun<poolgen_max_pool, poolgen_prepare_max_pool>(w.nd, self, *values,
                                                                     *indices);
  }
  poolgen_pool_options o;
  Outcome r;
  if (!(r = pool_options(w, &o)).ok() || !(r = check_tensor("input", self)).ok()) return r;
  int64_t shape[kMaxRank];
  const int rank = static_cast<int>(self.dim());
  if (!(r = output_shape(poolgen_max_pool_output_shape, w.nd, self, o, shape)).ok()) return r;
  if (values->defined()) {
    if (!(r = check_output("values", *values, shape, rank, self.scalar_type())).ok() ||
        !(r = check_output("indices", *indices, shape, rank, at::kLong)).ok()) {
      return r;
    }
  } else {
    *values = allocate(shape, rank, self.options(), pool_op(w.nd), self, w.nd, -2, self);
    *indices = allocate(shape, rank, self.options().dtype(at::kLong), pool_op(w.nd), self, w.nd,
                        -2, self);
  }
  const Execution on(self);
  o.cuda_stream = on.stream;
  at::Tensor keep[3];
  const poolgen_tensor views[3] = {view_of(self, &keep[0]), view_of(*values, &keep[1]),
                                   view_of(*indices, &keep[2])};
  // Kept for the next call: outputs allocated here (of the same strides), no copy of an
  // expanded input.
  return latest.run<poolgen_max_pool, poolgen_prepare_max_pool>(
      w.nd, views, o, key, *indices,
      keyed && !keep[0].defined() && indices->strides() == values->strides());
}

Outcome max_pool_backward(const at::Tensor& grad_output, const at::Tensor& self,
                          const PoolWindow& w, const at::Tensor& indices, at::Tensor* grad_input) {
  thread_local LatestCall<poolgen_pool_options> latest;
  const bool keyed = !grad_input->defined() && self.device().is_cpu();
  const WindowKey key = keyed ? key_of(w.nd, w.ceil_mode,
                                       {w.kernel_size, w.stride, w.padding, w.dilation},
                                       {&grad_output, &self, &indices})
                              : WindowKey(0, 0);
  if (keyed && latest.repeats(key)) {
    *grad_input = latest.output(self.scalar_type());
    return latest.rerun<poolgen_max_pool_backward, poolgen_prepare_max_pool_backward>(
        w.nd, grad_output, indices, *grad_input);
  }
  poolgen_pool_options o;
  Outcome r;
  if (!(r = pool_options(w, &o)).ok() || !(r = check_tensor("grad_output", grad_output)).ok() ||
      !(r = check_tensor("input", self)).ok() || !(r = check_tensor("indices", indices)).ok()) {
    return r;
  }
  const int rank = static_cast<int>(self.dim());
  if (grad_input->defined()) {
    if (!(r = check_output("grad_input", *grad_input, self.sizes().data(), rank,
                           self.scalar_type())).ok()) {
      return r;
    }
  } else {
    *grad_input = allocate(self.sizes().data(), rank, self.options(), pool_backward_op(w.nd), self,
                           w.nd, -2, grad_output);
  }
  const Execution on(grad_output);
  o.cuda_stream = on.stream;
  at::Tensor keep[3];
  const poolgen_tensor views[3] = {view_of(grad_output, &keep[0]), view_of(indices, &keep[1]),
                                   view_of(*grad_input, &keep[2])};
  return latest.run<poolgen_max_pool_backward, poolgen_prepare_max_pool_backward>(
      w.nd, views, o, key, *grad_input, keyed && !keep[0].defined() && !keep[1].defined());
}

Outcome max_unpool(const at::Tensor& self, const at::Tensor& indices, const UnpoolWindow& w,
                   at::Tensor* output) {
  thread_local LatestCall<poolgen_unpool_options> latest;
  const bool keyed = !output->defined() && self.device().is_cpu();
  const WindowKey key =
      keyed ? key_of(w.nd, w.output_size.has_value(),
                     {w.kernel_size, w.stride, w.padding,
                      w.output_size.has_value() ? *w.output_size : at::IntArrayRef()},
                     {&self, &indices})
            : WindowKey(0, 0);
  if (keyed && latest.repeats(key)) {
    *output = latest.output(self.scalar_type());
    return latest.rerun<poolgen_max_unpool, poolgen_prepare_max_unpool>(w.nd, self, indices,
                                                                        *output);
  }
  poolgen_unpool_options o;
  Outcome r;
  if (!(r = unpool_options(w, &o)).ok() || !(r = check_tensor("values", self)).ok() ||
      !(r = check_tensor("indices", indices)).ok()) {
    return r;
  }
  int64_t shape[kMaxRank];
  const int rank = static_cast<int>(self.dim());
  if (!(r = output_shape(poolgen_max_unpool_output_shape, w.nd, self, o, shape)).ok()) return r;
  if (output->defined()) {
    if (!(r = check_output("output", *output, shape, rank, self.scalar_type())).ok()) return r;
  } else {
    *output = allocate(shape, rank, self.options(), unpool_op(w.nd), self, w.nd, -1, self);
  }
  const Execution on(self);
  o.cuda_stream = on.stream;
  at::Tensor keep[3];
  const poolgen_tensor views[3] = {view_of(self, &keep[0]), view_of(indices, &keep[1]),
                                   view_of(*output, &keep[2])};
  return latest.run<poolgen_max_unpool, poolgen_prepare_max_unpool>(
      w.nd, views, o, key, *output, keyed && !keep[0].defined() && !keep[1].defined());
}

Outcome max_unpool_backward(const at::Tensor& grad_output, const at::Tensor& indices,
                            const UnpoolWindow& w, at::Tensor* grad_values) {
  poolgen_unpool_options o;
  Outcome r;
  if (!(r = unpool_options(w, &o)).ok() || !(r = check_tensor("grad_output", grad_output)).ok() ||
      !(r = check_tensor("indices", indices)).ok()) {
    return r;
  }
  // PyTorch's gradient is a gather (its max_pool_double_backward): contiguous, like the indices.
  const Execution on(grad_output);
  o.cuda_stream = on.stream;
  *grad_values = grad_output.is_cuda() ? at::empty(indices.sizes(), grad_output.options())
                                       : cpu_output(indices.sizes(), grad_output.options());
  at::Tensor keep[3];
  const poolgen_tensor views[3] = {view_of(grad_output, &keep[0]), view_of(indices, &keep[1]),
                                   view_of(*grad_values, &keep[2])};
  follow_torch_threads();
  return run_op<poolgen_max_unpool_backward, poolgen_prepare_max_unpool_backward>(w.nd, views,
                                                                                   o);
}

}  // namespace poolgen_torch
