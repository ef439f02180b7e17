// The two memory layouts poolgen's kernels take: the API's and the generators' one definition.
#pragma once

#include <cstdint>

namespace poolgen {

// contiguous: NCHW, NCDHW, NCL (the innermost spatial stride is 1); channels_last: NHWC, NDHWC,
// NLC (the channel stride is 1).
enum class Layout : int32_t { contiguous = 0, channels_last = 1 };

}  // namespace poolgen
