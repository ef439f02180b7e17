// The index formats (IndexFormat) inside the library: convert_indices' checks and rewrite, for
// the ops that write or read other formats than PyTorch's plane offsets.
#pragma once

#include "shapes.hpp"
#include "tensors.hpp"

namespace poolgen::detail {

// An i32 view (dtype) must hold every index `format` gives for the frame: else invalid_argument
// naming `argument`. window: the pooling window (resolved padding), for IndexFormat::window.
Status check_index_capacity(const char* argument, DType dtype, IndexFormat format, int nd,
                            const Ints& frame_shape, const Window* window);

// Rewrites the indices of `src` (from_format) into `dst` (to_format): checked host views of one
// pooled shape for the frame (the pooling input) of frame_shape, `dst` apart from `src` or the
// same view. An index the formats cannot carry is index_out_of_range naming it (in the caller's
// terms: batchless drops the view's added batch dimension).
Status rewrite_indices(int nd, const Ints& frame_shape, const Window* window, const View& src,
                       IndexFormat from_format, const View& dst, IndexFormat to_format,
                       bool batchless);

}  // namespace poolgen::detail
