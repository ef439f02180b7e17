// The typed tests' framework (typed_test.cpp, backward_test.cpp): random values of every dtype,
// views that are contiguous, channels-last or otherwise strided inside a backing with guard
// elements, comparisons that name logical positions, and the parameters the randomized tests run
// over (value dtype x index dtype x layout x rank), each with its own fixed seed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "built_kernels.hpp"
#include "dtypes.hpp"
#include "poolgen/poolgen.hpp"
#include "random_cases.hpp"
#include "test_util.hpp"
#include "values.hpp"

namespace poolgen::test::typed {

constexpr int kMaxReportedFailures = 3;
constexpr int64_t kGuardElements = 8;  // extra elements before and after every backing

// Element values (tests/values.hpp), unqualified here and wherever this namespace is used.
using namespace test::values;

// Random values with many ties. Floats: signed zeros, occasional NaN (various payloads), -inf,
// +inf, the extreme finite values, random bit patterns (subnormals too). Integers: the type's
// lowest and highest, all-lowest stretches (windows whose maximum is the starting value).
template <typename T>
std::vector<T> random_values(Rng& rng, int64_t n) {
  std::vector<T> v(static_cast<size_t>(n));
  if constexpr (kIsFloat<T>) {
    const int style = static_cast<int>(rng.uniform(0, 4));
    const double nan_p = rng.chance(0.3) ? 0.04 : 0.0;
    const double ninf_p = rng.chance(0.3) ? 0.2 : 0.0;
    const double extreme_p = rng.chance(0.2) ? 0.05 : 0.0;
    const double inf = std::numeric_limits<double>::infinity();
    for (T& x : v) {
      switch (style) {
        case 0: x = from_double<T>(static_cast<double>(rng.uniform(0, 3))); break;  // ties
        case 1: x = from_double<T>(rng.chance(0.5) ? -0.0 : 0.0); break;
        case 2: x = from_double<T>(rng.normal()); break;
        case 3: x = from_bits<T>(rng.bits()); break;  // any pattern
        default: x = from_double<T>(static_cast<double>(rng.uniform(-2, 2)) * 0.5); break;
      }
      if (rng.chance(ninf_p)) x = from_double<T>(-inf);
      if (rng.chance(extreme_p)) {
        const int64_t which = rng.uniform(0, 2);
        x = which == 0 ? lowest<T>() : which == 1 ? highest<T>() : from_double<T>(inf);
      }
      if (rng.chance(nan_p)) {
        // Quiet NaN, or a NaN with another payload and sign.
        x = winning_value<T>();
        if (rng.chance(0.5)) {
          const uint64_t flip = (rng.bits() & 0x3) | (uint64_t(1) << (sizeof(T) * 8 - 1));
          const T other = from_bits<T>(bits_of(x) ^ flip);
          if (is_nan_value(other)) x = other;
        }
      }
    }
  } else {
    const int64_t lo = static_cast<int64_t>(std::numeric_limits<T>::lowest());
    const int64_t hi = static_cast<int64_t>(std::numeric_limits<T>::max());
    const int style = static_cast<int>(rng.uniform(0, 3));
    const double low_p = rng.chance(0.3) ? 0.2 : 0.0;
    const double high_p = rng.chance(0.3) ? 0.05 : 0.0;
    for (T& x : v) {
      int64_t y;
      switch (style) {
        case 0: y = std::clamp<int64_t>(rng.uniform(-1, 2), lo, hi); break;  // ties
        case 1: y = rng.uniform(lo, hi); break;
        case 2: y = rng.chance(0.8) ? lo : rng.uniform(lo, std::min<int64_t>(lo + 2, hi)); break;
        default: y = rng.uniform(std::max<int64_t>(hi - 3, lo), hi); break;
      }
      if (rng.chance(low_p)) y = lo;
      if (rng.chance(high_p)) y = hi;
      x = static_cast<T>(y);
    }
  }
  return v;
}

// ---------------------------------------------------------------------------------------------
// Layouts and strided buffers.

enum class Kind { contiguous = 0, channels_last = 1, strided = 2 };
constexpr Kind kAllKinds[] = {Kind::contiguous, Kind::channels_last, Kind::strided};

inline const char* kind_name(Kind k) {
  switch (k) {
    case Kind::contiguous: return "contiguous";
    case Kind::channels_last: return "channels_last";
    case Kind::strided: return "strided";
  }
  return "?";
}

inline Kind random_kind(Rng& rng) { return kAllKinds[rng.uniform(0, 2)]; }

// Where a view lies in its backing (elements): strides in PyTorch dimension order, the first
// element's offset, the backing's size (guard elements on both sides included).
struct ViewLayout {
  Kind kind = Kind::contiguous;
  Ints shape, strides;
  int64_t start = 0, total = 0;
  std::string memory;  // the memory order, outermost first, e.g. "N H W C (x2)"

