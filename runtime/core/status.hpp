// Errors inside the runtime: a Status built from message parts ("<argument>: expected <what>,
// got <what>"), the early return, and the guard that keeps exceptions inside the library.
#pragma once

#include "poolgen/poolgen.hpp"

#include <initializer_list>
#include <string>
#include <type_traits>

namespace poolgen::detail {

// One part of an error message: text, an integer or an address.
struct MessagePart {
  enum Kind { text_part, number_part, address_part };
  MessagePart(const char* text) : text(text) {}
  MessagePart(const std::string& text) : text(text.c_str()) {}
  MessagePart(const void* address) : address(address), kind(address_part) {}
  template <typename I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  MessagePart(I number) : number(static_cast<int64_t>(number)), kind(number_part) {}
  const char* text = nullptr;
  int64_t number = 0;
  const void* address = nullptr;
  Kind kind = text_part;
};

// A Status naming `argument` (its message's leading name), whose message is the argument then the
// concatenation of `parts`, and whose kind is `kind`, or where that is none the argument's: an
// option's name (kernel_size, output_size, index_format, ...) makes it ErrorKind::option, else
// the code's (default_kind). Out of line: each of the runtime's many error sites is then a list
// of parts and one call, not a stream's inlined code.
Status fail_with(Code code, ErrorKind kind, const char* argument,
                 std::initializer_list<MessagePart> parts);

template <typename... Parts>
Status fail(Code code, const char* argument, const Parts&... parts) {
  return fail_with(code, ErrorKind::none, argument, {MessagePart(parts)...});
}
// fail, of a kind the argument does not tell (no kernel, no device).
template <typename... Parts>
Status fail_as(ErrorKind kind, Code code, const char* argument, const Parts&... parts) {
  return fail_with(code, kind, argument, {MessagePart(parts)...});
}

#define POOLGEN_RETURN_IF_ERROR(expr)         \
  do {                                        \
    ::poolgen::Status status_ = (expr);       \
    if (!status_.ok()) return status_;        \
  } while (false)

std::string format_shape(const Ints& shape);

// Runs `call`, turning any exception (std::bad_alloc for a packed copy, say) into an internal
// error: nothing is thrown out of the library.
template <typename F>
Status without_exceptions(F call) noexcept {
  try {
    return call();
  } catch (const std::exception& e) {
    return Status(Code::internal, std::string("internal: expected no exception, got ") + e.what());
  } catch (...) {
    return Status(Code::internal, "internal: expected no exception, got one of unknown type");
  }
}


}  // namespace poolgen::detail
