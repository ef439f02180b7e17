// What the two fuzz targets share: decoding shapes, strides and window lists from the fuzz input,
// fencing views in guarded buffers, an overflow-free model of the output-shape rules (the
// reference computes in int64 and is only asked where that cannot overflow), the checks every
// Status must pass, the indices, the checked run of a backward op (each target fuzzes its op's
// gradient too), and the seed maker.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "built_kernels.hpp"
#include "dtypes.hpp"
#include "fuzz_input.hpp"
#include "guarded_buffer.hpp"
#include "names.hpp"
#include "poolgen/poolgen.h"
#include "poolgen/poolgen.hpp"
#include "reference.hpp"

namespace poolgen::fuzz {

using i128 = __int128;
using test::code_name;
using test::GuardedBuffer;
using test::str;

constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
// Views reaching more elements than this get no memory (null data: the call must fail).
constexpr int64_t kMaxReach = int64_t(1) << 20;
// Fill bytes: inputs' before their elements are written, outputs' (they must survive wherever
// nothing is written).
constexpr uint8_t kInputFill = 0x5a;
constexpr uint8_t kSentinel = 0xA5;
// Calls doing more work than this get no memory either (keeps every input fast).
constexpr int64_t kMaxElements = int64_t(1) << 16;
constexpr int64_t kMaxWork = int64_t(1) << 21;
// Shapes and options within this bound are given to the reference (int64 math cannot overflow).
constexpr int64_t kRefBound = int64_t(1) << 24;
// Intermediates of the shape rules beyond this are "huge": the library may refuse them.
constexpr i128 kHuge = i128(1) << 62;
// The library's limits: elements of a tensor, reach of a view, window parameters.
constexpr i128 kLibMaxElements = i128(1) << 59;
constexpr i128 kLibMaxWindow = kI32Max;
constexpr i128 kLibMaxWindowReach = i128(1) << 29;  // d(k-1)+1 + s + 2p
constexpr i128 kLibMaxWindowVolume = i128(1) << 26;  // the product of the d(k-1)+1

// ---------------------------------------------------------------------------------------------
// Reporting. A violation aborts (libFuzzer keeps the input); a note is a finding that should not
// stop the search (printed once per kind), unless POOLGEN_FUZZ_STRICT=1.

inline std::string& context() {
  static std::string c;
  return c;
}

[[noreturn]] inline void violation(const std::string& what) {
  std::fprintf(stderr, "\npoolgen-fuzz VIOLATION: %s\n  call: %s\n", what.c_str(),
               context().c_str());
  std::fflush(stderr);
  __builtin_trap();
}

inline bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

// POOLGEN_FUZZ_VERBOSE=1: print every call before making it.
inline bool verbose() {
  static const bool v = env_flag("POOLGEN_FUZZ_VERBOSE");
  return v;
}

inline void note(const std::string& kind, const std::string& what) {
  static const bool strict = env_flag("POOLGEN_FUZZ_STRICT");
  static std::set<std::string> seen;
  if (strict) violation(kind + ": " + what);
  if (seen.insert(kind).second) {
    std::fprintf(stderr, "poolgen-fuzz NOTE [%s]: %s\n  call: %s\n", kind.c_str(), what.c_str(),
                 context().c_str());
  }
}

// Classes of input a long run can leave out while a bug they trigger is open:
// POOLGEN_FUZZ_AVOID=huge,... (see decode_extent and friends for the names).
inline bool avoided(const char* what) {
  static const std::string list = [] {
    const char* v = std::getenv("POOLGEN_FUZZ_AVOID");
    return "," + std::string(v ? v : "") + ",";
  }();
  return list.find("," + std::string(what) + ",") != std::string::npos;
}

// Features of the current input, for the seed maker (a set of short labels).
inline std::set<std::string>& features() {
  static std::set<std::string> f;
  return f;
}
inline void feature(const std::string& f) { features().insert(f); }

inline std::string dtype_str(int32_t code) {
  const char* n = dtype_name(static_cast<DType>(code));
  return std::strcmp(n, "unknown") == 0 ? "dtype#" + std::to_string(code) : n;
}

inline bool valid_dtype(int32_t code) { return code >= 0 && code <= 8; }

// ---------------------------------------------------------------------------------------------
// Messages: "<argument>: ...", naming what was expected and what was given.

inline constexpr const char* kArguments[] = {
    "input",    "values",  "indices",     "output",      "kernel_size",     "stride",
    "padding",  "dilation", "output_size", "nd",         "options",         "input_shape",
    "output_size_len", "device", "ceil_mode", "path", "rank", "grad_output", "grad_input",
    "grad_values", "index_format", "max_rule", "padding_end", "auto_pad", "output_size_rule",
    "pool_rule"};

// The message with every number replaced by '#': one entry per kind of message.
inline std::string message_template(const std::string& m) {
  std::string t;
  for (size_t i = 0; i < m.size(); ++i) {
    const bool digit = m[i] >= '0' && m[i] <= '9';
    const bool neg = m[i] == '-' && i + 1 < m.size() && m[i + 1] >= '0' && m[i + 1] <= '9';
    if (digit || neg) {
      while (i + 1 < m.size() && m[i + 1] >= '0' && m[i + 1] <= '9') ++i;
      t += '#';
    } else {
      t += m[i];
    }
  }
  return t;
}

// `known`: the whole message came back (C API: a large enough buffer); else only the code counts.
inline void check_message(const Status& s, bool known = true) {
  if (s.ok()) return;
  if (s.code() == Code::internal) violation("internal error: " + s.message());
  if (s.code() != Code::invalid_argument && s.code() != Code::index_out_of_range &&
      s.code() != Code::unsupported) {
    violation("unknown status code " + std::to_string(static_cast<int>(s.code())) + ": " +
              s.message());
  }
  if (!known) return;
  const std::string& m = s.message();
  if (m.empty()) violation(std::string("empty message for ") + code_name(s.code()));
  const size_t colon = m.find(": ");
  const std::string arg = colon == std::string::npos ? "" : m.substr(0, colon);
  if (std::none_of(std::begin(kArguments), std::end(kArguments),
                   [&](const char* a) { return arg == a; })) {
    violation("message does not start with \"<argument>: \": " + m);
  }
  if (m.find("expected") == std::string::npos || m.find("got") == std::string::npos) {
    note("message form: " + message_template(m), "no \"expected ..., got ...\" in \"" + m + "\"");
  }
  feature(std::string("code:") + code_name(s.code()) + ":" + arg);
}

// ---------------------------------------------------------------------------------------------
// Decoding shapes, strides, lists.

// nd: mostly 1..3, sometimes out of range.
inline int decode_nd(FuzzInput& in) {
  static constexpr int kBad[] = {0, 4, -1, 5, std::numeric_limits<int>::min(),
                                 std::numeric_limits<int>::max()};
  if (in.chance(3) && !avoided("bad_nd")) return in.pick(kBad);
  static constexpr int kNd[] = {2, 1, 3};
  return in.pick(kNd);
}

// The nd used to lay out shapes and lists when nd itself is out of range.
inline int shape_nd(int nd) { return nd >= 1 && nd <= 3 ? nd : 2; }

// Sometimes an extent or parameter from kEdgeInts (0, negative, 2^31, 2^40, 2^62, INT64_MAX...).
inline bool take_edge(FuzzInput& in, int percent) {
  return in.chance(percent) && !avoided("huge");
}

enum class Dim { batch, channel, spatial };

inline int64_t decode_extent(FuzzInput& in, Dim dim) {
  if (take_edge(in, 3)) return edge_int(in);
  switch (dim) {
    case Dim::batch: {
      static constexpr int64_t kBatch[] = {1, 2, 1, 0, 3, 1, 2, 4};
      return in.pick(kBatch);
    }
    case Dim::channel: {
      static constexpr int64_t kChannel[] = {1, 2, 3, 4, 1, 5, 8, 12};
      return in.pick(kChannel);
    }
    case Dim::spatial: break;
  }
  const uint8_t b = in.byte();
  if (b == 255) return 0;  // an empty spatial dimension: invalid (only the batch may be 0)
  return 1 + (b + 4) % 12;  // byte 0: 5
}

// POOLGEN_FUZZ_AVOID=empty_huge: no empty shapes with extents beyond 2^20, input or output
// (they pass the library's element limit and overflow its shape and stride arithmetic:
// tests/fuzz/regressions).
constexpr int64_t kEmptyHugeExtent = int64_t(1) << 20;
inline bool empty_huge(const Ints& shape) {
  return std::find(shape.begin(), shape.end(), 0) != shape.end() &&
         std::any_of(shape.begin(), shape.end(), [](int64_t e) { return e > kEmptyHugeExtent; });
}

// A shape of rank nd + 1 or nd + 2 (sometimes another rank).
inline Ints decode_shape(FuzzInput& in, int nd) {
  int rank = in.chance(25) ? nd + 1 : nd + 2;
  if (in.chance(3) && !avoided("bad_rank")) {
    static constexpr int kRanks[] = {0, 1, 6, 7, 2, 3, 4, 5};
    rank = in.pick(kRanks);
  }
  Ints shape(rank);
  for (int i = 0; i < rank; ++i) {
    const bool batch = rank == nd + 2 && i == 0;
    const bool channel = (rank == nd + 2 && i == 1) || (rank == nd + 1 && i == 0);
    shape[i] = decode_extent(in, batch ? Dim::batch : channel ? Dim::channel : Dim::spatial);
  }
  if (avoided("empty_huge") && empty_huge(shape)) {
    for (int64_t& e : shape) {
      if (e > kEmptyHugeExtent) e = 1;
    }
  }
  return shape;
}

inline int64_t saturate(i128 v) {
  if (v > kI64Max) return kI64Max;
  if (v < std::numeric_limits<int64_t>::min()) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

inline i128 sat_mul(i128 a, i128 b) {  // saturates at +-2^120
  const i128 cap = i128(1) << 120;
  if (a == 0 || b == 0) return 0;
  const i128 ma = a < 0 ? -a : a, mb = b < 0 ? -b : b;
  if (ma > cap / mb) return ((a < 0) != (b < 0)) ? -cap : cap;
  return a * b;
}

// Strides laying out `shape` with the dimensions of `order` from outermost to innermost, each
// dimension padded by pad[d] elements (a slice of a larger tensor), the innermost step `step`.
inline Ints layout_strides(const Ints& shape, const std::vector<int>& order, const Ints& pad,
                           int64_t step) {
  Ints strides(shape.size(), 0);
  i128 acc = step;
  for (size_t j = order.size(); j-- > 0;) {
    const int d = order[j];
    strides[d] = saturate(acc);
    acc = sat_mul(acc, i128(std::max<int64_t>(shape[d], 1)) + pad[d]);
  }
  return strides;
}

// Where the channel dimension is: 1 with a batch, 0 without (rank nd + 1).
inline int channel_dim(int nd, size_t rank) { return rank == size_t(nd) + 1 ? 0 : 1; }

inline std::vector<int> channels_last_order(int nd, size_t rank) {
  const int c = rank >= 2 ? channel_dim(nd, rank) : 0;
  std::vector<int> order;
  for (int d = 0; d < static_cast<int>(rank); ++d) {
    if (d != c) order.push_back(d);
  }
  if (rank > 0) order.push_back(c);
  return order;
}

enum class StrideKind { unset, contiguous, channels_last, sliced, transposed, stepped, weird };

inline const char* stride_kind_name(StrideKind k) {
  static const char* const kNames[] = {"unset",      "contiguous", "channels_last", "sliced",
                                       "transposed", "stepped",    "weird"};
  return kNames[static_cast<int>(k)];
}

// Strides for a view of `shape`: empty (contiguous; only where `allow_empty`), or explicit:
// contiguous, channels-last, a slice of either, a transposition, an innermost step of 2 or 3,
// or weird ones (zero, negative, overlapping, huge).
inline Ints decode_strides(FuzzInput& in, int nd, const Ints& shape, bool allow_empty,
                           StrideKind* kind_out) {
  static constexpr StrideKind kKinds[] = {
      StrideKind::unset,      StrideKind::channels_last, StrideKind::contiguous,
      StrideKind::unset,      StrideKind::channels_last, StrideKind::sliced,
      StrideKind::transposed, StrideKind::stepped,       StrideKind::unset,
      StrideKind::channels_last, StrideKind::sliced,     StrideKind::weird};
  StrideKind kind = in.pick(kKinds);
  if (kind == StrideKind::weird && avoided("weird_strides")) kind = StrideKind::sliced;
  if (kind == StrideKind::unset && !allow_empty) kind = StrideKind::contiguous;
  *kind_out = kind;
  const size_t rank = shape.size();
  std::vector<int> order(rank);
  for (size_t d = 0; d < rank; ++d) order[d] = static_cast<int>(d);
  Ints pad(rank, 0);
  int64_t step = 1;
  switch (kind) {
    case StrideKind::unset: return {};
    case StrideKind::contiguous: break;
    case StrideKind::channels_last: order = channels_last_order(nd, rank); break;
    case StrideKind::sliced:
      if (in.boolean()) order = channels_last_order(nd, rank);
      for (int64_t& p : pad) p = in.range(0, 2);
      break;
    case StrideKind::transposed:
      for (size_t i = rank; i > 1; --i) std::swap(order[i - 1], order[in.range(0, i - 1)]);
      break;
    case StrideKind::stepped:
      if (in.boolean()) order = channels_last_order(nd, rank);
      step = in.range(2, 3);
      if (in.boolean() && rank > 0) pad[in.range(0, rank - 1)] = 1;
      break;
    case StrideKind::weird: {
      Ints s = layout_strides(shape, order, pad, 1);
      for (int64_t& x : s) {
        switch (in.byte() % 5) {
          case 0: x = 0; break;
          case 1: x = x == std::numeric_limits<int64_t>::min() ? 1 : -x; break;
          case 2: x = edge_int(in); break;
          case 3: x = in.range(0, 5); break;
          default: break;  // keep
        }
      }
      return s;
    }
  }
  return layout_strides(shape, order, pad, step);
}

// A list of window parameters: nd entries or one (the C API always takes nd), sometimes another
// count; entries from `sensible` or, sometimes, kEdgeInts.
inline Ints decode_list(FuzzInput& in, int nd, bool c_api,
                        const std::function<int64_t(FuzzInput&, int)>& sensible) {
  size_t count = in.boolean() ? nd : 1;
  if (c_api) count = nd;
  if (!c_api && in.chance(3) && !avoided("bad_list")) {
    const size_t kCounts[] = {0, 2, 4, size_t(nd) + 1};
    count = in.pick(kCounts);
  }
  Ints list(count);
  for (size_t i = 0; i < count; ++i) {
    list[i] = take_edge(in, 3) ? edge_int(in) : sensible(in, static_cast<int>(i));
  }
  return list;
}

// The entry of a list for spatial dimension i (broadcast of a single entry), or `fallback`.
inline int64_t entry(const Ints& list, int i, int64_t fallback) {
  if (list.empty()) return fallback;
  if (list.size() == 1) return list[0];
  return i < static_cast<int>(list.size()) ? list[i] : fallback;
}

// A decoded end padding in a C options struct (poolgen_pool_options or poolgen_unpool_options):
// given (now and then by another nonzero flag), its nd entries, now and then an edge value past
// them; returns the list the C API reads.
template <typename COptions>
Ints c_padding_end(FuzzInput& in, int nd, const Ints& list, COptions* co) {
  co->padding_end_given = in.chance(10) ? -3 : 1;
  for (int i = 0; i < 3; ++i) {
    co->padding_end[i] = i < nd ? entry(list, i, 0) : (in.chance(30) ? edge_int(in) : 0);
  }
  return Ints(co->padding_end, co->padding_end + nd);
}

// ---------------------------------------------------------------------------------------------
// Overflow-free model of the shape rules of docs/semantics.md (in 128-bit integers).

struct ShapeModel {
  bool valid = false;
  bool representable = false;  // valid and every output extent fits int64
  bool huge = false;           // an intermediate of the rules beyond 2^62
  // Beyond the library's limits (runtime/core/limits.hpp): a window parameter of 2^31 or more, a
  // pooling window whose d(k-1)+1 + s + 2p exceeds 2^29 or whose spans multiply past 2^26, an
  // unknown options device (unsupported), more than 2^59 elements or an unpooled extent beyond
  // 2^59 (invalid_argument).
  bool limit = false;
  Ints out;
  std::string why;  // the first rule broken
};

inline bool model_list(const Ints& list, int nd, const i128* fallback, i128* out) {
  if (list.empty() && fallback) {
    for (int i = 0; i < nd; ++i) out[i] = fallback[i];
    return true;
  }
  if (list.size() != 1 && list.size() != static_cast<size_t>(nd)) return false;
  for (int i = 0; i < nd; ++i) out[i] = list.size() == 1 ? list[0] : list[i];
  return true;
}

// The element count the library limits: extents of 0 count as 1 (an empty tensor's extents
// must still fit its arithmetic).
inline i128 elements_of(const Ints& shape) {
  i128 n = 1;
  for (int64_t e : shape) n = sat_mul(n, std::max<int64_t>(e, 1));
  return n;
}

inline bool model_input_shape(int nd, const Ints& shape, ShapeModel* m) {
  const int rank = static_cast<int>(shape.size());
  if (rank != nd + 1 && rank != nd + 2) {
    m->why = "rank";
    return false;
  }
  for (int i = 0; i < rank; ++i) {
    if (shape[i] < ((rank == nd + 2 && i == 0) ? 0 : 1)) {
      m->why = "extent";
      return false;
    }
  }
  if (elements_of(shape) > kLibMaxElements) m->limit = true;
  return true;
}

inline i128 floor_div(i128 a, i128 b) {  // b > 0
  i128 q = a / b;
  if (a % b != 0 && a < 0) --q;
  return q;
}

inline bool is_huge(i128 v) { return v > kHuge || v < -kHuge; }

// Any entry of the lists over the library's window-parameter limit (it checks them early).
inline bool over_window_limit(std::initializer_list<const Ints*> lists) {
  for (const Ints* l : lists) {
    for (int64_t v : *l) {
      if (v > kLibMaxWindow) return true;
    }
  }
  return false;
}

inline bool unknown_device(Device device) {
  return device != Device::cpu && device != Device::cuda;
}

inline ShapeModel model_pool_shape(int nd, const Ints& shape, const PoolOptions& o) {
  ShapeModel m;
  m.limit = over_window_limit({&o.kernel_size, &o.stride, &o.padding, &o.dilation,
                               &o.padding_end}) ||
            unknown_device(o.device);
  if (nd < 1 || nd > 3) return m.why = "nd", m;
  i128 k[3], s[3], p[3], pe[3], d[3];
  const i128 zeros[3] = {0, 0, 0}, ones[3] = {1, 1, 1};
  if (!model_list(o.kernel_size, nd, nullptr, k)) return m.why = "kernel_size count", m;
  if (!model_list(o.stride, nd, k, s)) return m.why = "stride count", m;
  if (!model_list(o.padding, nd, zeros, p)) return m.why = "padding count", m;
  if (!model_list(o.dilation, nd, ones, d)) return m.why = "dilation count", m;
  // Other frameworks' padding (docs/semantics.md): ONNX's end padding, or SAME / VALID.
  const int auto_pad = static_cast<int>(o.auto_pad);
  if (auto_pad < 0 || auto_pad > 3) return m.why = "auto_pad code", m;
  const int rule = static_cast<int>(o.pool_rule);  // pytorch, onnx_runtime, tensorflow
  if (rule < 0 || rule > 2) return m.why = "pool_rule code", m;
  if (rule == 2 && o.ceil_mode) return m.why = "ceil_mode with pool_rule tensorflow", m;
  const bool end_given = !o.padding_end.empty(), same = auto_pad == 1 || auto_pad == 2;
  if (auto_pad != 0) {
    for (int i = 0; i < nd; ++i) {
      if (p[i] != 0) return m.why = "padding with auto_pad", m;
    }
    if (end_given) return m.why = "padding_end with auto_pad", m;
    if (same && o.ceil_mode) return m.why = "ceil_mode with SAME", m;
  }
  if (!model_list(o.padding_end, nd, p, pe)) return m.why = "padding_end count", m;
  for (int i = 0; i < nd; ++i) {
    if (k[i] > kLibMaxWindow || s[i] > kLibMaxWindow || p[i] > kLibMaxWindow ||
        d[i] > kLibMaxWindow) {
      m.limit = true;
    }
  }
  for (int i = 0; i < nd; ++i) {
    if (k[i] < 1 || s[i] < 1 || p[i] < 0 || d[i] < 1) return m.why = "window minimum", m;
  }
  for (int i = 0; i < nd; ++i) {
    if (pe[i] < 0) return m.why = "padding_end minimum", m;
    if (pe[i] > kLibMaxWindow) m.limit = true;
  }
  i128 volume = 1;
  for (int i = 0; i < nd; ++i) {
    const i128 span = d[i] * (k[i] - 1) + 1;
    // SAME's computed padding stays below the span.
    if (span + s[i] + (auto_pad == 0 ? p[i] + pe[i] : span - 1) > kLibMaxWindowReach) {
      m.limit = true;
    }
    volume = sat_mul(volume, span);
    if (volume > kLibMaxWindowVolume) m.limit = true;
    if (end_given) {  // ONNX Runtime's limit, each side below the undilated kernel
      if (p[i] >= k[i] || pe[i] >= k[i]) return m.why = "padding_end limit", m;
    } else {
      const i128 limit = nd == 3 ? k[i] / 2 : span / 2;
      if (p[i] > limit) return m.why = "padding limit", m;
    }
    if (is_huge(d[i] * (k[i] - 1)) || is_huge(p[i] + pe[i])) m.huge = true;
  }
  if (!model_input_shape(nd, shape, &m)) return m;
  m.out = shape;
  const size_t first = shape.size() - nd;
  bool fits = true;
  for (int i = 0; i < nd; ++i) {
    const i128 in = shape[first + i];
    if (same) {  // the padding an undilated window needs for ceil(in / s) outputs, halved
      // (ONNX Runtime does not clamp at 0: windows start inside the input, the halves
      // truncated toward zero.)
      i128 needed = (-floor_div(-in, s[i]) - 1) * s[i] + k[i] - in;
      if (rule != 1) needed = std::max<i128>(0, needed);
      const i128 halved = auto_pad == 1 ? needed : needed + 1;
      p[i] = halved >= 0 ? halved / 2 : -(-halved / 2);
      pe[i] = needed - p[i];
    }
    // What the window leaves, then the rule's division: PyTorch floors, ONNX Runtime truncates
    // (toward zero below 0), TensorFlow truncates (rest + s) / s.
    const i128 rest = in + p[i] + pe[i] - d[i] * (k[i] - 1) - 1;
    const i128 num = rest + (o.ceil_mode ? s[i] - 1 : 0);
    i128 e = rule == 0   ? floor_div(num, s[i]) + 1
             : rule == 1 ? (rest >= 0 ? num / s[i] : -(-rest / s[i])) + 1
                         : (rest + s[i] >= 0 ? (rest + s[i]) / s[i] : -(-(rest + s[i]) / s[i]));
    if (o.ceil_mode && e > 0 && (e - 1) * s[i] >= in + p[i]) --e;
    if (is_huge(num) || is_huge(in + p[i] + pe[i]) || is_huge(num + s[i])) m.huge = true;
    if (e < (rule == 0 ? 1 : 0)) return m.why = "output extent below the rule's minimum", m;
    if (e > kI64Max) fits = false;
    m.out[first + i] = saturate(e);
  }
  m.valid = true;
  m.representable = fits;
  if (elements_of(m.out) > kLibMaxElements) m.limit = true;
  return m;
}

inline ShapeModel model_unpool_shape(int nd, const Ints& shape, const UnpoolOptions& o) {
  ShapeModel m;
  m.limit = over_window_limit({&o.kernel_size, &o.stride, &o.padding, &o.padding_end}) ||
            unknown_device(o.device);
  if (nd < 1 || nd > 3) return m.why = "nd", m;
  // Other frameworks' rules (docs/semantics.md, "Unpooling in other frameworks").
  const int rule = static_cast<int>(o.output_size_rule);
  const bool onnx_rule = rule == 1 || rule == 2;  // onnx_runtime, onnx
  // No kernel_size but an output_size: by the indices alone, any extents >= 1 and no window.
  const bool by_indices = o.kernel_size.empty() && !o.output_size.empty();
  i128 k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, p[3], pe[3];
  const i128 zeros[3] = {0, 0, 0};
  if (by_indices) {
    if (onnx_rule) return m.why = "ONNX's output_size_rule without kernel_size", m;
    if (!o.padding_end.empty()) return m.why = "padding_end without kernel_size", m;
    if (!o.stride.empty()) return m.why = "stride without kernel_size", m;
    if (!model_list(o.padding, nd, zeros, p)) return m.why = "padding count", m;
    for (int i = 0; i < nd; ++i) {
      if (p[i] != 0) return m.why = "padding without kernel_size", m;
    }
  } else {
    if (!model_list(o.kernel_size, nd, nullptr, k)) return m.why = "kernel_size count", m;
    if (!model_list(o.stride, nd, k, s)) return m.why = "stride count", m;
    if (!model_list(o.padding, nd, zeros, p)) return m.why = "padding count", m;
  }
  if (rule < 0 || rule > 3) return m.why = "output_size_rule code", m;
  const int format = static_cast<int>(o.index_format);
  if (format < 0 || format > 4) return m.why = "index_format code (window: none for unpooling)", m;
  if (!model_list(o.padding_end, nd, p, pe)) return m.why = "padding_end count", m;
  for (int i = 0; i < nd; ++i) {
    if (k[i] > kLibMaxWindow || s[i] > kLibMaxWindow || p[i] > kLibMaxWindow ||
        pe[i] > kLibMaxWindow) {
      m.limit = true;
    }
  }
  for (int i = 0; i < nd; ++i) {
    if (k[i] < 1 || s[i] < 1 || p[i] < 0 || pe[i] < 0) return m.why = "window minimum", m;
  }
  if (!model_input_shape(nd, shape, &m)) return m;
  const size_t given = o.output_size.size();
  if (given != 0 && given != size_t(nd) && given != size_t(nd) + 2) {
    return m.why = "output_size count", m;
  }
  if (given == size_t(nd) + 2 && rule != 0 &&
      (shape.size() != size_t(nd) + 2 || o.output_size[0] != shape[0] ||
       o.output_size[1] != shape[1])) {
    return m.why = "output_size's N and C (not the values')", m;
  }
  m.out = shape;
  const size_t first = shape.size() - nd;
  bool fits = true;
  i128 default_count = 1, count = 1;
  for (int i = 0; i < nd; ++i) {
    const i128 in = shape[first + i];
    const i128 def = (in - 1) * s[i] - p[i] - pe[i] + k[i];
    if (is_huge((in - 1) * s[i]) || is_huge(p[i] + pe[i]) || is_huge(def) ||
        is_huge(def + s[i]) || is_huge(def - s[i])) {
      m.huge = true;
    }
    if ((in - 1) * s[i] > kLibMaxElements) m.limit = true;
    if (onnx_rule && def < 1) return m.why = "default extent below 1 (ONNX's rules)", m;
    i128 e = def;
    if (given) {
      e = o.output_size[given - nd + i];
      if (rule == 0 && !by_indices && !(def - s[i] < e && e < def + s[i])) {
        return m.why = "output_size range", m;
      }
      if (rule == 2 && e < def) return m.why = "output_size below the default (onnx)", m;
    }
    if (e < 1) return m.why = "output extent below 1", m;
    if (e > kI64Max) fits = false;
    m.out[first + i] = saturate(e);
    default_count = sat_mul(default_count, def);
    count = sat_mul(count, e);
  }
  // (Saturating at the library's element limit, as the library's counts do.)
  if (rule == 1 && std::min(count, kLibMaxElements) < std::min(default_count, kLibMaxElements)) {
    return m.why = "fewer elements than the default (onnx_runtime)", m;
  }
  m.valid = true;
  m.representable = fits;
  if (elements_of(m.out) > kLibMaxElements) m.limit = true;
  return m;
}

inline bool within(const Ints& v, int64_t bound) {
  return std::all_of(v.begin(), v.end(), [&](int64_t x) { return x >= -bound && x <= bound; });
}

// The model against the reference, where the reference's int64 arithmetic is safe: a
// disagreement is a flaw of the fuzzer's model (or of the reference).
template <typename Options, typename RefShape>
void check_model_against_reference(int nd, const Ints& shape, const Options& o,
                                   const ShapeModel& m, RefShape ref_shape) {
  Ints ref_out;
  const Status st = ref_shape(nd, shape, o, &ref_out);
  if (st.ok() != m.valid || (st.ok() && ref_out != m.out)) {
    violation("fuzzer shape model disagrees with the reference: model " +
              std::string(m.valid ? "valid " + str(m.out) : "invalid (" + m.why + ")") +
              ", reference " + (st.ok() ? "ok " + str(ref_out) : st.message()));
  }
}

// A shape query's status against the model: a valid representable shape must come back exactly
// (a huge one may be refused, noted), an invalid one must be refused with invalid_argument, an
// unrepresentable one refused somehow.
inline void check_shape_query(const char* what, const ShapeModel& m, const Status& st,
                              const Ints& out, bool known = true) {
  check_message(st, known);
  if (st.ok()) {
    if (!m.valid || !m.representable) {
      violation(std::string(what) + " accepted a shape the rules refuse (" +
                (m.valid ? "output extent beyond int64" : m.why) + "): returned " + str(out));
    }
    if (out != m.out) {
      violation(std::string(what) + " returned " + str(out) + ", expected " + str(m.out));
    }
    return;
  }
  if (st.code() == Code::index_out_of_range) {
    violation(std::string(what) + " returned index_out_of_range: " + st.message());
  }
  if (m.limit) {
    if (st.code() == Code::invalid_argument || st.code() == Code::unsupported) return;
  }
  if (m.valid && m.representable) {
    if (m.huge) {
      note(std::string(what) + " refuses valid huge shapes",
           "refused a valid shape whose result " + str(m.out) + " fits int64: " + st.message());
    } else {
      violation(std::string(what) + " refused a valid shape (expected " + str(m.out) +
                "): " + st.message());
    }
  }
  if (!m.valid && st.code() != Code::invalid_argument) {
    violation(std::string(what) + " refused an invalid shape with " + code_name(st.code()) +
              " (expected invalid_argument): " + st.message());
  }
}

// ---------------------------------------------------------------------------------------------
// Views in guarded memory.

struct ViewSpec {
  int32_t dtype = 0;  // a DType code, possibly out of range
  Ints shape;
  Ints strides;  // empty: contiguous
  int32_t device = 0;
  bool null_data = false;  // forced null data
  StrideKind kind = StrideKind::unset;
};

inline size_t element_size(int32_t dtype) {
  const size_t s = dtype_size(static_cast<DType>(dtype));
  return s ? s : 4;  // unknown dtypes: some memory all the same
}

inline Ints effective_strides(const ViewSpec& v) {
  if (!v.strides.empty()) return v.strides;
  std::vector<int> order(v.shape.size());
  for (size_t d = 0; d < order.size(); ++d) order[d] = static_cast<int>(d);
  return layout_strides(v.shape, order, Ints(v.shape.size(), 0), 1);
}

struct Geometry {
  bool sane = false;  // extents >= 0, strides match the rank
  i128 elements = 0;
  i128 min_offset = 0, max_offset = 0;  // over the elements (0, 0 when there are none)
};

inline Geometry geometry(const ViewSpec& v) {
  Geometry g;
  g.sane = std::all_of(v.shape.begin(), v.shape.end(), [](int64_t e) { return e >= 0; }) &&
           (v.strides.empty() || v.strides.size() == v.shape.size());
  if (!g.sane) return g;
  g.elements = 1;
  for (int64_t e : v.shape) g.elements = sat_mul(g.elements, e);
  if (g.elements == 0) return g;
  // Row-major strides of extents beyond int64 saturate: such views are never materialised.
  const Ints s = effective_strides(v);
  for (size_t d = 0; d < v.shape.size(); ++d) {
    const i128 span = sat_mul(i128(v.shape[d]) - 1, s[d]);
    (span < 0 ? g.min_offset : g.max_offset) += span;
  }
  return g;
}

// The element offsets of a view, relative to its data, in logical (row-major) order.
inline std::vector<int64_t> element_offsets(const Ints& shape, const Ints& strides) {
  std::vector<int64_t> out;
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  if (n <= 0) return out;
  out.reserve(static_cast<size_t>(n));
  const size_t rank = shape.size();
  std::vector<int64_t> idx(rank, 0);
  for (int64_t e = 0; e < n; ++e) {
    int64_t off = 0;
    for (size_t d = 0; d < rank; ++d) off += idx[d] * strides[d];
    out.push_back(off);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// A view's memory: exactly the elements it reaches, fenced by guard pages. Inputs are flush
// against the page after them or the one before (the input picks), outputs too.
struct Memory {
  std::unique_ptr<GuardedBuffer> buffer;
  void* data = nullptr;  // what the view's data points at
  size_t elem = 0;
  int64_t origin = 0;  // elements from the buffer start to data (negative strides)
  bool is_tiny = false;  // tiny(): not the view's memory
  std::vector<int64_t> offsets;

  uint8_t* at(int64_t offset) const {
    return static_cast<uint8_t*>(data) + offset * static_cast<int64_t>(elem);
  }
};

inline bool materialisable(const ViewSpec& v) {
  const Geometry g = geometry(v);
  return g.sane && g.max_offset - g.min_offset + 1 <= kMaxReach && g.elements <= kMaxElements;
}

// Fills the whole buffer with `fill` (outputs: the sentinel that must survive where nothing is
// written).
inline Memory allocate(const ViewSpec& v, bool underrun, uint8_t fill) {
  Memory m;
  m.elem = element_size(v.dtype);
  const Geometry g = geometry(v);
  const int64_t reach = g.elements == 0 ? 0 : static_cast<int64_t>(g.max_offset - g.min_offset + 1);
  m.buffer = std::make_unique<GuardedBuffer>(
      static_cast<size_t>(reach) * m.elem,
      underrun ? GuardedBuffer::catch_underrun : GuardedBuffer::catch_overrun);
  std::memset(m.buffer->data(), fill, m.buffer->size());
  m.origin = static_cast<int64_t>(-g.min_offset);
  m.data = m.buffer->data() + m.origin * static_cast<int64_t>(m.elem);
  if (g.elements > 0) m.offsets = element_offsets(v.shape, effective_strides(v));
  return m;
}

// A tiny buffer for a view that will not get its memory (calls that must fail before reading).
inline Memory tiny(bool underrun) {
  Memory m;
  m.elem = 1;
  m.is_tiny = true;
  m.buffer = std::make_unique<GuardedBuffer>(
      8, underrun ? GuardedBuffer::catch_underrun : GuardedBuffer::catch_overrun);
  std::memset(m.buffer->data(), 0x5c, 8);
  m.data = m.buffer->data();
  return m;
}

// The packed (logical order) bytes of a view.
inline std::vector<uint8_t> gather(const Memory& m) {
  std::vector<uint8_t> out(m.offsets.size() * m.elem);
  for (size_t i = 0; i < m.offsets.size(); ++i) {
    std::memcpy(&out[i * m.elem], m.at(m.offsets[i]), m.elem);
  }
  return out;
}

// The library's rule for outputs (poolgen.hpp): sorted by stride, each dimension (of extent > 1)
// steps over everything the finer ones cover.
inline bool keeps_elements_apart(const Ints& shape, const Ints& strides) {
  std::vector<std::pair<i128, i128>> dims;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] > 1) dims.emplace_back(strides[i], shape[i]);
  }
  std::sort(dims.begin(), dims.end());
  i128 covered = 1;
  for (const auto& [stride, extent] : dims) {
    if (stride < covered) return false;
    covered = sat_mul(stride, extent);
  }
  return true;
}

// Negative strides: the library refuses them as unsupported.
inline bool negative_strides(const ViewSpec& v) {
  const Ints s = effective_strides(v);
  return std::any_of(s.begin(), s.end(), [](int64_t x) { return x < 0; });
}

// A view reaching farther than 2^59 elements from its data: refused (invalid_argument). The
// library sums the spans of every dimension of extent > 1, even when another extent is 0.
inline bool reach_beyond_limit(const ViewSpec& v) {
  const Geometry g = geometry(v);
  if (!g.sane) return true;
  const Ints s = effective_strides(v);
  i128 reach = 0;
  for (size_t d = 0; d < v.shape.size(); ++d) {
    if (v.shape[d] > 1) reach += sat_mul(i128(v.shape[d]) - 1, s[d] < 0 ? -i128(s[d]) : i128(s[d]));
  }
  return reach > kLibMaxElements;
}

inline i128 plane_of(int nd, const Ints& shape) {
  i128 p = 1;
  for (size_t i = shape.size() - std::min<size_t>(nd, shape.size()); i < shape.size(); ++i) {
    p = sat_mul(p, shape[i]);
  }
  return p;
}

// The C form of a view (rank and arrays; all-zero strides mean contiguous).
inline poolgen_tensor to_c(const ViewSpec& v, void* data) {
  poolgen_tensor t{};
  t.data = data;
  t.dtype = v.dtype;
  t.rank = static_cast<int32_t>(v.shape.size());
  for (size_t i = 0; i < v.shape.size() && i < 5; ++i) {
    t.shape[i] = v.shape[i];
    if (!v.strides.empty()) t.strides[i] = v.strides[i];
  }
  t.device = v.device;
  return t;
}

// The C API reads all-zero strides as contiguous: the same view in C++ terms.
inline void normalise_for_c(ViewSpec* v) {
  if (std::all_of(v->strides.begin(), v->strides.end(), [](int64_t s) { return s == 0; })) {
    v->strides.clear();
  }
}

inline TensorView to_cpp(const ViewSpec& v, void* data) {
  TensorView t;
  t.data = data;
  t.dtype = static_cast<DType>(v.dtype);
  t.shape = v.shape;
  t.strides = v.strides;
  t.device = static_cast<Device>(v.device);
  return t;
}

inline std::string describe(const char* name, const ViewSpec& v) {
  std::ostringstream os;
  os << name << " " << dtype_str(v.dtype) << " " << str(v.shape) << " strides "
     << (v.strides.empty() ? "(contiguous)" : str(v.strides)) << " ["
     << stride_kind_name(v.kind) << "]";
  if (v.device) os << " device " << v.device;
  if (v.null_data) os << " null";
  return os.str();
}

inline constexpr DType kCommonValues[] = {DType::f32, DType::bf16, DType::u8};
inline constexpr int32_t kAnyDtype[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, -1, 100, 0x7fffffff};
inline constexpr int32_t kOtherIndex[] = {0, 6, 7, 5, 2, 3, 4, 9, -1};

inline int32_t decode_value_dtype(FuzzInput& in) {
  if (!in.chance(15)) return static_cast<int32_t>(in.pick(kCommonValues));
  return in.pick(kAnyDtype);
}

inline int32_t decode_index_dtype(FuzzInput& in) {
  if (!in.chance(8)) return in.boolean() ? 8 /* i32 */ : 1 /* i64 */;
  return in.pick(kOtherIndex);
}

// Gradients: the float dtypes (mostly the checked build's f32 and bf16), sometimes any code.
inline int32_t decode_gradient_dtype(FuzzInput& in) {
  static constexpr DType kGradients[] = {DType::f32, DType::bf16, DType::f32,
                                         DType::f16, DType::bf16, DType::f64};
  if (!in.chance(12)) return static_cast<int32_t>(in.pick(kGradients));
  return in.pick(kAnyDtype);
}

inline int32_t decode_device(FuzzInput& in) {
  if (!in.chance(3)) return 0;
  static constexpr int32_t kDevices[] = {1, 1, 2, -1};
  return in.pick(kDevices);
}

// A differing shape: one extent off by one, or replaced.
inline void perturb(FuzzInput& in, Ints* shape) {
  if (shape->empty()) return;
  int64_t& e = (*shape)[in.range(0, shape->size() - 1)];
  switch (in.byte() % 3) {
    case 0: e = e == kI64Max ? 0 : e + 1; break;
    case 1: e = e == 0 || e == std::numeric_limits<int64_t>::min() ? 1 : e - 1; break;
    default: e = edge_int(in); break;
  }
}

inline ViewSpec decode_view(FuzzInput& in, int nd, const Ints& shape, int32_t dtype, bool c_api) {
  ViewSpec v;
  v.shape = shape;
  v.dtype = dtype;
  if (in.chance(3)) perturb(in, &v.shape);
  v.strides = decode_strides(in, nd, v.shape, !c_api, &v.kind);
  if (!c_api && !v.strides.empty() && in.chance(2)) {
    if (in.boolean()) {
      v.strides.pop_back();
    } else {
      v.strides.push_back(1);
    }
  }
  if (c_api) normalise_for_c(&v);
  v.device = decode_device(in);
  v.null_data = in.chance(2);
  return v;
}

// grad_output's shape, which no op shape fixes (a backward op's leading view): sometimes another
// rank, the batch dropped or leading 1s added up to rank 8 (strides then contiguous).
// POOLGEN_FUZZ_AVOID=grad_shape keeps it within rank nd + 2 and extents 0..2^20: the library
// read grad_output's own shape before comparing it with the expected one, and indexed outside
// its shape arrays above rank nd + 2, overflowed on huge extents, and refused negative ones as
// negative strides, unsupported (fixed; tests/fuzz/regressions).
inline void decode_grad_output_shape(FuzzInput& in, int nd, ViewSpec* v) {
  const bool steer = avoided("grad_shape");
  if (in.chance(4)) {
    static constexpr int kDeltas[] = {-1, 1, 2, 4, -2};
    int64_t rank = static_cast<int64_t>(v->shape.size()) + in.pick(kDeltas);
    rank = std::clamp<int64_t>(rank, 0, steer ? nd + 2 : 8);
    while (static_cast<int64_t>(v->shape.size()) > rank) v->shape.erase(v->shape.begin());
    while (static_cast<int64_t>(v->shape.size()) < rank) v->shape.insert(v->shape.begin(), 1);
    v->strides.clear();
    v->kind = StrideKind::unset;
    feature("grad_rank:" + std::to_string(rank - nd));
  }
  if (!steer) return;
  for (int64_t& e : v->shape) {
    if (e > kEmptyHugeExtent || e < 0) e = 1;
  }
}

// ---------------------------------------------------------------------------------------------
// Values.

inline bool is_float_dtype(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}

inline bool is_nan_bits(DType t, const uint8_t* p) {
  switch (t) {
    case DType::f32: {
      uint32_t b;
      std::memcpy(&b, p, 4);
      return (b & 0x7fffffffu) > 0x7f800000u;
    }
    case DType::f64: {
      uint64_t b;
      std::memcpy(&b, p, 8);
      return (b & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
    }
    case DType::f16:
    case DType::bf16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      return t == DType::f16 ? (b & 0x7fff) > 0x7c00 : (b & 0x7fff) > 0x7f80;
    }
    default: return false;
  }
}

// Bit-identical, or (nan_equal) both NaN.
inline bool same_element(DType t, const uint8_t* a, const uint8_t* b, bool nan_equal) {
  const size_t n = dtype_size(t);
  if (std::memcmp(a, b, n) == 0) return true;
  return nan_equal && is_float_dtype(t) && is_nan_bits(t, a) && is_nan_bits(t, b);
}

inline std::string element_str(DType t, const uint8_t* p) {
  uint64_t b = 0;
  std::memcpy(&b, p, dtype_size(t));
  std::ostringstream os;
  os << "0x" << std::hex << b;
  return os.str();
}

// Bit patterns of interesting values of a dtype: NaNs (quiet, signalling, negative, payloads),
// infinities, signed zeros, extremes, subnormals; integer lowest/highest.
inline std::vector<uint64_t> special_bits(DType t) {
  static const uint32_t kF32[] = {0x00000000, 0x80000000, 0x3f800000, 0xbf800000, 0x40000000,
                                  0x7fc00000, 0xffc00000, 0x7f800001, 0x7fc12345, 0x7f800000,
                                  0xff800000, 0x7f7fffff, 0xff7fffff, 0x00000001, 0x00800000,
                                  0x3f000000};
  std::vector<uint64_t> out;
  switch (t) {
    case DType::f32:
      for (uint32_t b : kF32) out.push_back(b);
      break;
    case DType::bf16:
      for (uint32_t b : kF32) out.push_back(b >> 16);
      out.push_back(0x7f81);  // signalling NaN
      out.push_back(0xffc1);
      out.push_back(0x0001);
      break;
    case DType::f16:
      for (uint32_t b : kF32) out.push_back(test::to_f16(test::bits_to_float(b)).bits);
      out.push_back(0x7c01);
      out.push_back(0xfe01);
      out.push_back(0x0001);
      out.push_back(0x7bff);
      break;
    case DType::f64:
      for (uint32_t b : kF32) {
        const double d = static_cast<double>(test::bits_to_float(b));
        uint64_t bits;
        std::memcpy(&bits, &d, 8);
        out.push_back(bits);
      }
      out.push_back(0x7ff0000000000001ull);
      out.push_back(0x7fefffffffffffffull);
      break;
    default: {
      const size_t n = dtype_size(t);
      const bool is_signed = t != DType::u8;
      const uint64_t mask = n == 8 ? ~0ull : ((1ull << (8 * n)) - 1);
      const uint64_t min = is_signed ? (1ull << (8 * n - 1)) : 0;
      for (uint64_t b : {uint64_t(0), uint64_t(1), ~uint64_t(0), uint64_t(2), uint64_t(3), min,
                         min - 1, min + 1, mask - 1}) {
        out.push_back(b & mask);
      }
      break;
    }
  }
  return out;
}

// Bits of a small integer k (0..3) in a dtype: many ties.
inline uint64_t small_bits(DType t, int k) {
  uint64_t b = 0;
  switch (t) {
    case DType::f32: b = test::float_to_bits(float(k)); break;
    case DType::f64: {
      const double d = k;
      std::memcpy(&b, &d, 8);
      break;
    }
    case DType::f16: b = test::to_f16(float(k)).bits; break;
    case DType::bf16: b = test::to_bf16(float(k)).bits; break;
    default: b = uint64_t(k); break;
  }
  return b;
}

// Element data of one tensor: a style and a seed, then a few elements set explicitly.
struct DataRecipe {
  uint8_t style = 0;  // 0: small ints (ties), 1: specials, 2: raw bits, 3: small with specials
  uint64_t seed = 0;
  std::vector<std::pair<uint64_t, uint8_t>> overrides;  // (position, special number)
};

inline DataRecipe decode_recipe(FuzzInput& in) {
  DataRecipe r;
  r.style = in.byte() % 4;
  r.seed = in.range(0, 255);
  const int n = static_cast<int>(in.range(0, 3));
  for (int i = 0; i < n; ++i) r.overrides.emplace_back(in.range(0, 255), in.byte());
  return r;
}

// Writes n elements of dtype (as `elem` bytes each) into packed bytes.
inline std::vector<uint8_t> make_values(DType t, size_t elem, size_t n, const DataRecipe& r) {
  std::vector<uint8_t> out(n * elem);
  if (!valid_dtype(static_cast<int32_t>(t))) return out;
  const std::vector<uint64_t> specials = special_bits(t);
  SplitMix rng(r.seed * 0x100000001b3ull + r.style);
  auto put = [&](size_t i, uint64_t bits) { std::memcpy(&out[i * elem], &bits, elem); };
  for (size_t i = 0; i < n; ++i) {
    switch (r.style) {
      case 0: put(i, small_bits(t, static_cast<int>(rng.below(4)))); break;
      case 1: put(i, specials[rng.below(specials.size())]); break;
      case 2: put(i, rng.next()); break;
      default:
        put(i, rng.below(10) == 0 ? specials[rng.below(specials.size())]
                                  : small_bits(t, static_cast<int>(rng.below(4))));
        break;
    }
  }
  for (const auto& [pos, which] : r.overrides) {
    if (n) put(pos % n, specials[which % specials.size()]);
  }
  return out;
}

// Writes packed bytes into a view's memory in logical order (repeated offsets: the last wins,
// and gather() then reads what is really there).
inline void scatter_into(Memory& m, const std::vector<uint8_t>& packed) {
  for (size_t i = 0; i < m.offsets.size(); ++i) {
    std::memcpy(m.at(m.offsets[i]), &packed[i * m.elem], m.elem);
  }
}

// ---------------------------------------------------------------------------------------------
// The reference on packed bytes.

template <typename T>
std::vector<T> typed(const std::vector<uint8_t>& bytes) {
  std::vector<T> v(bytes.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

inline Status ref_pool(int nd, DType t, const Ints& shape, const std::vector<uint8_t>& input,
                       const PoolOptions& o, std::vector<uint8_t>* values,
                       std::vector<int64_t>* indices) {
  return test::visit_dtype(t, [&](auto zero) {
    using T = decltype(zero);
    Ints out_shape;
    std::vector<T> vals;
    const Status st = ref::max_pool<T>(nd, shape, typed<T>(input), o, &out_shape, &vals, indices);
    *values = bytes_of(vals);
    return st;
  });
}

inline Status ref_unpool(int nd, DType t, const Ints& shape, const std::vector<uint8_t>& values,
                         const std::vector<int64_t>& indices, const UnpoolOptions& o,
                         std::vector<uint8_t>* output) {
  return test::visit_dtype(t, [&](auto zero) {
    using T = decltype(zero);
    Ints out_shape;
    std::vector<T> out;
    const Status st = ref::max_unpool<T>(nd, shape, typed<T>(values), indices, o, &out_shape, &out);
    *output = bytes_of(out);
    return st;
  });
}

// The backward references: gradients are floats (other dtypes: refused, never asked).
// run(T{}, &out) computes one in the float type T; its result comes back as bytes.
template <typename Run>
Status float_reference(DType t, std::vector<uint8_t>* bytes, Run run) {
  return test::visit_dtype(t, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (test::is_float_type<T>()) {
      std::vector<T> out;
      const Status st = run(zero, &out);
      *bytes = bytes_of(out);
      return st;
    } else {
      return Status(Code::invalid_argument, "grad_output: expected a float dtype, got another");
    }
  });
}

inline Status ref_pool_backward(int nd, DType t, const Ints& input_shape,
                                const std::vector<uint8_t>& grad,
                                const std::vector<int64_t>& indices, const PoolOptions& o,
                                std::vector<uint8_t>* grad_input) {
  return float_reference(t, grad_input, [&](auto zero, auto* out) {
    using T = decltype(zero);
    return ref::max_pool_backward<T>(nd, input_shape, typed<T>(grad), indices, o, out);
  });
}

inline Status ref_unpool_backward(int nd, DType t, const Ints& values_shape,
                                  const std::vector<uint8_t>& grad,
                                  const std::vector<int64_t>& indices, const UnpoolOptions& o,
                                  std::vector<uint8_t>* grad_values) {
  return float_reference(t, grad_values, [&](auto zero, auto* out) {
    using T = decltype(zero);
    return ref::max_unpool_backward<T>(nd, values_shape, typed<T>(grad), indices, o, out);
  });
}

// ---------------------------------------------------------------------------------------------
// Indices (unpooling's, and both backward ops').

// From positions inside each element's window (what pooling gives: the gather fast paths),
// anywhere in the plane, from a few slots (many duplicates); then some set to chosen values.
enum class IndexStyle : uint8_t { window, uniform, duplicates };

struct IndexRecipe {
  IndexStyle style = IndexStyle::window;
  uint64_t seed = 0;
  std::vector<std::pair<uint64_t, int64_t>> overrides;  // (position, value)
};

inline IndexRecipe decode_index_recipe(FuzzInput& in) {
  IndexRecipe r;
  r.style = static_cast<IndexStyle>(in.byte() % 3);
  r.seed = in.range(0, 255);
  const int overrides = static_cast<int>(in.range(0, 3));
  for (int i = 0; i < overrides; ++i) {
    // Relative to the plane P: -1, P, P + 1, P - 1, 0, or an edge value (INT32_MAX/MIN...).
    static constexpr int64_t kRelative[] = {-1, 0, 1, -2, -1000};
    const uint64_t pos = in.range(0, 255);
    const int64_t v = in.chance(30) ? edge_int(in) : kRelative[in.byte() % 5];
    r.overrides.emplace_back(pos, v);
  }
  return r;
}

// The windows the window style draws from: element e at spatial position o of `from` (the shape
// whose elements the indices belong to) takes a tap o*s - p + t*d (t < k) in every dimension.
struct IndexWindows {
  const Ints* kernel;
  const Ints* stride;    // empty: the kernel
  const Ints* padding;
  const Ints* dilation;  // null: 1
};

// Index values (int64, logical order) for `count` elements, addressing planes of the spatial
// extents of `to` (null: unknown, a plane of 1), window taps clamped into them.
inline std::vector<int64_t> make_indices(const IndexRecipe& r, int nd, const Ints& from,
                                         const Ints* to, const IndexWindows& w, size_t count) {
  std::vector<int64_t> idx(count, 0);
  SplitMix rng(r.seed * 0x9e3779b97f4a7c15ull + static_cast<uint8_t>(r.style));
  const i128 plane = to ? plane_of(nd, *to) : 1;
  const int64_t p = plane > kI64Max ? kI64Max : static_cast<int64_t>(plane);
  IndexStyle style = r.style;
  if (!to || plane > (i128(1) << 40) || from.size() < size_t(nd)) style = IndexStyle::uniform;
  for (size_t e = 0; e < count; ++e) {
    switch (style) {
      case IndexStyle::window: {
        // Element e's spatial position o, then a tap of its window, clamped into the plane.
        int64_t rest = static_cast<int64_t>(e), flat = 0, scale = 1;
        int64_t pos[3] = {0, 0, 0};
        for (int i = nd - 1; i >= 0; --i) {
          const int64_t ext = std::max<int64_t>(from[from.size() - nd + i], 1);
          pos[i] = rest % ext;
          rest /= ext;
        }
        for (int i = nd - 1; i >= 0; --i) {
          const i128 k = entry(*w.kernel, i, 1);
          const i128 s = w.stride->empty() ? k : entry(*w.stride, i, 1);
          const i128 pad = entry(*w.padding, i, 0);
          const i128 d = w.dilation ? entry(*w.dilation, i, 1) : 1;
          const int64_t oe = (*to)[to->size() - nd + i];
          const i128 q =
              std::clamp<i128>(pos[i] * s - pad + rng.below(saturate(k)) * d, 0, oe - 1);
          flat += static_cast<int64_t>(q) * scale;
          scale *= oe;
        }
        idx[e] = flat;
        break;
      }
      case IndexStyle::uniform: idx[e] = rng.below(p); break;
      case IndexStyle::duplicates: idx[e] = rng.below(std::min<int64_t>(p, 3)); break;
    }
  }
  for (const auto& [pos, v] : r.overrides) {
    if (!count) break;
    // Small values are relative to the plane size (P - 1, P, P + 1, -1...), others absolute.
    const bool relative = v >= -1000 && v <= 1;
    idx[pos % count] = relative ? (v == -1000 ? -1000 : saturate(i128(p) + v)) : v;
  }
  return idx;
}

// Writes index values into an index view's memory (as i32, i64, or another dtype's raw bytes:
// such calls are refused) and returns what the call reads there, as int64 (other dtypes: 0).
inline std::vector<int64_t> write_indices(Memory& m, int32_t dtype,
                                          const std::vector<int64_t>& idx) {
  const bool i32 = dtype == 8;
  std::vector<uint8_t> bytes(idx.size() * m.elem);
  for (size_t k = 0; k < idx.size(); ++k) {
    if (i32) {
      const int32_t v = static_cast<int32_t>(idx[k]);
      std::memcpy(&bytes[k * 4], &v, 4);
    } else if (m.elem == 8) {
      std::memcpy(&bytes[k * 8], &idx[k], 8);
    } else {
      std::memcpy(&bytes[k * m.elem], &idx[k], m.elem);  // another dtype: any bits
    }
  }
  scatter_into(m, bytes);
  const std::vector<uint8_t> back = gather(m);  // repeated offsets: what is really there
  std::vector<int64_t> packed(idx.size());
  for (size_t k = 0; k < idx.size(); ++k) {
    if (i32) {
      int32_t v;
      std::memcpy(&v, &back[k * 4], 4);
      packed[k] = v;
    } else if (m.elem == 8) {
      std::memcpy(&packed[k], &back[k * 8], 8);
    }
  }
  return packed;
}

// The first index outside [0, plane) in input order, if any.
inline bool first_invalid_index(const std::vector<int64_t>& idx, int64_t plane, int64_t* value) {
  for (int64_t v : idx) {
    if (v < 0 || v >= plane) {
      *value = v;
      return true;
    }
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// The C API's messages: a guarded buffer of the given size (or none), read back as a Status.

struct CMessage {
  std::unique_ptr<GuardedBuffer> buffer;
  size_t size = 0;
  char* ptr() const { return buffer ? reinterpret_cast<char*>(buffer->data()) : nullptr; }
};

inline CMessage decode_message_buffer(FuzzInput& in) {
  CMessage m;
  m.size = 1024;
  if (in.chance(8)) {
    static constexpr size_t kSizes[] = {0, 1, 2, 7, 16, 64, 0};
    m.size = in.pick(kSizes);
    if (in.chance(30)) return CMessage{};  // message == NULL (with any size)
  }
  m.buffer = std::make_unique<GuardedBuffer>(m.size);
  std::memset(m.buffer->data(), 'x', m.size);
  return m;
}

// A C++ call prepared on its views (prepare_*), then run on their data: it must succeed, fail
// and write as the call itself does (a shape or option error at prepare, a data error at run).
template <typename Prepare, typename Options>
Status run_prepared(Prepare prepare, int nd, const TensorView& a, const TensorView& b,
                    const TensorView& c, const Options& options) {
  PreparedCall call;
  const Status st = prepare(nd, a, b, c, options, &call);
  if (!st.ok()) {
    if (call.prepared()) violation("a refused prepare left a prepared call");
    return st;
  }
  return call.run(a.data, b.data, c.data);
}

// The status of a C call. The message must be NUL-terminated inside its buffer and nothing may
// be written around it; *full says whether the whole message came back (a 1024-byte buffer),
// so that the message checks apply.
inline Status c_status(int32_t rc, const CMessage& m, bool* full) {
  if (rc < 0 || rc > 4) violation("C API returned code " + std::to_string(rc));
  *full = false;
  std::string text;
  if (m.buffer) {
    if (!m.buffer->check()) violation("C API wrote outside its message buffer");
    if (m.size > 0) {
      const char* p = m.ptr();
      const void* nul = std::memchr(p, '\0', m.size);
      if (!nul) violation("C API message not NUL-terminated within its buffer of " +
                          std::to_string(m.size) + " bytes");
      text.assign(p, static_cast<const char*>(nul) - p);
      *full = m.size == 1024 && text.size() < 1023;
    }
  }
  return Status(static_cast<Code>(rc), text);
}

// ---------------------------------------------------------------------------------------------
// What a call must do, from the model and the views: succeed, fail with invalid_argument (a
// malformed call), fail somehow (CUDA without CUDA, unrepresentable shapes), or be allowed to
// fail with unsupported (32-bit limits, negative strides, dtypes the build left out).

struct Expect {
  bool invalid = false;           // must fail, with invalid_argument (or unsupported if allowed)
  bool fail = false;              // must fail, invalid_argument or unsupported
  bool unsupported_ok = false;    // may fail with unsupported
  bool needs_unsupported = false; // must fail (no kernel), unsupported unless malformed
  bool invalid_ok = false;        // may fail with invalid_argument (a library limit)
  std::string reasons;

  void add(bool* flag, const std::string& why) {
    *flag = true;
    reasons += (reasons.empty() ? "" : "; ") + why;
  }
  bool must_fail() const { return invalid || fail || needs_unsupported; }
};

// The checks common to both ops once a call returned: the code must fit the expectation.
// `index_error`: an invalid unpooling index is present (index_out_of_range expected).
inline void check_outcome(const Status& st, const Expect& e, bool index_error) {
  const std::string why = e.reasons.empty() ? "(none)" : e.reasons;
  if (st.ok()) {
    if (e.must_fail()) violation("accepted a call that must fail: " + why);
    if (index_error) violation("accepted invalid indices");
    return;
  }
  switch (st.code()) {
    case Code::index_out_of_range:
      if (!index_error) violation("index_out_of_range without an invalid index: " + st.message());
      if (e.must_fail()) {
        violation("index_out_of_range where the call is malformed (" + why + "): " +
                  st.message());
      }
      break;
    case Code::unsupported:
      if (!e.fail && !e.unsupported_ok && !e.needs_unsupported) {
        violation(std::string(e.invalid ? "malformed" : "valid") +
                  " call refused as unsupported (" + why + "): " + st.message());
      }
      break;
    case Code::invalid_argument:
      if (!e.invalid && !e.fail && !e.invalid_ok) {
        violation("valid call rejected with invalid_argument (" + why + "): " + st.message());
      }
      break;
    default: break;  // check_message reported it
  }
}

// Memory checks after a call: the canaries beside every buffer, outputs untouched (all of a
// buffer, or what lies outside the view).
inline void check_canary(const Memory& m, const char* name, const Status& st) {
  if (m.buffer && !m.buffer->check()) {
    violation(std::string("write beside the ") + name + " buffer (canary changed); status " +
              code_name(st.code()) + " " + st.message());
  }
}

inline void check_untouched(const Memory& m, uint8_t sentinel, const char* name,
                            const Status& st) {
  if (!m.buffer || m.is_tiny) return;
  const GuardedBuffer& b = *m.buffer;
  for (size_t k = 0; k < b.size(); ++k) {
    if (b.data()[k] != sentinel) {
      violation(std::string(name) + " written by a call that failed with " + code_name(st.code()) +
                ": " + st.message());
    }
  }
}

inline void check_outside_view(const Memory& m, uint8_t sentinel, const char* name) {
  if (!m.buffer || m.is_tiny) return;
  std::vector<char> in_view(m.buffer->size() / m.elem, 0);
  for (int64_t off : m.offsets) in_view[static_cast<size_t>(off + m.origin)] = 1;
  for (size_t k = 0; k < in_view.size(); ++k) {
    if (in_view[k]) continue;
    for (size_t b = 0; b < m.elem; ++b) {
      if (m.buffer->data()[k * m.elem + b] != sentinel) {
        violation(std::string("write outside the ") + name + " view (element offset " +
                  std::to_string(int64_t(k) - m.origin) + ")");
      }
    }
  }
}

// What one view contributes to the expectation: dtype, shape (against `want`, when known),
// strides, device, data. Outputs must keep their elements apart.
inline void expect_view(Expect& e, const char* name, const ViewSpec& v, int32_t want_dtype,
                        const Ints* want_shape, bool output) {
  const std::string n = name;
  if (v.dtype != want_dtype) e.add(&e.invalid, n + " dtype");
  if (want_shape && v.shape != *want_shape) e.add(&e.invalid, n + " shape");
  if (!v.strides.empty() && v.strides.size() != v.shape.size()) e.add(&e.invalid, n + " stride count");
  if (v.device == 1) e.add(&e.fail, n + " on cuda (no CUDA here)");
  if (v.device != 0 && v.device != 1) e.add(&e.fail, n + " device code");
  const Geometry g = geometry(v);
  if (v.null_data && g.sane && g.elements > 0) e.add(&e.invalid, n + " null");
  if (negative_strides(v)) e.add(&e.unsupported_ok, n + " negative strides");
  if (reach_beyond_limit(v)) e.add(&e.invalid_ok, n + " reach beyond 2^59");
  // (A view without elements has none to overlap.)
  if (output && g.sane && g.elements > 0 &&
      (v.strides.empty() || v.strides.size() == v.shape.size()) &&
      !keeps_elements_apart(v.shape, effective_strides(v))) {
    e.add(&e.invalid, n + " overlapping");
  }
}

// ---------------------------------------------------------------------------------------------
// Arguments sharing memory: one output placed on another argument's memory, at its data or some
// elements before or after it. Where the byte spans (first to last element) then overlap, the
// call must be refused with invalid_argument (or a code its other faults allow) before anything
// is written; where they do not, the output keeps its own memory.

struct Alias {
  int output = -1;    // the view placed (an output), or none
  int onto = -1;      // the argument whose memory it is placed on
  int64_t shift = 0;  // from the other's data, in the output's elements
};

// The last `outputs` of `views` arguments are outputs. Decoded last: older corpus inputs,
// exhausted by then, keep their meaning (no alias).
inline Alias decode_alias(FuzzInput& in, int views, int outputs) {
  Alias a;
  if (!in.chance(10) || avoided("alias")) return a;
  a.output = views - 1 - in.byte() % outputs;
  a.onto = (a.output + 1 + in.byte() % (views - 1)) % views;
  static constexpr int64_t kShifts[] = {0, 1, -1, 2, -2, 3, -5, 8, -8, 31, -31, 100, -100};
  a.shift = in.pick(kShifts);
  return a;
}

// The byte addresses [first, second) a view at `data` reaches; empty without elements.
inline std::pair<i128, i128> byte_span(const ViewSpec& v, const void* data) {
  const Geometry g = geometry(v);
  const i128 at = static_cast<i128>(reinterpret_cast<uintptr_t>(data));
  const i128 size = static_cast<i128>(element_size(v.dtype));
  if (!g.sane || g.elements == 0) return {at, at};
  return {at + g.min_offset * size, at + (g.max_offset + 1) * size};
}

// Whether two byte spans share a byte (empty ones share none).
inline bool overlap(const std::pair<i128, i128>& x, const std::pair<i128, i128>& y) {
  return x.first < x.second && y.first < y.second && x.first < y.second && y.first < x.second;
}

// Moves the aliased output's data onto the other argument's memory where the spans then overlap
// (both must have memory of their own: a wrongly accepted call then writes into the fuzzer's
// memory, read-only for inputs).
inline void apply_alias(const Alias& a, const ViewSpec* const views[], Memory mem[]) {
  if (a.output < 0) return;
  const Memory &out = mem[a.output], &onto = mem[a.onto];
  if (!out.buffer || out.is_tiny || !onto.buffer || onto.is_tiny) return;
  void* data = onto.at(0) + a.shift * static_cast<int64_t>(out.elem);
  const auto x = byte_span(*views[a.output], data), y = byte_span(*views[a.onto], onto.data);
  if (!overlap(x, y)) return;
  mem[a.output].data = data;
  feature("alias:" + std::to_string(a.output) + "/" + std::to_string(a.onto));
}

// Every output (the last `outputs` of `count` views) whose byte span, at the data the call gets,
// overlaps another argument's must be refused: aliased outputs, and views whose stand-in memory
// (tiny()) is smaller than the span they declare.
inline void expect_apart(const ViewSpec* const views[], const char* const names[],
                         const Memory mem[], int count, int outputs, Expect& e) {
  for (int out = count - outputs; out < count; ++out) {
    for (int other = 0; other < count; ++other) {
      if (other != out && overlap(byte_span(*views[out], mem[out].data),
                                  byte_span(*views[other], mem[other].data))) {
        e.add(&e.invalid, std::string(names[out]) + " overlaps " + names[other]);
      }
    }
  }
}

// Memory for a call's `count` views (the last `outputs` are outputs): exactly what each reaches
// when every view can have it (`materialise`), else a tiny stand-in for a call that must fail
// (the input picks), else none (null data, which the call must then refuse). Inputs are filled
// with kInputFill, outputs with kSentinel; `underrun` picks which end of each buffer touches a
// guard page.
inline void allocate_views(const ViewSpec* const views[], const char* const names[], int count,
                           int outputs, bool materialise, uint8_t underrun, Expect& e,
                           Memory mem[]) {
  for (int i = 0; i < count; ++i) {
    const bool flush_before = (underrun >> i) & 1;
    const Geometry g = geometry(*views[i]);
    if (views[i]->null_data) continue;
    if (materialise) {
      mem[i] = allocate(*views[i], flush_before, i < count - outputs ? kInputFill : kSentinel);
    } else if (e.must_fail() && ((underrun >> (3 + i)) & 1)) {
      mem[i] = tiny(flush_before);  // must fail before reading anything
    } else if (g.sane && g.elements > 0) {
      e.add(&e.invalid, std::string(names[i]) + " too large for the fuzzer: null data");
    } else if (g.sane) {
      mem[i] = allocate(*views[i], flush_before, kSentinel);  // no elements: a zero-size buffer
    }
  }
}

// ---------------------------------------------------------------------------------------------
// A backward op's call (max_pool_backward, max_unpool_backward), as both targets check it: views
// in argument order (grad_output, indices, then the output: grad_input or grad_values), the
// output fenced and sentinel-filled, the inputs read-only during the call. It must succeed with
// the reference's gradient, or fail as `expect` allows, writing nothing (index_out_of_range:
// nothing outside the output).

struct BackwardCall {
  const char* op = "";  // for features: "pool_backward", "unpool_backward"
  const ViewSpec* views[3] = {};
  const char* names[3] = {};
  Expect expect;
  bool materialise = false;
  uint8_t underrun = 0;
  Alias alias;
  DataRecipe data;  // grad_output's elements
  // Unpooling's gradient: indices outside [0, index_plane) are index_out_of_range (0: none are;
  // pooling's drops them).
  int64_t index_plane = 0;
  bool nan_equal = false;  // compare any NaN equal (sums), else exact bits (gathers)
  bool unknown_option_device = false;
  std::string description;
  std::function<std::vector<int64_t>(size_t count)> indices;
  // The call on the views at `data`; *known: the whole message came back.
  std::function<Status(void* const data[3], bool* known)> call;
  std::function<Status(std::string* name)> kernel_name;
  std::function<Status(const std::vector<uint8_t>& grad, const std::vector<int64_t>& indices,
                       std::vector<uint8_t>* want)>
      reference;
};

inline void check_backward_call(const BackwardCall& b) {
  Expect e = b.expect;
  Memory mem[3];
  allocate_views(b.views, b.names, 3, 1, b.materialise, b.underrun, e, mem);
  apply_alias(b.alias, b.views, mem);
  expect_apart(b.views, b.names, mem, 3, 1, e);
  const DType gt = static_cast<DType>(b.views[0]->dtype);
  std::vector<uint8_t> packed_grad;
  if (mem[0].buffer && !mem[0].offsets.empty()) {
    scatter_into(mem[0], make_values(gt, mem[0].elem, mem[0].offsets.size(), b.data));
    packed_grad = gather(mem[0]);
  }
  std::vector<int64_t> packed_indices;
  if (mem[1].buffer && !mem[1].offsets.empty()) {
    packed_indices = write_indices(mem[1], b.views[1]->dtype, b.indices(mem[1].offsets.size()));
  }
  // The first invalid index in input order, where the call is otherwise valid and has memory.
  int64_t first_bad = 0;
  const bool index_error = b.materialise && !e.must_fail() && b.index_plane > 0 &&
                           first_invalid_index(packed_indices, b.index_plane, &first_bad);
  if (index_error) feature(std::string(b.op) + ":index_error");
  context() = b.description + "; expect " + (e.reasons.empty() ? "success" : e.reasons) +
              (index_error ? "; invalid index " + std::to_string(first_bad) : "");

  for (int i : {0, 1}) {
    if (mem[i].buffer) mem[i].buffer->protect();  // any write to an input faults
  }
  void* const data[3] = {mem[0].data, mem[1].data, mem[2].data};
  bool known = true;
  const Status st = b.call(data, &known);
  for (int i : {0, 1}) {
    if (mem[i].buffer) mem[i].buffer->unprotect();
  }
  for (int i = 0; i < 3; ++i) check_canary(mem[i], b.names[i], st);
  check_message(st, known);
  check_outcome(st, e, index_error);
  feature(std::string("outcome:") + b.op + ":" + code_name(st.code()));
  if (st.code() == Code::index_out_of_range) {
    // docs/semantics.md: the message names the first invalid index and the plane size.
    if (known && (st.message().find("got " + std::to_string(first_bad) + " at element") ==
                      std::string::npos ||
                  st.message().find(std::to_string(b.index_plane)) == std::string::npos)) {
      violation("index_out_of_range does not name the first invalid index " +
                std::to_string(first_bad) + " and the plane size " +
                std::to_string(b.index_plane) + ": " + st.message());
    }
    check_outside_view(mem[2], kSentinel, b.names[2]);  // the view itself may be written
    return;
  }
  if (!st.ok()) {
    check_untouched(mem[2], kSentinel, b.names[2], st);
    return;
  }
  std::string name;
  const Status kn = b.kernel_name(&name);
  if (!kn.ok()) {
    violation(std::string(b.op) + " succeeded but its kernel-name query refuses: " +
              kn.message());
  }
  if (b.unknown_option_device) {
    note("options.device code accepted", "an unknown options.device code runs on the CPU");
  }
  feature("ok:" + name);
  if (!b.materialise || geometry(*b.views[2]).elements == 0) return;

  std::vector<uint8_t> want;
  const Status rs = b.reference(packed_grad, packed_indices, &want);
  if (!rs.ok()) violation("library succeeded, reference refuses: " + rs.message());
  const std::vector<uint8_t> got = gather(mem[2]);
  const size_t es = dtype_size(gt), n = want.size() / es;
  if (got.size() != want.size()) violation(std::string(b.names[2]) + " element count");
  for (size_t i = 0; i < n; ++i) {
    if (!same_element(gt, &got[i * es], &want[i * es], b.nan_equal)) {
      violation(std::string(b.names[2]) + " element " + std::to_string(i) + " (of " +
                std::to_string(n) + ") is " + element_str(gt, &got[i * es]) + ", reference " +
                element_str(gt, &want[i * es]) + " (kernel " + name + ")");
    }
  }
  check_outside_view(mem[2], kSentinel, b.names[2]);
}

// The C API's tensor-level oddities: a rank field out of 2..5 for one tensor, a NULL tensor.
struct CTensorFaults {
  int rank_view = -1;
  int32_t rank = 0;
  int null_view = -1;
};

inline CTensorFaults decode_c_faults(FuzzInput& in) {
  CTensorFaults f;
  if (in.chance(3)) {
    static constexpr int32_t kRanks[] = {0, 1, 6, -1, 0x7fffffff, -0x7fffffff - 1};
    f.rank_view = static_cast<int>(in.range(0, 2));
    f.rank = in.pick(kRanks);
  }
  if (in.chance(2)) f.null_view = static_cast<int>(in.range(0, 2));
  return f;
}

// A call's three C tensors with the faults applied: at(i) is NULL for the faulty one.
struct CTensors {
  poolgen_tensor t[3];
  int null_view;

  CTensors(const ViewSpec* const views[3], void* const data[3], const CTensorFaults& faults)
      : null_view(faults.null_view) {
    for (int i = 0; i < 3; ++i) {
      t[i] = to_c(*views[i], data[i]);
      if (faults.rank_view == i) t[i].rank = faults.rank;
    }
  }
  const poolgen_tensor* at(int i) const { return null_view == i ? nullptr : &t[i]; }
};

// ---------------------------------------------------------------------------------------------
// The seed maker: `<fuzzer> -make_seeds=DIR` runs the target on pseudo-random inputs (fixed seed)
// and writes each input that shows a feature no earlier one showed (rank, layout, dtype, API,
// outcome and error class...), then exits. The corpus under tests/fuzz/corpus starts from these.

inline void make_seeds(const char* dir, int (*run)(const uint8_t*, size_t)) {
  std::set<std::string> seen;
  SplitMix rng(20240611);
  int written = 0;
  for (int i = 0; i < 60000; ++i) {
    const size_t n = 4 + static_cast<size_t>(rng.below(120));
    std::vector<uint8_t> bytes(n);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng.next());
    // Mostly ordinary choices: many zero bytes.
    for (uint8_t& b : bytes) {
      if (rng.below(3) == 0) b = 0;
    }
    features().clear();
    run(bytes.data(), bytes.size());
    bool fresh = false;
    for (const std::string& f : features()) fresh |= seen.insert(f).second;
    if (!fresh) continue;
    char name[64];
    std::snprintf(name, sizeof name, "%s/seed-%03d", dir, written++);
    std::ofstream(name, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), n);
  }
  std::fprintf(stderr, "poolgen-fuzz: wrote %d seeds covering %zu features to %s\n", written,
               seen.size(), dir);
  if (verbose()) {
    for (const std::string& f : seen) std::fprintf(stderr, "  %s\n", f.c_str());
  }
}

// LLVMFuzzerInitialize's part: -make_seeds=DIR.
inline void maybe_make_seeds(int argc, char** argv, int (*run)(const uint8_t*, size_t)) {
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "-make_seeds=", 12) == 0) {
      make_seeds(argv[i] + 12, run);
      std::exit(0);
    }
  }
}

}  // namespace poolgen::fuzz
