// The index formats (IndexFormat) inside the library: convert_indices' checks and rewrite, for
// the ops that write or read other formats than PyTorch's plane offsets. The rewrites and the
// unpooling across planes are hand-written kernels (docs/design.md, "Hand-written compute").
#pragma once

#include "core/view.hpp"
#include "validate/window.hpp"

namespace poolgen::detail {

// An i32 view (dtype) must hold every index `format` gives for the frame: else invalid_argument
// naming `argument`. window: the pooling window (resolved padding), for IndexFormat::window.
Status check_index_capacity(const char* argument, DType dtype, IndexFormat format, int nd,
                            const Ints& frame_shape, const Window* window);

// Rewrites the indices of `src` (from_format) into `dst` (to_format): checked host views of one
// pooled shape for the frame (the pooling input) of frame_shape, `dst` apart from `src` or the
// same view. An index the formats cannot carry is index_out_of_range naming it as an element of
// `indices` (in the caller's terms: batchless drops the view's added batch dimension). The views
// may be part of the frame's tensor, from plane (n0, c0): one image's channels, or whole images.
Status rewrite_indices(int nd, const Ints& frame_shape, const Window* window, const View& src,
                       IndexFormat from_format, const View& dst, IndexFormat to_format,
                       bool batchless, int64_t n0 = 0, int64_t c0 = 0);

// A block of a call's planes for for_index_blocks: `count` images (dim 0) or one image's
// channels (dim 1) from `first`; its first plane is (n0, c0).
struct IndexBlock {
  int dim;
  int64_t first, count, n0, c0;
  View of(const View& v) const { return slice(v, dim, first, count); }
};

// Runs pass(block) over blocks of whole images of `indices`' shape (of one image's channels where
// there is one and they are not innermost: channels-last blocks would cut every pixel's run of
// channels short), on the kernels' threads where a call of call_bytes is worth sharing, so that
// each block's passes run while it is in cache. Every block runs; the first failing one in (n, c)
// order decides, as one pass over all would.
Status for_index_blocks(const View& indices, int64_t call_bytes,
                        const std::function<Status(const IndexBlock&)>& pass);

// Unpooling's indices of `format`, addressing frame_shape (the output's, or under ONNX's output
// size rule the default output's), as plane offsets of the output (output_shape, extents at least
// the frame's: the same coordinates) in `dst`, a packed view of src's shape and dtype; src may
// be part of the indices, one image's channels from plane (n0, c0). index_out_of_range where an
// index names no element of its own plane.
Status unpool_plane_offsets(int nd, const Ints& frame_shape, const Ints& output_shape,
                            const View& src, IndexFormat format, const View& dst, bool batchless,
                            int64_t n0 = 0, int64_t c0 = 0);

// Unpooling where indices cross planes (onnx: into any plane of the frame; tensorflow: any
// channel of the item): one thread; the output zeroed, then each value stored at its index in
// the format's order (ONNX's row-major, TensorFlow's NHWC), the latest winning. The first index
// in that order outside the format's range is index_out_of_range.
Status unpool_across_planes(int nd, const Ints& frame_shape, const View& values,
                            const View& indices, IndexFormat format, const View& output,
                            bool batchless);

}  // namespace poolgen::detail
