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

// A position in the outer dimensions [0, dims) of two views of one shape, walked in logical
// order from the `outer`-th: the copies' loop over rows or strips.
struct OuterWalk {
  const View& from;
  const View& to;
  int dims;
  int64_t index[5] = {};

  OuterWalk(const View& f, const View& t, int d, int64_t outer) : from(f), to(t), dims(d) {
    for (int i = dims - 1; i >= 0; --i) {
      index[i] = outer % from.shape[i];
      outer /= from.shape[i];
    }
  }
  // The position's element offsets in the two views.
  void offsets(int64_t* f, int64_t* t) const {
    *f = *t = 0;
    for (int i = 0; i < dims; ++i) {
      *f += index[i] * from.strides[i];
      *t += index[i] * to.strides[i];
    }
  }
  void next() {
    for (int i = dims - 1; i >= 0 && ++index[i] == from.shape[i]; --i) index[i] = 0;
  }
};

// Copies rows [first, end) of the innermost dimension (rows in the logical order of the outer
// dimensions) with element type T (an integer of the dtype's width).
template <typename T>
void copy_rows(const View& from, const View& to, int64_t first, int64_t end) {
  const int last = from.rank - 1;
  const int64_t n = from.shape[last], fs = from.strides[last], ts = to.strides[last];
  OuterWalk row(from, to, last, first);
  const auto* src = static_cast<const T*>(from.data);
  auto* dst = static_cast<T*>(to.data);
  for (int64_t k = first; k < end; ++k, row.next()) {
    int64_t f, t;
    row.offsets(&f, &t);
    for (int64_t e = 0; e < n; ++e) dst[t + e * ts] = src[f + e * fs];
  }
}

// A square block of a transpose takes a 16-byte register a row: its side, in elements of
// `width` bytes.
constexpr int64_t block_lanes(int64_t width) { return 16 / width; }

#ifdef POOLGEN_SSE2
inline __m128i load16(const void* at) { return _mm_loadu_si128(static_cast<const __m128i*>(at)); }
inline void store16(void* at, __m128i v) { _mm_storeu_si128(static_cast<__m128i*>(at), v); }

// A square block of a transpose: d[c * ds + r] = s[r * ss + c] for r, c in [0, block_lanes).
// For 4- and 8-byte elements: the narrower ones copy by rows.
template <typename T>
struct Block;

template <>
struct Block<uint32_t> {
  static void transpose(const uint32_t* s, int64_t ss, uint32_t* d, int64_t ds) {
    const __m128i r0 = load16(s), r1 = load16(s + ss), r2 = load16(s + 2 * ss),
                  r3 = load16(s + 3 * ss);
    const __m128i lo01 = _mm_unpacklo_epi32(r0, r1), lo23 = _mm_unpacklo_epi32(r2, r3),
                  hi01 = _mm_unpackhi_epi32(r0, r1), hi23 = _mm_unpackhi_epi32(r2, r3);
    store16(d, _mm_unpacklo_epi64(lo01, lo23));
    store16(d + ds, _mm_unpackhi_epi64(lo01, lo23));
    store16(d + 2 * ds, _mm_unpacklo_epi64(hi01, hi23));
    store16(d + 3 * ds, _mm_unpackhi_epi64(hi01, hi23));
  }
};

template <>
struct Block<uint64_t> {
  static void transpose(const uint64_t* s, int64_t ss, uint64_t* d, int64_t ds) {
    const __m128i r0 = load16(s), r1 = load16(s + ss);
    store16(d, _mm_unpacklo_epi64(r0, r1));
    store16(d + ds, _mm_unpackhi_epi64(r0, r1));
  }
};

// A transposing copy of views whose last two dimensions are unit-stride in the source (the
// next-to-last, p) and in the destination (the last, q). Its items are strips of block_lanes
// destination rows (p), each strip all along q in square blocks; items [first, end) run in the
// logical order of the outer dimensions, then the strips.
template <typename T>
void copy_strips(const View& from, const View& to, int64_t first, int64_t end) {
  constexpr int64_t lanes = block_lanes(sizeof(T));
  const int p = from.rank - 2, q = from.rank - 1;
  const int64_t ps = from.shape[p], qs = from.shape[q], strips = (ps + lanes - 1) / lanes;
  const int64_t from_q = from.strides[q], to_p = to.strides[p];
  OuterWalk outer(from, to, p, first / strips);
  int64_t strip = first % strips;
  const auto* src = static_cast<const T*>(from.data);
  auto* dst = static_cast<T*>(to.data);
  for (int64_t item = first; item < end; ++item) {
    const int64_t p0 = strip * lanes, width = std::min<int64_t>(lanes, ps - p0);
    int64_t f, t;
    outer.offsets(&f, &t);
    f += p0;
    t += p0 * to_p;
    int64_t q0 = 0;
    if (width == lanes) {
      for (; q0 + lanes <= qs; q0 += lanes) {
        Block<T>::transpose(src + f + q0 * from_q, from_q, dst + t + q0, to_p);
      }
    }
    for (int64_t c = 0; c < width; ++c) {  // the strip's ragged end, or a short strip whole
      for (int64_t r = q0; r < qs; ++r) dst[t + c * to_p + r] = src[f + r * from_q + c];
    }
    if (++strip < strips) continue;
    strip = 0;
    outer.next();
  }
}

