#include "execute/memory.hpp"

#include "parallel/settings.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>
#define POOLGEN_SSE2 1
#endif

namespace poolgen::detail {

void add_to_indices(const View& indices, int64_t offset) {
  for_each_element(indices, [&](int64_t, int64_t at) {
    if (indices.dtype == DType::i32) {
      static_cast<int32_t*>(indices.data)[at] += static_cast<int32_t>(offset);
    } else {
      static_cast<int64_t*>(indices.data)[at] += offset;
    }
  });
}

namespace {

// Copies rows [first, end) of the innermost dimension (rows in the logical order of the outer
// dimensions) with element type T (an integer of the dtype's width).
template <typename T>
void copy_rows(const View& from, const View& to, int64_t first, int64_t end) {
  const int last = from.rank - 1;
  const int64_t n = from.shape[last], fs = from.strides[last], ts = to.strides[last];
  int64_t index[5] = {};
  for (int64_t row = first, i = last - 1; i >= 0; --i) {
    index[i] = row % from.shape[i];
    row /= from.shape[i];
  }
  const auto* src = static_cast<const T*>(from.data);
  auto* dst = static_cast<T*>(to.data);
  for (int64_t row = first; row < end; ++row) {
    int64_t f = 0, t = 0;
    for (int i = 0; i < last; ++i) {
      f += index[i] * from.strides[i];
      t += index[i] * to.strides[i];
    }
    for (int64_t k = 0; k < n; ++k) dst[t + k * ts] = src[f + k * fs];
    for (int i = last - 1; i >= 0 && ++index[i] == from.shape[i]; --i) index[i] = 0;
  }
}

void copy_row_range(const View& from, const View& to, int64_t first, int64_t end) {
  switch (element_size(from.dtype)) {
    case 1: return copy_rows<uint8_t>(from, to, first, end);
    case 2: return copy_rows<uint16_t>(from, to, first, end);
    case 4: return copy_rows<uint32_t>(from, to, first, end);
    default: return copy_rows<uint64_t>(from, to, first, end);
  }
}

int64_t rows_of(const View& view) { return view.elements() / view.shape[view.rank - 1]; }

}  // namespace

void copy_elements(const View& from, const View& to) {
  if (from.elements() == 0) return;
  copy_row_range(from, to, 0, rows_of(from));
}

void copy_elements_shared(const View& from, const View& to) {
  if (from.elements() == 0) return;
  const int64_t rows = rows_of(from), bytes = 2 * from.bytes();
  if (!worth_sharing(bytes)) return copy_row_range(from, to, 0, rows);
  // Ranges of rows, several a thread (the parallel loop hands each thread a run of them).
  const int tasks = static_cast<int>(std::min<int64_t>(rows, 64));
  parallel_for(
      tasks,
      [&](int task) {
        copy_row_range(from, to, rows * task / tasks, rows * (task + 1) / tasks);
        return 0;
      },
      bytes);
}

void zero_elements(const View& view, Layout layout) {
  if (is_packed(view, layout)) {
    std::memset(view.data, 0, static_cast<size_t>(view.bytes()));
    return;
  }
  static const uint64_t zero = 0;  // every element's source, at stride 0
  View zeros = view;
  zeros.data = const_cast<uint64_t*>(&zero);
  for (int d = 0; d < zeros.rank; ++d) zeros.strides[d] = 0;
  copy_elements(zeros, view);
}

void copy_streaming(void* to, const void* from, size_t bytes) {
#ifdef POOLGEN_SSE2
  auto* dst = static_cast<char*>(to);
  const auto* src = static_cast<const char*>(from);
  const size_t head = std::min(bytes, (16 - reinterpret_cast<uintptr_t>(dst) % 16) % 16);
  std::memcpy(dst, src, head);
  size_t at = head;
  for (; at + 64 <= bytes; at += 64) {  // a cache line a step: four stores fill it whole
    const auto* s = reinterpret_cast<const __m128i*>(src + at);
    auto* d = reinterpret_cast<__m128i*>(dst + at);
    const __m128i a = _mm_loadu_si128(s), b = _mm_loadu_si128(s + 1),
                  c = _mm_loadu_si128(s + 2), e = _mm_loadu_si128(s + 3);
    _mm_stream_si128(d, a);
    _mm_stream_si128(d + 1, b);
    _mm_stream_si128(d + 2, c);
    _mm_stream_si128(d + 3, e);
  }
  for (; at + 16 <= bytes; at += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + at),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + at)));
  }
  std::memcpy(dst + at, src + at, bytes - at);
  _mm_sfence();  // the streamed lines are visible to whoever reads the output next
#else
  std::memcpy(to, from, bytes);
#endif
}

bool indices_within(const void* indices, DType dtype, int64_t count, int64_t lo, int64_t hi) {
  const bool wide = dtype == DType::i64;
#ifdef POOLGEN_SSE2
  // As 32-bit words (x86 is little-endian): an i64 index lies within iff its low word does and
  // its high word is 0, so the words alternate between two ranges, each tested as an unsigned
  // `word - base < span`, which SSE2 does as the signed (span ^ sign) > ((word - base) ^ sign).
  const auto low = static_cast<uint32_t>(lo), span = static_cast<uint32_t>(hi - lo);
  const uint32_t base[2] = {low, wide ? 0u : low}, spans[2] = {span, wide ? 1u : span};
  const auto* words = static_cast<const uint32_t*>(indices);
  const int64_t n = count * (wide ? 2 : 1);
  auto lanes = [](const uint32_t pair[2]) {
    return _mm_setr_epi32(static_cast<int32_t>(pair[0]), static_cast<int32_t>(pair[1]),
                          static_cast<int32_t>(pair[0]), static_cast<int32_t>(pair[1]));
  };
  const __m128i sign = _mm_set1_epi32(std::numeric_limits<int32_t>::min());
  const __m128i bases = lanes(base), limits = _mm_xor_si128(lanes(spans), sign);
  auto within = [&](const uint32_t* at) {
    const __m128i word = _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
    return _mm_cmpgt_epi32(limits, _mm_xor_si128(_mm_sub_epi32(word, bases), sign));
  };
  // A cache line a step, in four independent chains (twice as fast as one from L2).
  __m128i inside[4] = {_mm_set1_epi32(-1), _mm_set1_epi32(-1), _mm_set1_epi32(-1),
                       _mm_set1_epi32(-1)};
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    for (int j = 0; j < 4; ++j) inside[j] = _mm_and_si128(inside[j], within(words + k + 4 * j));
  }
  for (; k + 4 <= n; k += 4) inside[0] = _mm_and_si128(inside[0], within(words + k));
  const __m128i all = _mm_and_si128(_mm_and_si128(inside[0], inside[1]),
                                    _mm_and_si128(inside[2], inside[3]));
  if (_mm_movemask_epi8(all) != 0xFFFF) return false;
  for (; k < n; ++k) {
    if (words[k] - base[k % 2] >= spans[k % 2]) return false;
  }
#else
  for (int64_t k = 0; k < count; ++k) {
    const int64_t index = wide ? static_cast<const int64_t*>(indices)[k]
                               : static_cast<const int32_t*>(indices)[k];
    if (index < lo || index >= hi) return false;
  }
#endif
  return true;
}


}  // namespace poolgen::detail
