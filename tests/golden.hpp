// Reader of the golden vectors in tests/golden/*.txt (written by tools/make_golden.py; the
// format is documented there). Header-only and needs no kernel library: used by reference_test
// and golden_test.
//
// Values are kept as raw little-endian bytes (the bit patterns of the file) with their DType;
// values_as<T>() turns them into a typed vector, same_values() compares two byte arrays of one
// dtype (bit for bit, any NaN equal to any NaN).
#pragma once

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "poolgen/poolgen.hpp"

namespace poolgen::golden {

// Element size and name of a DType (local copies: the reference test links no library).
inline size_t dtype_bytes(DType t) {
  switch (t) {
    case DType::i8:
    case DType::u8: return 1;
    case DType::f16:
    case DType::bf16:
    case DType::i16: return 2;
    case DType::f32:
    case DType::i32: return 4;
    case DType::f64:
    case DType::i64: return 8;
  }
  return 0;
}

inline const char* dtype_str(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i8: return "i8";
    case DType::u8: return "u8";
    case DType::i16: return "i16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
  }
  return "?";
}

inline bool dtype_from_str(const std::string& s, DType* t) {
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8, DType::u8,
                  DType::i16, DType::i32, DType::i64}) {
    if (s == dtype_str(d)) {
      *t = d;
      return true;
    }
  }
  return false;
}

inline const char* layout_str(Layout l) {
  return l == Layout::channels_last ? "channels_last" : "contiguous";
}

inline bool is_float(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}

// The bit pattern of element i of a little-endian byte array of `t`.
inline uint64_t element_bits(DType t, const uint8_t* bytes, size_t i) {
  const size_t w = dtype_bytes(t);
  uint64_t v = 0;
  for (size_t b = 0; b < w; ++b) v |= static_cast<uint64_t>(bytes[i * w + b]) << (8 * b);
  return v;
}

inline bool is_nan_bits(DType t, uint64_t b) {
  switch (t) {
    case DType::f32: return (b & 0x7f800000u) == 0x7f800000u && (b & 0x007fffffu) != 0;
    case DType::f64:
      return (b & 0x7ff0000000000000ull) == 0x7ff0000000000000ull &&
             (b & 0x000fffffffffffffull) != 0;
    case DType::f16: return (b & 0x7c00u) == 0x7c00u && (b & 0x03ffu) != 0;
    case DType::bf16: return (b & 0x7f80u) == 0x7f80u && (b & 0x007fu) != 0;
    default: return false;
  }
}

// One element as text: its value and bit pattern.
inline std::string show_element(DType t, uint64_t b) {
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%0*llx", static_cast<int>(2 * dtype_bytes(t)),
                static_cast<unsigned long long>(b));
  std::ostringstream os;
  switch (t) {
    case DType::f32: {
      const uint32_t u = static_cast<uint32_t>(b);
      float f;
      std::memcpy(&f, &u, 4);
      os << f;
      break;
    }
    case DType::f64: {
      double f;
      std::memcpy(&f, &b, 8);
      os << f;
      break;
    }
    case DType::f16: {  // widen exactly
      const uint32_t sign = (b & 0x8000u) << 16, exp = (b >> 10) & 0x1f, man = b & 0x3ff;
      float f;
      if (exp == 0x1f) {
        const uint32_t u = sign | 0x7f800000u | (man << 13);
        std::memcpy(&f, &u, 4);
      } else if (exp != 0) {
        const uint32_t u = sign | ((exp + 112) << 23) | (man << 13);
        std::memcpy(&f, &u, 4);
      } else {
        f = std::ldexp(static_cast<float>(man), -24);
        if (sign) f = -f;
      }
      os << f;
      break;
    }
    case DType::bf16: {
      const uint32_t u = static_cast<uint32_t>(b) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      os << f;
      break;
    }
    case DType::i8: os << static_cast<int>(static_cast<int8_t>(b)); break;
    case DType::u8: os << static_cast<int>(static_cast<uint8_t>(b)); break;
    case DType::i16: os << static_cast<int16_t>(b); break;
    case DType::i32: os << static_cast<int32_t>(b); break;
    case DType::i64: os << static_cast<int64_t>(b); break;
  }
  os << " (" << hex << ")";
  return os.str();
}

