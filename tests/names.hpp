// Text for test messages: shapes, paths and status codes (no test framework needed, so the fuzzers
// use it too).
#pragma once

#include <sstream>
#include <string>

#include "poolgen/poolgen.hpp"

namespace poolgen::test {

inline std::string str(const Ints& v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}

inline const char* path_name(Path p) {
  return p == Path::automatic ? "automatic" : p == Path::general ? "general" : "winner";
}

inline const char* code_name(Code c) {
  switch (c) {
    case Code::ok: return "ok";
    case Code::invalid_argument: return "invalid_argument";
    case Code::index_out_of_range: return "index_out_of_range";
    case Code::unsupported: return "unsupported";
    case Code::internal: return "internal";
  }
  return "unknown";
}

}  // namespace poolgen::test
