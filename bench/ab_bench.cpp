// poolgen_ab_bench: two builds of libpoolgen.so in one process, timed on the same calls in
// alternating trials, with their outputs compared bit for bit.
//
//   poolgen_ab_bench BEFORE.so AFTER.so [--cases=LIST] [--threads=1,2] [--trials=21]
//                    [--trial_ms=10]
//
// A shared VM's neighbours move a whole benchmark run by up to 1.5x within minutes
// (bench/results/README.md), more than most changes a kernel gets. Here each trial times A then
// B (B then A on odd trials) on the same buffers, milliseconds apart, so both see the same
// phase: the median of the per-trial ratios B/A holds where the medians of two separate runs do
// not. Each library is dlopen'd on its own (RTLD_LOCAL, so two copies of one file need two
// paths) and called through the C API, with its own worker threads; before each timed block
// the other build's workers are left to fall asleep (they stay awake 2 ms after a call,
// runtime/parallel/workers.cpp) and the timed build makes one untimed call. The outputs each
// build writes are compared after the timing. Cases use poolgen_bench's spelling
// (bench/cases.cpp); f32 values, i64 or i32 indices.
#include "bench.h"

#include <poolgen/poolgen.h>

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using bench::Case;
using bench::Op;

// The C API of one dlopen'd build.
struct Library {
  std::string path;
  decltype(&poolgen_max_pool) pool = nullptr;
  decltype(&poolgen_max_unpool) unpool = nullptr;
  decltype(&poolgen_max_pool_backward) pool_backward = nullptr;
  decltype(&poolgen_max_unpool_backward) unpool_backward = nullptr;
  decltype(&poolgen_set_num_threads) set_num_threads = nullptr;

  bool open(const std::string& file, std::string* error) {
    path = file;
    void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      *error = dlerror();
      return false;
    }
    const auto find = [&](auto* fn, const char* name) {
      *fn = reinterpret_cast<std::remove_reference_t<decltype(*fn)>>(dlsym(handle, name));
      return *fn != nullptr;
    };
    if (!(find(&pool, "poolgen_max_pool") && find(&unpool, "poolgen_max_unpool") &&
          find(&pool_backward, "poolgen_max_pool_backward") &&
          find(&unpool_backward, "poolgen_max_unpool_backward") &&
          find(&set_num_threads, "poolgen_set_num_threads"))) {
      *error = file + ": not a libpoolgen (the C API's symbols are missing)";
      return false;
    }
    return true;
  }
};

// A C tensor over `data` of the case's layout.
poolgen_tensor tensor(const Case& c, void* data, int32_t dtype, const bench::Ints& shape) {
  poolgen_tensor t{};
  t.data = data;
  t.dtype = dtype;
  t.rank = static_cast<int32_t>(shape.size());
  for (int i = 0; i < t.rank; ++i) t.shape[i] = shape[i];
  if (c.cl) {  // channels innermost, then the spatial dimensions, then the batch
    int64_t stride = shape[1];
    t.strides[1] = 1;
    for (int i = t.rank - 1; i >= 2; --i) {
      t.strides[i] = stride;
      stride *= shape[i];
    }
    t.strides[0] = stride;
  }
  return t;
}

// One op of a case on both builds: its inputs, and each build's outputs.
struct Call {
  const Case& c;
  Op op;
  poolgen_pool_options pool_options{};
  poolgen_unpool_options unpool_options{};
  std::vector<float> input, grad_pooled, grad_unpooled;
  std::vector<float> values, outputs[2];  // the pooled values (from A); each build's result
  std::vector<int64_t> indices, pooled_indices[2];  // as bytes of the index type (i32: half used)
  std::string pool_error;  // the pooling that made `indices`, where it failed

