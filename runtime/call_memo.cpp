#include "call_memo.hpp"

namespace poolgen::detail {

void CallKey::add(const Ints& list) {
  add(static_cast<int64_t>(list.size()));
  for (int64_t value : list) add(value);
}

void CallKey::add(const TensorView& view) {
  add(static_cast<int64_t>(view.dtype));  // each field whole: codes need not be valid ones
  add(static_cast<int64_t>(view.device));
  add(view.shape);
  add(view.strides);
}

void CallKey::add(int nd, std::initializer_list<const TensorView*> views) {
  add(nd);
  for (const TensorView* view : views) add(*view);
}

// A new option field must join these: else calls differing only in it would share a plan.
CallKey::CallKey(int nd, std::initializer_list<const TensorView*> views, const PoolOptions& o) {
  add(nd, views);
  add(o.kernel_size);
  add(o.stride);
  add(o.padding);
  add(o.dilation);
  add(o.padding_end);
  for (int64_t field : {int64_t{o.ceil_mode}, int64_t{static_cast<int32_t>(o.path)},
                        int64_t{static_cast<int32_t>(o.device)},
                        int64_t{static_cast<int32_t>(o.auto_pad)},
                        int64_t{static_cast<int32_t>(o.max_rule)},
                        int64_t{static_cast<int32_t>(o.index_format)}}) {
    add(field);
  }
}

CallKey::CallKey(int nd, std::initializer_list<const TensorView*> views, const UnpoolOptions& o) {
  add(nd, views);
  add(o.kernel_size);
  add(o.stride);
  add(o.padding);
  add(o.output_size);
  add(o.padding_end);
  for (int64_t field : {int64_t{static_cast<int32_t>(o.path)},
                        int64_t{static_cast<int32_t>(o.device)},
                        int64_t{static_cast<int32_t>(o.output_size_rule)},
                        int64_t{static_cast<int32_t>(o.index_format)}}) {
    add(field);
  }
}

}  // namespace poolgen::detail
