// poolgen_bench: max pooling with indices, max unpooling and their backward passes against their
// peers on the same cases and the same memory, in one run:
//   poolgen    the library, on each --poolgen_threads count (default 1 and all cores);
//   memcpy     a plain copy whose reads + writes equal the op's compulsory traffic (the roofline);
//   reference  a plain scalar loop nest from docs/semantics.md (reference.cpp), 1 thread, in
//              the case's own layout;
//   aten       PyTorch's CPU kernels (-DPOOLGEN_BENCH_ATEN=ON, aten_peer.cpp): the backward
//              passes as autograd runs them (max_pool*_with_indices_backward, and a gather over
//              flattened planes for unpooling's);
//   xnnpack    XNNPACK's argmax pooling and unpooling, 2-D NHWC f32 with stride == window
//              (-DPOOLGEN_BENCH_XNNPACK=ON, xnnpack_peer.cpp); no backward passes.
// Every case is first checked bit for bit against the reference (and the peers against it), so
// that the timings are of correct kernels; a mismatch makes the exit code 2. Unpool and backward
// inputs take the indices of a real pooling of random data (the SegNet case); the gradients are
// random. The built-in f32 NCHW cases (and any case with the option "general") also time pool
// and unpool on Path::general; pool backward is timed on Path::general wherever the automatic
// path runs another kernel (a window gather). Bytes/s count compulsory traffic (bench.h:
// Case::traffic, the same for the four ops).
//
// Benchmark names are "<op>/<case>/<impl>/threads:<T>": op max_pool, max_unpool,
// max_pool_backward or max_unpool_backward, case in the --poolgen_cases syntax (cases.cpp), impl
// poolgen, poolgen_general, reference, aten, xnnpack, memcpy (Google Benchmark appends
// "/min_time:0.100/repeats:5/real_time" in its output). A row's memcpy runs right after its
// poolgen timing on as many threads: this VM's copy bandwidth moves 1.3-1.5x between minutes, so
// a copy timed once per traffic, minutes from most of the rows that read it, made their shares
// read high or low by that much. Each carries the counters
// traffic_bytes, input_bytes and sweep (1: a --poolgen_sweep case), and the JSON context
// poolgen_command, poolgen_cpu_model and poolgen_llc_bytes, which is all that
// tools/bench_report.py reads. After Google Benchmark's output come a Markdown table of medians
// and ratios, the kernel each case ran and the peers' notes.
//
// Flags (besides Google Benchmark's):
//   --poolgen_cases=CASE[,CASE...]  replaces the built-in cases (empty: none, e.g. for the sweep
//       alone); CASE is <nd>d/<NxCxD1x...>/k<k>s<s>p<p>[/<opt>...], opts: cl, a value dtype,
//       idx32, general, and the ops to time (default: pool and unpool): pool, unpool,
//       pool_backward, unpool_backward
//   --poolgen_sweep                 adds the size sweep (cases.cpp: sweep_cases)
//   --poolgen_peers=LIST            of reference, memcpy, aten, xnnpack (default: all built)
//   --poolgen_threads=LIST          default: 1 and std::thread::hardware_concurrency()
//   --poolgen_cpu_variant=V         runs the kernels' best CPU variant up to V (baseline, sse41,
//       avx2): what a variant earns over the one below it, measured on one machine (baseline
//       needs a build whose POOLGEN_CPU_TARGETS end in x86-64-linux: the default's floor is
//       SSE4.1, and the runtime refuses a CPU below it)
//   --poolgen_streaming_bytes=N     poolgen::set_streaming_bytes(N) before the run: where this
//       machine wants non-temporal stores for scatter outputs (docs/kernels.md, "Streaming
//       outputs"); 0 streams every scatter, a huge N (up to 12 digits) none
//   --poolgen_min_parallel_bytes=N  poolgen::set_min_parallel_bytes(N) before the run: the
//       smallest call shared among threads (docs/kernels.md, "Threads"); 0 shares every call
//   --poolgen_gap_us=N              the calling thread works N us between two timed calls
//       (a spin outside the timing), as between the layers of a network: idle workers go to
//       sleep and each call meets them there (docs/kernels.md, "Threads"); default 0, back to back
//   --poolgen_buffer_offset=N       every buffer starts N bytes past a 64-byte boundary (default
//       0: frameworks' tensors; 16: glibc's large blocks): docs/kernels.md, "Alignment"
//   --poolgen_min_time=SECONDS (default 0.1), --poolgen_repetitions=N (default 5)

#include "bench.h"
#include "copy_pool.h"

