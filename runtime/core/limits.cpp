#include "core/limits.hpp"

namespace poolgen::detail {

bool multiply_within_slow(int64_t a, int64_t b, int64_t limit, int64_t* out) {
  if (a != 0 && b > limit / a) return false;
  *out = a * b;
  return *out <= limit;
}

}  // namespace poolgen::detail
