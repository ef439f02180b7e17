// Hand-written GPU (CUDA) schedules of the same stages as the CPU ones (cpu_schedules.h), chosen
// by the generators when the target has a GPU feature. Knobs are GeneratorParams, named gpu_* so
// they sit beside the CPU knobs in one generator. Their defaults are untuned: the kernels have
// run on an H100 and an H200 once (bench/results/cuda), without a sweep of the knobs.
#pragma once

#include "Halide.h"
#include "cpu_schedules.h"  // the stage structs

namespace poolgen {

// Whether a kernel's threads run along its two innermost dimensions fused into one (gpu_fuse):
// a channels-last tensor's channels (16 in the 3-D v0.1 shape) fill too few of a block's x
// threads alone, and a plane's rows (56 outputs) leave the last block of each row part idle.
enum class FuseInner { none, channels_last, all };
inline const std::map<std::string, FuseInner> kFuseInnerNames = {
    {"none", FuseInner::none}, {"channels_last", FuseInner::channels_last}, {"all", FuseInner::all}};
inline bool fuses_inner(FuseInner f, Layout layout) {
  return f == FuseInner::all || (f == FuseInner::channels_last && layout == Layout::channels_last);
}

// How a kernel's blocks map onto CUDA's grid (gpu_grid). fused: every dimension outside the
// threads' tile fused into grid x, which takes 2^31-1 blocks, so any shape launches; each thread
// then takes its block index apart by the runtime block counts, three or four 32-bit divisions
// and remainders (each an emulated sequence of about 20 instructions). planes: the grid's three
// dimensions hold the blocks directly: contiguous kernels put the planes in z (the runtime
// passes a dense (n, c) as one dimension of N*C planes, at most 65535 a launch) and loop over the
// batch inside each thread, the tile's column blocks in y and the rows (3-D: fused with the
// depth, a division by the row blocks) in x; channels-last kernels put the batch in z, the rows
// (3-D: with the depth) in y. Opt-in until a GPU has timed it (bench/results/cuda).
enum class GpuGrid { fused, planes };
inline const std::map<std::string, GpuGrid> kGpuGridNames = {{"fused", GpuGrid::fused},
                                                             {"planes", GpuGrid::planes}};

// One thread per output, tiles of gpu_threads_x x gpu_threads_y threads per block: x runs along
// the dimension that is dense in memory (output columns in contiguous, channels in
// channels-last), so a warp's loads and stores coalesce; every other dimension is a block
// dimension. A thread keeps its running maximum in registers and scans its taps (unrolled when
// the window is fixed).
struct GpuPoolSchedule {
  Halide::GeneratorParam<int> gpu_threads_x{"gpu_threads_x", 32};
  Halide::GeneratorParam<int> gpu_threads_y{"gpu_threads_y", 8};
  Halide::GeneratorParam<FuseInner> gpu_fuse{"gpu_fuse", FuseInner::channels_last,
                                             kFuseInnerNames};
  Halide::GeneratorParam<GpuGrid> gpu_grid{"gpu_grid", GpuGrid::fused, kGpuGridNames};
  // Divide by the runtime window's strides and dilations with their magic pairs (generators/
  // window.h, Divisor) instead of the GPU's emulated division; opt-in until a GPU has timed it.
  Halide::GeneratorParam<bool> gpu_magic{"gpu_magic", false};

  void apply(const PoolStages& s, const Halide::Target& target) const;
};

// Deterministic unpooling: one thread per input element for the atomic winner update (only
// threads of valid indices touch memory), one thread per output slot for the zero-fill of the
// winners and for the gather; the first-invalid reduction runs only for invalid elements, so
// valid inputs never contend on it.
struct GpuWinnerSchedule {
  Halide::GeneratorParam<int> gpu_threads{"gpu_threads", 256};
  Halide::GeneratorParam<FuseInner> gpu_fuse{"gpu_fuse", FuseInner::channels_last,
                                             kFuseInnerNames};

  void apply(const WinnerStages& s, const Halide::Target& target) const;
};

// Max pooling's backward as the accumulating scatter (max_unpool_scatter with accumulate): one
// thread per (n, c) plane adds its gradients in input order, which keeps PyTorch's order of
// additions without atomics; the zero-fill has a thread per element.
struct GpuScatterSchedule {
  Halide::GeneratorParam<int> gpu_threads{"gpu_threads", 64};

  void apply(const ScatterStages& s, const Halide::Target& target) const;
};

// Stages of max_pool_backward_gather: grad_input(x..., c, n) (channels-last: (c, x..., n)) is
// sum, a reduction over the covering outputs; outside_window() counts, over `outputs`, the
// indices outside their windows.
struct PoolGatherStages {
  Halide::Func grad_input, sum, outside_window;
  std::vector<Halide::Var> x;  // spatial, innermost first
  Halide::Var c, n;
  Layout layout;
  Halide::RDom outputs;
};

// Max pooling's backward as the window gather: one thread per input position, tiled as the
// pooling's threads are (x along the dense dimension); the count of indices outside their
// windows has a thread per output element, and only such an element's thread adds (atomically).
struct GpuPoolGatherSchedule {
  Halide::GeneratorParam<int> gpu_threads_x{"gpu_threads_x", 32};
  Halide::GeneratorParam<int> gpu_threads_y{"gpu_threads_y", 8};
  Halide::GeneratorParam<FuseInner> gpu_fuse{"gpu_fuse", FuseInner::channels_last,
                                             kFuseInnerNames};
  Halide::GeneratorParam<GpuGrid> gpu_grid{"gpu_grid", GpuGrid::fused, kGpuGridNames};
  // As GpuPoolSchedule's; also the check's divisions by the input's extents.
  Halide::GeneratorParam<bool> gpu_magic{"gpu_magic", false};

  void apply(const PoolGatherStages& s) const;
};

// The unpooling's backward: one thread per element of the gather (x along the dense dimension),
// and the first-invalid reduction as the winner's.
struct GpuIndexGatherSchedule {
  Halide::GeneratorParam<int> gpu_threads{"gpu_threads", 256};
  Halide::GeneratorParam<FuseInner> gpu_fuse{"gpu_fuse", FuseInner::channels_last,
                                             kFuseInnerNames};

  void apply(const IndexGatherStages& s, Halide::Func first_invalid, const Halide::RDom& bad,
             const std::vector<Halide::Func>& reports) const;
};

}  // namespace poolgen