#include <HalideRuntime.h>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <unistd.h>

namespace bench {

int all_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

std::vector<std::string> g_problems;
int64_t g_buffer_offset = 0;

namespace {

std::vector<std::unique_ptr<Peer>> g_peers;  // the peer libraries selected
bool g_reference = true, g_memcpy = true;
Spec* g_current = nullptr;  // the case whose buffers are allocated

}  // namespace

// ---------------------------------------------------------------------------------------------
// Setup: random input and gradients, the reference's outputs (the inputs of the ops after
// pooling and the expected results), and a one-off check of poolgen and the peers against them.

Spec::Spec(const Case& c) : Case(c), pooled(pooled_shape()) {
  g.n = shape[0];
  g.c = shape[1];
  g.planes = shape[0] * shape[1];
  for (int i = 0; i < nd; ++i) {
    const int j = 3 - nd + i;
    g.in[j] = shape[2 + i];
    g.out[j] = pooled[2 + i];
    g.k[j] = k;
    g.s[j] = s;
    g.p[j] = p;
  }
}

void Spec::release() {
  for (Buffer* b : {&input, &values, &indices, &expect, &pvalues, &pindices, &output,
                    &grad_pooled, &grad_unpooled, &expect_grad_input, &expect_grad_values,
                    &grad_input, &grad_values})
    b->release();
  for (auto& peer : g_peers) peer->release();
  ready = false;
}

Buffer& Spec::source(Op op) {
  switch (op) {
    case Op::pool: return input;
    case Op::unpool: return values;
    case Op::pool_backward: return grad_pooled;
    case Op::unpool_backward: break;
  }
  return grad_unpooled;
}

std::vector<std::pair<Buffer*, Buffer*>> Spec::results(Op op) {
  switch (op) {
    case Op::pool: return {{&pvalues, &values}, {&pindices, &indices}};
    case Op::unpool: return {{&output, &expect}};
    case Op::pool_backward: return {{&grad_input, &expect_grad_input}};
    case Op::unpool_backward: break;
  }
  return {{&grad_values, &expect_grad_values}};
}

bool Spec::reference(Op op, bool expected) {
  const auto r = results(op);
  auto dst = [&](size_t i) { return (expected ? r[i].second : r[i].first)->data(); };
  if (op == Op::pool) {
    reference_pool(dst(0), dst(1));
    return true;
  }
  return reference_by_index(op, source(op).data(), indices.data(), dst(0));
}

namespace {

// Fills a buffer of `elems` values with a xorshift64* sequence from `seed`.
void fill_random(Buffer& b, DType dtype, int64_t elems, uint64_t seed) {
  b.resize(elems * poolgen::dtype_size(dtype));
  with_types(dtype, DType::i64, [&](auto t, auto) {
    using T = decltype(t);
    uint64_t x = seed;
    T* v = b.as<T>();
    for (int64_t i = 0; i < elems; ++i) {
      x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
      v[i] = ValueTraits<T>::random(x * 2685821657736338717ull);
    }
  });
}

// One poolgen call of an op on a Spec's buffers, its views and options built once (outside the
// timed loop): the source (source()), the indices (pool: its output) and the op's output;
// `prepared`: prepared once (poolgen::PreparedCall), then run on the same data.
class PoolgenCall {
 public:
  PoolgenCall(Spec& sp, Op op, poolgen::Path path, bool prepared = false)
      : op_(op), nd_(sp.nd), pool_(sp.pool_options(path)), unpool_(sp.unpool_options(path)) {
    const auto r = sp.results(op);
    const Ints& from = to_pooled(op) ? sp.shape : sp.pooled;
    const Ints& to = to_pooled(op) ? sp.pooled : sp.shape;
    src_ = sp.view(sp.source(op).data(), sp.vt, from);
    idx_ = sp.view((op == Op::pool ? sp.pindices : sp.indices).data(), sp.it, sp.pooled);
    out_ = sp.view(r[0].first->data(), sp.vt, to);
    if (prepared) prepare_status_ = prepare();
  }
  poolgen::Status operator()() {
    if (!prepare_status_.ok()) return prepare_status_;
    if (prepared_.prepared()) {
      return op_ == Op::pool ? prepared_.run(src_.data, out_.data, idx_.data)
                             : prepared_.run(src_.data, idx_.data, out_.data);
    }
    switch (op_) {
      case Op::pool: return poolgen::max_pool(nd_, src_, out_, idx_, pool_);
      case Op::unpool: return poolgen::max_unpool(nd_, src_, idx_, out_, unpool_);
      case Op::pool_backward: return poolgen::max_pool_backward(nd_, src_, idx_, out_, pool_);
      case Op::unpool_backward: break;
    }
    return poolgen::max_unpool_backward(nd_, src_, idx_, out_, unpool_);
  }

