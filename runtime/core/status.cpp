#include "core/status.hpp"

#include <sstream>

namespace poolgen::detail {

Status fail_with(Code code, std::initializer_list<MessagePart> parts) {
  std::ostringstream message;
  for (const MessagePart& part : parts) {
    switch (part.kind) {
      case MessagePart::text_part: message << part.text; break;
      case MessagePart::number_part: message << part.number; break;
      case MessagePart::address_part: message << part.address; break;
    }
  }
  return Status(code, message.str());
}

std::string format_shape(const Ints& shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}


}  // namespace poolgen::detail
