#include "core/status.hpp"

#include <cstring>
#include <sstream>

namespace poolgen::detail {

namespace {

// The options' names, as errors name them.
bool is_option(const char* argument) {
  static const char* const kOptions[] = {
      "kernel_size", "stride",    "padding",      "dilation",         "padding_end",
      "ceil_mode",   "auto_pad",  "max_rule",     "index_format",     "output_size",
      "output_size_rule", "nd",   "window",       "device",           "path",
      "options",     "output_size_len", "option"};
  for (const char* option : kOptions) {
    if (std::strcmp(argument, option) == 0) return true;
  }
  return false;
}

}  // namespace

Status fail_with(Code code, ErrorKind kind, const char* argument,
                 std::initializer_list<MessagePart> parts) {
  if (kind == ErrorKind::none) {  // unsupported: a tensor's size or strides (fail_as otherwise)
    kind = is_option(argument)          ? ErrorKind::option
           : code == Code::unsupported ? ErrorKind::tensor
                                       : default_kind(code);
  }
  std::ostringstream message;
  message << argument;
  for (const MessagePart& part : parts) {
    switch (part.kind) {
      case MessagePart::text_part: message << part.text; break;
      case MessagePart::number_part: message << part.number; break;
      case MessagePart::address_part: message << part.address; break;
    }
  }
  return Status(code, message.str(), kind);
}

std::string format_shape(const Ints& shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}


}  // namespace poolgen::detail
