# The kernel matrix. Every kernel is one Halide library built for all of POOLGEN_CPU_TARGETS
# (a multitarget "fat" object: Halide picks the best variant the CPU supports at run time), and
# every kernel is listed in the generated kernel_table.inc, which is all the runtime's dispatcher
# knows about kernels.

# The default variants follow the architecture CMake compiles for (a cross build of
# cmake/toolchains/aarch64-linux-gnu.cmake gets the ARM ones).
if (CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$")
  # Armv8.2-A (every 64-bit ARM core since Cortex-A55/A75, Neoverse N1, Apple M1): half-precision
  # arithmetic and dot products; then the Armv8.0 baseline (NEON).
  set(poolgen_default_cpu_targets "arm-64-linux-arm_dot_prod-arm_fp16;arm-64-linux")
else ()
  # Every variant is a copy of every kernel, so each must earn its bytes (docs/kernels.md):
  # measured on a 2-core AMD EPYC (bench/poolgen_bench --poolgen_cpu_variant), AVX2 pools up to
  # 1.5x faster than SSE4.1, and SSE4.1 1.4-2x faster than SSE2. The floor is SSE4.1
  # (x86-64-v2 without its SSE4.2 and POPCNT, which these kernels do not use): Intel since
  # Penryn (2008), AMD since Bulldozer (2011); RHEL 9 and Windows 11 24H2 require more.
  # The SSE2 variant it replaces was 3.5 MB, 15% of the default build's code; a build whose
  # list ends in x86-64-linux serves older CPUs, and the runtime refuses a CPU below the floor
  # with an error rather than run instructions it lacks (POOLGEN_CPU_FLOOR_FEATURES, below).
  # AVX-512 is a variant of the families where it was measured faster (POOLGEN_AVX512_FAMILIES,
  # below), not of every kernel: it is the largest variant and loses on others.
  set(poolgen_default_cpu_targets "x86-64-linux-avx2-fma-f16c;x86-64-linux-sse41")
endif ()
set(POOLGEN_CPU_TARGETS "${poolgen_default_cpu_targets}"
    CACHE STRING "Halide targets of the CPU kernels, best first; the last is the floor")
# The AVX-512 variant is avx512_skylake (F, CD, BW, DQ, VL: every AVX-512 CPU since Skylake-SP):
# plain "avx512" (F and CD only) makes LLVM's x86 instruction selection abort on these kernels
# ("Cannot select: vselect" of 256-bit vectors without VL).
# Halide's multitarget wrapper runs its last variant without asking the CPU, and the CUDA
# kernels' host code is built for it too: the last target's instruction-set features, as
# Halide's feature enum (its target string minus arch-bits-os, without processor tunings), are
# what the runtime checks the CPU against before any call (runtime/dispatch/kernel_table.cpp).
# poolgen_target_features(<out> <target>): a CPU target's instruction-set features as a C list
# of Halide's feature enum ("halide_target_feature_avx2, halide_target_feature_fma, "): its
# string minus arch-bits-os, without processor tunings; empty for an architecture's baseline.
function(poolgen_target_features out target)
  string(REPLACE "-" ";" fields "${target}")
  list(LENGTH fields length)
  set(features "")
  if (length GREATER 3)
    list(SUBLIST fields 3 -1 fields)
    foreach (feature IN LISTS fields)
      if (NOT feature MATCHES "^tune_")
        string(APPEND features "halide_target_feature_${feature}, ")
      endif ()
    endforeach ()
  endif ()
  set(${out} "${features}" PARENT_SCOPE)
endfunction()
# poolgen_floor_knobs_apply(<out> <avx512_only>): whether a family's floor variant takes its own
# knobs (POOLGEN_FLOOR_KNOBS_<family>): the floor's target must name an instruction set, and the
# family have a variant above it for the CPUs the floor's knobs leave out (its AVX-512 one, in a
# family of POOLGEN_AVX512_ONLY_FAMILIES; else POOLGEN_CPU_TARGETS' others).
function(poolgen_floor_knobs_apply out avx512_only)
  list(LENGTH POOLGEN_CPU_TARGETS count)
  if ((avx512_only OR count GREATER 1) AND
      POOLGEN_CPU_FLOOR_TARGET MATCHES "-(sse41|avx|avx2)(-|$)")
    set(${out} TRUE PARENT_SCOPE)
  else ()
    set(${out} FALSE PARENT_SCOPE)
  endif ()
endfunction()
list(GET POOLGEN_CPU_TARGETS -1 POOLGEN_CPU_FLOOR_TARGET)
poolgen_target_features(POOLGEN_CPU_FLOOR_FEATURES ${POOLGEN_CPU_FLOOR_TARGET})
# AVX-512 per family: the kernels of POOLGEN_AVX512_FAMILIES whose value type (unpooling
# kernels: whose element width) is one of POOLGEN_AVX512_TYPES get an AVX-512 variant in front
# of POOLGEN_CPU_TARGETS: the first target with its instruction sets replaced (x86 only; its
# other features, such as a sanitizer's, kept: a multitarget library's variants must agree on
# them; a list that already has an AVX-512 target gives it to every kernel). Each family earned
# it on a Zen 5 (docs/kernels.md, "AVX-512"); on the others AVX-512 measured no faster than AVX2
# and would only add bytes.
# f32, one thread, ms, AVX-512 / AVX2, three interleaved runs of one binary
# (poolgen_bench --poolgen_cpu_variant=avx2): general pooling 2-D 8x64x112x112 k3s1p1 8.66-9.35 /
# 10.1-10.4, NHWC 6.92-7.03 / 8.57-9.03; 3-D 2x16x32x64x64 k3s2p1 3.18-3.31 / 3.66-3.91, NDHWC
# k3s1p1 15.4-15.6 / 18.8-19.0; 1-D 8x64x65536 k3s2p1 12.2-14.7 / 14.3-17.8; NCDHW k2s2p0
# 0.76-0.77 / 0.87-1.03. The fixed 2-D windows, the channels-last fixed windows, the unpooling
# and gradient kernels measured within the noise of AVX2 there (docs/kernels.md).
# 2-D k3s2p1 (ResNet's stem) in both layouts earned it on an Intel Xeon (Emerald Rapids, AVX-512
# F to FP16), where AVX2's variable blends cost three micro-ops and AVX-512 compares into mask
# registers: 8x64x112x112, one thread, AVX-512 / AVX2, three interleaved runs, 5.9-7.9 / 8.5-10.4
# NCHW, 2.5-3.1 / 4.8-7.3 NHWC; 1x64x56x56 NHWC 0.047-0.051 / 0.15-0.20 (on the Zen 5 NCHW
# measured 2.95-3.07 / 3.06-3.12). So did 2-D k2s2p0 channels-last pooling in cache, XNNPACK's
# case: 1x64x56x56 0.020-0.024 / 0.040-0.042, 1x64x28x28 0.005 / 0.008; and that window's
# channels-last gathers, one / two threads: unpooling 1x64x56x56 0.036-0.044 / 0.021-0.030
# against 0.070-0.095 / 0.039-0.050, 8x64x112x112 2.41 / 1.12-1.23 against 2.33-2.88 /
# 1.51-1.80; the pooling gradient 0.035-0.049 / 0.027-0.030 against 0.075-0.087 / 0.040-0.048,
# 2.29-2.44 / 1.16-1.30 against 2.78-2.96 / 1.36-1.54; unpooling's gradient 0.034-0.037 / 0.022
# against 0.060-0.091 / 0.041-0.048, 2.06-2.25 / 1.02-1.23 against 2.52-3.25 / 1.42-1.55.
# The bytes Halide's entry checks gave back bought, on the Intel, one / two threads, three runs:
# 3-D k3s2p1 NDHWC 2x16x32x64x64 1.51-2.01 / 0.75-1.40 against 4.75-5.62 / 2.53-2.97; 1-D NLC
# 8x64x65536 k2s2p0 23.6-27.0 / 11.3-14.2 against 24.4-33.9 / 16.4-17.8, k3s2p1 21.3-26.3 /
# 11.2-13.0 against 27.0-31.8 / 13.7-16.8; 2-D k2s2p0 NCHW 1x64x56x56 (us) 37-47 / 23-27 against
# 50-53 / 29-30, 1x64x14x14 3.4-4.5 / 3.1-3.8 against 3.9-4.5 / 4.3-4.5; 3-D k2s2p0 NDHWC
# unpooling 1.06-1.29 / 0.58-0.67 against 1.26-1.33 / 0.52-0.66 (docs/kernels.md).
# On a Zen 4 (AVX-512 in two 256-bit halves) every listed family measured faster or even, but
# for 2-D k2s2p0 NCHW's rows of fewer than 16 outputs (POOLGEN_AVX512_NARROW, below).
# The 1-D pooling gradient's gather, Intel, f32, ms, AVX-512 / AVX2, 8x64x65536, one thread,
# two interleaved runs: i64 30.5, 33.2 / 34.1, 38.8, i32 23.5, 23.4 / 24.8, 26.8; two threads
# i64 16.6 / 18.8, i32 12.6 / 14.6; 1x64x8192 on two threads 75 / 95 us; 10 KB a kernel. Its
# 2-D siblings (NCHW unpooling and pooling gradient) measured even on 8x64x112x112.
# The 3-D channels-last k2s2p0 pooling gradient's gather, Zen 5 VM, f32 i64, ms, AVX-512 / AVX2,
# one / two threads, two interleaved runs: 2x16x32x64x64 0.405-0.449 / 0.19-0.21 against
# 0.55-0.63 / 0.26; out of cache 8x16x32x64x64 2.51-2.58 / 1.21-1.25 against 3.21-3.81 /
# 1.59-1.61; in cache 1x16x16x32x32 0.023 against 0.032, 2x32x32x32x32 0.152 against 0.22.
# Like its 2-D sibling it runs whole vectors only: 24 channels leave the call to the scatter
# (2x24x32x64x64 1.45 against 1.09), 8 go to it anyway (0.25 against the AVX2 gather's 0.34).
# The channels-last unpooling scatter (vectors of channels), from 32 channels (POOLGEN_AVX512_
# NARROW): NHWC k3s2p1, one / two threads, two interleaved runs, 8x64x112x112 1.71-2.00 /
# 0.60-0.91 against 2.42-2.61 / 1.10-1.26, 8x32x112x112 0.61-0.63 / 0.29 against 1.00-1.08 /
# 0.50-0.53; 8x48x112x112 even (1.17-1.21 against 1.18-1.19), 1x64x56x56 even; fewer channels
# lose (8x8x224x224 0.78-0.89 against 0.65-0.68, 8x16x224x224 1.83-1.98 against 1.77-1.84).
# Unpooling's gradients by index and the channels-last pooling gradient's scatter measured even
# or slower.
set(POOLGEN_AVX512_FAMILIES "max_pool1d;max_pool2d;max_pool3d;max_pool1d_cl;max_pool2d_cl;max_pool3d_cl;max_pool2d_k2s2p0;max_pool3d_k2s2p0;max_pool2d_k3s2p1;max_pool2d_k3s2p1_cl;max_pool3d_k3s2p1_cl;max_pool2d_k2s2p0_cl;max_unpool2d_k2s2p0_cl;max_unpool3d_k2s2p0_cl;max_pool2d_backward_k2s2p0_cl;max_unpool2d_backward_k2s2p0_cl;max_pool2d_k2s2p0_flat;max_pool1d_backward_k2s2p0;max_pool3d_backward_k2s2p0_cl;max_unpool_scatter_cl;max_pool2d_k3s2p1_flat"
    CACHE STRING
    "Kernel families (names without types) with an AVX-512 variant besides POOLGEN_CPU_TARGETS")
set(POOLGEN_AVX512_TYPES "f32" CACHE STRING
    "Value types whose kernels of POOLGEN_AVX512_FAMILIES get the AVX-512 variant")
# Families that pay with AVX-512 alone: their kernels of POOLGEN_AVX512_TYPES come with the
# AVX-512 variant and the floor's (Halide's wrapper needs one it may run anywhere; the runtime
# runs them only where the CPU has AVX-512, runtime/dispatch/kernel_table.hpp, gather_pays), no
# AVX2 one; where the build has no AVX-512 variant, the default build leaves them out. The 2-D
# k3s2p1 channels-last gradient gather (overlapping windows: a slot sums up to four cells), on
# an Intel Xeon, f32 i64, ms, one / two threads, gather / scatter: 8x64x112x112 2.64 /
# 1.36 against 3.26-3.50 / 1.62-1.73, 1x64x112x112 0.344 / 0.189 against 0.433 / 0.434,
# 1x64x56x56 0.077 / 0.044 against 0.079 / 0.078; its AVX2 variant 4.56 / 2.17 at 8x64x112x112
# and 0.133 / 0.076 at 1x64x56x56, its SSE4.1 one 9.0 / 3.3.
set(POOLGEN_AVX512_ONLY_FAMILIES "max_pool2d_backward_k3s2p1_cl" CACHE STRING
    "Kernel families built with the AVX-512 variant and the floor's only (of POOLGEN_AVX512_TYPES)")
# Families whose AVX-512 variant loses on narrow vectors, each "family:lanes": calls whose
# vectors run along fewer outputs than `lanes` (contiguous: the output rows; channels-last: the
# channels) run the next variant (POOLGEN_CPU_TARGETS' first, an AVX2 one) directly
# (runtime/dispatch/kernel_table.cpp, variant_for). 3-D k2s2p0 NCDHW f32, one thread, us,
# AVX-512 / AVX2: rows of 7 (1x64x8x14x14) 24.7-25.8 / 19.7-19.8, of 12 (1x32x16x24x24) 55.4-55.6
# / 46.7-47.0, of 14 (1x64x8x28x28) 66.1-66.5 / 58.0-58.3; of 16 (1x16x16x32x32) 25.1-25.5 /
# 29.0-29.1. The channels-last general kernels on fewer than 16 channels: 2-D 1x8x56x56 k3s1p1
# 40.4-40.9 / 37.8, 1x12x56x56 72.0-72.2 / 64.9-65.6; 3-D 1x8x8x28x28 221-222 / 180-181,
# 1x12x8x28x28 422-432 / 344-352; 16 channels 51.6-52.7 / 64.9-67.1 (docs/kernels.md). 2-D
# k3s2p1 NCHW rows of 14 (1x64x28x28), us: Zen 5 36 / 30-31; Intel 78-79 / 66-105, two threads
# 71-88 / 51-54. The 2-D k2s2p0 channels-last unpooling gather and pooling gradient, whose
# AVX-512 vectors of 16 channels leave fewer channels to the scatter (Intel, us: unpooling
# 1x8x112x112 78-96 / 47-72; gradient 1x8x112x112 71-85 / 56-77, 1x12x112x112 141-154 /
# 107-129); unpooling's gradient, which has halved vectors, wins there and keeps them. 1-D
# channels-last pooling and 3-D k2s2p0 channels-last unpooling follow their 2-D siblings' rule
# (not yet measured below 16 channels). 2-D k2s2p0 NCHW pooling on a Zen 4 (AVX-512 in two
# 256-bit halves), one thread, us: rows of 7 (1x64x14x14) 2.56-2.80 / 2.26-2.39, of 14
# (1x64x28x28) 6.8-7.6 / 5.8-6.0; of 16 (1x64x32x32) 5.1-5.7 / 6.5-7.6 (Intel: even on rows of 7,
# 1.2x on rows of 14, which it gives up). Those k2s2p0 NCHW figures are of halved and overlapping
# vectors: with a vector spanning each row of 8-15 outputs (f32 exact_rows,
# schedules/cpu_knobs.cmake) the AVX-512 variants win there too, and hand over rows under 8 only.
# Intel, f32 i64, one thread, us, AVX-512 exact / AVX2: 2-D rows of 12 (1x64x24x24) 3.6-3.7 /
# 6.6-6.7, of 14 (1x64x28x28) 5.9 / 8.0; 3-D rows of 12 (1x32x16x24x24) 28-29 / 63-67, of 14
# (1x64x8x28x28) 51-53 / 78-89 (docs/kernels.md); rows of 7 in 2-D 2.7 / 2.5-2.6. Not re-measured
# on a Zen 4. 2-D k3s2p1 NCHW likewise from rows of 12 (schedules/cpu_knobs.cmake): 1x64x28x28
# 39-49 / 30 us. k3s2p1 over flat planes runs AVX-512 on every side: on a Zen 4 it took
# 1x64x28x28 0.87-0.89x AVX2's time, sides 7 and 14 0.99-1.02x; on an Intel Xeon (full-width
# AVX-512) sides 7, 14 and 16 0.57-0.74x, for 14 KB (docs/kernels.md). The 1-D pooling
# gradient's gather runs whole vectors of cells, two slots each: on rows of fewer than 32 slots
# its AVX-512 variant would leave the call to the scatter.
set(POOLGEN_AVX512_NARROW "max_pool2d_k2s2p0:8;max_pool3d_k2s2p0:8;max_pool1d_cl:16;max_pool2d_cl:16;max_pool3d_cl:16;max_pool2d_k3s2p1:12;max_unpool2d_k2s2p0_cl:16;max_unpool3d_k2s2p0_cl:16;max_pool2d_backward_k2s2p0_cl:16;max_pool1d_backward_k2s2p0:32;max_pool3d_backward_k2s2p0_cl:16;max_unpool_scatter_cl:32" CACHE STRING
    "family:lanes entries: calls of fewer lanes run the AVX2 variant of that family's kernels")
# Families whose AVX-512 variant loads under masks (a gather's taps, selected lane by lane) and
# pays in cache only where masked loads that miss the caches run at memory latency (AMD's:
# masked_loads_miss_slowly, runtime/parallel/settings.hpp): calls out of cache on such CPUs run
# the next variant, as narrow calls do. 2-D k2s2p0 channels-last unpooling's gradient on the
# Zen 5 VM, f32 i64, one thread, ms, AVX-512 / AVX2: 1x64x56x56 0.014 / 0.016, 2x64x112x112
# 0.110 / 0.128, 8x64x112x112 1.68-2.70 / 1.06-1.19 (Intel: 1.78-1.84 / 2.70-2.72, kept there).
set(POOLGEN_AVX512_IN_CACHE "max_unpool2d_backward_k2s2p0_cl" CACHE STRING
    "Families whose calls out of cache run the AVX2 variant where masked loads miss slowly")
set(POOLGEN_AVX512_FEATURE "avx512_skylake" CACHE STRING
    "Halide feature (and processor tuning) of the AVX-512 variant: avx512_skylake, avx512_zen4, ...")
set(POOLGEN_AVX512_TARGET "")
list(GET POOLGEN_CPU_TARGETS 0 poolgen_best)
if (POOLGEN_AVX512_FAMILIES AND poolgen_best MATCHES "^x86-64-" AND
    NOT POOLGEN_CPU_TARGETS MATCHES "avx512")
  string(REPLACE "-" ";" poolgen_avx512 "${poolgen_best}")
  list(REMOVE_ITEM poolgen_avx512 sse41 avx avx2 fma f16c)
  list(JOIN poolgen_avx512 "-" poolgen_avx512)
  set(POOLGEN_AVX512_TARGET "${poolgen_avx512}-${POOLGEN_AVX512_FEATURE}")
endif ()
set(POOLGEN_AVX512_KERNELS "")  # their names, for the kernel table
set(POOLGEN_AVX512_ONLY_KERNELS "")  # of those, POOLGEN_AVX512_ONLY_FAMILIES' (no AVX2 variant)
set(POOLGEN_NARROW_VARIANTS "")  # POOLGEN_NARROW_VARIANT(name, symbol, lanes, in_cache) rows
list(GET POOLGEN_CPU_TARGETS 0 POOLGEN_NARROW_TARGET)
poolgen_target_features(POOLGEN_NARROW_FEATURES ${POOLGEN_NARROW_TARGET})

# user_context routes kernel errors to the call that caused them; strict_float keeps the
# NaN-aware comparisons exactly as written.
set(POOLGEN_KERNEL_FEATURES user_context strict_float)
# Halide checks each call's buffers on entry (types, ranks, extents and strides, spans below
# 2 GiB, the region read), which the runtime has validated before it calls a kernel
# (runtime/validate, fits_kernel). CPU kernels whose generators check nothing else (no
# `require`: the pooling) drop those checks with Halide's no_asserts: 16-33% of each kernel's
# code and 0.04-0.1 us of each call (docs/footprint.md, "Halide's entry checks"); the kernel
# over flat planes, 43.8 -> 26.7 KB an index type. The fuzzers
# fence the shipped kernels' buffers with PROT_NONE pages, so a read or write outside them
# still fails there.
option(POOLGEN_KERNEL_CHECKS "Keep Halide's entry checks in every kernel" OFF)
set(POOLGEN_UNCHECKED_GENERATORS max_pool max_pool_flat)
# Every Halide pipeline also answers bounds queries (a null host asks for the regions it would
# touch), and computes those regions on each call before it tests for one: a division or two per
# split, per specialization. The runtime asks only the gathers (Launch::within_views), so the
# CPU kernels of the other generators drop the query (Halide's no_bounds_query): 160 KB of an f32
# program's share, 0.68 MB of the linked SegNet example, and 11-14 ns of each pooling call
# (docs/footprint.md, "Halide's bounds query").
set(POOLGEN_UNQUERIED_GENERATORS max_pool max_pool_flat max_unpool_scatter max_unpool_winner
    max_unpool_backward)

# Which element types get kernels. Each value type costs 14 pooling kernels per index type; the
# unpooling kernels move bits, so they follow the value types' widths.
set(POOLGEN_VALUE_TYPES "f32;f64;f16;bf16;i8;u8;i16;i32;i64"
    CACHE STRING "Value types to compile kernels for (f32 f64 f16 bf16 i8 u8 i16 i32 i64)")
set(POOLGEN_INDEX_TYPES "i64;i32" CACHE STRING "Index types to compile kernels for (i64 i32)")

# poolgen's dtype names -> Halide type names; unpooling kernels are named by element width.
set(POOLGEN_HALIDE_TYPE_f32 float32)
set(POOLGEN_HALIDE_TYPE_f64 float64)
set(POOLGEN_HALIDE_TYPE_f16 float16)
set(POOLGEN_HALIDE_TYPE_bf16 bfloat16)
set(POOLGEN_HALIDE_TYPE_i8 int8)
set(POOLGEN_HALIDE_TYPE_u8 uint8)
set(POOLGEN_HALIDE_TYPE_i16 int16)
set(POOLGEN_HALIDE_TYPE_i32 int32)
set(POOLGEN_HALIDE_TYPE_i64 int64)
set(POOLGEN_WIDTH_f64 64)
set(POOLGEN_WIDTH_i64 64)
set(POOLGEN_WIDTH_f32 32)
set(POOLGEN_WIDTH_i32 32)
set(POOLGEN_WIDTH_f16 16)
set(POOLGEN_WIDTH_bf16 16)
set(POOLGEN_WIDTH_i16 16)
set(POOLGEN_WIDTH_i8 8)
set(POOLGEN_WIDTH_u8 8)
# The dtype an unpooling kernel of each width is listed under (any dtype of the width matches).
set(POOLGEN_WIDTH_DTYPE_8 u8)
set(POOLGEN_WIDTH_DTYPE_16 i16)
set(POOLGEN_WIDTH_DTYPE_32 i32)
set(POOLGEN_WIDTH_DTYPE_64 i64)
foreach (type IN LISTS POOLGEN_VALUE_TYPES POOLGEN_INDEX_TYPES)
  if (NOT DEFINED POOLGEN_HALIDE_TYPE_${type})
    message(FATAL_ERROR "POOLGEN_VALUE_TYPES / POOLGEN_INDEX_TYPES: unknown type '${type}'")
  endif ()
endforeach ()
foreach (type IN LISTS POOLGEN_INDEX_TYPES)
  if (NOT type MATCHES "^i(32|64)$")
    message(FATAL_ERROR "POOLGEN_INDEX_TYPES: expected i64 and/or i32, got '${type}'")
  endif ()
endforeach ()

# CPU schedule choices per kernel family (the kernel name without its types), passed to the
# generators as `cpu_schedule` (schedules/knobs.h): the hand knob values of
# schedules/cpu_knobs.cmake for every target (POOLGEN_KNOBS_<family>), then, per target, the
# tunings tools/tune.py checked in as <POOLGEN_SCHEDULES_DIR>/<halide target>/tuned.txt (lines
# "<family> <knobs>"; POOLGEN_TUNED_<family>). The generator picks, for each variant, the most
# specific tuned target it has all the features of, else the hand values.
include(${PROJECT_SOURCE_DIR}/schedules/cpu_knobs.cmake)
set(POOLGEN_SCHEDULES_DIR "${PROJECT_SOURCE_DIR}/schedules" CACHE PATH
    "Folder of the tuned schedules (<dir>/<halide target>/tuned.txt)")
file(GLOB poolgen_tuned_files "${POOLGEN_SCHEDULES_DIR}/*/tuned.txt")
foreach (file IN LISTS poolgen_tuned_files)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${file}")
  get_filename_component(tuned_target "${file}" DIRECTORY)
  get_filename_component(tuned_target "${tuned_target}" NAME)
  file(STRINGS "${file}" lines REGEX "^[a-z]")
  foreach (line IN LISTS lines)
    if (NOT line MATCHES "^([a-z0-9_]+) +([a-zA-Z0-9_:,.]+)$")
      message(FATAL_ERROR "${file}: expected \"<family> <knobs>\", got \"${line}\"")
    endif ()
    string(APPEND POOLGEN_TUNED_${CMAKE_MATCH_1} "/${tuned_target}@${CMAKE_MATCH_2}")
  endforeach ()
endforeach ()

add_halide_runtime(poolgen_halide_runtime TARGETS ${POOLGEN_CPU_TARGETS})

set(POOLGEN_KERNEL_LIBRARIES "")
set(POOLGEN_KERNEL_TABLE "")
set(POOLGEN_BACKWARD_KERNEL_TABLE "")

# poolgen_kernel(<name> <op> <nd> <k> <s> <p> <layout> <value> <index> GENERATOR <gen>
#                [KNOBS <knob-set>] [PARAMS ...] [CUDA_CAPABILITY <cc>])
#   op: pool | unpool_scatter | unpool_gather | unpool_winner | pool_backward_scatter |
#   pool_backward_gather | unpool_backward;  nd = 0: any rank;  k = 0: any
#   window;  layout: contiguous | channels_last;  value, index: poolgen dtype names
#   The backward ops' kernels are listed in a table of their own (backward_kernel_table.inc),
#   which only the runtime's backward entry points name: a program that never calls them links
#   none of their code.
#   KNOBS: the kernel family whose CPU schedule choices it takes (POOLGEN_KNOBS_<family>, then
#   POOLGEN_KNOBS_<family>_<value> where set, and POOLGEN_TUNED_<family>, above)
#   CUDA_CAPABILITY: a CUDA kernel for that capability (70: sm_70) instead of a CPU one
#   (cmake/PoolgenCudaKernels.cmake); its table row says device cuda and the capability.
function(poolgen_kernel name op nd k s p layout value index)
  cmake_parse_arguments(ARG "" "GENERATOR;KNOBS;CUDA_CAPABILITY" "PARAMS" ${ARGN})
  set(targets ${POOLGEN_CPU_TARGETS})
  set(device cpu)
  set(capability 0)
  if (ARG_CUDA_CAPABILITY)
    poolgen_cuda_target(targets ${ARG_CUDA_CAPABILITY})
    set(device cuda)
    set(capability ${ARG_CUDA_CAPABILITY})
    list(APPEND ARG_PARAMS ${POOLGEN_CUDA_KNOBS_${ARG_GENERATOR}})
  endif ()
  set(features ${POOLGEN_KERNEL_FEATURES})
  if (NOT POOLGEN_KERNEL_CHECKS AND NOT ARG_CUDA_CAPABILITY AND
      ARG_GENERATOR IN_LIST POOLGEN_UNCHECKED_GENERATORS)
    list(APPEND features no_asserts)
  endif ()
  if (NOT ARG_CUDA_CAPABILITY AND ARG_GENERATOR IN_LIST POOLGEN_UNQUERIED_GENERATORS)
    list(APPEND features no_bounds_query)
  endif ()
  set(wide FALSE)  # whether it gets the AVX-512 variant
  set(avx512_only FALSE)  # and that one alone besides the floor's (POOLGEN_AVX512_ONLY_FAMILIES)
  set(wide_knobs "")  # that variant's own knobs: the narrow rule's, then its hand knobs
  if (NOT ARG_CUDA_CAPABILITY)
    poolgen_wide(wide "${ARG_KNOBS}" ${op} ${value})
    if (wide AND ARG_KNOBS IN_LIST POOLGEN_AVX512_ONLY_FAMILIES)
      set(avx512_only TRUE)
      set(targets ${POOLGEN_CPU_FLOOR_TARGET})
      set(POOLGEN_AVX512_ONLY_KERNELS ${POOLGEN_AVX512_ONLY_KERNELS} ${name} PARENT_SCOPE)
    endif ()
    if (wide)
      list(PREPEND targets ${POOLGEN_AVX512_TARGET})
      set(POOLGEN_AVX512_KERNELS ${POOLGEN_AVX512_KERNELS} ${name} PARENT_SCOPE)
      # The next variant's argv entry, as Halide's multitarget library names it, for the narrow
      # calls and those out of cache.
      set(lanes 0)
      foreach (entry IN LISTS POOLGEN_AVX512_NARROW)
        string(REPLACE ":" ";" entry "${entry}")
        list(GET entry 0 family)
        if (family STREQUAL ARG_KNOBS)
          list(GET entry 1 lanes)
        endif ()
      endforeach ()
      set(in_cache false)
      if (ARG_KNOBS IN_LIST POOLGEN_AVX512_IN_CACHE)
        set(in_cache true)
      endif ()
      if ((lanes GREATER 0 OR in_cache) AND POOLGEN_NARROW_TARGET MATCHES "-avx2")
        string(REPLACE ";" "-" suffix "${features};no_runtime")
        string(APPEND POOLGEN_NARROW_VARIANTS " POOLGEN_NARROW_VARIANT(${name}, "
               "\"${name}-${POOLGEN_NARROW_TARGET}-${suffix}_argv\", ${lanes}, ${in_cache})")
        set(POOLGEN_NARROW_VARIANTS "${POOLGEN_NARROW_VARIANTS}" PARENT_SCOPE)
        # Calls that narrow never reach the AVX-512 variant (runtime/dispatch/kernel_table.cpp:
        # where weak symbols find the AVX2 entry; elsewhere they run its scalar loop), so it
        # carries no vectors for them (CpuPoolSchedule::handed_off_below).
        if (lanes GREATER 0 AND NOT MSVC)
          list(APPEND wide_knobs "handed_off_below:${lanes}")
        endif ()
      endif ()
    endif ()
  endif ()
  # A value type's own hand knobs (POOLGEN_KNOBS_<family>_<value>) come after the family's and
  # override them knob by knob.
  set(cpu_schedule "${POOLGEN_KNOBS_${ARG_KNOBS}}")
  if (DEFINED POOLGEN_KNOBS_${ARG_KNOBS}_${value})
    if (cpu_schedule)
      string(APPEND cpu_schedule ",")
    endif ()
    string(APPEND cpu_schedule "${POOLGEN_KNOBS_${ARG_KNOBS}_${value}}")
  endif ()
  # The AVX-512 variant's own hand knobs (POOLGEN_AVX512_KNOBS_<family>, and the narrow rule's),
  # before its tuning.
  list(APPEND wide_knobs ${POOLGEN_AVX512_KNOBS_${ARG_KNOBS}})
  list(JOIN wide_knobs "," wide_knobs)
  if (wide AND wide_knobs)
    string(APPEND cpu_schedule "/x86-64-linux-${POOLGEN_AVX512_FEATURE}@${wide_knobs}")
  endif ()
  # The floor variant's own hand knobs (POOLGEN_FLOOR_KNOBS_<family>), where the family has a
  # variant above it: the families whose floor is only the multitarget wrapper's fallback
  # (POOLGEN_AVX512_ONLY_FAMILIES), and any family where POOLGEN_CPU_TARGETS has more than the
  # floor (poolgen_floor_knobs_apply). Keyed on the floor's target, which must name an
  # instruction set: a floor of the baseline (x86-64-linux) would match the AVX-512 variant too,
  # and keeps the family's schedule.
  poolgen_floor_knobs_apply(floor_knobs ${avx512_only})
  if (floor_knobs AND DEFINED POOLGEN_FLOOR_KNOBS_${ARG_KNOBS})
    string(APPEND cpu_schedule "/${POOLGEN_CPU_FLOOR_TARGET}@${POOLGEN_FLOOR_KNOBS_${ARG_KNOBS}}")
  endif ()
  string(APPEND cpu_schedule "${POOLGEN_TUNED_${ARG_KNOBS}}")
  set(plugins "")
  if (cpu_schedule MATCHES "autoscheduler:")
    set(plugins Halide::Adams2019 Halide::Mullapudi2016)
  endif ()
  if (cpu_schedule)  # GenGen refuses an empty value
    set(cpu_schedule cpu_schedule=${cpu_schedule})
  endif ()
  add_halide_library(
    ${name} FROM poolgen_generators
    GENERATOR ${ARG_GENERATOR}
    TARGETS ${targets}
    FEATURES ${features}
    USE_RUNTIME poolgen_halide_runtime
    PARAMS ${ARG_PARAMS} layout=${layout} value_type=${POOLGEN_HALIDE_TYPE_${value}}
           index_type=${POOLGEN_HALIDE_TYPE_${index}} ${cpu_schedule}
    PLUGINS ${plugins})
  set(POOLGEN_KERNEL_LIBRARIES ${POOLGEN_KERNEL_LIBRARIES} ${name} PARENT_SCOPE)
  set(table POOLGEN_KERNEL_TABLE)
  if (op MATCHES "backward")
    set(table POOLGEN_BACKWARD_KERNEL_TABLE)
  endif ()
  # Gathers by vectors of cells: the runtime tries them by their own rule (gather_pays).
  set(cell_vectors 0)
  if (cpu_schedule MATCHES "cell_vectors:true")
    set(cell_vectors 1)
  endif ()
  # Kernels whose prefetches run on some calls only take a flag (pooling's out_of_cache, the
  # scatter's prefetch; the generators ask the same of the string: sets_knob).
  set(prefetches 0)
  if ((ARG_GENERATOR STREQUAL "max_pool" AND cpu_schedule MATCHES "prefetch_rows:[1-9]") OR
      (ARG_GENERATOR STREQUAL "max_unpool_scatter" AND
       cpu_schedule MATCHES "prefetch_(pixels|elements):[1-9]"))
    set(prefetches 1)
  endif ()
  string(APPEND ${table} "POOLGEN_KERNEL(${op}, ${nd}, ${k}, ${s}, ${p}, ${layout}, "
         "${value}, ${index}, ${device}, ${capability}, ${cell_vectors}, ${prefetches}, "
         "${name})\n")
  set(${table} "${${table}}" PARENT_SCOPE)
endfunction()

# poolgen_avx512_type(<out> <op> <value>): whether a kernel's type is one of POOLGEN_AVX512_TYPES
# (unpooling kernels move bits: by element width).
function(poolgen_avx512_type out op value)
  set(match FALSE)
  foreach (type IN LISTS POOLGEN_AVX512_TYPES)
    if (value STREQUAL type OR (op MATCHES "^unpool" AND POOLGEN_WIDTH_${value} EQUAL POOLGEN_WIDTH_${type}))
      set(match TRUE)
    endif ()
  endforeach ()
  set(${out} ${match} PARENT_SCOPE)
endfunction()

# poolgen_wide(<out> <family> <op> <value>): whether a CPU kernel of `family` gets the AVX-512
# variant (POOLGEN_AVX512_FAMILIES or POOLGEN_AVX512_ONLY_FAMILIES, of POOLGEN_AVX512_TYPES,
# where the build has that variant).
function(poolgen_wide out family op value)
  set(wide FALSE)
  if (POOLGEN_AVX512_TARGET AND (family IN_LIST POOLGEN_AVX512_FAMILIES OR
                                 family IN_LIST POOLGEN_AVX512_ONLY_FAMILIES))
    poolgen_avx512_type(wide ${op} ${value})
  endif ()
  set(${out} ${wide} PARENT_SCOPE)
endfunction()

# poolgen_window(<window> <k> <s> <p>): the kernel, stride and padding of a POOLGEN_FAST_WINDOWS
# entry ("2 2 0").
macro(poolgen_window window k s p)
  string(REPLACE " " ";" poolgen_window_fields "${window}")
  list(GET poolgen_window_fields 0 ${k})
  list(GET poolgen_window_fields 1 ${s})
  list(GET poolgen_window_fields 2 ${p})
endmacro()

# poolgen_layout_tag(<out> <layout>): the kernel name's layout tag ("" or "_cl").
function(poolgen_layout_tag out layout)
  set(tag "")
  if (layout STREQUAL "channels_last")
    set(tag "_cl")
  endif ()
  set(${out} "${tag}" PARENT_SCOPE)
endfunction()

# poolgen_gather_params(<out> <nd> <k> <s> <p> <layout>): a fixed-window gather's generator
# parameters. Contiguous windows that tile their output (kernel = stride, no padding) are built
# `tiled`: cells read without boundary conditions, for the vectors of cells their
# schedule runs (schedules/cpu_knobs.cmake); other extents take the scatter.
function(poolgen_gather_params out nd k s p layout)
  set(params rank=${nd} fixed_kernel=${k} fixed_stride=${s} fixed_padding=${p})
  if (layout STREQUAL "contiguous" AND k EQUAL s AND p EQUAL 0)
    list(APPEND params tiled=true)
  endif ()
  set(${out} ${params} PARENT_SCOPE)
endfunction()

# The gather formulation of unpooling (generators/max_unpool_gather_generator.cpp) serves the
# fast windows when every index lies in its own cell's window (the SegNet case), writing each
# output once without a zero pass; the dispatcher takes it whenever it is built for the call.
# Channels-last 2-D k2s2p0, the case XNNPACK serves, is built by default: there it measured
# 1.5-1.65x faster than the scatter in and out of cache (f32, one thread, ms, gather / scatter:
# 1x64x28x28 0.015 / 0.024, 1x64x56x56 0.064 / 0.106, 8x64x112x112 2.46 / 3.78), for 13 KB of
# code per kernel. The others are built on request, per layout:
# -DPOOLGEN_UNPOOL_GATHER_LAYOUTS="contiguous;channels_last".
set(POOLGEN_UNPOOL_GATHER_LAYOUTS "" CACHE STRING
    "Layouts with gather unpooling kernels for every fast window (contiguous, channels_last)")
set(POOLGEN_UNPOOL_GATHER_FAMILIES "max_unpool2d_k2s2p0_cl" CACHE STRING
    "Gather unpooling kernel families built whatever POOLGEN_UNPOOL_GATHER_LAYOUTS says")
# And 32-bit (f32) ones: the contiguous 2-D k2s2p0 gather, NCHW's SegNet case, which the runtime
# takes on calls of 4 MiB and more with rows of 64 slots or more (gather_pays): 8x64x112x112, one
# thread, ms, gather / scatter 1.22-1.37 / 2.2-2.5 (i64 indices), for 26 KB an index type; and
# the 3-D channels-last one, 3-D NDHWC's (2x16x32x64x64, ms, one / two threads: 1.10-1.13 /
# 0.52-0.54 -> 0.73-0.75 / 0.36-0.37; 1x16x16x32x32 54 -> 44 us), for 31 KB an index type.
# The contiguous 3-D one, NCDHW's, is no longer built by default: it had led the scatter (Intel
# Xeon, 2x16x32x64x64, ms, one / two threads, gather / scatter: 0.79-0.81 / 0.40 against
# 1.03-1.04 / 0.52), and the scatter prefetching its reads now leads it (Zen 5 VM, i64: 0.59-0.61
# / 0.28-0.29 against 0.40 / 0.20), which saves 31 KB an index type.
set(POOLGEN_DEFAULT_UNPOOL_GATHERS b32:max_unpool2d_k2s2p0 b32:max_unpool3d_k2s2p0_cl)

# The value types with fixed-window kernels: those inference pools (f32, bf16, i8, u8; on ARM
# also f16, which it computes natively). x86 has no 16-bit float arithmetic, and its f16 window
# kernels (1.5 MB, the largest of any type) ran 0.95-1.7x the general kernel's speed; i16, i32,
# i64 and f64 gained 1.2-5x on windows networks of those types rarely pool, for 2.7 MB (1x64x56x56,
# one thread; docs/footprint.md). The others pool those windows with the general kernels.
if (CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$")
  set(poolgen_default_window_types "f32;f16;bf16;i8;u8")
else ()
  set(poolgen_default_window_types "f32;bf16;i8;u8")
endif ()
set(POOLGEN_FIXED_WINDOW_TYPES "${poolgen_default_window_types}" CACHE STRING
    "Value types with fixed-window pooling kernels (k2s2p0, k3s2p1), of POOLGEN_VALUE_TYPES")

# Windows networks actually use, as fast paths in both layouts: kernel 2 stride 2, and kernel 3
# stride 2 pad 1 (unrolled taps; channels-last 2-D k2s2p0 on 8x64x112x112: 2.1 -> 1.5 ms).
set(POOLGEN_FAST_WINDOWS "2 2 0" "3 2 1")
# Fast windows that do not earn their code: contiguous 3-D k3s2p1 ran 1.15-1.34x faster than the
# general kernel (2x16x32x64x64 and 1x32x16x28x28, one thread, three runs) for 2.8 MB, 7% of
# the default build's code.
set(POOLGEN_SKIPPED_FAST_KERNELS max_pool3d_k3s2p1)

# The element widths of the value types: the unpooling kernels are per width.
set(POOLGEN_VALUE_WIDTHS "")
foreach (value IN LISTS POOLGEN_VALUE_TYPES)
  list(APPEND POOLGEN_VALUE_WIDTHS ${POOLGEN_WIDTH_${value}})
endforeach ()
list(REMOVE_DUPLICATES POOLGEN_VALUE_WIDTHS)

# Kernel names: max_pool2d_k2s2p0_f32_i64, max_pool3d_cl_bf16_i32, max_pool2d_k3s2p1_cl_u8_i64,
# max_unpool_scatter_cl_b16_i64.
foreach (value IN LISTS POOLGEN_VALUE_TYPES)
  foreach (index IN LISTS POOLGEN_INDEX_TYPES)
    set(types ${value} ${index})
    foreach (nd 1 2 3)
      foreach (layout contiguous channels_last)
        poolgen_layout_tag(tag ${layout})
        poolgen_kernel(max_pool${nd}d${tag}_${value}_${index} pool ${nd} 0 0 0 ${layout} ${types}
                       GENERATOR max_pool KNOBS max_pool${nd}d${tag} PARAMS rank=${nd})
        if (nd EQUAL 1 OR NOT value IN_LIST POOLGEN_FIXED_WINDOW_TYPES)
          continue ()
        endif ()
        foreach (window IN LISTS POOLGEN_FAST_WINDOWS)
          poolgen_window("${window}" k s p)
          set(family max_pool${nd}d_k${k}s${s}p${p}${tag})
          if (family IN_LIST POOLGEN_SKIPPED_FAST_KERNELS)
            continue ()
          endif ()
          poolgen_kernel(${family}_${value}_${index} pool ${nd} ${k} ${s} ${p} ${layout} ${types}
                         GENERATOR max_pool KNOBS ${family}
                         PARAMS rank=${nd} fixed_kernel=${k} fixed_stride=${s} fixed_padding=${p})
        endforeach ()
      endforeach ()
    endforeach ()
  endforeach ()
endforeach ()
# Small NCHW planes pooled over every plane at once (generators/max_pool_flat_generator.cpp):
# square input planes of these sides, 2-D k2s2p0, f32, whose outputs are packed; the runtime
# runs it for those calls instead of max_pool2d_k2s2p0 (runtime/ops/max_pool.cpp; calls whose
# outputs are whole runs: 1x64, 1x16 planes and the like, multiples of 16 planes of 7). f32 i64,
# one thread, Zen 5 VM, us, NCHW against NHWC (docs/kernels.md, "Small NCHW planes over flat
# planes"): 1x64x7x7 0.49 -> 0.26 (NHWC 0.15), 1x64x14x14 1.44 -> 0.92-0.96 (0.63-0.68),
# 1x64x28x28 3.6 -> 2.75-2.89 (2.2-2.36); with i32 indices 1x64x14x14 1.31-1.36 -> 0.85-0.88,
# 1x64x28x28 3.38-3.46 -> 2.60-2.65. Sides 14 and 28 cost 34-41 KB an index type. Side 16 (rows
# of 8 outputs; Zen 4 VM, poolgen_ab_bench against the fixed window, one / two threads):
# 1x64x16x16 0.90 / 0.90, i32 indices 0.80 / 0.79, for 4.8 KB of an f32 program; side 32 measured
# 0.96-1.04 for 5.2 KB more, not built.
set(POOLGEN_FLAT_PLANES "7;14;16;28" CACHE STRING
    "Sides of the square NCHW planes 2-D k2s2p0 f32 pooling with i64 indices runs over flat planes (empty: none)")
set(POOLGEN_FLAT_PLANES_I32 "7;14;16;28" CACHE STRING
    "The same with i32 indices (empty: none)")
# k3s2p1 likewise, through a stage of each output row's column winners over its three input rows
# (docs/kernels.md, "Small NCHW planes over flat planes"): f32 i64, one thread, us, NCHW against
# NHWC, across planes before -> over flat planes (AMD EPYC Zen 3, AVX2): 1x64x7x7 2.97-3.73 ->
# 1.26-1.30 (NHWC 0.86-0.98), 1x64x14x14 8.9-9.6 -> 4.61-4.70 (2.75-3.0), 1x64x28x28 35.7-36.7 ->
# 20.5-21.2 (10.9-11.7), for 36.7 KB; i32 would cost as much again, and keeps the vectors across
# planes. Its AVX-512 variant serves every side (no POOLGEN_AVX512_NARROW entry). Side 112 (ResNet's
# stem pools 112x112 planes at 224 pixels), whose stage goes by bands of rows, on calls in cache
# only (flat_planes_served): against the fixed window's kernel, Zen 4 VM, one / two threads,
# poolgen_ab_bench's medians of alternating trials, 1x64x112x112 0.64-0.78 / 0.74-0.78; 26.9 KB
# (three variants). Sides 16 and 32 (rows of 8 and 16 outputs, which the fixed window ran across
# planes and as one vector a row), same bench: 1x64x16x16 0.45-0.48 / 0.48, 1x16x16x16 0.45,
# 1x64x32x32 0.49 / 0.52, 8x64x32x32 0.52 / 0.40; 14.6 KB. Side 56 (0.37-0.60, docs/kernels.md)
# came when the floor variant left the wide sides (below). Side 22 took 0.50-0.58 (1x16, 1x64
# and 2x64 planes) for 9.6 KB of AVX2 code (runs of lcm(11, 8) outputs), 3.4 KB more than issue
# 62's 3 MB for an f32 program had left: add it here where it pays.
set(POOLGEN_FLAT_PLANES_K3S2P1 "7;14;16;28;32;56;112" CACHE STRING
    "Sides of the square NCHW planes 2-D k3s2p1 f32 pooling with i64 indices runs over flat planes (empty: none)")
set(POOLGEN_FLAT_PLANES_K3S2P1_I32 "" CACHE STRING
    "The same with i32 indices (empty: none)")
# The floor variant (SSE4.1) of the kernels over flat planes builds the sides up to these alone:
# CPUs that run a variant above it (AVX2: Intel's since Haswell, 2013, but for Atom-class and
# some Pentium and Celeron parts before 2021; AMD's since 2015) take the wider sides over flat
# planes, the floor's keep the fixed window there (flat_planes_served). The SSE4.1 objects went
# from 29.3 KB (k3s2p1: sides 7, 14, 28 and 112) to 11.9 and from 14.1 and 13.3 (k2s2p0, i64 and
# i32) to 9.9 and 9.5, which paid for k3s2p1's sides 16, 32 and 56 in the variants above it
# within issue 62's 3 MB for an f32 program; SSE4.1 CPUs pay about 2x at 28x28 (k3s2p1 51 us
# through the fixed window on the Zen 4 VM; docs/kernels.md). 0: the floor builds every side.
set(POOLGEN_FLAT_PLANES_FLOOR_WIDEST 14 CACHE STRING
    "Widest k2s2p0 side the floor variant of the kernels over flat planes builds (0: every side)")
set(POOLGEN_FLAT_PLANES_K3S2P1_FLOOR_WIDEST 14 CACHE STRING
    "Widest k3s2p1 side the floor variant of the kernels over flat planes builds (0: every side)")
poolgen_floor_knobs_apply(poolgen_flat_floor_knobs FALSE)
foreach (window k2s2p0 k3s2p1)
  set(list_var POOLGEN_FLAT_PLANES)  # the cache variables of this window's sides
  set(numbers 2 2 0)
  if (window STREQUAL "k3s2p1")
    set(list_var POOLGEN_FLAT_PLANES_K3S2P1)
    set(numbers 3 2 1)
  endif ()
  set(${list_var}_LIST "")  # the sides built, for the runtime (kernel_table.inc)
  set(${list_var}_I32_LIST "")
  set(${list_var}_FLOOR_LIST 0)  # the floor's widest side, for the runtime (0: every side)
  if (poolgen_flat_floor_knobs AND ${list_var}_FLOOR_WIDEST GREATER 0)
    set(POOLGEN_FLOOR_KNOBS_max_pool2d_${window}_flat widest_side:${${list_var}_FLOOR_WIDEST})
    set(${list_var}_FLOOR_LIST ${${list_var}_FLOOR_WIDEST})
  endif ()
  if (NOT "f32" IN_LIST POOLGEN_VALUE_TYPES OR NOT "f32" IN_LIST POOLGEN_FIXED_WINDOW_TYPES)
    continue ()
  endif ()
  foreach (index IN LISTS POOLGEN_INDEX_TYPES)
    set(sides ${list_var})
    if (index STREQUAL "i32")
      set(sides ${list_var}_I32)
    endif ()
    if (NOT ${sides})
      continue()
    endif ()
    list(JOIN ${sides} "," poolgen_flat_sides)
    set(${sides}_LIST "${poolgen_flat_sides},")
    poolgen_kernel(max_pool2d_${window}_flat_f32_${index} pool_flat 2 ${numbers} contiguous f32
                   ${index} GENERATOR max_pool_flat KNOBS max_pool2d_${window}_flat
                   PARAMS planes=${poolgen_flat_sides} window=${window})
  endforeach ()
endforeach ()
foreach (bits IN LISTS POOLGEN_VALUE_WIDTHS)
  foreach (index IN LISTS POOLGEN_INDEX_TYPES)
    foreach (layout contiguous channels_last)
      poolgen_layout_tag(tag ${layout})
      set(types ${POOLGEN_WIDTH_DTYPE_${bits}} ${index})
      poolgen_kernel(max_unpool_scatter${tag}_b${bits}_${index} unpool_scatter 0 0 0 0 ${layout}
                     ${types} GENERATOR max_unpool_scatter KNOBS max_unpool_scatter${tag})
      foreach (nd 2 3)
        foreach (window IN LISTS POOLGEN_FAST_WINDOWS)
          poolgen_window("${window}" k s p)
          set(family max_unpool${nd}d_k${k}s${s}p${p}${tag})
          if (NOT layout IN_LIST POOLGEN_UNPOOL_GATHER_LAYOUTS AND
              NOT family IN_LIST POOLGEN_UNPOOL_GATHER_FAMILIES AND
              NOT "b${bits}:${family}" IN_LIST POOLGEN_DEFAULT_UNPOOL_GATHERS)
            continue ()
          endif ()
          poolgen_gather_params(params ${nd} ${k} ${s} ${p} ${layout})
          poolgen_kernel(${family}_b${bits}_${index} unpool_gather ${nd} ${k} ${s} ${p} ${layout}
                         ${types} GENERATOR max_unpool_gather KNOBS ${family} PARAMS ${params})
        endforeach ()
      endforeach ()
    endforeach ()
  endforeach ()
endforeach ()

# The backward ops (training): the gradient types are the float value types autograd uses.
# Max pooling's backward is unpooling that adds (docs/semantics.md): the scatter with
# `accumulate`, which zeroes a cache-sized group of planes and adds into it in input order (on
# CUDA any window's gather, cmake/PoolgenCudaKernels.cmake); the unpooling's backward is a gather
# by index per element width.
# The window gather with `accumulate` serves the fixed windows too, but measured 1.3-6x slower
# than the scatter on x86 (f32, one thread, ms, gather / scatter: 8x64x112x112 k2s2p0 6.9 / 2.6,
# k3s2p1 16.9 / 2.7, NHWC 4.7 / 3.7 and 8.9 / 3.8; 2x16x32x64x64 k2s2p0 3.7 / 1.2; 8x64x65536
# 1-D 67 / 34), so it is built only on request: -DPOOLGEN_BACKWARD_WINDOW_TYPES="f32;bf16".
# But for f32's channels-last k2s2p0 gathers (2-D, 3-D), built by default: with the unpooling
# gather's schedule (schedules/cpu_knobs.cmake: each cell checked right before its slots) and
# without its test for indices outside the plane (they stop it like any index outside its
# window, and the scatter runs), the 2-D one takes 0.68-0.81x the scatter's time in cache and
# 0.6x at 8x64x112x112, the 3-D one 0.74-0.80x at 2x16x32x64x64 (docs/kernels.md). And f32's
# contiguous 2-D k2s2p0 one, with vectors of cells: 0.7-0.85x the scatter's time on calls no
# cache holds, and on the Zen 4 VM 0.82-0.96x in cache from 1 MB (the runtime gives it calls
# from 512 KiB with rows of 64 slots: runtime/dispatch/kernel_table.hpp, gather_pays).
# And the contiguous 1-D one, the same vectors of cells along each row: 1.05-1.3x the scatter's
# speed from 4 MiB (Intel Xeon, ms, one / two threads, scatter / gather: 8x64x65536 44.3-44.4 /
# 21.98-23.71 -> 39.4-40.2 / 20.3-20.4, i32 indices 37.3-37.6 / 18.7-18.8 -> 28.5-29.0 /
# 14.9-15.3; 8x64x4096 1.08-1.11 / 0.55-0.59 -> 0.96-1.05 / 0.50-0.53), for 37 KB. The 1-D
# unpooling gather measured 0.8-1.0x its scatter (which stores rather than adds) and is not built.
# And, with AVX-512, the 2-D channels-last k3s2p1 one for i64 indices (POOLGEN_AVX512_ONLY_FAMILIES
# has its figures); with i32 indices, whose scatter is faster, it measured 0.77-0.97x the
# scatter on one thread (Intel Xeon, 1x64x56x56 to 8x64x112x112). The contiguous 3-D one,
# NCDHW's, had led the scatter (Intel Xeon, 2x16x32x64x64, ms, one / two threads, gather /
# scatter: 0.81-0.83 / 0.42 against 1.04 / 0.53) until the scatter prefetched its reads (Zen 5
# VM, i64: 0.58-0.61 / 0.28-0.29 against 0.47 / 0.23-0.24), and is built on request only.
# Entries are <value>:<family>[:<index>].
set(POOLGEN_DEFAULT_BACKWARD_WINDOWS f32:max_pool2d_backward_k2s2p0_cl f32:max_pool3d_backward_k2s2p0_cl
    f32:max_pool1d_backward_k2s2p0 f32:max_pool2d_backward_k2s2p0 f32:max_pool2d_backward_k3s2p1_cl:i64)
# Unpooling's gradient for SegNet indices (every index in its own cell's k2s2p0 window): each
# cell reads its window densely (generators/max_unpool_backward_window_generator.cpp) rather than
# gathering by index; a call whose indices leave their windows takes the gather by index. f32,
# 2-D 8x64x112x112, one / two threads, ms, window / by index: NCHW 2.01-2.09 / 2.34-2.48, 0.99-1.09
# / 1.11-1.31; NHWC 1.73-1.88 / 2.38-2.40, 0.85-0.91 / 1.24-1.25. The 3-D ones measured no
# faster (2x16x32x64x64: 0.87-1.05 / 0.87-1.07) and are built on request
# (b32:max_unpool3d_backward_k2s2p0[_cl]).
set(POOLGEN_UNPOOL_BACKWARD_WINDOWS "b32:max_unpool2d_backward_k2s2p0;b32:max_unpool2d_backward_k2s2p0_cl"
    CACHE STRING "Fixed-window unpooling gradient kernels (<width>:<family>)")
set(POOLGEN_GRADIENT_TYPES "")
foreach (value f32 f64 f16 bf16)
  if (value IN_LIST POOLGEN_VALUE_TYPES)
    list(APPEND POOLGEN_GRADIENT_TYPES ${value})
  endif ()
endforeach ()
set(POOLGEN_BACKWARD_WINDOW_TYPES "" CACHE STRING
    "Gradient types with fixed-window pooling backward kernels (window gathers for k2s2p0, k3s2p1)")
set(POOLGEN_SKIPPED_BACKWARD_KERNELS max_pool3d_backward_k3s2p1 max_pool3d_backward_k3s2p1_cl)
set(POOLGEN_GRADIENT_WIDTHS "")
foreach (value IN LISTS POOLGEN_GRADIENT_TYPES)
  list(APPEND POOLGEN_GRADIENT_WIDTHS ${POOLGEN_WIDTH_${value}})
endforeach ()
list(REMOVE_DUPLICATES POOLGEN_GRADIENT_WIDTHS)
foreach (index IN LISTS POOLGEN_INDEX_TYPES)
  foreach (layout contiguous channels_last)
    poolgen_layout_tag(tag ${layout})
    foreach (value IN LISTS POOLGEN_GRADIENT_TYPES)
      set(types ${value} ${index})
      poolgen_kernel(max_pool_backward_scatter${tag}_${value}_${index} pool_backward_scatter
                     0 0 0 0 ${layout} ${types} GENERATOR max_unpool_scatter
                     KNOBS max_pool_backward_scatter${tag} PARAMS accumulate=true)
      foreach (nd 1 2 3)
        foreach (window IN LISTS POOLGEN_FAST_WINDOWS)
          poolgen_window("${window}" k s p)
          set(family max_pool${nd}d_backward_k${k}s${s}p${p}${tag})
          poolgen_wide(wide ${family} pool_backward_gather ${value})
          if (family IN_LIST POOLGEN_SKIPPED_BACKWARD_KERNELS OR
              (NOT value IN_LIST POOLGEN_BACKWARD_WINDOW_TYPES AND
               (NOT ("${value}:${family}" IN_LIST POOLGEN_DEFAULT_BACKWARD_WINDOWS OR
                     "${value}:${family}:${index}" IN_LIST POOLGEN_DEFAULT_BACKWARD_WINDOWS) OR
                (family IN_LIST POOLGEN_AVX512_ONLY_FAMILIES AND NOT wide))))
            continue ()
          endif ()
          poolgen_gather_params(params ${nd} ${k} ${s} ${p} ${layout})
          poolgen_kernel(${family}_${value}_${index} pool_backward_gather ${nd} ${k} ${s} ${p}
                         ${layout} ${types} GENERATOR max_unpool_gather KNOBS ${family}
                         PARAMS ${params} accumulate=true)
        endforeach ()
      endforeach ()
    endforeach ()
    foreach (bits IN LISTS POOLGEN_GRADIENT_WIDTHS)
      poolgen_kernel(max_unpool_backward${tag}_b${bits}_${index} unpool_backward 0 0 0 0
                     ${layout} ${POOLGEN_WIDTH_DTYPE_${bits}} ${index}
                     GENERATOR max_unpool_backward KNOBS max_unpool_backward${tag})
      foreach (nd 2 3)
        set(family max_unpool${nd}d_backward_k2s2p0${tag})
        if ("b${bits}:${family}" IN_LIST POOLGEN_UNPOOL_BACKWARD_WINDOWS)
          poolgen_kernel(${family}_b${bits}_${index} unpool_backward ${nd} 2 2 0 ${layout}
                         ${POOLGEN_WIDTH_DTYPE_${bits}} ${index} GENERATOR max_unpool_backward_window
                         KNOBS ${family} PARAMS rank=${nd} fixed_kernel=2)
        endif ()
      endforeach ()
    endforeach ()
  endforeach ()
endforeach ()

# CUDA kernels (POOLGEN_CUDA_CAPABILITIES) and the winner unpooling's CPU twins.
include(${CMAKE_CURRENT_LIST_DIR}/PoolgenCudaKernels.cmake)

# Every kernel and the Halide runtime are part of `all`, also where nothing links them (a
# kernels-only build for another platform, whose archives are IMPORTED).
add_custom_target(poolgen_kernels ALL)
foreach (lib IN LISTS POOLGEN_KERNEL_LIBRARIES ITEMS poolgen_halide_runtime)
  if (TARGET ${lib}.update)
    add_dependencies(poolgen_kernels ${lib}.update)
  else ()
    add_dependencies(poolgen_kernels ${lib})
  endif ()
endforeach ()

string(REPLACE ";" "\",\"" POOLGEN_TARGET_NAMES "\"${POOLGEN_CPU_TARGETS}\"")
string(REPLACE ";" "\",\"" POOLGEN_AVX512_KERNEL_NAMES "\"${POOLGEN_AVX512_KERNELS}\"")
string(REPLACE ";" "\",\"" POOLGEN_AVX512_ONLY_KERNEL_NAMES "\"${POOLGEN_AVX512_ONLY_KERNELS}\"")
poolgen_target_features(POOLGEN_AVX512_FEATURES "${POOLGEN_AVX512_TARGET}")
file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/generated/kernel_table.inc
     CONTENT "// Generated by cmake/PoolgenKernels.cmake: every compiled kernel.\n\
// POOLGEN_KERNEL(op, nd, kernel, stride, padding, layout, value, index, device, capability,\n\
//                cell_vectors, prefetches, name)\n\
#define POOLGEN_CPU_TARGET_NAMES ${POOLGEN_TARGET_NAMES}\n\
#define POOLGEN_AVX512_TARGET \"${POOLGEN_AVX512_TARGET}\"\n\
#define POOLGEN_AVX512_KERNEL_NAMES ${POOLGEN_AVX512_KERNEL_NAMES}\n\
#define POOLGEN_AVX512_ONLY_KERNEL_NAMES ${POOLGEN_AVX512_ONLY_KERNEL_NAMES}\n\
#define POOLGEN_AVX512_FEATURES ${POOLGEN_AVX512_FEATURES}\n\
#define POOLGEN_NARROW_VARIANTS ${POOLGEN_NARROW_VARIANTS}\n\
#define POOLGEN_NARROW_FEATURES ${POOLGEN_NARROW_FEATURES}\n\
#define POOLGEN_CPU_FLOOR_TARGET \"${POOLGEN_CPU_FLOOR_TARGET}\"\n\
#define POOLGEN_FLAT_PLANES ${POOLGEN_FLAT_PLANES_LIST}\n\
#define POOLGEN_FLAT_PLANES_I32 ${POOLGEN_FLAT_PLANES_I32_LIST}\n\
#define POOLGEN_FLAT_PLANES_K3S2P1 ${POOLGEN_FLAT_PLANES_K3S2P1_LIST}\n\
#define POOLGEN_FLAT_PLANES_K3S2P1_I32 ${POOLGEN_FLAT_PLANES_K3S2P1_I32_LIST}\n\
#define POOLGEN_FLAT_PLANES_FLOOR_WIDEST ${POOLGEN_FLAT_PLANES_FLOOR_LIST}\n\
#define POOLGEN_FLAT_PLANES_K3S2P1_FLOOR_WIDEST ${POOLGEN_FLAT_PLANES_K3S2P1_FLOOR_LIST}\n\
#define POOLGEN_CPU_FLOOR_FEATURES ${POOLGEN_CPU_FLOOR_FEATURES}\n\
#define POOLGEN_CUDA_TARGET_PREFIX \"${POOLGEN_CUDA_TARGET_PREFIX}\"\n${POOLGEN_KERNEL_TABLE}")
file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/generated/backward_kernel_table.inc
     CONTENT "// Generated by cmake/PoolgenKernels.cmake: every compiled kernel of the backward ops.\n\
// POOLGEN_KERNEL(op, nd, kernel, stride, padding, layout, value, index, device, capability,\n\
//                cell_vectors, prefetches, name)\n\
${POOLGEN_BACKWARD_KERNEL_TABLE}")