  std::string describe() const {
    std::ostringstream os;
    os << kind_name(kind) << " shape " << str(shape) << " strides " << str(strides)
       << " memory order " << memory << " offset " << start - kGuardElements;
    return os.str();
  }
};

// Dimension names of a shape of rank nd+1 or nd+2, PyTorch order.
inline std::vector<std::string> dim_names(int nd, size_t rank) {
  static const char* spatial[3][3] = {{"L"}, {"H", "W"}, {"D", "H", "W"}};
  std::vector<std::string> n;
  if (rank == static_cast<size_t>(nd) + 2) n.push_back("N");
  n.push_back("C");
  for (int i = 0; i < nd; ++i) n.push_back(spatial[nd - 1][i]);
  return n;
}

// A layout of `kind` for `shape`: contiguous (row-major memory order), channels-last (N,
// spatial..., C), or strided: a memory order where neither C nor the innermost spatial
// dimension is innermost (a transposed view), or either standard order with every element 2
// apart. gaps: each dimension may be a slice of a longer one (padding between rows, planes...).
inline ViewLayout make_layout(Rng& rng, int nd, const Ints& shape, Kind kind, bool gaps) {
  const int rank = static_cast<int>(shape.size());
  const int cdim = rank - nd - 1;
  const int wdim = rank - 1;
  std::vector<int> order(rank);  // outermost first
  for (int i = 0; i < rank; ++i) order[i] = i;
  auto channels_last_order = [&] {
    std::vector<int> o;
    for (int i = 0; i < cdim; ++i) o.push_back(i);
    for (int i = cdim + 1; i < rank; ++i) o.push_back(i);
    o.push_back(cdim);
    return o;
  };
  int64_t step = 1;
  if (kind == Kind::channels_last) order = channels_last_order();
  if (kind == Kind::strided) {
    int variant = static_cast<int>(rng.uniform(0, 2));
    if (variant == 2 && rank < 3) variant = static_cast<int>(rng.uniform(0, 1));
    if (variant == 0) {
      step = 2;
    } else if (variant == 1) {
      order = channels_last_order();
      step = 2;
    } else {
      std::vector<int> inner_choices;
      for (int i = 0; i < rank; ++i) {
        if (i != cdim && i != wdim) inner_choices.push_back(i);
      }
      const int inner =
          inner_choices[rng.uniform(0, static_cast<int64_t>(inner_choices.size()) - 1)];
      std::vector<int> rest;
      for (int i = 0; i < rank; ++i) {
        if (i != inner) rest.push_back(i);
      }
      rng.shuffle(rest);
      order = rest;
      order.push_back(inner);
      if (rng.chance(0.25)) step = 2;
    }
  }
  Ints backing(rank), offset(rank, 0);
  for (int i = 0; i < rank; ++i) {
    const int64_t extra = gaps ? rng.uniform(0, 2) : 0;
    backing[i] = std::max<int64_t>(shape[i] + extra, 1);
    offset[i] = rng.uniform(0, extra);
  }
  ViewLayout l;
  l.kind = kind;
  l.shape = shape;
  l.strides.assign(rank, 0);
  int64_t acc = step;
  for (int j = rank - 1; j >= 0; --j) {
    l.strides[order[j]] = acc;
    acc *= backing[order[j]];
  }
  l.start = kGuardElements;
  for (int i = 0; i < rank; ++i) l.start += offset[i] * l.strides[i];
  l.total = acc + 2 * kGuardElements;
  const std::vector<std::string> names = dim_names(nd, shape.size());
  for (int j = 0; j < rank; ++j) l.memory += (j ? " " : "") + names[order[j]];
  if (step != 1) l.memory += " (x" + std::to_string(step) + ")";
  return l;
}

// A view of `layout` in an owned backing.
template <typename T>
struct Buf {
  ViewLayout layout;
  std::vector<T> data;
  std::vector<int64_t> offsets;