 private:
  poolgen::Status prepare() {
    switch (op_) {
      case Op::pool: return poolgen::prepare_max_pool(nd_, src_, out_, idx_, pool_, &prepared_);
      case Op::unpool:
        return poolgen::prepare_max_unpool(nd_, src_, idx_, out_, unpool_, &prepared_);
      case Op::pool_backward:
        return poolgen::prepare_max_pool_backward(nd_, src_, idx_, out_, pool_, &prepared_);
      case Op::unpool_backward: break;
    }
    return poolgen::prepare_max_unpool_backward(nd_, src_, idx_, out_, unpool_, &prepared_);
  }

  Op op_;
  int nd_;
  poolgen::PoolOptions pool_;
  poolgen::UnpoolOptions unpool_;
  poolgen::TensorView src_, idx_, out_;
  poolgen::PreparedCall prepared_;
  poolgen::Status prepare_status_;
};

}  // namespace

void Spec::ensure() {
  if (ready) return;
  if (g_current && g_current != this) g_current->release();
  g_current = this;
  ready = ran = true;

  const size_t vs = poolgen::dtype_size(vt), is = poolgen::dtype_size(it);
  fill_random(input, vt, in_elems(), 0x9E3779B97F4A7C15ull);
  values.resize(out_elems() * vs);
  indices.resize(out_elems() * is);
  reference_pool(values.data(), indices.data());
  // Gradients of their own sequences: unrelated to the input that chose the indices.
  if (times(Op::pool_backward)) fill_random(grad_pooled, vt, out_elems(), 0x2545F4914F6CDD1Dull);
  if (times(Op::unpool_backward)) fill_random(grad_unpooled, vt, in_elems(), 0xD1B54A32D192ED03ull);
  for (Op op : kOps) {
    if (!times(op)) continue;
    for (auto [out, expected] : results(op)) {
      if (op != Op::pool) expected->resize((to_pooled(op) ? out_elems() : in_elems()) * vs);
      out->resize(expected->size());
    }
    if (op != Op::pool && !reference(op, true))
      g_problems.push_back(what() + ": reference " + op_name(op) + " saw an invalid index");
  }

  poolgen::set_num_threads(all_threads());
  for (Op op : kOps) {
    if (!times(op)) continue;
    std::vector<poolgen::Path> paths{poolgen::Path::automatic};
    if (general_path[static_cast<int>(op)]) paths.push_back(poolgen::Path::general);
    for (auto path : paths) {
      bool same = true;
      for (auto [out, expected] : results(op)) std::memset(out->data(), 7, out->size());
      const poolgen::Status st = PoolgenCall(*this, op, path)();
      for (auto [out, expected] : results(op)) {
        same = same && out->size() == expected->size() &&
               std::memcmp(out->data(), expected->data(), out->size()) == 0;
      }
      const std::string who = std::string("poolgen ") +
                              (path == poolgen::Path::general ? "(general) " : "") + op_name(op);
      if (!st.ok())
        g_problems.push_back(what() + ": " + who + " failed: " + st.message());
      else if (!same)
        g_problems.push_back(what() + ": " + who + " differs from the reference");
    }
  }
  for (auto& peer : g_peers)
    for (Op op : kOps)
      if (times(op) && peer->has(*this, op)) {
        peer->setup(*this);
        break;
      }
}

namespace {

// ---------------------------------------------------------------------------------------------
// The memcpy roofline (copy_pool.h), one pair of buffers sized for the benchmark that runs.

std::vector<char> g_copy_src, g_copy_dst;
CopyPool g_copy_pool;

// The JSON's per-benchmark facts (tools/bench_report.py).
void set_counters(benchmark::State& state, int64_t traffic, int64_t input, bool sweep) {
  state.SetBytesProcessed(state.iterations() * traffic);
  state.counters["traffic_bytes"] = static_cast<double>(traffic);
  state.counters["input_bytes"] = static_cast<double>(input);
  state.counters["sweep"] = sweep;
}

std::chrono::microseconds g_gap{0};  // --poolgen_gap_us

// Times call() (false: stop) for the state's iterations, g_gap apart.
template <typename Call>
void time_calls(benchmark::State& state, const Call& call) {
  using Clock = std::chrono::steady_clock;
  for (auto _ : state) {
    if (g_gap.count() == 0) {
      if (!call()) break;
      continue;
    }
    const auto start = Clock::now();
    const bool ok = call();
    const auto end = Clock::now();
    state.SetIterationTime(std::chrono::duration<double>(end - start).count());
    if (!ok) break;
    while (Clock::now() - end < g_gap) {
    }
  }
}

void bench_memcpy(benchmark::State& state, int64_t bytes, int threads) {
  if (g_copy_src.size() != static_cast<size_t>(bytes / 2)) {
    std::vector<char>(bytes / 2, 1).swap(g_copy_src);
    std::vector<char>(bytes / 2, 0).swap(g_copy_dst);
  }
  time_calls(state, [&] {
    g_copy_pool.copy(g_copy_dst.data(), g_copy_src.data(), g_copy_src.size(), threads);
    return true;
  });
  benchmark::ClobberMemory();
  set_counters(state, bytes, bytes / 2, false);
}

// ---------------------------------------------------------------------------------------------
// One timed op of one case: poolgen (automatic or general path), the reference or a peer.

enum class Impl { poolgen, poolgen_general, poolgen_prepared, reference, peer };

void bench_op(benchmark::State& state, Spec* sp, Op op, Impl impl, Peer* peer, int threads) {
  sp->ensure();
  if (impl == Impl::poolgen || impl == Impl::poolgen_general || impl == Impl::poolgen_prepared) {
    poolgen::set_num_threads(threads);
    PoolgenCall call(*sp, op,
                     impl == Impl::poolgen_general ? poolgen::Path::general
                                                   : poolgen::Path::automatic,
                     impl == Impl::poolgen_prepared);
    time_calls(state, [&] {
      const auto st = call();
      if (!st.ok()) state.SkipWithError(st.message().c_str());
      return st.ok();
    });
  } else if (impl == Impl::reference) {
    time_calls(state, [&] {
      const bool ok = sp->reference(op, false);
      if (!ok) state.SkipWithError("reference: invalid index");
      return ok;
    });
  } else {
    peer->prepare(op, threads);
    time_calls(state, [&] {
      const bool ok = peer->run(op);
      if (!ok) state.SkipWithError((std::string(peer->title()) + " failed").c_str());
      return ok;
    });
  }
  benchmark::ClobberMemory();
  set_counters(state, sp->traffic(), sp->input_bytes(), sp->sweep);
}

// ---------------------------------------------------------------------------------------------
// Registration and the summary table.

// The largest input whose calls are also timed prepared (1x64x14x14).
constexpr int64_t kPreparedElements = 64 * 14 * 14;

struct Row {  // one line of the summary table; the strings are benchmark names
  std::string op, shape;
  int threads;
  std::string poolgen, memcpy, reference;  // "": not run
  std::vector<std::string> peers;          // per g_peers; "n/a": no kernel for the case
  int64_t traffic;
};
std::vector<Row> g_rows;

// Wraps the console reporter and keeps each benchmark's median real time (ms).
class MedianReporter : public benchmark::ConsoleReporter {
 public:
  explicit MedianReporter(OutputOptions opts) : ConsoleReporter(opts) {}
  std::map<std::string, double> median_ms;
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      const bool single = r.run_type == Run::RT_Iteration && r.repetitions <= 1;
      if (!median && !single) continue;
      median_ms[r.run_name.function_name] =
          r.GetAdjustedRealTime() * 1e3 / benchmark::GetTimeUnitMultiplier(r.time_unit);
    }
  }
  double get(const std::string& name) const {
    auto it = median_ms.find(name);
    return it == median_ms.end() ? -1.0 : it->second;
  }
};

