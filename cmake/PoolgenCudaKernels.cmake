# The CUDA kernel matrix, included by cmake/PoolgenKernels.cmake (whose poolgen_kernel() builds
# and lists every kernel). One library per kernel and capability, with its own function name
# (max_pool2d_f32_i64_sm70): the runtime picks, per call, the largest capability the device
# meets. Halide emits PTX and the driver compiles it for the device at load time, so a kernel of
# a lower capability also runs on newer GPUs. Nothing here needs a GPU or the CUDA toolkit: the
# libraries build and link everywhere, and Halide's CUDA runtime (part of poolgen_halide_runtime
# once a CUDA library uses it) loads libcuda only when a CUDA call is made.
#
# The matrix is kept lean (CI has 2 cores): general pooling (runtime window) for ranks 1-3 per
# value type, index type and layout, and the deterministic winner unpooling per element width,
# index type and layout. The fixed-window kernels and the gather unpooling stay CPU-only (the
# gather's `require` checks stop a CPU kernel; they have no counterpart inside a GPU kernel).

# Halide 21 knows CUDA capabilities 30 32 35 50 61 70 75 80 86; there is no cuda_capability_90
# feature, and PTX for sm_86 runs on sm_89 and sm_90 (Ada, Hopper) through the driver's JIT.
# One capability by default: Halide 21 emits the same PTX for 86 as for 70 (apart from the
# .version/.target lines and an explicit .relaxed on the winner's compare-and-swap, which is the
# default ordering), so a second capability would double the CUDA code for nothing; the driver
# compiles sm_70 PTX for every newer GPU.
set(POOLGEN_CUDA_CAPABILITIES "70" CACHE STRING
    "CUDA capabilities to build kernels for (Halide 21: 30 32 35 50 61 70 75 80 86); empty: no CUDA")
set(POOLGEN_CUDA_KNOWN_CAPABILITIES 30 32 35 50 61 70 75 80 86)
# Pooling on CUDA takes the float types, as PyTorch's CUDA max pooling does (its kernels dispatch
# on floating types only): integer pooling kernels (i8 u8 i16 i32 i64) were 1.55 MB, a tenth of
# the default build's code, for calls PyTorch itself refuses; list them here to build them.
# bf16 pooling has no CUDA kernels: Halide 21's PTX code generation aborts in LLVM ("Invalid
# cast") on its bf16 -> f32 widening for every capability it knows (this holds for the
# backward's additions too). Unpooling moves bf16 as 16-bit elements, so it is served.
set(POOLGEN_CUDA_POOL_TYPES "f32;f64;f16" CACHE STRING
    "Value types with CUDA pooling kernels (of POOLGEN_VALUE_TYPES; not bf16)")
list(REMOVE_ITEM POOLGEN_CUDA_POOL_TYPES bf16)
set(poolgen_cuda_pool_types "")
foreach (value IN LISTS POOLGEN_CUDA_POOL_TYPES)
  if (value IN_LIST POOLGEN_VALUE_TYPES)
    list(APPEND poolgen_cuda_pool_types ${value})
  endif ()
endforeach ()
set(POOLGEN_CUDA_POOL_TYPES ${poolgen_cuda_pool_types})
# Pooling's gradient as any window's gather (10-25x the scatter's speed on an H100) costs 40 KB a
# kernel, 3 ranks x 2 layouts x 2 index types a type; the types left out (f64 by default: GPUs
# train in f32 and f16) take the scatter, a thread per plane, with the same bytes.
set(POOLGEN_CUDA_GATHER_TYPES "f32;f16" CACHE STRING
    "Gradient types with CUDA window-gather pooling backward kernels (of POOLGEN_CUDA_POOL_TYPES)")

# Unpooling as any window's gather (max_pool_backward_gather with accumulate=false: a thread per
# output slot, no winner pass) where every index lies in its own window, the winner behind it.
# Built where it beat the winner on an H200 (bench/results/cuda, 2026-11-27): channels-last
# (2-D 1.6-1.75x, 3-D 2.7x) and 1-D (1.65x); in contiguous 2-D and 3-D the winner's flat planes
# cost fewer integer divisions than the gather's window arithmetic (gather 1.08x and 2.75x
# slower). At 36 KB a kernel (24 of them took the linked training example from 15.53 to 16.40
# MB, past issue 14's 16 MB), only for the widths GPUs mostly unpool (f32, f16 and bf16) and the
# int64 indices every framework's pooling gives: the others take the winner alone.
set(POOLGEN_CUDA_UNPOOL_GATHER_WIDTHS "32;16" CACHE STRING
    "Value widths with CUDA window-gather unpooling kernels (of 8 16 32 64)")
