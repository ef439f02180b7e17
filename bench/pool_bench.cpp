// poolgen_bench: max pooling with indices and max unpooling (f32, NCHW) against its peers on the
// same shapes and the same memory, in one run:
//   poolgen    the library, on 1 thread and on all threads (std::thread::hardware_concurrency());
//   memcpy     a plain copy whose reads + writes equal the op's compulsory traffic (the roofline);
//   reference  a plain scalar loop nest written here from SEMANTICS.md (1 thread);
//   ATen       PyTorch's CPU kernels (only with -DPOOLGEN_BENCH_ATEN=ON), 1 and all threads.
// Unpool inputs come from a real pooling of random data (the SegNet case); the unpool is timed on
// the automatic path (which may take the SegNet gather) and, as separate rows, on Path::general.
// Bytes/s count compulsory traffic: pool = input + values + indices, unpool = values + indices +
// output. After the Google Benchmark output a Markdown table of medians and ratios is printed.
//
// Extra flags (besides Google Benchmark's): --poolgen_min_time=SECONDS (default 0.1) and
// --poolgen_repetitions=N (default 5).

#include <benchmark/benchmark.h>
#include <poolgen/poolgen.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#ifdef POOLGEN_BENCH_ATEN
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#endif

namespace {

using poolgen::Ints;

int all_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

// ---------------------------------------------------------------------------------------------
// One benchmark shape: f32 NCHW input, cubic kernel/stride/padding, dilation 1, floor mode.

struct Geometry {  // spatial dims padded to 3 (leading extents 1)
  int64_t planes = 1;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int64_t k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, p[3] = {0, 0, 0};
  int64_t in_plane() const { return in[0] * in[1] * in[2]; }
  int64_t out_plane() const { return out[0] * out[1] * out[2]; }
};

struct Spec {
  int nd;
  Ints shape;  // N, C, spatial...
  int64_t k, s, p;

  // Filled by ensure(), on first use.
  bool ready = false;
  Geometry g;
  Ints pooled_shape;
  std::vector<float> input, values, pvalues, output;
  std::vector<int64_t> indices, pindices;
  std::vector<char> copy_src, copy_dst;

  std::string tag() const {
    return "k" + std::to_string(k) + "s" + std::to_string(s) + "p" + std::to_string(p);
  }
  std::string shape_str() const {
    std::string r;
    for (size_t i = 0; i < shape.size(); ++i) r += (i ? "x" : "") + std::to_string(shape[i]);
    return r;
  }
  int64_t in_elems() const { return g.planes * g.in_plane(); }
  int64_t out_elems() const { return g.planes * g.out_plane(); }
  // Compulsory traffic; pool (input + values + indices) and unpool (values + indices + output)
  // move the same number of bytes.
  int64_t traffic() const { return in_elems() * 4 + out_elems() * (4 + 8); }