std::string fmt(const char* f, double v) {
  if (v <= 0 || !std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

void print_table(const MedianReporter& rep, const std::vector<std::unique_ptr<Spec>>& specs) {
  std::string head = "| op | shape | threads | poolgen ms | poolgen GB/s |", rule = "|---|---|---:|---:|---:|";
  auto col = [&](const std::string& title) { head += " " + title + " |", rule += "---:|"; };
  if (g_memcpy) col("memcpy ms");
  if (g_reference) col("reference ms (1 thread)");
  for (auto& peer : g_peers) col(std::string(peer->title()) + " ms");
  if (g_memcpy) col("poolgen vs memcpy");
  if (g_reference) col("speed-up vs reference");
  for (auto& peer : g_peers) col(std::string("speed-up vs ") + peer->title());
  std::printf("\n%s\n%s\n", head.c_str(), rule.c_str());
  for (const Row& r : g_rows) {
    const double pg = rep.get(r.poolgen);
    if (pg < 0) continue;  // filtered out or failed
    std::vector<double> peer_ms;
    for (const auto& name : r.peers) peer_ms.push_back(name == "n/a" ? -1 : rep.get(name));
    const double mc = rep.get(r.memcpy), ref = rep.get(r.reference);
    std::printf("| %s | %s | %d | %s | %s |", r.op.c_str(), r.shape.c_str(), r.threads,
                fmt("%.4g", pg).c_str(), fmt("%.1f", r.traffic / (pg * 1e-3) / 1e9).c_str());
    auto na_or = [&](size_t i, const std::string& s) { return r.peers[i] == "n/a" ? "n/a" : s; };
    if (g_memcpy) std::printf(" %s |", fmt("%.4g", mc).c_str());
    if (g_reference) std::printf(" %s |", fmt("%.4g", ref).c_str());
    for (size_t i = 0; i < peer_ms.size(); ++i)
      std::printf(" %s |", na_or(i, fmt("%.4g", peer_ms[i])).c_str());
    if (g_memcpy) std::printf(" %s |", fmt("%.0f%%", mc > 0 ? 100.0 * mc / pg : -1).c_str());
    if (g_reference) std::printf(" %s |", fmt("%.1fx", ref > 0 ? ref / pg : -1).c_str());
    for (size_t i = 0; i < peer_ms.size(); ++i)
      std::printf(" %s |", na_or(i, fmt("%.1fx", peer_ms[i] > 0 ? peer_ms[i] / pg : -1)).c_str());
    std::printf("\n");
  }
  std::printf(
      "\npoolgen vs memcpy: memcpy time / poolgen time for a copy whose reads + writes equal the "
      "op's compulsory traffic (100%% = at the copy roofline). Speed-ups: peer time / poolgen "
      "time. Times are medians of the repetitions. Unmarked rows are f32 NCHW/NCDHW/NCL with i64 "
      "indices; n/a: the peer has no CPU kernel for that case (ATen 1.13: no f16 or integer "
      "values, i64 indices only; XNNPACK: 2-D NHWC f32 with stride == window only, no backward "
      "passes).\n");
  std::printf("\nKernels (automatic path):\n");
  for (const auto& sp : specs) {
    if (!sp->ran) continue;
    std::string kernels;
    for (Op op : kOps)
      if (sp->times(op))
        kernels += (kernels.empty() ? "" : ", ") + sp->kernel[static_cast<int>(op)];
    std::printf("- %s: %s\n", sp->name().c_str(), kernels.c_str());
  }
  // Each distinct note once, with the cases it came from (ATen's layouts repeat across a sweep).
  std::vector<std::pair<std::string, std::vector<std::string>>> notes;
  for (const auto& sp : specs)
    for (const auto& note : sp->notes) {
      auto it = std::find_if(notes.begin(), notes.end(), [&](auto& n) { return n.first == note; });
      if (it == notes.end()) it = notes.insert(notes.end(), {note, {}});
      it->second.push_back(sp->name());
    }
  if (!notes.empty()) std::printf("\nPeer notes:\n");
  for (const auto& [note, names] : notes) {
    std::printf("- %s: %s", note.c_str(), names[0].c_str());
    for (size_t i = 1; i < std::min<size_t>(names.size(), 3); ++i) std::printf(", %s", names[i].c_str());
    if (names.size() > 3) std::printf(" and %zu more", names.size() - 3);
    std::printf("\n");
  }
}

void register_all(std::vector<std::unique_ptr<Spec>>& specs, const std::vector<int>& threads,
                  double min_time, int reps) {
  auto configure = [&](benchmark::internal::Benchmark* b) {
    b->Unit(benchmark::kMillisecond)->MinTime(min_time)->Repetitions(reps);
    if (g_gap.count() == 0) {
      b->UseRealTime();
    } else {
      b->UseManualTime();
    }
    b->ReportAggregatesOnly(true);
  };
  for (auto& owned : specs) {
    Spec* sp = owned.get();
    for (Op op : kOps) {
      if (!sp->times(op)) continue;
      const std::string base = std::string(op_name(op)) + "/" + sp->name();
      auto reg = [&](const char* impl_name, Impl impl, Peer* peer, int t) {
        const std::string name = base + "/" + impl_name + "/threads:" + std::to_string(t);
        configure(benchmark::RegisterBenchmark(name.c_str(), bench_op, sp, op, impl, peer, t));
        return name;
      };
      const std::string ref = g_reference ? reg("reference", Impl::reference, nullptr, 1) : "";
      std::vector<std::map<int, std::string>> peer_names(g_peers.size());
      for (size_t i = 0; i < g_peers.size(); ++i)
        for (int t : threads)
          peer_names[i][t] = g_peers[i]->has(*sp, op)
                                 ? reg(g_peers[i]->name(), Impl::peer, g_peers[i].get(), t)
                                 : "n/a";
      std::vector<std::pair<Impl, std::string>> variants{{Impl::poolgen, ""}};
      if (op == Op::unpool) variants = {{Impl::poolgen, " (SegNet indices)"}};
      if (sp->general_path[static_cast<int>(op)])
        variants.push_back({Impl::poolgen_general, " (general path)"});
      // Calls small enough for their fixed cost to show: also prepared once, then run.
      if (sp->in_elems() <= kPreparedElements) {
        variants.push_back({Impl::poolgen_prepared, " (prepared)"});
      }
      // "max_pool2d_backward k2s2p0 NHWC": the op's family, the label's rank ("2d"), the
      // backward mark, the rest of the label.
      const bool pooling = op == Op::pool || op == Op::pool_backward;
      const std::string label = sp->label(), rank = label.substr(0, label.find(' '));
      const std::string title = (pooling ? "max_pool" : "max_unpool") + rank +
                                (op == Op::pool || op == Op::unpool ? "" : "_backward") +
                                label.substr(rank.size());
      std::map<int, std::string> memcpy_names;  // the case's copy per thread count
      for (auto& [impl, suffix] : variants)
        for (int t : threads) {
          Row row;
          row.op = title + suffix;
          row.shape = sp->shape_str();
          row.threads = t;
          row.poolgen = reg(impl == Impl::poolgen           ? "poolgen"
                            : impl == Impl::poolgen_general ? "poolgen_general"
                                                            : "poolgen_prepared",
                            impl, nullptr, t);
          if (g_memcpy && memcpy_names[t].empty()) {
            memcpy_names[t] = base + "/memcpy/threads:" + std::to_string(t);
            configure(benchmark::RegisterBenchmark(memcpy_names[t].c_str(), bench_memcpy,
                                                   sp->traffic(), t));
          }
          row.memcpy = memcpy_names[t];
          row.reference = ref;
          for (auto& names : peer_names) row.peers.push_back(names[t]);
          row.traffic = sp->traffic();
          g_rows.push_back(row);
        }
    }
  }
}

// The kernel the op's call on the case would run on `path` (its data is not read).
poolgen::Status kernel_name(const Spec& sp, Op op, poolgen::Path path, std::string* name) {
  const DType vt = sp.vt, it = sp.it;
  switch (op) {
    case Op::pool:
      return poolgen::max_pool_kernel_name(sp.nd, sp.view(nullptr, vt, sp.shape), it,
                                           sp.pool_options(path), name);
    case Op::unpool:
      return poolgen::max_unpool_kernel_name(sp.nd, sp.view(nullptr, vt, sp.pooled), it,
                                             sp.unpool_options(path), name);
    case Op::pool_backward:
      return poolgen::max_pool_backward_kernel_name(sp.nd, sp.view(nullptr, vt, sp.pooled), it,
                                                    sp.shape, sp.pool_options(path), name);
    case Op::unpool_backward: break;
  }
  return poolgen::max_unpool_backward_kernel_name(sp.nd, sp.view(nullptr, vt, sp.shape), it,
                                                  sp.pooled, sp.unpool_options(path), name);
}

// ---------------------------------------------------------------------------------------------
// Flags and the run's context.

// Removes "--name=value" (or a bare "--name": "") from argv and returns value (or def).
const char* take_flag(int* argc, char** argv, const char* name, const char* def) {
  const size_t n = std::strlen(name);
  for (int i = 1; i < *argc; ++i)
    if (std::strncmp(argv[i], name, n) == 0 && (argv[i][n] == '=' || argv[i][n] == '\0')) {
      const char* v = argv[i][n] ? argv[i] + n + 1 : "";
      for (int j = i; j + 1 < *argc; ++j) argv[j] = argv[j + 1];
      --*argc;
      return v;
    }
  return def;
}

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr, "poolgen_bench: %s\n", message.c_str());
  std::exit(1);
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> r;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, ',');)
    if (!part.empty()) r.push_back(part);
  return r;
}