  Call(const Case& c_, Op op_, const Library& a) : c(c_), op(op_) {
    for (int i = 0; i < c.nd; ++i) {
      pool_options.kernel_size[i] = unpool_options.kernel_size[i] = c.k;
      pool_options.stride[i] = unpool_options.stride[i] = c.s;
      pool_options.padding[i] = unpool_options.padding[i] = c.p;
      unpool_options.output_size[i] = c.shape[2 + i];
    }
    unpool_options.output_size_len = c.nd;
    std::mt19937 random(42);
    std::uniform_real_distribution<float> uniform(-1.f, 1.f);
    const auto fill = [&](std::vector<float>& v, int64_t n) {
      v.resize(static_cast<size_t>(n));
      for (float& x : v) x = uniform(random);
    };
    fill(input, c.in_elems());
    fill(grad_pooled, c.out_elems());
    fill(grad_unpooled, c.in_elems());
    values.resize(static_cast<size_t>(c.out_elems()));
    indices.resize(static_cast<size_t>(c.out_elems()));
    const poolgen_tensor in = tensor(c, input.data(), POOLGEN_F32, c.shape),
                         v = tensor(c, values.data(), POOLGEN_F32, c.pooled_shape()),
                         i = index_tensor(indices.data());
    char message[512] = "";
    if (a.pool(c.nd, &in, &v, &i, &pool_options, message, sizeof message) != POOLGEN_OK) {
      pool_error = message;
    }
    for (auto& out : outputs) out.resize(static_cast<size_t>(to_pooled(op) ? c.out_elems() : c.in_elems()));
    for (auto& idx : pooled_indices) idx.resize(indices.size());
  }

  poolgen_tensor index_tensor(int64_t* data) const {
    return tensor(c, data, c.it == bench::DType::i32 ? POOLGEN_I32 : POOLGEN_I64, c.pooled_shape());
  }

  // The op through build `lib` into output set `which`; the C API's code.
  int32_t run(const Library& lib, int which, char* message, size_t size) {
    float* out = outputs[which].data();
    const poolgen_tensor idx = index_tensor(indices.data());
    switch (op) {
      case Op::pool: {
        const poolgen_tensor in = tensor(c, input.data(), POOLGEN_F32, c.shape),
                             v = tensor(c, out, POOLGEN_F32, c.pooled_shape()),
                             i = index_tensor(pooled_indices[which].data());
        return lib.pool(c.nd, &in, &v, &i, &pool_options, message, size);
      }
      case Op::unpool: {
        const poolgen_tensor v = tensor(c, values.data(), POOLGEN_F32, c.pooled_shape()),
                             o = tensor(c, out, POOLGEN_F32, c.shape);
        return lib.unpool(c.nd, &v, &idx, &o, &unpool_options, message, size);
      }
      case Op::pool_backward: {
        const poolgen_tensor g = tensor(c, grad_pooled.data(), POOLGEN_F32, c.pooled_shape()),
                             o = tensor(c, out, POOLGEN_F32, c.shape);
        return lib.pool_backward(c.nd, &g, &idx, &o, &pool_options, message, size);
      }
      case Op::unpool_backward: {
        const poolgen_tensor g = tensor(c, grad_unpooled.data(), POOLGEN_F32, c.shape),
                             o = tensor(c, out, POOLGEN_F32, c.pooled_shape());
        return lib.unpool_backward(c.nd, &g, &idx, &o, &unpool_options, message, size);
      }
    }
    return POOLGEN_INTERNAL;
  }