set(POOLGEN_CUDA_UNPOOL_GATHER_INDEX_TYPES "i64" CACHE STRING
    "Index types with CUDA window-gather unpooling kernels (of POOLGEN_INDEX_TYPES)")

# Fixed-window kernels on CUDA ("k s p" entries as POOLGEN_FAST_WINDOWS'): pooling with unrolled
# taps, and the window gathers (pooling's backward, unpooling), with no divisions by runtime
# window parameters, for calls whose window matches exactly (the general kernels serve the
# rest); none by default.
set(POOLGEN_CUDA_FAST_WINDOWS "" CACHE STRING
    "Windows (\"k s p\", as POOLGEN_FAST_WINDOWS) with fixed-window CUDA pooling kernels")

# poolgen_cuda_fixed_windows(<name> <op> <nd> <layout> <value> <index> <generator> <cc> <params...>):
# one fixed-window CUDA kernel of <generator> per POOLGEN_CUDA_FAST_WINDOWS entry, named <name>
# with "{window}" replaced by k<k>s<s>p<p>. A macro, so that poolgen_kernel's lists reach the
# caller's scope.
macro(poolgen_cuda_fixed_windows name op nd layout value index generator cc)
  foreach (poolgen_fixed_window IN LISTS POOLGEN_CUDA_FAST_WINDOWS)
    poolgen_window("${poolgen_fixed_window}" poolgen_k poolgen_s poolgen_p)
    string(REPLACE "{window}" "k${poolgen_k}s${poolgen_s}p${poolgen_p}" poolgen_fixed_name "${name}")
    poolgen_kernel(${poolgen_fixed_name} ${op} ${nd} ${poolgen_k} ${poolgen_s} ${poolgen_p}
                   ${layout} ${value} ${index} GENERATOR ${generator}
                   PARAMS rank=${nd} ${ARGN} fixed_kernel=${poolgen_k} fixed_stride=${poolgen_s}
                          fixed_padding=${poolgen_p} CUDA_CAPABILITY ${cc})
  endforeach ()
endmacro()

# The CUDA schedules' knobs (schedules/gpu_schedules.h: GeneratorParams named gpu_*) of each
# generator's CUDA kernels, for measuring other values (scripts/gpu_pack.sh's sweep); empty: the
# schedules' defaults. Example: -DPOOLGEN_CUDA_KNOBS_max_pool="gpu_threads_x=64;gpu_threads_y=4".
foreach (generator max_pool max_unpool_winner max_unpool_scatter max_unpool_backward
                   max_pool_backward_gather)
  set(POOLGEN_CUDA_KNOBS_${generator} "" CACHE STRING
      "GeneratorParams of ${generator}'s CUDA schedule (gpu_* knobs); empty: the defaults")
endforeach ()

# The CUDA changes that a GPU run has yet to time (bench/results/cuda, "Owed"), built together:
# the fixed-window kernels (k2s2p0, k3s2p1), for pooling and the window gathers the planes grid
# (blocks found without division) and magic-number division by the runtime window and extents
# (schedules/gpu_schedules.h), and unpooling's window gather in contiguous 2-D and 3-D too (with
# no division left, it may now beat the winner there). Their results are checked without a GPU
# on PoCL (scripts/reliability.sh opencl) and their PTX by tools/ptx_budget.py.
option(POOLGEN_CUDA_CANDIDATE "Build the CUDA kernels with the changes a GPU has yet to time" OFF)
if (POOLGEN_CUDA_CANDIDATE)
  foreach (generator max_pool max_pool_backward_gather)
    list(APPEND POOLGEN_CUDA_KNOBS_${generator} gpu_grid=planes gpu_magic=true)
  endforeach ()
  if (NOT POOLGEN_CUDA_FAST_WINDOWS)
    set(POOLGEN_CUDA_FAST_WINDOWS "2 2 0" "3 2 1")
  endif ()
endif ()

foreach (cc IN LISTS POOLGEN_CUDA_CAPABILITIES)
  if (NOT cc IN_LIST POOLGEN_CUDA_KNOWN_CAPABILITIES)
    message(FATAL_ERROR "POOLGEN_CUDA_CAPABILITIES: Halide ${Halide_VERSION} has no CUDA "
                        "capability '${cc}' (known: ${POOLGEN_CUDA_KNOWN_CAPABILITIES})")
  endif ()
endforeach ()