std::vector<int> parse_threads(const char* flag) {
  std::vector<int> r;
  if (!flag) {
    r = {1, all_threads()};
  } else {
    for (const auto& t : split_list(flag)) {
      const int v = std::atoi(t.c_str());
      if (v < 1 || t.find_first_not_of("0123456789") != std::string::npos)
        usage_error("--poolgen_threads: \"" + t + "\": expected a positive integer");
      r.push_back(v);
    }
    if (r.empty()) usage_error("--poolgen_threads: expected a comma-separated list of counts");
  }
  std::sort(r.begin(), r.end());
  r.erase(std::unique(r.begin(), r.end()), r.end());
  return r;
}

void select_peers(const char* flag) {
  std::map<std::string, std::unique_ptr<Peer> (*)()> built;
#ifdef POOLGEN_BENCH_ATEN
  built["aten"] = make_aten_peer;
#endif
#ifdef POOLGEN_BENCH_XNNPACK
  built["xnnpack"] = make_xnnpack_peer;
#endif
  std::vector<std::string> names{"reference", "memcpy", "aten", "xnnpack"};
  if (flag) names = split_list(flag);
  g_reference = g_memcpy = false;
  for (const auto& n : names) {
    if (n == "reference") g_reference = true;
    else if (n == "memcpy") g_memcpy = true;
    else if (built.count(n)) g_peers.push_back(built[n]());
    else if (n == "aten" || n == "xnnpack") {
      if (flag) usage_error("--poolgen_peers: " + n + " is not built (configure with -DPOOLGEN_BENCH_" +
                            (n == "aten" ? "ATEN" : "XNNPACK") + "=ON)");
    } else {
      usage_error("--poolgen_peers: \"" + n + "\": expected reference, memcpy, aten or xnnpack");
    }
  }
}

