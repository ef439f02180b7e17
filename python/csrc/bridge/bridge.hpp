// The framework adapters' one way into poolgen's C API (python/csrc/<framework>/ each include
// it): a call's outcome as poolgen reports it, and failures of the adapter's own checks in the
// same form. Header-only and free of any framework's types; the C API passes no C++
// standard-library type, so an adapter works whatever C++ ABI its framework was built with.
#pragma once

#include <poolgen/poolgen.h>

#include <sstream>
#include <string>

namespace poolgen_bridge {

// A failed call: poolgen's status code (POOLGEN_*), what it is about (POOLGEN_ERROR_*), the
// argument it names and the message; code 0 is success. Adapters pick the exception their
// framework raises from the first three (poolgen_last_error's), never from the message's wording.
struct Outcome {
  int code = 0;
  int kind = 0;
  std::string argument;
  std::string message;
  bool ok() const { return code == 0; }
};

// Runs one C API call, f(message, size), with its message buffer.
template <typename F>
Outcome call(F f) {
  char message[1024];
  message[0] = '\0';
  const int32_t code = f(message, sizeof message);
  if (code == POOLGEN_OK) return {};
  const poolgen_error e = poolgen_last_error();
  return {code, e.kind, e.argument, message};
}

// An adapter's own failure (what only its framework's tensors and rules can fail), in poolgen's
// form: "argument: expected ..., got ...".
template <typename... Parts>
Outcome fail(int code, int kind, const char* argument, const Parts&... parts) {
  std::ostringstream message;
  (message << argument << ... << parts);
  return {code, kind, argument, message.str()};
}

}  // namespace poolgen_bridge