# The host side of a CUDA kernel runs on the CPU the library is built for: the baseline (last)
# CPU target, so an ARM build gets arm-64-linux-cuda-....
list(GET POOLGEN_CPU_TARGETS -1 POOLGEN_CUDA_HOST_TARGET)
set(POOLGEN_CUDA_TARGET_PREFIX "${POOLGEN_CUDA_HOST_TARGET}-cuda-cuda_capability_")

# The GPU API the CUDA kernel matrix is compiled for. "opencl" is a check build for machines
# without a GPU (scripts/reliability.sh opencl): the same generators and GPU schedules compiled
# for Halide's OpenCL target and run, through the runtime's CUDA path with host views, on a CPU
# OpenCL (Debian's PoCL), bit for bit against the CPU kernels. It checks what the schedules
# compute, not how fast (docs/testing.md, "GPU checks without a GPU").
set(POOLGEN_GPU_API "cuda" CACHE STRING "GPU API of the CUDA kernel matrix: cuda, or opencl (a check build)")
set_property(CACHE POOLGEN_GPU_API PROPERTY STRINGS cuda opencl)
if (POOLGEN_GPU_API STREQUAL "opencl")
  # f64 takes cl_doubles; the winner's 64-bit atomics cl_atomics64. PoCL 3.1 has no cl_khr_fp16,
  # so f16 pooling and its gradient are left out (16-bit unpooling moves bits as int16 and stays).
  set(POOLGEN_CUDA_TARGET_PREFIX "${POOLGEN_CUDA_HOST_TARGET}-opencl-cl_doubles-cl_atomics64")
  list(REMOVE_ITEM POOLGEN_CUDA_POOL_TYPES f16)
  list(REMOVE_ITEM POOLGEN_CUDA_GATHER_TYPES f16)
elseif (NOT POOLGEN_GPU_API STREQUAL "cuda")
  message(FATAL_ERROR "POOLGEN_GPU_API: expected cuda or opencl, got '${POOLGEN_GPU_API}'")
endif ()

# poolgen_cuda_target(<out> <capability>): the Halide target of a CUDA kernel (of the OpenCL
# check build: the same target for every capability).
function(poolgen_cuda_target out capability)
  if (POOLGEN_GPU_API STREQUAL "opencl")
    set(${out} "${POOLGEN_CUDA_TARGET_PREFIX}" PARENT_SCOPE)
  else ()
    set(${out} "${POOLGEN_CUDA_TARGET_PREFIX}${capability}" PARENT_SCOPE)
  endif ()
endfunction()

# The CPU twins (contiguous, 32-bit values) of the kernels only GPUs run, the winner unpooling
# and the window gather in front of it, the unpooling backward that reports invalid indices and
# the pooling backward's window gather:
# their algorithms built for the host, so that their tests run where there is no GPU
# (Path::winner). A program that links the library carries them (95 KB of an f32 program's 2 MB)
# but never needs them, so only the checked builds of scripts/reliability.sh, which run the
# whole suite in CI, build them.
option(POOLGEN_GPU_TWINS "Build CPU twins of the GPU-only kernels (Path::winner), for tests" OFF)
if (POOLGEN_GPU_TWINS AND 32 IN_LIST POOLGEN_VALUE_WIDTHS)
  foreach (index IN LISTS POOLGEN_INDEX_TYPES)
    poolgen_kernel(max_unpool_winner_b32_${index} unpool_winner 0 0 0 0 contiguous i32 ${index}
                   GENERATOR max_unpool_winner)
    foreach (nd 1 2 3)
      poolgen_kernel(max_unpool${nd}d_gather_b32_${index} unpool_window_gather ${nd} 0 0 0
                     contiguous i32 ${index} GENERATOR max_pool_backward_gather
                     PARAMS rank=${nd} accumulate=false)
    endforeach ()
  endforeach ()
endif ()
if (POOLGEN_GPU_TWINS AND 32 IN_LIST POOLGEN_GRADIENT_WIDTHS)
  foreach (index IN LISTS POOLGEN_INDEX_TYPES)
    poolgen_kernel(max_unpool_backward_reporting_b32_${index} unpool_backward_reporting 0 0 0 0
                   contiguous i32 ${index} GENERATOR max_unpool_backward
                   PARAMS report_invalid=true)
  endforeach ()
endif ()
if (POOLGEN_GPU_TWINS AND f32 IN_LIST POOLGEN_GRADIENT_TYPES)
  foreach (index IN LISTS POOLGEN_INDEX_TYPES)
    foreach (nd 1 2 3)
      poolgen_kernel(max_pool${nd}d_backward_gather_f32_${index} pool_backward_window_gather
                     ${nd} 0 0 0 contiguous f32 ${index} GENERATOR max_pool_backward_gather
                     PARAMS rank=${nd})
    endforeach ()
  endforeach ()