// x86 features above each --poolgen_cpu_variant level; a kernel variant needing one is refused,
// so Halide's multitarget wrapper takes the next variant down on its first call.
const std::map<std::string, std::vector<halide_target_feature_t>> kFeaturesAbove = {
    {"avx2", {halide_target_feature_avx512, halide_target_feature_avx512_skylake,
              halide_target_feature_avx512_cannonlake, halide_target_feature_avx512_zen4,
              halide_target_feature_avx512_zen5,
              halide_target_feature_avx512_sapphirerapids}},
    {"sse41", {halide_target_feature_avx, halide_target_feature_avx2, halide_target_feature_fma,
               halide_target_feature_f16c}},
    {"baseline", {halide_target_feature_sse41}}};
std::vector<halide_target_feature_t> g_refused_features;

int capped_can_use_target_features(int count, const uint64_t* features) {
  for (halide_target_feature_t f : g_refused_features)
    if (f / 64 < count && (features[f / 64] >> (f % 64) & 1)) return 0;
  return halide_default_can_use_target_features(count, features);
}

void cap_cpu_variant(const char* level) {
  if (!level) return;
  bool found = false;
  for (const char* l : {"avx2", "sse41", "baseline"}) {  // each level refuses those above it too
    const auto& above = kFeaturesAbove.at(l);
    g_refused_features.insert(g_refused_features.end(), above.begin(), above.end());
    if ((found = std::strcmp(level, l) == 0)) break;
  }
  if (!found) usage_error(std::string("--poolgen_cpu_variant: \"") + level +
                          "\": expected baseline, sse41 or avx2");
  halide_set_custom_can_use_target_features(capped_can_use_target_features);
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos)
      return line.substr(line.find(':') + 2);
  return "unknown";
}

