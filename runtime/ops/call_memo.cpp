#include "ops/call_memo.hpp"

#include "parallel/settings.hpp"

namespace poolgen::detail {

// Appends to a key with the count in a local: kept in the key, the count was stored after every
// value and loaded again for the next, a chain through memory that made the key a sixth of a
// small call's cost.
struct CallKey::Writer {
  CallKey& key;
  size_t size = 0;

  ~Writer() { key.size_ = size; }
  void add(int64_t value) {
    if (size < kCapacity) key.values_[size] = value;
    ++size;  // past the capacity the key is unusable, not truncated
  }
  void add(const Ints& list) {  // one capacity test a list: the key is a third of a C call
    const size_t count = list.size();
    if (size + 1 + count <= kCapacity) {
      int64_t* to = key.values_ + size;
      *to++ = static_cast<int64_t>(count);
      for (size_t k = 0; k < count; ++k) to[k] = list[k];
    }
    size += 1 + count;
  }
  void add(const TensorView& view) {  // everything of a view but its data
    add(static_cast<int64_t>(view.dtype));  // each field whole: codes need not be valid ones
    add(static_cast<int64_t>(view.device));
    add(view.shape);
    add(view.strides);
  }
  void add(int nd, std::initializer_list<const TensorView*> views) {
    add(nd);
    add(settings_changes());  // plans follow the settings
    for (const TensorView* view : views) add(*view);
  }
};

// A new option field must join these: else calls differing only in it would share a plan.
CallKey::CallKey(int nd, std::initializer_list<const TensorView*> views, const PoolOptions& o) {
  Writer w{*this};
  w.add(nd, views);
  w.add(o.kernel_size);
  w.add(o.stride);
  w.add(o.padding);
  w.add(o.dilation);
  w.add(o.padding_end);
  for (int64_t field : {int64_t{o.ceil_mode}, int64_t{static_cast<int32_t>(o.path)},
                        int64_t{static_cast<int32_t>(o.device)},
                        int64_t{static_cast<int32_t>(o.auto_pad)},
                        int64_t{static_cast<int32_t>(o.max_rule)},
                        int64_t{static_cast<int32_t>(o.index_format)},
                        int64_t{static_cast<int32_t>(o.pool_rule)}}) {
    w.add(field);
  }
}

CallKey::CallKey(int nd, std::initializer_list<const TensorView*> views, const UnpoolOptions& o) {
  Writer w{*this};
  w.add(nd, views);
  w.add(o.kernel_size);
  w.add(o.stride);
  w.add(o.padding);
  w.add(o.output_size);
  w.add(o.padding_end);
  for (int64_t field : {int64_t{static_cast<int32_t>(o.path)},
                        int64_t{static_cast<int32_t>(o.device)},
                        int64_t{static_cast<int32_t>(o.output_size_rule)},
                        int64_t{static_cast<int32_t>(o.index_format)}}) {
    w.add(field);
  }
}

}  // namespace poolgen::detail