// Compares two byte arrays of `t`: bit for bit, except that any NaN equals any NaN (floats).
// Reports the size mismatch or the first few differing elements (with `shape`'s coordinates).
inline ::std::string compare_values(DType t, const std::vector<uint8_t>& expected,
                                    const std::vector<uint8_t>& actual, const Ints& shape = {}) {
  const size_t w = dtype_bytes(t);
  if (expected.size() != actual.size()) {
    return "size " + std::to_string(actual.size() / w) + " elements, expected " +
           std::to_string(expected.size() / w);
  }
  const size_t n = expected.size() / w;
  std::ostringstream os;
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t e = element_bits(t, expected.data(), i), a = element_bits(t, actual.data(), i);
    if (e == a || (is_nan_bits(t, e) && is_nan_bits(t, a))) continue;
    if (bad < 8) {
      os << "\n  [" << i;
      if (!shape.empty()) {  // coordinates in the logical shape
        std::vector<int64_t> c(shape.size());
        size_t r = i;
        for (size_t d = shape.size(); d-- > 0;) {
          c[d] = shape[d] ? static_cast<int64_t>(r % shape[d]) : 0;
          r = shape[d] ? r / shape[d] : 0;
        }
        os << " =";
        for (int64_t x : c) os << " " << x;
      }
      os << "] got " << show_element(t, a) << ", expected " << show_element(t, e);
    }
    ++bad;
  }
  if (bad == 0) return "";
  return std::to_string(bad) + " of " + std::to_string(n) + " " + dtype_str(t) +
         " values differ:" + os.str();
}

// The same for index arrays ("" when equal).
inline std::string compare_indices(const std::vector<int64_t>& expected,
                                   const std::vector<int64_t>& actual) {
  if (expected.size() != actual.size()) {
    return "size " + std::to_string(actual.size()) + ", expected " +
           std::to_string(expected.size());
  }
  std::ostringstream os;
  size_t bad = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] == actual[i]) continue;
    if (bad < 8) os << "\n  [" << i << "] got " << actual[i] << ", expected " << expected[i];
    ++bad;
  }
  if (bad == 0) return "";
  return std::to_string(bad) + " of " + std::to_string(expected.size()) +
         " indices differ:" + os.str();
}

