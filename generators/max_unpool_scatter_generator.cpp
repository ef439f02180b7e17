// Max unpooling, general path: zero the output planes, then scatter each value to the slot its
// index names, in input order, so the latest duplicate wins. Planes are flat here (the runtime
// hands dense planes over), which makes the index the slot with no decoding. The runtime runs it
// on cache-sized groups of planes, one group per task, so the scatter finds its freshly zeroed
// planes in cache. Values are moved, never compared: value_type only sets the element width.
#include "Halide.h"
#include "window.h"
#include "cpu_schedules.h"
#include "knobs.h"

namespace poolgen {
namespace {

using namespace Halide;

class MaxUnpoolScatter : public Generator<MaxUnpoolScatter> {
 public:
  GeneratorParam<Type> value_type{"value_type", Float(32)};
  GeneratorParam<Type> index_type{"index_type", Int(64)};
  GeneratorParam<Layout> layout{"layout", Layout::contiguous, kLayoutNames};

  GeneratorParam<std::string> cpu_schedule{"cpu_schedule", ""};  // knobs.h

  void configure() {
    // (plane offset, c, n), or (c, plane offset, n) in channels-last; indices as values
    values_ = add_input<Buffer<>>("values", value_type, 3);
    indices_ = add_input<Buffer<>>("indices", index_type, 3);
    output_ = add_output<Buffer<>>("output", value_type, 3);
  }

  void generate() {
    const Layout l = layout;
    const int plane_dim = spatial_dim(0, l);
    Func out = *output_;
    out(tensor_args<Expr>({p_}, c_, n_, l)) = cast(value_type, 0);

    RDom r(0, values_->dim(plane_dim).extent(), "element");
    const std::vector<Expr> element = tensor_args<Expr>({r}, c_, n_, l);
    Expr index = (*indices_)(element);
    Expr plane = cast(index_type, output_->dim(plane_dim).extent());
    // An invalid index stops the kernel with an error; the clamp keeps even that store inside
    // the plane, so nothing outside the output is ever written.
    Expr slot = cast<int32_t>(clamp(index, 0, plane - 1));
    out(tensor_args<Expr>({slot}, c_, n_, l)) =
        require(index >= 0 && index < plane, (*values_)(element), "max_unpool: index", index,
                "outside plane of", plane);

    // Estimates for the autoschedulers: the 2-D benchmark shape's planes.
    values_->set_estimates(representative_region(2, l, 2, true));
    indices_->set_estimates(representative_region(2, l, 2, true));
    output_->set_estimates(representative_region(2, l, 1, true));
    apply_cpu_schedule<CpuScatterSchedule>(cpu_schedule, ScatterStages{out, p_, c_, n_, r, l},
                                           {out}, get_target());
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
