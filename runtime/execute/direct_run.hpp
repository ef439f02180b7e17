// A call run without copies, pieces or passes after the kernel: one kernel launch built once for
// a call's plan (ops/op.hpp), which a call repeating its shapes runs on its data pointers alone.
#pragma once

#include "core/status.hpp"
#include "validate/views.hpp"

namespace poolgen::detail {

class DirectRun {
 public:
  explicit DirectRun(const KeptSpans& kept) : spans(kept) {}
  virtual ~DirectRun() = default;
  DirectRun(const DirectRun&) = delete;
  DirectRun& operator=(const DirectRun&) = delete;

  // Runs on the call's tensors' data, in call order.
  virtual Status run(void* const (&data)[3]) = 0;

  const KeptSpans spans;  // the overlap check's sizes (check_views_apart)
};

}  // namespace poolgen::detail