template <typename T>
std::vector<T> values_as(const std::vector<uint8_t>& bytes) {
  std::vector<T> v(bytes.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// The ops of the files; the backward ones are the gradients of the forward ones. Shapes and
// indices keep the forward op's meaning: input_shape is the pooling input's (grad_input's) or the
// unpooling values' (grad_values'), output_shape the pooled or unpooled one.
inline const char* const kOps[] = {"pool", "unpool", "pool_backward", "unpool_backward"};
// index_formats.txt (tools/make_framework_golden.py) holds pooling cases of op index_formats:
// their out_indices (PyTorch's) come with the other frameworks' indices of the same maxima, as
// indices_<IndexFormat name> lines.
inline const char kIndexFormatsOp[] = "index_formats";

inline bool known_op(const std::string& op) {
  if (op == kIndexFormatsOp) return true;
  for (const char* o : kOps) {
    if (op == o) return true;
  }
  return false;
}

// The backward ops take gradients: float dtypes only.
inline bool is_backward(const std::string& op) {
  return op == "pool_backward" || op == "unpool_backward";
}

struct Case {
  std::string file, name, op;  // op: one of kOps
  std::string via;             // "# computed via ..." comment, if any
  int nd = 0;
  DType dtype = DType::f32;                // of every value and gradient
  Layout layout = Layout::contiguous;      // the memory format PyTorch computed in
  PoolOptions pool;
  UnpoolOptions unpool;
  Ints input_shape, output_shape;
  std::vector<uint8_t> in_values, out_values;  // little-endian bit patterns, logical order
  std::vector<int64_t> in_indices, out_indices;
  // Backward ops: the gradient given (output_shape) and the one expected (input_shape): grad_input
  // for pool_backward, grad_values for unpool_backward. pool_backward keeps the forward's input
  // (in_values) and indices (out_indices), unpool_backward the unpooling's indices (in_indices).
  std::vector<uint8_t> grad_output, grad_input, grad_values;
  // index_formats: (format name, the pooled elements' indices in that format).
  std::vector<std::pair<std::string, std::vector<int64_t>>> formatted_indices;
  // The framework refused the case (an output extent below its rule's minimum): so must poolgen.
  bool refused = false;

  template <typename T>
  std::vector<T> in() const { return values_as<T>(in_values); }
  template <typename T>
  std::vector<T> out() const { return values_as<T>(out_values); }
  // f32 cases only (the original files).
  std::vector<float> in_f32() const { return in<float>(); }
  std::vector<float> out_f32() const { return out<float>(); }
};

inline const char* const kFiles[] = {
    "pool1d.txt",          "pool2d.txt",          "pool3d.txt",
    "unpool1d.txt",        "unpool2d.txt",        "unpool3d.txt",
    "typed_pool1d.txt",    "typed_pool2d.txt",    "typed_pool3d.txt",
    "typed_unpool1d.txt",  "typed_unpool2d.txt",  "typed_unpool3d.txt",
    "pool_backward1d.txt", "pool_backward2d.txt", "pool_backward3d.txt",
    "unpool_backward1d.txt", "unpool_backward2d.txt", "unpool_backward3d.txt"};

namespace detail {

// A whitespace-separated token reader over one line.
struct Tokens {
  const char* p;
  const char* end;
  bool next(const char** s, size_t* n) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r')) ++p;
    if (p == end) return false;
    *s = p;
    while (p < end && *p != ' ' && *p != '\t' && *p != '\r') ++p;
    *n = static_cast<size_t>(p - *s);
    return true;
  }
};

inline int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

inline std::vector<int64_t> parse_ints(Tokens& t, const std::string& where) {
  std::vector<int64_t> v;
  const char* s;
  size_t n;
  while (t.next(&s, &n)) {
    size_t i = s[0] == '-' ? 1 : 0;
    bool ok = n > i && n - i <= 19;
    uint64_t x = 0;
    for (; ok && i < n; ++i) {
      ok = s[i] >= '0' && s[i] <= '9';
      x = x * 10 + static_cast<uint64_t>(s[i] - '0');
    }
    if (!ok || x > (s[0] == '-' ? 0x8000000000000000ull : 0x7fffffffffffffffull)) {
      throw std::runtime_error("golden: bad integer '" + std::string(s, n) + "' at " + where);
    }
    v.push_back(s[0] == '-' ? static_cast<int64_t>(0 - x) : static_cast<int64_t>(x));
  }
  return v;
}

// Hex bit patterns of `dtype`'s width, to little-endian bytes.
inline std::vector<uint8_t> parse_values(Tokens& t, DType dtype, const std::string& where) {
  const size_t w = dtype_bytes(dtype);
  std::vector<uint8_t> v;
  const char* s;
  size_t n;
  while (t.next(&s, &n)) {
    uint64_t x = 0;
    bool ok = n == 2 * w;
    for (size_t i = 0; ok && i < n; ++i) {
      const int d = hex_digit(s[i]);
      ok = d >= 0;
      x = (x << 4) | static_cast<uint64_t>(d < 0 ? 0 : d);
    }
    if (!ok) {
      throw std::runtime_error("golden: bad " + std::string(dtype_str(dtype)) + " token '" +
                               std::string(s, n) + "' at " + where);
    }
    for (size_t b = 0; b < w; ++b) v.push_back(static_cast<uint8_t>(x >> (8 * b)));
  }
  return v;
}

// Whether every data line of `c` holds as many elements as its shape says (a line left out holds
// none).
inline bool sizes_match(const Case& c) {
  auto count = [](const Ints& shape) {
    int64_t n = 1;
    for (int64_t e : shape) n *= e;
    return static_cast<size_t>(n);
  };
  const size_t w = dtype_bytes(c.dtype), in = count(c.input_shape), out = count(c.output_shape);
  if (c.op == "pool" || c.op == "index_formats") {
    for (const auto& [format, indices] : c.formatted_indices) {
      if (indices.size() != out) return false;
    }
    return c.in_values.size() == in * w && c.out_values.size() == out * w &&
           c.out_indices.size() == out;
  }
  if (c.op == "unpool") {
    return c.in_values.size() == in * w && c.in_indices.size() == in &&
           c.out_values.size() == out * w;
  }
  if (c.op == "pool_backward") {  // in_values: the forward's input, where the case has one
    return (c.in_values.empty() || c.in_values.size() == in * w) && c.out_indices.size() == out &&
           c.grad_output.size() == out * w && c.grad_input.size() == in * w;
  }
  return c.in_indices.size() == in && c.grad_output.size() == out * w &&
         c.grad_values.size() == in * w;
}

}  // namespace detail

// Reads one golden file; throws std::runtime_error on malformed input. `dtype` and `layout`
// lines must come before the values they describe (make_golden.py writes them after `nd`).
inline std::vector<Case> load_file(const std::string& dir, const std::string& file) {
  const std::string path = dir + "/" + file;
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("golden: cannot open " + path);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<Case> cases;
  Case c;
  bool open = false, values_seen = false;
  int lineno = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    const char* line = text.data() + pos;
    const size_t len = eol - pos;
    pos = eol + 1;
    ++lineno;
    if (len == 0 || line[0] == '#') {
      if (open && len > 15 && std::strncmp(line, "# computed via ", 15) == 0) {
        c.via.assign(line + 15, len - 15);
      }
      continue;
    }
    detail::Tokens tok{line, line + len};
    const char* ks;
    size_t kn;
    if (!tok.next(&ks, &kn)) continue;
    const std::string key(ks, kn);
    const std::string where = path + ":" + std::to_string(lineno);
    auto word = [&]() {
      const char* s;
      size_t n;
      if (!tok.next(&s, &n)) throw std::runtime_error("golden: missing value at " + where);
      return std::string(s, n);
    };
    if (key == "case") {
      if (open) throw std::runtime_error("golden: missing 'end' before " + where);
      c = Case();
      c.file = file;
      c.name = word();
      open = true;
      values_seen = false;
      continue;
    }
    if (!open) throw std::runtime_error("golden: data outside a case at " + where);
    if (key == "end") {
      if (!known_op(c.op)) {
        throw std::runtime_error("golden: case " + c.name + " has no valid op at " + where);
      }
      if (!c.refused && !detail::sizes_match(c)) {
        throw std::runtime_error("golden: case " + c.name +
                                 ": data sizes do not match its shapes at " + where);
      }
      cases.push_back(c);
      open = false;
    } else if (key == "op") {
      c.op = word();
    } else if (key == "nd") {
      c.nd = std::stoi(word());
    } else if (key == "dtype") {
      if (values_seen) throw std::runtime_error("golden: dtype after values at " + where);
      const std::string d = word();
      if (!dtype_from_str(d, &c.dtype)) {
        throw std::runtime_error("golden: unknown dtype '" + d + "' at " + where);
      }
    } else if (key == "layout") {
      const std::string l = word();
      if (l == "contiguous") {
        c.layout = Layout::contiguous;
      } else if (l == "channels_last") {
        c.layout = Layout::channels_last;
      } else {
        throw std::runtime_error("golden: unknown layout '" + l + "' at " + where);
      }
    } else if (key == "kernel_size") {
      c.pool.kernel_size = c.unpool.kernel_size = detail::parse_ints(tok, where);
    } else if (key == "stride") {
      c.pool.stride = c.unpool.stride = detail::parse_ints(tok, where);
    } else if (key == "padding") {
      c.pool.padding = c.unpool.padding = detail::parse_ints(tok, where);
    } else if (key == "dilation") {
      c.pool.dilation = detail::parse_ints(tok, where);
    } else if (key == "padding_end") {
      c.pool.padding_end = c.unpool.padding_end = detail::parse_ints(tok, where);
    } else if (key == "output_size_rule") {
      const std::string v = word();
      const char* const rules[] = {"pytorch", "onnx_runtime", "onnx", "any"};
      const auto it = std::find(std::begin(rules), std::end(rules), v);
      if (it == std::end(rules)) {
        throw std::runtime_error("golden: unknown output_size_rule '" + v + "' at " + where);
      }
      c.unpool.output_size_rule = static_cast<OutputSizeRule>(it - std::begin(rules));
    } else if (key == "pool_rule") {
      const std::string v = word();
      const char* const rules[] = {"pytorch", "onnx_runtime", "tensorflow"};
      const auto it = std::find(std::begin(rules), std::end(rules), v);
      if (it == std::end(rules)) {
        throw std::runtime_error("golden: unknown pool_rule '" + v + "' at " + where);
      }
      c.pool.pool_rule = static_cast<PoolRule>(it - std::begin(rules));
    } else if (key == "error") {
      c.refused = std::stoi(word()) != 0;
    } else if (key == "auto_pad" || key == "max_rule" || key == "index_format") {
      // Other frameworks' pooling (index_formats.txt): names as the enums spell them.
      const std::string v = word();
      const std::pair<const char*, int> names[] = {
          {"explicit_padding", 0}, {"same_upper", 1}, {"same_lower", 2}, {"valid", 3},
          {"any_nan", 0}, {"first_tap", 1}, {"plane", 0}, {"onnx", 1}, {"onnx_column_major", 2},
          {"tensorflow", 3}, {"tensorflow_with_batch", 4}, {"window", 5}};
      int value = -1;
      for (const auto& [name, n] : names) {
        if (v == name) value = n;
      }
      if (value < 0) throw std::runtime_error("golden: unknown " + key + " '" + v + "' at " + where);
      if (key == "auto_pad") c.pool.auto_pad = static_cast<AutoPad>(value);
      if (key == "max_rule") c.pool.max_rule = static_cast<MaxRule>(value);
      if (key == "index_format") {
        c.pool.index_format = c.unpool.index_format = static_cast<IndexFormat>(value);
      }
    } else if (key == "ceil_mode") {
      c.pool.ceil_mode = std::stoi(word()) != 0;
    } else if (key == "output_size") {
      c.unpool.output_size = detail::parse_ints(tok, where);
    } else if (key == "input_shape") {
      c.input_shape = detail::parse_ints(tok, where);
    } else if (key == "output_shape") {
      c.output_shape = detail::parse_ints(tok, where);
    } else if (key == "in_values") {
      c.in_values = detail::parse_values(tok, c.dtype, where);
      values_seen = true;
    } else if (key == "out_values") {
      c.out_values = detail::parse_values(tok, c.dtype, where);
      values_seen = true;
    } else if (key == "grad_output" || key == "grad_input" || key == "grad_values") {
      std::vector<uint8_t>& v = key == "grad_output" ? c.grad_output
                                : key == "grad_input" ? c.grad_input
                                                      : c.grad_values;
      v = detail::parse_values(tok, c.dtype, where);
      values_seen = true;
    } else if (key == "in_indices") {
      c.in_indices = detail::parse_ints(tok, where);
    } else if (key == "out_indices") {
      c.out_indices = detail::parse_ints(tok, where);
    } else if (key.rfind("indices_", 0) == 0) {
      c.formatted_indices.emplace_back(key.substr(8), detail::parse_ints(tok, where));
    } else {
      throw std::runtime_error("golden: unknown key '" + key + "' at " + where);
    }
  }
  if (open) throw std::runtime_error("golden: unterminated case in " + path);
  return cases;
}

// Every case of every golden file in `dir`.
inline std::vector<Case> load_all(const std::string& dir) {
  std::vector<Case> all;
  for (const char* file : kFiles) {
    std::vector<Case> cs = load_file(dir, file);
    all.insert(all.end(), cs.begin(), cs.end());
  }
  return all;
}

}  // namespace poolgen::golden