std::string command_line(int argc, char** argv) {  // shell-quoted where needed
  std::string r;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./=,:+-") !=
        std::string::npos) {
      std::string q = "'";
      for (char ch : a) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
      a = q + "'";
    }
    r += (i ? " " : "") + a;
  }
  return r;
}

}  // namespace
}  // namespace bench

int main(int argc, char** argv) {
  using namespace bench;
  const std::string command = command_line(argc, argv);
  const double min_time = std::atof(take_flag(&argc, argv, "--poolgen_min_time", "0.1"));
  const int reps = std::max(1, std::atoi(take_flag(&argc, argv, "--poolgen_repetitions", "5")));
  const char* cases_flag = take_flag(&argc, argv, "--poolgen_cases", nullptr);
  const char* sweep_flag = take_flag(&argc, argv, "--poolgen_sweep", "false");
  const bool sweep = std::strcmp(sweep_flag, "false") != 0 && std::strcmp(sweep_flag, "0") != 0;
  const std::vector<int> threads = parse_threads(take_flag(&argc, argv, "--poolgen_threads", nullptr));
  select_peers(take_flag(&argc, argv, "--poolgen_peers", nullptr));
  cap_cpu_variant(take_flag(&argc, argv, "--poolgen_cpu_variant", nullptr));
  // The integer flags: the runtime's byte thresholds and the gap, each set before the run when
  // given.
  struct IntFlag {
    const char* flag;
    const char* unit;
    void (*set)(int64_t);
  };
  const IntFlag int_flags[] = {
      {"--poolgen_streaming_bytes", "a byte count", poolgen::set_streaming_bytes},
      {"--poolgen_min_parallel_bytes", "a byte count", poolgen::set_min_parallel_bytes},
      {"--poolgen_gap_us", "microseconds", [](int64_t us) { g_gap = std::chrono::microseconds(us); }},
      {"--poolgen_buffer_offset", "a byte count below 64",
       [](int64_t bytes) {
         if (bytes < 0 || bytes >= 64) usage_error("--poolgen_buffer_offset: expected 0 to 63");
         g_buffer_offset = bytes;
       }}};
  for (const IntFlag& f : int_flags) {
    if (const char* value = take_flag(&argc, argv, f.flag, nullptr)) {
      int64_t n = 0;
      if (!parse_int(value, &n))
        usage_error(std::string(f.flag) + ": \"" + value + "\": expected " + f.unit);
      f.set(n);
    }
  }
  // Color as Google Benchmark's own console reporter would: --benchmark_color, else a terminal.
  bool color = isatty(STDOUT_FILENO) != 0;
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--benchmark_color=", 18) == 0) {
      const std::string v = argv[i] + 18;
      color = v == "true" || v == "yes" || v == "1" || v == "force" || (v == "auto" && color);
    }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  std::vector<Case> cases;
  std::string error;
  if (!cases_flag) cases = builtin_cases();
  else if (!parse_cases(cases_flag, &cases, &error)) usage_error("--poolgen_cases: " + error);
  std::string llc_source;
  const int64_t llc = last_level_cache(&llc_source);
  if (sweep) {
    std::printf("poolgen_bench: sweep up to 8x a last-level cache of %lld KiB (from %s)\n",
                static_cast<long long>(llc >> 10), llc_source.c_str());
    for (const Case& c : sweep_cases(llc)) cases.push_back(c);
  }

  // One Spec per distinct case name (a repeated case times the union of its ops), without the
  // cases whose kernels this build lacks.
  std::vector<Case> distinct;
  std::map<std::string, size_t> seen;
  for (const Case& c : cases) {
    auto [it, fresh] = seen.emplace(c.name(), distinct.size());
    if (fresh) {
      distinct.push_back(c);
      continue;
    }
    Case& d = distinct[it->second];
    d.ops |= c.ops, d.sweep |= c.sweep, d.general_rows |= c.general_rows;
  }
  std::vector<std::unique_ptr<Spec>> specs;
  for (const Case& c : distinct) {
    auto sp = std::make_unique<Spec>(c);
    poolgen::Status st;
    for (Op op : kOps) {
      const int i = static_cast<int>(op);
      if (!st.ok() || !c.times(op)) continue;
      st = kernel_name(*sp, op, poolgen::Path::automatic, &sp->kernel[i]);
      // Forward ops: the general kernel where the case asks; pool backward: where it is not the
      // automatic path's (a window gather, in builds that have them); unpool backward has one.
      std::string general;
      if (st.ok() && op == Op::pool_backward)
        st = kernel_name(*sp, op, poolgen::Path::general, &general);
      sp->general_path[i] = op == Op::pool_backward ? general != sp->kernel[i]
                            : op == Op::unpool_backward ? false
                                                        : c.general_rows;
    }
    if (st.code() == poolgen::Code::unsupported) {
      std::printf("poolgen_bench: skipping %s: %s\n", c.name().c_str(), st.message().c_str());
      continue;
    }
    if (!st.ok()) usage_error("case \"" + c.name() + "\": " + st.message());
    specs.push_back(std::move(sp));
  }
  register_all(specs, threads, min_time, reps);

  benchmark::AddCustomContext("poolgen_command", command);
  benchmark::AddCustomContext("poolgen_cpu_model", cpu_model());
  benchmark::AddCustomContext("poolgen_llc_bytes", std::to_string(llc));
  benchmark::AddCustomContext("poolgen_llc_source", llc_source);
  MedianReporter reporter(color ? benchmark::ConsoleReporter::OO_ColorTabular
                                : benchmark::ConsoleReporter::OO_Tabular);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  print_table(reporter, specs);

  for (const auto& p : g_problems) std::printf("MISMATCH: %s\n", p.c_str());
  return g_problems.empty() ? 0 : 2;
}
