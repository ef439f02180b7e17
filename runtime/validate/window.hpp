// The window and shape rules of docs/semantics.md: options checked into a Window, output shapes;
// every failure names the argument, what was expected and what was given.
#pragma once

#include "core/limits.hpp"
#include "core/status.hpp"

namespace poolgen::detail {

// A window with one entry per spatial dimension, in PyTorch order (outermost first).
struct Window {
  int nd = 0;
  int64_t kernel[3] = {}, stride[3] = {}, padding[3] = {}, dilation[3] = {1, 1, 1};
  // Padding after the end: `padding` but where padding_end was given or auto_pad computes both
  // sides (pool_output_shape sets them then).
  int64_t padding_end[3] = {};
  AutoPad auto_pad = AutoPad::explicit_padding;
  bool ceil_mode = false;
  // Some window reaches past the input's end (ceil_mode, or the right padding): fixed-window
  // kernels without padding read no bounds and cannot run it (pool_output_shape sets it).
  bool overhangs = false;
  // Unpooling by the indices alone (no kernel_size; output_size gives the extents): kernel,
  // stride and padding are 0.
  bool by_indices = false;
  OutputSizeRule size_rule = OutputSizeRule::pytorch;  // unpooling's
  PoolRule pool_rule = PoolRule::pytorch;              // pooling's
};

Status pool_window(int nd, const PoolOptions& options, Window* window);

// One window option of 1 or nd entries ("kernel_size", "stride", "padding" or "dilation"),
// expanded to nd entries in `out` with the checks pool_window makes of it (its minimum, 1 or 0,
// and at most 2^31-1); an empty list leaves an optional one (all but kernel_size) at zeros, the
// C options' default. Bindings expand their framework's lists through it (poolgen.h,
// poolgen_expand_option); invalid_argument naming `option` where it is none of these.
Status expand_option(const char* option, const Ints& list, int nd, int64_t* out);

// `format` is one of IndexFormat's values: else invalid_argument naming `argument`.
Status check_index_format(const char* argument, IndexFormat format);
Status unpool_window(int nd, const UnpoolOptions& options, Window* window);

// For unpooling by the indices alone: the window such a call most likely undoes, kernel = stride
// = each output extent over the input's (padding 0), so that a fixed-window kernel may be tried
// (those check every index and leave the rest to the general path). False where an extent does
// not divide evenly.
bool implied_window(int nd, const Ints& input_shape, const Ints& output_shape, Window* window);

// Whether `window`'s windows tile the output exactly: each output extent is the kernel times the
// input's (the shapes' last nd entries), as the fixed windows' gathers by window require.
bool windows_tile(const Window& window, const Ints& input_shape, const Ints& output_shape);

// The input must be (N, C, spatial...) or (C, spatial...), every extent >= 1 except N, and at
// most kMaxElements elements in all.
Status check_input_shape(const char* op, int nd, const char* argument, const Ints& shape);

// Elements in one plane of a tensor of `shape`: the product of its last nd extents (a shape
// check_input_shape passed, or one derived from it).
int64_t spatial_elements(int nd, const Ints& shape);

// The pooled and unpooled shapes; `input` and `output` name the pooling input and the unpooled
// output in messages (the backward ops' grad_input and grad_output). pool_output_shape also sets
// window->overhangs.
Status pool_output_shape(Window* window, const Ints& input_shape, Ints* output_shape,
                         const char* input = "input");
Status unpool_output_shape(const Window& window, const Ints& input_shape, const Ints& output_size,
                           Ints* output_shape, const char* output = "output");

// Frameworks pool 1-D as 2-D on (N, C, 1, L) with a window (1, k) (PyTorch's max_pool1d): the
// leading spatial dimensions of extent 1 that such a window spans (one tap, no padding on either
// side, so one output row too), at most nd - 1 of them. A call without them is the same call one
// rank lower, whose plane offsets are the same (the dropped dimensions' offsets are 0), and takes
// that rank's fixed-window kernels.
int unit_leading_dims(const Window& window, const int64_t* spatial_extents);
// `window` without its first `count` dimensions.
Window without_leading_dims(const Window& window, int count);

}  // namespace poolgen::detail