  Buf(const ViewLayout& l, T outside)
      : layout(l),
        data(static_cast<size_t>(l.total), outside),
        offsets(element_offsets(l.shape, l.strides, l.start)) {}
  void set(const std::vector<T>& v) {
    for (size_t k = 0; k < offsets.size(); ++k) data[offsets[k]] = v[k];
  }
  std::vector<T> get() const {
    std::vector<T> v;
    v.reserve(offsets.size());
    for (int64_t o : offsets) v.push_back(data[o]);
    return v;
  }
  // Every backing element outside the view, guard elements included, reset to `outside`; every
  // element inside to `inside`.
  void reset(T outside, T inside) {
    std::fill(data.begin(), data.end(), outside);
    for (int64_t o : offsets) data[o] = inside;
  }
  TensorView view() {
    TensorView v;
    v.data = data.data() + layout.start;
    v.dtype = test::dtype_of<T>();
    v.shape = layout.shape;
    v.strides = layout.strides;
    return v;
  }
  // True when every element outside the view still has the bits of `outside`.
  bool outside_is(T outside) const { return test::outside_untouched(data, offsets, outside); }
  bool bytes_equal(const std::vector<T>& before) const {
    return std::memcmp(data.data(), before.data(), data.size() * sizeof(T)) == 0;
  }
};

// Offsets of a tensor's elements (row-major logical order) in packed channels-last memory
// (channels_last(shape, nd)).
inline std::vector<int64_t> channels_last_offsets(const Ints& shape, int nd) {
  const TensorView probe = channels_last(static_cast<void*>(nullptr), DType::u8, shape, nd);
  return element_offsets(shape, probe.strides, 0);
}

// `logical` (row-major order) laid out as packed channels-last memory, and back.
template <typename T>
std::vector<T> to_channels_last(const std::vector<T>& logical, const Ints& shape, int nd) {
  std::vector<T> memory(logical.size());
  const std::vector<int64_t> offsets = channels_last_offsets(shape, nd);
  for (size_t k = 0; k < offsets.size(); ++k) memory[offsets[k]] = logical[k];
  return memory;
}

template <typename T>
std::vector<T> from_channels_last(const std::vector<T>& memory, const Ints& shape, int nd) {
  std::vector<T> logical;
  logical.reserve(memory.size());
  for (int64_t offset : channels_last_offsets(shape, nd)) logical.push_back(memory[offset]);
  return logical;
}

// The first 48 entries of a list.
inline std::string head(const std::vector<int64_t>& v) {
  if (v.size() <= 48) return str(v);
  return str(Ints(v.begin(), v.begin() + 48))
      .insert(0, "(first 48 of " + std::to_string(v.size()) + ") ");
}

// The logical position of flat element `flat` of `shape`, e.g. "[1, 0, 3, 2]".
inline std::string position(const Ints& shape, int64_t flat) {
  Ints idx(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = shape[d] > 0 ? flat % shape[d] : 0;
    flat = shape[d] > 0 ? flat / shape[d] : 0;
  }
  return str(idx);
}

// "" when equal; otherwise how many differ and the first few, with their logical positions.
template <typename T, typename Eq>
std::string mismatches(const Ints& shape, const std::vector<T>& expected, const std::vector<T>& got,
                       Eq eq) {
  if (expected.size() != got.size()) {
    return "size " + std::to_string(got.size()) + ", expected " + std::to_string(expected.size());
  }
  std::ostringstream os;
  int bad = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (!eq(expected[i], got[i])) {
      if (bad < 6) {
        os << "\n      at " << position(shape, static_cast<int64_t>(i)) << ": got " << show(got[i])
           << ", expected " << show(expected[i]);
      }
      ++bad;
    }
  }
  if (bad == 0) return "";
  return std::to_string(bad) + " of " + std::to_string(expected.size()) + " differ:" + os.str();
}

// ---------------------------------------------------------------------------------------------
// What the build compiled, and the dtypes' C++ types.

