// SegNet-style encoder/decoder round trip with poolgen's C++ API.
//
// Encoder: a random feature map (2, 8, 32, 32) is max-pooled twice (kernel 2, stride 2) and the
// indices of each stage are kept. Decoder: max-unpooled twice with those indices back to
// (2, 8, 32, 32). Every non-zero of the decoded map must equal the input at that position, and
// every maximum of the deepest pooling must reappear where it came from. Then one stage again in
// bf16, channels-last (NHWC), with i32 indices. Last, a training step: pool (overlapping windows)
// and unpool forward, then the gradients back through the unpooling and the pooling, checked
// against plain loops.
#include <poolgen/poolgen.hpp>

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace {

int failures = 0;

bool check(const poolgen::Status& s, const char* what) {
  if (s.ok()) return true;
  std::fprintf(stderr, "error in %s (code %d): %s\n", what, static_cast<int>(s.code()),
               s.message().c_str());
  ++failures;
  return false;
}

std::string str(const poolgen::Ints& shape) {
  std::string r = "(";
  for (size_t i = 0; i < shape.size(); ++i) r += (i ? ", " : "") + std::to_string(shape[i]);
  return r + ")";
}

int64_t numel(const poolgen::Ints& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// One pool + unpool stage on a bf16 NHWC map with i32 indices: every pooled maximum reappears at
// the position its index names, everything else is zero.
void channels_last_bf16_stage() {
  const poolgen::Ints shape{2, 16, 12, 10};  // PyTorch order; memory is (N, H, W, C)
  std::vector<poolgen::bf16_t> x(numel(shape));
  std::mt19937 rng(7);
  for (auto& v : x) v.bits = static_cast<uint16_t>(0x3f80 + rng() % 0x7f);  // in [1, 2)
  poolgen::PoolOptions pool;
  pool.kernel_size = {3};
  pool.stride = {2};
  pool.padding = {1};
  poolgen::Ints pooled;
  if (!check(poolgen::max_pool_output_shape(2, shape, pool, &pooled), "bf16 pool shape")) return;
  std::vector<poolgen::bf16_t> values(numel(pooled)), y(x.size());
  std::vector<int32_t> indices(values.size());
  const poolgen::TensorView in = poolgen::channels_last(x.data(), shape);
  std::string name;
  const poolgen::Status built = poolgen::max_pool_kernel_name(2, in, poolgen::DType::i32, pool, &name);
  if (built.code() == poolgen::Code::unsupported) {
    std::printf("bf16 channels-last stage skipped: %s\n", built.message().c_str());
    return;
  }
  std::printf("bf16 NHWC pool %s -> %s  kernel %s\n", str(shape).c_str(), str(pooled).c_str(),
              name.c_str());
  if (!check(poolgen::max_pool2d(in, poolgen::channels_last(values.data(), pooled),
                                 poolgen::channels_last(indices.data(), pooled), pool),
             "bf16 pool")) {
    return;
  }
  poolgen::UnpoolOptions unpool;
  unpool.kernel_size = pool.kernel_size;
  unpool.stride = pool.stride;
  unpool.padding = pool.padding;
  unpool.output_size = {shape[2], shape[3]};
  if (!check(poolgen::max_unpool2d(poolgen::channels_last(values.data(), pooled),
                                   poolgen::channels_last(indices.data(), pooled),
                                   poolgen::channels_last(y.data(), shape), unpool),
             "bf16 unpool")) {
    return;
  }
  // Element (n, c, h, w) of an NHWC tensor lives at ((n * H + h) * W + w) * C + c.
  const int64_t C = shape[1], plane = shape[2] * shape[3], cells = pooled[2] * pooled[3];
  int64_t lost = 0, nonzeros = 0;
  for (const auto& v : y) nonzeros += v.bits != 0;
  for (int64_t n = 0; n < shape[0]; ++n)
    for (int64_t cell = 0; cell < cells; ++cell)
      for (int64_t c = 0; c < C; ++c) {
        const int64_t at = (n * cells + cell) * C + c, pos = (n * plane + indices[at]) * C + c;
        if (y[pos].bits != values[at].bits || x[pos].bits != values[at].bits) ++lost;
      }
  std::printf("bf16 NHWC round trip: %lld non-zeros, %lld lost maxima\n",
              static_cast<long long>(nonzeros), static_cast<long long>(lost));
  if (lost || nonzeros == 0) ++failures;
}

// A training step through one encoder/decoder stage: y = unpool(pool(x)) with kernel 3, stride
// 2, padding 1 (overlapping windows; x has many ties, so one input often wins several windows),
// the loss sum(w * y), and its gradients: dL/dy = w, dL/dvalues = max_unpool_backward(w),
// dL/dx = max_pool_backward(dL/dvalues). Both are checked, bit for bit, against the loops that
// define them: a gather, and an addition of each pooled gradient at its index, in ascending order
// within each plane (PyTorch's order: sums of several gradients depend on it).
void training_step() {
  const poolgen::Ints x_shape{2, 8, 33, 33};
  std::mt19937 rng(11);
  std::vector<float> x(numel(x_shape)), w(x.size());
  for (float& v : x) v = static_cast<float>(rng() % 5);  // ties
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : w) v = dist(rng);

  poolgen::PoolOptions pool;
  pool.kernel_size = {3};
  pool.stride = {2};
  pool.padding = {1};
  poolgen::UnpoolOptions unpool;
  unpool.kernel_size = pool.kernel_size;
  unpool.stride = pool.stride;
  unpool.padding = pool.padding;
  unpool.output_size = {x_shape[2], x_shape[3]};
  poolgen::Ints pooled;
  if (!check(poolgen::max_pool_output_shape(2, x_shape, pool, &pooled), "training pool shape")) {
    return;
  }
  std::vector<float> values(numel(pooled)), y(x.size()), grad_values(values.size()),
      grad_x(x.size());
  std::vector<int64_t> indices(values.size());
  auto view = [](std::vector<float>& v, const poolgen::Ints& s) {
    return poolgen::contiguous(v.data(), s);
  };
  // Forward.
  if (!check(poolgen::max_pool2d(view(x, x_shape), view(values, pooled),
                                 poolgen::contiguous(indices.data(), pooled), pool),
             "training pool") ||
      !check(poolgen::max_unpool2d(view(values, pooled),
                                   poolgen::contiguous(indices.data(), pooled), view(y, x_shape),
                                   unpool),
             "training unpool")) {
    return;
  }
  // Backward: dL/dy = w.
  std::string unpool_kernel, pool_kernel;
  check(poolgen::max_unpool_backward_kernel_name(2, view(w, x_shape), poolgen::DType::i64,
                                                 pooled, unpool, &unpool_kernel),
        "unpool backward kernel name");
  check(poolgen::max_pool_backward_kernel_name(2, view(grad_values, pooled), poolgen::DType::i64,
                                               x_shape, pool, &pool_kernel),
        "pool backward kernel name");
  std::printf("training: pool %s -> %s, unpool back; backward kernels %s, %s\n",
              str(x_shape).c_str(), str(pooled).c_str(), unpool_kernel.c_str(),
              pool_kernel.c_str());
  if (!check(poolgen::max_unpool_backward(2, view(w, x_shape),
                                          poolgen::contiguous(indices.data(), pooled),
                                          view(grad_values, pooled), unpool),
             "max_unpool_backward") ||
      !check(poolgen::max_pool_backward(2, view(grad_values, pooled),
                                        poolgen::contiguous(indices.data(), pooled),
                                        view(grad_x, x_shape), pool),
             "max_pool_backward")) {
    return;
  }
  // The loops that define both gradients, plane by plane.
  const int64_t planes = x_shape[0] * x_shape[1], x_plane = x_shape[2] * x_shape[3],
                cells = pooled[2] * pooled[3];
  std::vector<float> want_values(values.size()), want_x(x.size(), 0.0f);
  std::vector<int> hits(x.size(), 0);
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t cell = 0; cell < cells; ++cell) {
      const int64_t o = p * cells + cell, at = p * x_plane + indices[o];
      want_values[o] = w[at];
      want_x[at] += want_values[o];
      ++hits[at];
    }
  }
  int64_t mismatches = 0, shared = 0;
  for (size_t i = 0; i < want_values.size(); ++i) mismatches += want_values[i] != grad_values[i];
  for (size_t i = 0; i < want_x.size(); ++i) {
    mismatches += want_x[i] != grad_x[i];
    shared += hits[i] > 1;
  }
  std::printf("training: gradients of %lld values and %lld inputs (%lld inputs won several "
              "windows), %lld mismatches\n",
              static_cast<long long>(values.size()), static_cast<long long>(x.size()),
              static_cast<long long>(shared), static_cast<long long>(mismatches));
  if (mismatches || shared == 0) ++failures;
}

}  // namespace