  poolgen::PoolOptions pool_options() const {
    poolgen::PoolOptions o;
    o.kernel_size = {k};
    o.stride = {s};
    o.padding = {p};
    return o;
  }
  poolgen::UnpoolOptions unpool_options(poolgen::Path path) const {
    poolgen::UnpoolOptions o;
    o.kernel_size = {k};
    o.stride = {s};
    o.padding = {p};
    o.output_size.assign(shape.end() - nd, shape.end());
    o.path = path;
    return o;
  }
  void init_geometry();
  void ensure();
};

std::vector<std::string> g_problems;  // correctness mismatches found while setting up

// ---------------------------------------------------------------------------------------------
// The scalar reference (SEMANTICS.md, dilation 1): one loop nest, one thread.

void reference_pool(const Geometry& g, const float* in, float* vals, int64_t* idx) {
  const int64_t ip = g.in_plane(), op = g.out_plane();
  for (int64_t c = 0; c < g.planes; ++c, in += ip, vals += op, idx += op) {
    int64_t o = 0;
    for (int64_t od = 0; od < g.out[0]; ++od)
      for (int64_t oh = 0; oh < g.out[1]; ++oh)
        for (int64_t ow = 0; ow < g.out[2]; ++ow, ++o) {
          int64_t lo[3], hi[3];
          const int64_t pos[3] = {od, oh, ow};
          for (int i = 0; i < 3; ++i) {
            lo[i] = pos[i] * g.s[i] - g.p[i];
            hi[i] = std::min(lo[i] + g.k[i], g.in[i]);
            lo[i] = std::max<int64_t>(lo[i], 0);
          }
          float best = -std::numeric_limits<float>::infinity();
          int64_t best_i = (lo[0] * g.in[1] + lo[1]) * g.in[2] + lo[2];
          for (int64_t d = lo[0]; d < hi[0]; ++d)
            for (int64_t h = lo[1]; h < hi[1]; ++h)
              for (int64_t w = lo[2]; w < hi[2]; ++w) {
                const int64_t i = (d * g.in[1] + h) * g.in[2] + w;
                const float v = in[i];
                if (v > best || std::isnan(v)) {
                  best = v;
                  best_i = i;
                }
              }
          vals[o] = best;
          idx[o] = best_i;
        }
  }
}

bool reference_unpool(const Geometry& g, const float* vals, const int64_t* idx, float* out) {
  const int64_t ip = g.out_plane(), op = g.in_plane();  // unpool maps pooled -> input extent
  std::memset(out, 0, sizeof(float) * g.planes * op);
  for (int64_t c = 0; c < g.planes; ++c, vals += ip, idx += ip, out += op)
    for (int64_t i = 0; i < ip; ++i) {
      const int64_t j = idx[i];
      if (j < 0 || j >= op) return false;
      out[j] = vals[i];
    }
  return true;
}

// ---------------------------------------------------------------------------------------------
// The memcpy roofline: `threads` threads each copy one contiguous chunk.

void parallel_memcpy(char* dst, const char* src, size_t bytes, int threads) {
  if (threads <= 1) {
    std::memcpy(dst, src, bytes);
    return;
  }
  std::vector<std::thread> pool;
  const size_t chunk = (bytes + threads - 1) / threads;
  for (int t = 0; t < threads; ++t) {
    const size_t b = std::min(bytes, t * chunk), e = std::min(bytes, b + chunk);
    pool.emplace_back([=] { std::memcpy(dst + b, src + b, e - b); });
  }
  for (auto& th : pool) th.join();
}

// ---------------------------------------------------------------------------------------------
// ATen peers on the same memory (1-D goes through the 2-D kernels on an (N, C, 1, L) view).

#ifdef POOLGEN_BENCH_ATEN
struct AtenViews {
  at::Tensor input, values, indices, output;
  std::vector<int64_t> k, s, p, out_size;
};

AtenViews aten_views(Spec& sp, float* values, int64_t* indices) {
  AtenViews v;
  std::vector<int64_t> in_shape(sp.shape.begin(), sp.shape.end());
  std::vector<int64_t> pooled(sp.pooled_shape.begin(), sp.pooled_shape.end());
  v.k.assign(sp.nd, sp.k);
  v.s.assign(sp.nd, sp.s);
  v.p.assign(sp.nd, sp.p);
  if (sp.nd == 1) {
    in_shape.insert(in_shape.end() - 1, 1);
    pooled.insert(pooled.end() - 1, 1);
    v.k.insert(v.k.begin(), 1);
    v.s.insert(v.s.begin(), 1);
    v.p.insert(v.p.begin(), 0);
  }
  v.out_size.assign(in_shape.end() - (sp.nd == 3 ? 3 : 2), in_shape.end());
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  const auto i64 = at::TensorOptions().dtype(at::kLong);
  v.input = at::from_blob(sp.input.data(), in_shape, f32);
  v.output = at::from_blob(sp.output.data(), in_shape, f32);
  v.values = at::from_blob(values, pooled, f32);
  v.indices = at::from_blob(indices, pooled, i64);
  return v;
}

void aten_pool(AtenViews& v, int nd) {
  if (nd == 3)
    at::max_pool3d_with_indices_out(v.values, v.indices, v.input, v.k, v.s, v.p, {1, 1, 1}, false);
  else
    at::max_pool2d_with_indices_out(v.values, v.indices, v.input, v.k, v.s, v.p, {1, 1}, false);
}

void aten_unpool(AtenViews& v, int nd) {
  if (nd == 3)
    at::max_unpool3d_out(v.output, v.values, v.indices, v.out_size, v.s, v.p);
  else
    at::max_unpool2d_out(v.output, v.values, v.indices, v.out_size);
}
#endif

// ---------------------------------------------------------------------------------------------
// Setup: random input, reference pooling (the unpool inputs), and a one-off correctness check of
// poolgen (and ATen) against the reference so that the timings are of correct kernels.

void Spec::init_geometry() {
  g.planes = shape[0] * shape[1];
  for (int i = 0; i < nd; ++i) {
    const int j = 3 - nd + i;
    g.in[j] = shape[2 + i];
    g.k[j] = k;
    g.s[j] = s;
    g.p[j] = p;
    g.out[j] = (g.in[j] + 2 * p - k) / s + 1;
  }
  pooled_shape = {shape[0], shape[1]};
  for (int i = 0; i < nd; ++i) pooled_shape.push_back(g.out[3 - nd + i]);
}

void Spec::ensure() {
  if (ready) return;
  ready = true;

  input.resize(in_elems());
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (auto& v : input) {  // xorshift64*: uniform in [-1, 1)
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    v = static_cast<float>((x * 2685821657736338717ull) >> 40) / 8388608.0f - 1.0f;
  }
  values.resize(out_elems());
  indices.resize(out_elems());
  pvalues.resize(out_elems());
  pindices.resize(out_elems());
  output.resize(in_elems());
  copy_src.assign(traffic() / 2, 1);
  copy_dst.assign(traffic() / 2, 0);
  reference_pool(g, input.data(), values.data(), indices.data());

  const std::string what = "max_pool" + std::to_string(nd) + "d " + tag() + " " + shape_str();
  auto check_pool = [&](const char* who) {
    if (std::memcmp(pvalues.data(), values.data(), values.size() * 4) != 0 ||
        std::memcmp(pindices.data(), indices.data(), indices.size() * 8) != 0)
      g_problems.push_back(what + ": " + who + " pool differs from the reference");
  };
  std::vector<float> expect(in_elems());
  if (!reference_unpool(g, values.data(), indices.data(), expect.data()))
    g_problems.push_back(what + ": reference unpool saw an invalid index");
  auto check_unpool = [&](const char* who) {
    if (std::memcmp(output.data(), expect.data(), expect.size() * 4) != 0)
      g_problems.push_back(what + ": " + who + " unpool differs from the reference");
  };

  poolgen::set_num_threads(all_threads());
  auto st = poolgen::max_pool(nd, poolgen::contiguous(input.data(), shape),
                              poolgen::contiguous(pvalues.data(), pooled_shape),
                              poolgen::contiguous(pindices.data(), pooled_shape), pool_options());
  if (!st.ok())
    g_problems.push_back(what + ": poolgen pool failed: " + st.message());
  else
    check_pool("poolgen");
  for (auto path : {poolgen::Path::automatic, poolgen::Path::general}) {
    std::fill(output.begin(), output.end(), 7.0f);
    st = poolgen::max_unpool(nd, poolgen::contiguous(values.data(), pooled_shape),
                             poolgen::contiguous(indices.data(), pooled_shape),
                             poolgen::contiguous(output.data(), shape), unpool_options(path));
    const char* who = path == poolgen::Path::general ? "poolgen (general)" : "poolgen";
    if (!st.ok())
      g_problems.push_back(what + ": " + who + " unpool failed: " + st.message());
    else
      check_unpool(who);
  }
#ifdef POOLGEN_BENCH_ATEN
  at::set_num_threads(all_threads());
  AtenViews v = aten_views(*this, pvalues.data(), pindices.data());
  std::fill(pvalues.begin(), pvalues.end(), 7.0f);
  aten_pool(v, nd);
  check_pool("ATen");
  v = aten_views(*this, values.data(), indices.data());
  std::fill(output.begin(), output.end(), 7.0f);
  aten_unpool(v, nd);
  check_unpool("ATen");
#endif
}

// ---------------------------------------------------------------------------------------------
// Benchmark bodies.

enum class Impl { poolgen, poolgen_general, memcpy, reference, aten };

void bench_pool(benchmark::State& state, Spec* sp, Impl impl, int threads) {
  sp->ensure();
  const int nd = sp->nd;
  if (impl == Impl::poolgen) {
    poolgen::set_num_threads(threads);
    const auto in = poolgen::contiguous(sp->input.data(), sp->shape);
    const auto vals = poolgen::contiguous(sp->pvalues.data(), sp->pooled_shape);
    const auto idx = poolgen::contiguous(sp->pindices.data(), sp->pooled_shape);
    const auto opt = sp->pool_options();
    for (auto _ : state) {
      auto st = poolgen::max_pool(nd, in, vals, idx, opt);
      if (!st.ok()) {
        state.SkipWithError(st.message().c_str());
        break;
      }
    }
  } else if (impl == Impl::memcpy) {
    for (auto _ : state)
      parallel_memcpy(sp->copy_dst.data(), sp->copy_src.data(), sp->copy_src.size(), threads);
  } else if (impl == Impl::reference) {
    for (auto _ : state) reference_pool(sp->g, sp->input.data(), sp->pvalues.data(), sp->pindices.data());
  } else if (impl == Impl::aten) {
#ifdef POOLGEN_BENCH_ATEN
    at::set_num_threads(threads);
    AtenViews v = aten_views(*sp, sp->pvalues.data(), sp->pindices.data());
    for (auto _ : state) aten_pool(v, nd);
#endif
  }
  benchmark::ClobberMemory();
  state.SetBytesProcessed(state.iterations() * sp->traffic());
}

void bench_unpool(benchmark::State& state, Spec* sp, Impl impl, int threads) {
  sp->ensure();
  const int nd = sp->nd;
  if (impl == Impl::poolgen || impl == Impl::poolgen_general) {
    poolgen::set_num_threads(threads);
    const auto vals = poolgen::contiguous(sp->values.data(), sp->pooled_shape);
    const auto idx = poolgen::contiguous(sp->indices.data(), sp->pooled_shape);
    const auto out = poolgen::contiguous(sp->output.data(), sp->shape);
    const auto opt = sp->unpool_options(impl == Impl::poolgen_general ? poolgen::Path::general
                                                                      : poolgen::Path::automatic);
    for (auto _ : state) {
      auto st = poolgen::max_unpool(nd, vals, idx, out, opt);
      if (!st.ok()) {
        state.SkipWithError(st.message().c_str());
        break;
      }
    }
  } else if (impl == Impl::memcpy) {
    for (auto _ : state)
      parallel_memcpy(sp->copy_dst.data(), sp->copy_src.data(), sp->copy_src.size(), threads);
  } else if (impl == Impl::reference) {
    for (auto _ : state)
      if (!reference_unpool(sp->g, sp->values.data(), sp->indices.data(), sp->output.data())) {
        state.SkipWithError("reference unpool: invalid index");
        break;
      }
  } else if (impl == Impl::aten) {
#ifdef POOLGEN_BENCH_ATEN
    at::set_num_threads(threads);
    AtenViews v = aten_views(*sp, sp->values.data(), sp->indices.data());
    for (auto _ : state) aten_unpool(v, nd);
#endif
  }
  benchmark::ClobberMemory();
  state.SetBytesProcessed(state.iterations() * sp->traffic());
}

// ---------------------------------------------------------------------------------------------
// Registration and the summary table.

struct Row {  // one line of the summary table; the strings are benchmark names
  std::string op, shape;
  int threads;
  std::string poolgen, memcpy, reference, aten;
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

void print_table(const MedianReporter& rep) {
#ifdef POOLGEN_BENCH_ATEN
  const bool aten = true;
#else
  const bool aten = false;
#endif
  std::printf("\n| op | shape | threads | poolgen ms | poolgen GB/s | memcpy ms | reference ms (1 thread) |%s"
              " poolgen vs memcpy | speed-up vs reference |%s\n",
              aten ? " ATen ms |" : "", aten ? " speed-up vs ATen |" : "");
  std::printf("|---|---|---:|---:|---:|---:|---:|%s---:|---:|%s\n", aten ? "---:|" : "",
              aten ? "---:|" : "");
  for (const Row& r : g_rows) {
    const double pg = rep.get(r.poolgen), mc = rep.get(r.memcpy), ref = rep.get(r.reference),
                 at = rep.get(r.aten);
    if (pg < 0 && mc < 0 && ref < 0 && at < 0) continue;  // filtered out
    const double gbs = pg > 0 ? r.traffic / (pg * 1e-3) / 1e9 : -1;
    std::printf("| %s | %s | %d | %s | %s | %s | %s |", r.op.c_str(), r.shape.c_str(), r.threads,
                fmt("%.3f", pg).c_str(), fmt("%.1f", gbs).c_str(), fmt("%.3f", mc).c_str(),
                fmt("%.3f", ref).c_str());
    if (aten) std::printf(" %s |", fmt("%.3f", at).c_str());
    std::printf(" %s | %s |", fmt("%.0f%%", pg > 0 && mc > 0 ? 100.0 * mc / pg : -1).c_str(),
                fmt("%.1fx", pg > 0 && ref > 0 ? ref / pg : -1).c_str());
    if (aten) std::printf(" %s |", fmt("%.1fx", pg > 0 && at > 0 ? at / pg : -1).c_str());
    std::printf("\n");
  }
  std::printf(
      "\npoolgen vs memcpy: memcpy time / poolgen time for a copy whose reads + writes equal the "
      "op's compulsory traffic (100%% = at the copy roofline). Speed-ups: peer time / poolgen "
      "time. Times are medians of the repetitions.\n");
}

void register_all(std::vector<std::unique_ptr<Spec>>& specs, double min_time, int reps) {
  std::vector<int> thread_counts{1};
  if (all_threads() > 1) thread_counts.push_back(all_threads());
  auto configure = [&](benchmark::internal::Benchmark* b) {
    b->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(min_time)->Repetitions(reps);
    b->ReportAggregatesOnly(true);
  };
  for (auto& owned : specs) {
    Spec* sp = owned.get();
    const std::string tag = std::to_string(sp->nd) + "d_" + sp->tag() + "/" + sp->shape_str();
    const std::string label = std::to_string(sp->nd) + "d " + sp->tag();
    for (int unpool = 0; unpool < 2; ++unpool) {
      const std::string base = (unpool ? "max_unpool" : "max_pool") + tag;
      auto reg = [&](const std::string& name, Impl impl, int threads) {
        configure(unpool ? benchmark::RegisterBenchmark(name.c_str(), bench_unpool, sp, impl, threads)
                         : benchmark::RegisterBenchmark(name.c_str(), bench_pool, sp, impl, threads));
        return name;
      };
      const std::string ref = reg(base + "/reference/threads:1", Impl::reference, 1);
      std::map<int, std::string> mc, at;
      for (int t : thread_counts) {
        mc[t] = reg(base + "/memcpy/threads:" + std::to_string(t), Impl::memcpy, t);
#ifdef POOLGEN_BENCH_ATEN
        at[t] = reg(base + "/aten/threads:" + std::to_string(t), Impl::aten, t);
#endif
      }
      std::vector<std::pair<Impl, std::string>> variants{{Impl::poolgen, ""}};
      if (unpool) variants = {{Impl::poolgen, " (SegNet indices)"}, {Impl::poolgen_general, " (general path)"}};
      for (auto& [impl, suffix] : variants)
        for (int t : thread_counts) {
          const char* who = impl == Impl::poolgen_general ? "/poolgen_general" : "/poolgen";
          Row row;
          row.op = (unpool ? "max_unpool" : "max_pool") + label + suffix;
          row.shape = sp->shape_str();
          row.threads = t;
          row.poolgen = reg(base + who + "/threads:" + std::to_string(t), impl, t);
          row.memcpy = mc[t];
          row.reference = ref;
          row.aten = at.count(t) ? at[t] : "";
          row.traffic = sp->traffic();
          g_rows.push_back(row);
        }
    }
  }
}

// Removes "--name=value" from argv and returns value (or def).
const char* take_flag(int* argc, char** argv, const char* name, const char* def) {
  const size_t n = std::strlen(name);
  for (int i = 1; i < *argc; ++i)
    if (std::strncmp(argv[i], name, n) == 0 && argv[i][n] == '=') {
      const char* v = argv[i] + n + 1;
      for (int j = i; j + 1 < *argc; ++j) argv[j] = argv[j + 1];
      --*argc;
      return v;
    }
  return def;
}

}  // namespace

int main(int argc, char** argv) {
  const double min_time = std::atof(take_flag(&argc, argv, "--poolgen_min_time", "0.1"));
  const int reps = std::max(1, std::atoi(take_flag(&argc, argv, "--poolgen_repetitions", "5")));
  // Color as Google Benchmark's own console reporter would: --benchmark_color, else a terminal.
  bool color = isatty(STDOUT_FILENO) != 0;
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--benchmark_color=", 18) == 0) {
      const std::string v = argv[i] + 18;
      color = v == "true" || v == "yes" || v == "1" || v == "force" || (v == "auto" && color);
    }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  std::vector<std::unique_ptr<Spec>> specs;
  auto add = [&](int nd, Ints shape, int64_t k, int64_t s, int64_t p) {
    auto sp = std::make_unique<Spec>();
    sp->nd = nd;
    sp->shape = std::move(shape);
    sp->k = k;
    sp->s = s;
    sp->p = p;
    sp->init_geometry();
    specs.push_back(std::move(sp));
  };
  add(2, {8, 64, 112, 112}, 2, 2, 0);
  add(2, {8, 64, 112, 112}, 3, 2, 1);
  add(3, {2, 16, 32, 64, 64}, 2, 2, 0);
  add(1, {8, 64, 65536}, 2, 2, 0);
  register_all(specs, min_time, reps);

  MedianReporter reporter(color ? benchmark::ConsoleReporter::OO_ColorTabular
                                 : benchmark::ConsoleReporter::OO_Tabular);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  print_table(reporter);

  for (const auto& p : g_problems) std::printf("MISMATCH: %s\n", p.c_str());
  return g_problems.empty() ? 0 : 2;
}