// Calls f(T{}, I{}) with T the C++ type of `value` and I that of `index` (i64 or i32).
template <typename F>
void visit_dtypes(DType value, DType index, F&& f) {
  test::visit_dtype(value, [&](auto v) {
    if (index == DType::i64) {
      f(v, int64_t{});
    } else {
      f(v, int32_t{});
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Random configurations.

// Pooling: dilated windows, many channels now and then. Unpooling: no dilation (unpooling has
// none), many channels now and then, a specialised window in half of the cases (1-D too).
inline test::PoolConfigOptions pool_config_kinds() {
  test::PoolConfigOptions k;
  k.many_channels = true;
  return k;
}

inline test::UnpoolCaseOptions unpool_case_kinds() {
  test::UnpoolCaseOptions k;
  k.window_p = 0.5;
  k.many_channels = true;
  return k;
}

// seed for one parameterized test
inline uint64_t seed_of(DType value, DType index, Kind kind, int nd, uint64_t op) {
  return 0x7e57'0000ULL + op * 100000 + static_cast<uint64_t>(value) * 1000 +
         static_cast<uint64_t>(index) * 100 + static_cast<uint64_t>(kind) * 10 +
         static_cast<uint64_t>(nd);
}

// ---------------------------------------------------------------------------------------------
// Parameters: value dtype x index dtype x input layout x rank.

struct Param {
  DType value;
  DType index;
  Kind kind;
  int nd;
};

// Every combination for the value dtypes `values` (all nine, or the gradient types).
template <typename DTypes>
std::vector<Param> all_params(const DTypes& values) {
  std::vector<Param> v;
  for (DType value : values) {
    for (DType index : {DType::i64, DType::i32}) {
      for (Kind kind : kAllKinds) {
        for (int nd = 1; nd <= 3; ++nd) v.push_back({value, index, kind, nd});
      }
    }
  }
  return v;
}

inline void PrintTo(const Param& p, std::ostream* os) {
  *os << dtype_name(p.value) << " values, " << dtype_name(p.index) << " indices, "
      << kind_name(p.kind) << " input, " << p.nd << "-d";
}

inline std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const Param& p = info.param;
  return std::string(dtype_name(p.value)) + "_" + dtype_name(p.index) + "_" + kind_name(p.kind) +
         "_" + std::to_string(p.nd) + "d";
}

// ---------------------------------------------------------------------------------------------
// Layout equivalence: windows of both kinds, fixed (k2s2p0, k3s2p1) and general.

inline std::vector<PoolOptions> equivalence_windows() {
  std::vector<PoolOptions> w(4);
  w[0].kernel_size = {2};  // k2s2p0
  w[1].kernel_size = {3};  // k3s2p1
  w[1].stride = {2};
  w[1].padding = {1};
  w[2].kernel_size = {3};  // general: overlapping, ceil_mode
  w[2].stride = {1};
  w[2].padding = {1};
  w[2].ceil_mode = true;
  w[3].kernel_size = {2};  // general: dilated
  w[3].stride = {2};
  w[3].padding = {1};
  w[3].dilation = {2};
  return w;
}

// ---------------------------------------------------------------------------------------------
// Kernel choice and threads.

// A view of `shape` in neither kernel layout, which the ops pack first: memory order N C [D] W H
// (1-D: L C N, N innermost).
inline TensorView transposed_view(void* data, DType dtype, const Ints& shape, int nd) {
  TensorView v = contiguous(data, dtype, shape);
  const size_t r = shape.size();
  std::vector<size_t> order;  // outermost first
  for (size_t i = 0; i < r; ++i) order.push_back(i);
  if (nd >= 2) {
    std::swap(order[r - 1], order[r - 2]);
  } else {
    std::swap(order[0], order[r - 1]);
  }
  v.strides.assign(r, 0);
  int64_t acc = 1;
  for (size_t j = r; j-- > 0;) {
    v.strides[order[j]] = acc;
    acc *= shape[order[j]];
  }
  return v;
}

// The kernel of that name in `kernels`, or null.
inline const KernelInfo* find_kernel(const std::vector<KernelInfo>& kernels,
                                     const std::string& name) {
  for (const KernelInfo& k : kernels) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Every call shared across threads while it lives (set_min_parallel_bytes(0): the tests' shapes
// are small enough that by default they would run on the calling thread); the defaults after.
struct ThreadsReset {
  ThreadsReset() { set_min_parallel_bytes(0); }
  ~ThreadsReset() {
    set_num_threads(0);
    set_min_parallel_bytes(-1);
  }
};

}  // namespace poolgen::test::typed
