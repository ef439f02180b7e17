// Argument checks and shape arithmetic of docs/semantics.md; every failure names the argument, what
// was expected and what was given.
#pragma once

#include "poolgen/poolgen.hpp"

#include <initializer_list>
#include <string>
#include <type_traits>

namespace poolgen::detail {

// dtype_size for a dtype already checked valid, inline: views ask it several times a call.
inline int64_t element_size(DType dtype) {
  constexpr int64_t kSizes[] = {4, 8, 8, 2, 2, 1, 1, 2, 4};  // DType's order
  return kSizes[static_cast<int>(dtype)];
}

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

// A Status whose message is the concatenation of `parts`. Out of line: each of the runtime's
// many error sites is then a list of parts and one call, not a stream's inlined code.
Status fail_with(Code code, std::initializer_list<MessagePart> parts);

template <typename... Parts>
Status fail(Code code, const Parts&... parts) {
  return fail_with(code, {MessagePart(parts)...});
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

// The most elements a tensor may have: its byte size (8 bytes an element at most) and every
// offset into it stay far from int64's limit, so shape and offset arithmetic cannot overflow.
constexpr int64_t kMaxElements = int64_t{1} << 59;
// The most a window parameter (kernel_size, stride, padding, dilation) may be: the kernels take
// them as 32-bit scalars.
constexpr int64_t kMaxWindowParameter = (int64_t{1} << 31) - 1;
// The most a pooling window may reach (span + stride + 2 * padding), and the longest dimension a
// kernel's buffer may have: the kernels' 32-bit coordinates (at most their sum) cannot overflow.
constexpr int64_t kMaxWindowReach = int64_t{1} << 29;
// The most taps a pooling window may have (the product of its dilated spans): the general
// kernel's boundary handling holds a window's footprint in memory.
constexpr int64_t kMaxWindowVolume = int64_t{1} << 26;
constexpr int64_t kMaxKernelExtent = int64_t{1} << 30;

// a * b for a, b >= 0, false (and *out untouched) when it would exceed `limit`. Inline: operands
// in [0, 2^31), nearly every call's, multiply without overflow and without a division (tens of
// cycles, several times a call).
bool multiply_within_slow(int64_t a, int64_t b, int64_t limit, int64_t* out);
inline bool multiply_within(int64_t a, int64_t b, int64_t limit, int64_t* out) {
  if (((a | b) >> 31) != 0) return multiply_within_slow(a, b, limit, out);
  if (a * b > limit) return false;
  *out = a * b;
  return true;
}

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
};

Status pool_window(int nd, const PoolOptions& options, Window* window);

// `format` is one of IndexFormat's values: else invalid_argument naming `argument`.
Status check_index_format(const char* argument, IndexFormat format);
Status unpool_window(int nd, const UnpoolOptions& options, Window* window);

// For unpooling by the indices alone: the window such a call most likely undoes, kernel = stride
// = each output extent over the input's (padding 0), so that a fixed-window kernel may be tried
// (those check every index and leave the rest to the general path). False where an extent does
// not divide evenly.
bool implied_window(int nd, const Ints& input_shape, const Ints& output_shape, Window* window);

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

}  // namespace poolgen::detail