int main() {
  const poolgen::Ints x_shape{2, 8, 32, 32};
  std::vector<float> x(numel(x_shape));
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : x) {
    v = dist(rng);
    if (v == 0.0f) v = 0.5f;  // zero would be indistinguishable from "not unpooled"
  }

  poolgen::PoolOptions pool;
  pool.kernel_size = {2};
  pool.stride = {2};
  poolgen::UnpoolOptions unpool;
  unpool.kernel_size = {2};
  unpool.stride = {2};

  // ---- encoder ----
  poolgen::Ints p1_shape, p2_shape;
  if (!check(poolgen::max_pool_output_shape(2, x_shape, pool, &p1_shape), "pool1 shape") ||
      !check(poolgen::max_pool_output_shape(2, p1_shape, pool, &p2_shape), "pool2 shape"))
    return 1;
  std::vector<float> v1(numel(p1_shape)), v2(numel(p2_shape));
  std::vector<int64_t> i1(v1.size()), i2(v2.size());

  std::string name;
  if (check(poolgen::max_pool_kernel_name(2, x_shape, pool, &name), "pool1 kernel name"))
    std::printf("pool1   %s -> %s  kernel %s\n", str(x_shape).c_str(), str(p1_shape).c_str(),
                name.c_str());
  if (!check(poolgen::max_pool2d(poolgen::contiguous(x.data(), x_shape),
                                 poolgen::contiguous(v1.data(), p1_shape),
                                 poolgen::contiguous(i1.data(), p1_shape), pool),
             "pool1"))
    return 1;

  if (check(poolgen::max_pool_kernel_name(2, p1_shape, pool, &name), "pool2 kernel name"))
    std::printf("pool2   %s -> %s  kernel %s\n", str(p1_shape).c_str(), str(p2_shape).c_str(),
                name.c_str());
  if (!check(poolgen::max_pool2d(poolgen::contiguous(v1.data(), p1_shape),
                                 poolgen::contiguous(v2.data(), p2_shape),
                                 poolgen::contiguous(i2.data(), p2_shape), pool),
             "pool2"))
    return 1;

  // ---- decoder ----
  // Stage 1 passes output_size as the full shape (N and C are ignored), stage 2 as spatial only.
  poolgen::UnpoolOptions unpool1 = unpool, unpool2 = unpool;
  unpool1.output_size = p1_shape;
  unpool2.output_size = {x_shape[2], x_shape[3]};
  poolgen::Ints u1_shape, u2_shape;
  if (!check(poolgen::max_unpool_output_shape(2, p2_shape, unpool1, &u1_shape), "unpool1 shape") ||
      !check(poolgen::max_unpool_output_shape(2, u1_shape, unpool2, &u2_shape), "unpool2 shape"))
    return 1;
  std::vector<float> u1(numel(u1_shape)), y(numel(u2_shape));

  if (check(poolgen::max_unpool_kernel_name(2, p2_shape, unpool1, &name), "unpool1 kernel name"))
    std::printf("unpool1 %s -> %s  kernel %s\n", str(p2_shape).c_str(), str(u1_shape).c_str(),
                name.c_str());
  if (!check(poolgen::max_unpool2d(poolgen::contiguous(v2.data(), p2_shape),
                                   poolgen::contiguous(i2.data(), p2_shape),
                                   poolgen::contiguous(u1.data(), u1_shape), unpool1),
             "unpool1"))
    return 1;

  if (check(poolgen::max_unpool_kernel_name(2, u1_shape, unpool2, &name), "unpool2 kernel name"))
    std::printf("unpool2 %s -> %s  kernel %s\n", str(u1_shape).c_str(), str(u2_shape).c_str(),
                name.c_str());
  if (!check(poolgen::max_unpool2d(poolgen::contiguous(u1.data(), u1_shape),
                                   poolgen::contiguous(i1.data(), p1_shape),
                                   poolgen::contiguous(y.data(), u2_shape), unpool2),
             "unpool2"))
    return 1;

  // ---- checks ----
  if (u2_shape != x_shape) {
    std::printf("decoded shape %s != input shape %s\n", str(u2_shape).c_str(),
                str(x_shape).c_str());
    ++failures;
  }
  // Every non-zero of the decoded map is the input value at that position.
  int64_t nonzeros = 0, bad_values = 0;
  for (size_t i = 0; i < y.size() && i < x.size(); ++i)
    if (y[i] != 0.0f) {
      ++nonzeros;
      if (y[i] != x[i]) {
        if (bad_values++ < 5) std::printf("mismatch at flat %zu: decoded %g, input %g\n", i, y[i], x[i]);
      }
    }
  // Every maximum of the deepest pooling reappears at its origin: follow i2 then i1.
  const int64_t planes = x_shape[0] * x_shape[1];
  const int64_t x_plane = x_shape[2] * x_shape[3], p1_plane = p1_shape[2] * p1_shape[3],
                p2_plane = p2_shape[2] * p2_shape[3];
  int64_t lost = 0;
  for (int64_t c = 0; c < planes; ++c)
    for (int64_t m = 0; m < p2_plane; ++m) {
      const int64_t j = i2[c * p2_plane + m];       // position in the pool1 output plane
      const int64_t pos = i1[c * p1_plane + j];     // position in the input plane
      const float want = v2[c * p2_plane + m];
      if (want != x[c * x_plane + pos] || y[c * x_plane + pos] != want) {
        if (lost++ < 5)
          std::printf("max %g of plane %lld cell %lld did not survive (decoded %g)\n", want,
                      static_cast<long long>(c), static_cast<long long>(m), y[c * x_plane + pos]);
      }
    }
  const int64_t expected_nonzeros = planes * p2_plane;
  std::printf("decoded non-zeros: %lld (expected %lld), value mismatches: %lld, lost maxima: %lld\n",
              static_cast<long long>(nonzeros), static_cast<long long>(expected_nonzeros),
              static_cast<long long>(bad_values), static_cast<long long>(lost));
  if (nonzeros != expected_nonzeros || bad_values || lost) ++failures;

  channels_last_bf16_stage();
  training_step();

  if (failures) {
    std::printf("segnet round trip: FAILED\n");
    return 1;
  }
  std::printf("segnet round trip: OK\n");
  return 0;
}