endif ()

foreach (cc IN LISTS POOLGEN_CUDA_CAPABILITIES)
  set(sm _sm${cc})
  foreach (index IN LISTS POOLGEN_INDEX_TYPES)
    foreach (layout contiguous channels_last)
      poolgen_layout_tag(tag ${layout})
      foreach (value IN LISTS POOLGEN_CUDA_POOL_TYPES)
        foreach (nd 1 2 3)
          poolgen_kernel(max_pool${nd}d${tag}_${value}_${index}${sm} pool ${nd} 0 0 0 ${layout}
                         ${value} ${index} GENERATOR max_pool KNOBS max_pool${nd}d${tag}_cuda
                         PARAMS rank=${nd} CUDA_CAPABILITY ${cc})
          poolgen_cuda_fixed_windows(max_pool${nd}d_{window}${tag}_${value}_${index}${sm} pool
                                     ${nd} ${layout} ${value} ${index} max_pool ${cc})
        endforeach ()
      endforeach ()
      foreach (bits IN LISTS POOLGEN_VALUE_WIDTHS)
        poolgen_kernel(max_unpool_winner${tag}_b${bits}_${index}${sm} unpool_winner 0 0 0 0
                       ${layout} ${POOLGEN_WIDTH_DTYPE_${bits}} ${index}
                       GENERATOR max_unpool_winner CUDA_CAPABILITY ${cc})
        if (bits IN_LIST POOLGEN_CUDA_UNPOOL_GATHER_WIDTHS AND
            index IN_LIST POOLGEN_CUDA_UNPOOL_GATHER_INDEX_TYPES)
          foreach (nd 1 2 3)
            if (layout STREQUAL "contiguous" AND nd GREATER 1 AND NOT POOLGEN_CUDA_CANDIDATE)
              break ()
            endif ()
            poolgen_kernel(max_unpool${nd}d_gather${tag}_b${bits}_${index}${sm}
                           unpool_window_gather ${nd} 0 0 0 ${layout}
                           ${POOLGEN_WIDTH_DTYPE_${bits}} ${index} GENERATOR max_pool_backward_gather
                           PARAMS rank=${nd} accumulate=false CUDA_CAPABILITY ${cc})
            poolgen_cuda_fixed_windows(
                max_unpool${nd}d_gather_{window}${tag}_b${bits}_${index}${sm} unpool_window_gather
                ${nd} ${layout} ${POOLGEN_WIDTH_DTYPE_${bits}} ${index} max_pool_backward_gather
                ${cc} accumulate=false)
          endforeach ()
        endif ()
      endforeach ()
      # The backward ops: pooling's as any window's gather (a thread per input position), with
      # the accumulating scatter (a thread per plane keeps the order of additions) for indices
      # outside their windows; unpooling's as the gather by index reporting invalid indices.
      foreach (value IN LISTS POOLGEN_GRADIENT_TYPES)
        if (value IN_LIST POOLGEN_CUDA_POOL_TYPES)
          foreach (nd 1 2 3)
            if (NOT value IN_LIST POOLGEN_CUDA_GATHER_TYPES)
              break ()
            endif ()
            poolgen_kernel(max_pool${nd}d_backward_gather${tag}_${value}_${index}${sm}
                           pool_backward_window_gather ${nd} 0 0 0 ${layout} ${value} ${index}
                           GENERATOR max_pool_backward_gather PARAMS rank=${nd}
                           CUDA_CAPABILITY ${cc})
            poolgen_cuda_fixed_windows(
                max_pool${nd}d_backward_gather_{window}${tag}_${value}_${index}${sm}
                pool_backward_window_gather ${nd} ${layout} ${value} ${index}
                max_pool_backward_gather ${cc})
          endforeach ()
          poolgen_kernel(max_pool_backward_scatter${tag}_${value}_${index}${sm}
                         pool_backward_scatter 0 0 0 0 ${layout} ${value} ${index}
                         GENERATOR max_unpool_scatter PARAMS accumulate=true
                         CUDA_CAPABILITY ${cc})
        endif ()
      endforeach ()
      foreach (bits IN LISTS POOLGEN_GRADIENT_WIDTHS)
        poolgen_kernel(max_unpool_backward_reporting${tag}_b${bits}_${index}${sm}
                       unpool_backward_reporting 0 0 0 0 ${layout}
                       ${POOLGEN_WIDTH_DTYPE_${bits}} ${index} GENERATOR max_unpool_backward
                       PARAMS report_invalid=true CUDA_CAPABILITY ${cc})
      endforeach ()
    endforeach ()
  endforeach ()
endforeach ()