constexpr bool kTransposes = true;
#else
constexpr bool kTransposes = false;
#endif

// The innermost dimension of stride 1 and extent above 1; -1 when there is none.
int unit_dimension(const View& view) {
  for (int i = view.rank - 1; i >= 0; --i) {
    if (view.strides[i] == 1 && view.shape[i] > 1) return i;
  }
  return -1;
}

// How a copy runs: in rows along the destination's unit-stride dimension, or, for 4- and 8-byte
// elements where the source is unit-stride along another dimension, in strips of square blocks
// (copy_strips) that read and write whole vectors. The views' dimensions are reordered so that
// the loops' dimensions come last.
struct CopyPlan {
  View from, to;
  bool transposes = false;
  int64_t items = 0;  // rows or strips: the units its ranges count

  // Out of line, as run is: inlined into both copies' callers it took 7 KB.
  [[gnu::noinline]] CopyPlan(const View& source, const View& target) : from(source), to(target) {
    const int width = static_cast<int>(element_size(from.dtype));
    const int q = unit_dimension(to), p = unit_dimension(from);
    transposes = kTransposes && (width == 4 || width == 8) && q >= 0 && p >= 0 && p != q;
    int order[5], n = 0;  // the dimensions outermost first: the others, then p, then q
    for (int i = 0; i < from.rank; ++i) {
      if (i != q && !(transposes && i == p)) order[n++] = i;
    }
    if (transposes) order[n++] = p;
    if (q >= 0) order[n++] = q;
    for (int i = 0; i < from.rank; ++i) {
      from.shape[i] = to.shape[i] = source.shape[order[i]];
      from.strides[i] = source.strides[order[i]];
      to.strides[i] = target.strides[order[i]];
    }
    items = from.elements() / from.shape[from.rank - 1];
    if (transposes) {
      const int64_t ps = from.shape[from.rank - 2], lanes = block_lanes(width);
      items = items / ps * ((ps + lanes - 1) / lanes);
    }
  }

  template <typename T>
  void run_as(int64_t first, int64_t end) const {
#ifdef POOLGEN_SSE2
    if constexpr (sizeof(T) >= 4) {
      if (transposes) return copy_strips<T>(from, to, first, end);
    }
#endif
    copy_rows<T>(from, to, first, end);
  }

  [[gnu::noinline]] void run(int64_t first, int64_t end) const {
    switch (element_size(from.dtype)) {
      case 1: return run_as<uint8_t>(first, end);
      case 2: return run_as<uint16_t>(first, end);
      case 4: return run_as<uint32_t>(first, end);
      default: return run_as<uint64_t>(first, end);
    }
  }
};

}  // namespace

void copy_elements(const View& from, const View& to) {
  if (from.elements() == 0) return;
  const CopyPlan plan(from, to);
  plan.run(0, plan.items);
}

void copy_elements_shared(const View& from, const View& to) {
  if (from.elements() == 0) return;
  const CopyPlan plan(from, to);
  const int64_t items = plan.items, bytes = 2 * from.bytes();
  if (!worth_sharing(bytes)) return plan.run(0, items);
  // Ranges of items, several a thread (the parallel loop hands each thread a run of them).
  const int tasks = static_cast<int>(std::min<int64_t>(items, 64));
  parallel_for(
      tasks,
      [&](int task) {
        plan.run(items * task / tasks, items * (task + 1) / tasks);
        return 0;
      },
      bytes);
}

void zero_elements(const View& view, Layout layout) {
  zero_elements(view, is_packed(view, layout));
}

void zero_elements(const View& view, bool packed) {
  if (packed) {
    std::memset(view.data, 0, static_cast<size_t>(view.bytes()));
    return;
  }
  static const uint64_t zero = 0;  // every element's source, at stride 0
  View zeros = view;
  zeros.data = const_cast<uint64_t*>(&zero);
  for (int d = 0; d < zeros.rank; ++d) zeros.strides[d] = 0;
  copy_elements(zeros, view);
}

void zero_elements_shared(const View& view, Layout layout) {
  const int64_t bytes = view.bytes();
  const int threads = sharing_threads(bytes);
  if (threads <= 1 || !is_packed(view, layout)) return zero_elements(view, layout);
  char* const data = static_cast<char*>(view.data);
  parallel_for(
      threads,
      [&](int run) {
        const int64_t begin = bytes * run / threads, end = bytes * (run + 1) / threads;
        std::memset(data + begin, 0, static_cast<size_t>(end - begin));
        return 0;
      },
      bytes);
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
