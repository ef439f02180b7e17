// A thread's last validated call of each op, for the calls that repeat it but for their data.
//
// Every check of a call but those of its data pointers (data present, outputs apart from the
// inputs and from each other) depends only on what a CallKey holds: the views' dtypes, devices,
// shapes and strides, nd and the options; so does the choice of kernels, with the settings'
// count of changes (parallel/settings.hpp, settings_changes). A CPU call whose key
// equals the last successful call's on the same thread therefore passes those checks and takes
// the same kernels: it reruns the data checks alone. Inference and training loops repeat their
// shapes: the checks were two thirds of a small call's fixed cost (docs/kernels.md, "Threads
// and per-call cost").
#pragma once

#include "poolgen/poolgen.hpp"

#include <cstdint>
#include <cstring>
#include <initializer_list>

namespace poolgen::detail {

class CallKey {
 public:
  CallKey() = default;
  // The key of a call of `nd` spatial dimensions on `views` with `options`. Out of line: the
  // same code for every op.
  CallKey(int nd, std::initializer_list<const TensorView*> views, const PoolOptions& options);
  CallKey(int nd, std::initializer_list<const TensorView*> views, const UnpoolOptions& options);
  // Keys too long for the capacity (malformed calls: ranks past five) are never remembered.
  bool usable() const { return size_ <= kCapacity; }
  void clear() { size_ = 0; }
  bool operator==(const CallKey& other) const {
    return size_ == other.size_ && usable() &&
           std::memcmp(values_, other.values_, size_ * sizeof(int64_t)) == 0;
  }

 private:
  struct Writer;  // appends the values (call_memo.cpp)

  // Three views of rank five and every option list at three entries take 83.
  static constexpr size_t kCapacity = 96;
  int64_t values_[kCapacity];  // entries past size_ are never read
  size_t size_ = 0;
};

// The last successful call's key and plan (whatever the op keeps of its checks: windows, shapes,
// views, kernels). A call that misses fills the plan in place while it checks, and keeps it
// under its key once every check passed.
template <typename Plan>
class CallMemo {
 public:
  // The remembered plan for `key`, or null.
  const Plan* find(const CallKey& key) const { return key == key_ ? &plan_ : nullptr; }
  // Forgets the last call: a fresh plan for this one's checks to fill.
  Plan& start() {
    key_.clear();
    plan_ = Plan();
    return plan_;
  }
  void keep(const CallKey& key) {
    if (key.usable()) key_ = key;
  }

 private:
  CallKey key_;  // empty: matches no call's (every key holds nd at least)
  Plan plan_;
};

}  // namespace poolgen::detail
