// Max unpooling, general path: zero the output planes, then scatter each value to the slot its
// index names, in input order, so the latest duplicate wins. Planes are flat here (the runtime
// hands dense planes over), which makes the index the store address with no decoding. The
// runtime runs it on cache-sized groups of planes, one group per task, so the scatter finds its
// freshly zeroed planes in cache.
#include "Halide.h"
#include "window.h"
#include "cpu_schedules.h"

namespace poolgen {
namespace {

using namespace Halide;

class MaxUnpoolScatter : public Generator<MaxUnpoolScatter> {
 public:
  GeneratorParam<Type> value_type{"value_type", Float(32)};
  GeneratorParam<Type> index_type{"index_type", Int(64)};

  CpuScatterSchedule schedule_knobs;

  void configure() {
    values_ = add_input<Buffer<>>("values", value_type, 3);    // (plane offset, c, n)
    indices_ = add_input<Buffer<>>("indices", index_type, 3);  // same shape as values
    output_ = add_output<Buffer<>>("output", value_type, 3);   // (plane offset, c, n)
  }

  void generate() {
    Func out = *output_;
    out(p_, c_, n_) = cast(value_type, 0);

    RDom r(0, values_->dim(0).extent(), "element");
    Expr index = (*indices_)(r, c_, n_);
    Expr plane = cast(index_type, output_->dim(0).extent());
    // An invalid index stops the kernel with an error; the clamp keeps even that store inside
    // the plane, so nothing outside the output is ever written.
    Expr slot = cast<int32_t>(clamp(index, 0, plane - 1));
    out(slot, c_, n_) = require(index >= 0 && index < plane, (*values_)(r, c_, n_),
                                "max_unpool: index", index, "outside plane of", plane);

    schedule_knobs.apply(ScatterStages{out, p_, c_, n_}, get_target());
  }

 private:
  Input<Buffer<>>* values_ = nullptr;
  Input<Buffer<>>* indices_ = nullptr;
  Output<Buffer<>>* output_ = nullptr;
  Var p_{"p"}, c_{"c"}, n_{"n"};
};

}  // namespace
}  // namespace poolgen

HALIDE_REGISTER_GENERATOR(poolgen::MaxUnpoolScatter, max_unpool_scatter)
