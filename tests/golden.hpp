// Reader of the golden vectors in tests/golden/*.txt (written by tools/make_golden.py; the
// format is documented there). Header-only; used by reference_test and golden_test.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "poolgen/poolgen.hpp"

namespace poolgen::golden {

struct Case {
  std::string file, name, op;  // op: "pool" or "unpool"
  int nd = 0;
  PoolOptions pool;
  UnpoolOptions unpool;
  Ints input_shape, output_shape;
  std::vector<float> in_values, out_values;
  std::vector<int64_t> in_indices, out_indices;
};

inline const char* const kFiles[] = {"pool1d.txt",   "pool2d.txt",   "pool3d.txt",
                                     "unpool1d.txt", "unpool2d.txt", "unpool3d.txt"};

inline float float_from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

inline std::vector<int64_t> parse_ints(std::istringstream& in) {
  std::vector<int64_t> v;
  long long x;
  while (in >> x) v.push_back(static_cast<int64_t>(x));
  return v;
}

inline std::vector<float> parse_floats(std::istringstream& in) {
  std::vector<float> v;
  std::string tok;
  while (in >> tok) {
    if (tok.size() != 8) throw std::runtime_error("golden: bad f32 token '" + tok + "'");
    v.push_back(float_from_bits(static_cast<uint32_t>(std::stoul(tok, nullptr, 16))));
  }
  return v;
}

// Reads one golden file; throws std::runtime_error on malformed input.
inline std::vector<Case> load_file(const std::string& dir, const std::string& file) {
  const std::string path = dir + "/" + file;
  std::ifstream f(path);
  if (!f) throw std::runtime_error("golden: cannot open " + path);
  std::vector<Case> cases;
  Case c;
  bool open = false;
  std::string line;
  int lineno = 0;
  while (std::getline(f, line)) {
    ++lineno;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string key;
    in >> key;
    const std::string where = path + ":" + std::to_string(lineno);
    if (key == "case") {
      if (open) throw std::runtime_error("golden: missing 'end' before " + where);
      c = Case();
      c.file = file;
      in >> c.name;
      open = true;
      continue;
    }
    if (!open) throw std::runtime_error("golden: data outside a case at " + where);
    if (key == "end") {
      cases.push_back(c);
      open = false;
    } else if (key == "op") {
      in >> c.op;
    } else if (key == "nd") {
      in >> c.nd;
    } else if (key == "kernel_size") {
      c.pool.kernel_size = c.unpool.kernel_size = parse_ints(in);
    } else if (key == "stride") {
      c.pool.stride = c.unpool.stride = parse_ints(in);
    } else if (key == "padding") {
      c.pool.padding = c.unpool.padding = parse_ints(in);
    } else if (key == "dilation") {
      c.pool.dilation = parse_ints(in);
    } else if (key == "ceil_mode") {
      int v = 0;
      in >> v;
      c.pool.ceil_mode = v != 0;
    } else if (key == "output_size") {
      c.unpool.output_size = parse_ints(in);
    } else if (key == "input_shape") {
      c.input_shape = parse_ints(in);
    } else if (key == "output_shape") {
      c.output_shape = parse_ints(in);
    } else if (key == "in_values") {
      c.in_values = parse_floats(in);
    } else if (key == "out_values") {
      c.out_values = parse_floats(in);
    } else if (key == "in_indices") {
      c.in_indices = parse_ints(in);
    } else if (key == "out_indices") {
      c.out_indices = parse_ints(in);
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