  bool same_outputs() const {
    const size_t index_bytes = indices.size() * (c.it == bench::DType::i32 ? 4 : 8);
    return outputs[0] == outputs[1] &&
           (op != Op::pool ||
            std::memcmp(pooled_indices[0].data(), pooled_indices[1].data(), index_bytes) == 0);
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

bool flag(const char* arg, const char* name, std::string* value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *value = arg + n + 1;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  using Clock = std::chrono::steady_clock;
  std::vector<std::string> libs;
  std::string cases_text, threads_text = "1", value;
  int64_t trials = 21, trial_ms = 10;
  for (int i = 1; i < argc; ++i) {
    if (flag(argv[i], "--cases", &value)) {
      cases_text = value;
    } else if (flag(argv[i], "--threads", &value)) {
      threads_text = value;
    } else if (flag(argv[i], "--trials", &value)) {
      if (!bench::parse_int(value, &trials) || trials < 1) return std::fprintf(stderr, "--trials: expected a count >= 1, got \"%s\"\n", value.c_str()), 1;
    } else if (flag(argv[i], "--trial_ms", &value)) {
      if (!bench::parse_int(value, &trial_ms) || trial_ms < 1) return std::fprintf(stderr, "--trial_ms: expected milliseconds >= 1, got \"%s\"\n", value.c_str()), 1;
    } else if (argv[i][0] == '-') {
      return std::fprintf(stderr, "unknown option %s (see the comment atop bench/ab_bench.cpp)\n", argv[i]), 1;
    } else {
      libs.push_back(argv[i]);
    }
  }
  if (libs.size() != 2) {
    std::fprintf(stderr, "usage: %s BEFORE.so AFTER.so [--cases=LIST] [--threads=1,2] [--trials=N] [--trial_ms=M]\n", argv[0]);
    return 1;
  }
  Library lib[2];
  std::string error;
  for (int b = 0; b < 2; ++b) {
    if (!lib[b].open(libs[b], &error)) return std::fprintf(stderr, "%s\n", error.c_str()), 1;
  }
  std::vector<Case> cases;
  if (cases_text.empty()) {
    cases = bench::builtin_cases();
  } else if (!bench::parse_cases(cases_text, &cases, &error)) {
    return std::fprintf(stderr, "--cases: %s\n", error.c_str()), 1;
  }
  std::vector<int64_t> threads;
  for (size_t at = 0; at <= threads_text.size();) {
    const size_t end = std::min(threads_text.find(',', at), threads_text.size());
    const std::string t = threads_text.substr(at, end - at);
    at = end + 1;
    int64_t n = 0;
    if (!bench::parse_int(t, &n) || n < 1) return std::fprintf(stderr, "--threads: expected counts >= 1, got \"%s\"\n", t.c_str()), 1;
    threads.push_back(n);
  }

  std::printf("A: %s\nB: %s\n%lld trials of about %lld ms each, A and B alternating; us a call, "
              "medians; B/A: the median of the trials' ratios [quartiles]\n\n",
              libs[0].c_str(), libs[1].c_str(), static_cast<long long>(trials),
              static_cast<long long>(trial_ms));
  std::printf("| case | op | threads | A us | B us | B/A | outputs |\n|---|---|---:|---:|---:|---:|---|\n");
  int differ = 0;
  for (const Case& c : cases) {
    if (c.vt != bench::DType::f32) {
      std::fprintf(stderr, "%s: skipped (f32 values only)\n", c.name().c_str());
      continue;
    }
    for (Op op : bench::kOps) {
      if (!c.times(op)) continue;
      Call call(c, op, lib[0]);
      if (!call.pool_error.empty()) {
        std::fprintf(stderr, "%s: pooling its input on %s: %s\n", c.name().c_str(),
                     libs[0].c_str(), call.pool_error.c_str());
        return 1;
      }
      for (int64_t t : threads) {
        for (auto& l : lib) l.set_num_threads(static_cast<int32_t>(t));
        char message[512] = "";
        for (int b = 0; b < 2; ++b) {  // warm both, and stop on an error
          if (call.run(lib[b], b, message, sizeof message) != POOLGEN_OK) {
            std::fprintf(stderr, "%s %s on %s: %s\n", c.name().c_str(), bench::op_name(op),
                         libs[b].c_str(), message);
            return 1;
          }
        }
        const bool same = call.same_outputs();
        // Timed into one set of outputs (the same addresses for both builds).
        const auto start = Clock::now();
        call.run(lib[0], 0, nullptr, 0);
        const double once = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        const int64_t reps = std::max<int64_t>(1, static_cast<int64_t>(trial_ms / std::max(once, 1e-6)));
        std::vector<double> us[2], ratio;
        for (int64_t trial = 0; trial < trials; ++trial) {
          double took[2];
          for (int k = 0; k < 2; ++k) {
            const int b = static_cast<int>((k + trial) % 2);
            std::this_thread::sleep_for(std::chrono::milliseconds(3));
            call.run(lib[b], 0, nullptr, 0);
            const auto t0 = Clock::now();
            for (int64_t r = 0; r < reps; ++r) call.run(lib[b], 0, nullptr, 0);
            took[b] = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / reps;
            us[b].push_back(took[b]);
          }
          ratio.push_back(took[1] / took[0]);
        }
        differ += !same;
        std::printf("| %s | %s | %lld | %.4g | %.4g | %.3f [%.3f-%.3f] | %s |\n", c.name().c_str(),
                    bench::op_name(op), static_cast<long long>(t), median(us[0]), median(us[1]),
                    median(ratio), quantile(ratio, 0.25), quantile(ratio, 0.75),
                    same ? "equal" : "DIFFER");
        std::fflush(stdout);
      }
    }
  }
  return differ ? 2 : 0;
}
