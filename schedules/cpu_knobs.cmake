# Knob values of the CPU schedules, per kernel family (POOLGEN_KNOBS_<family>: the kernel name
# without its value and index types), chosen by measurement with bench/poolgen_bench on x86-64
# (avx512_skylake, 2 cores). A family not listed uses the knobs' defaults
# (schedules/cpu_schedules.h). Values apply to every CPU variant and element type, except a value
# type's own (POOLGEN_KNOBS_<family>_<value>, after the family's).
#
# Staging input rows pays where windows overlap or are padded; in 1-D it only adds a pass
# (8x64x65536 k2s2p0: 48 -> 33 ms on one thread). The k2s2p0 kernels read the input in place
# (no bounds), and channels-last kernels never stage (their vectors run along the channels, so
# taps load dense vectors anyway).
set(POOLGEN_KNOBS_max_pool1d stage_rows:false,narrow_vectors:false)
# f32 rows narrower than a vector run vectors of rows (a row per lane, tasks of 4 vectors) where
# the scalar loop served them, which AVX-512 compiles through mask registers (kmovd round trips,
# masked vmovss). f32 i64, one thread, us: AVX-512 64x64x8 k3s1p1 270 -> 40, 64x64x16 k2s2p0
# (rows of 8) 193 -> 34, 8x64x12 k3s2p1 25 -> 4.0; AVX2 64x64x8 k2s2p0 85 -> 22, 8x64x12 k3s2p1
# 18.4 -> 5.0 (docs/kernels.md). Wider rows keep their own vectors: across rows measured slower
# from 16 outputs (64x64x32 k2s2p0 34 -> 71).
set(POOLGEN_KNOBS_max_pool1d_f32 channel_vectors:4)
# The contiguous unpooling scatter steps 8 elements a loop trip (its count and branch shared) and
# prefetches the values and indices 512 elements ahead: its stores to scattered slots stalled it
# on index loads the hardware prefetchers issued too late. Zen 5 VM, f32 i64, one thread, ms,
# medians of 4 interleaved runs: 8x64x112x112 k3s2p1 1.93-2.0 -> 1.28-1.36 (256 ahead: 1.37,
# 1024: 1.55; prefetching every plane a plane ahead: 2.4), 1x64x56x56 0.027 -> 0.025;
# prefetching inside a guarded unrolled loop cost 1x64x56x56 25% (its bounds every step), hence
# the generator's whole steps. Before (unroll 4 alone, against 1): 1x64x28x28 0.92, 1x64x56x56
# 0.90. Pooling's gradient scatter (adding, skipping dropped elements) likewise: f32 i64, ms,
# one / two threads, 3 interleaved runs, NCHW 8x64x112x112 k3s2p1 1.93-2.04 / 1.01-1.07 ->
# 1.38-1.48 / 0.76-0.80, k2s2p0 1.82-2.08 / 0.98-1.02 -> 1.32-1.35 / 0.72-0.76, NCDHW
# 2x16x32x64x64 k2s2p0 0.51-0.55 / 0.25-0.26 -> 0.41-0.45 / 0.21-0.22, 1x64x56x56 k3s2p1 0.032-
# 0.037 -> 0.030-0.031 (unrolled by 4 without prefetching it had measured 5% slower).
# The prefetches run under the kernel's flag, which the runtime sets on AMD's processors alone
# (element_prefetches_pay): on the Intel Xeon VM they cost 1.2-1.9x (docs/kernels.md).
set(POOLGEN_KNOBS_max_unpool_scatter unroll:8,prefetch_elements:512)
set(POOLGEN_KNOBS_max_pool_backward_scatter ${POOLGEN_KNOBS_max_unpool_scatter})
# f32's gets a copy for outputs that start at a plane's first slot (every call's but a slab's):
# 10 -> 6 instructions an element (CpuScatterSchedule::from_first_slot), f32 i64, one thread,
# us, Zen 4 VM, three interleaved rounds: 1x64x16x16 k2s2p0 3.43-3.50 -> 3.12-3.20, 32x32
# 13.1-13.2 -> 11.8-11.9, 56x56 43.8-49.6 -> 41.9-43.0 (ATen 1.13: 3.26, 12.3, 40.7); 1.5 KB an
# index type and variant. The channels-last loop (10 -> 8: its loads of indices stall it) and
# the other value types go without.
set(POOLGEN_KNOBS_max_pool_backward_scatter_f32 from_first_slot:true)
# The channels-last pooling gradient's scatter, f32 with i64 indices, as a scalar loop that skips
# dropped elements: its vectors of channels went lane by lane through their slots anyway, and
# spent AVX2's shuffle port on them and on 64-bit clamps (f32 i64, one thread, us, Intel:
# 1x64x16x16 k3s2p1 6.6-6.8 -> 5.3-5.4, 1x64x32x32 28.1-28.8 -> 25.1-26.3, 3-D 1x16x8x16x16 7.4
# -> 6.1; AVX2 1x64x56x56 84-86 -> 72-73, 8x64x112x112 3.69-3.79 -> 3.55-3.69 ms). i32 indices
# (4.1 -> 4.7), bf16 (6.1 -> 7.2), f16 (6.2 -> 21) and f64 (even) keep their vectors. Its
# channels unrolled by 4 share the loop's count and branch: 16 -> 12 instructions an element
# (1x64x8x8 k3s2p1 1.13-1.19 -> 0.75-0.84 us, 16x16 5.2-8.3 -> 4.3-5.3, 32x32 23-26 -> 16-21,
# 3-D 1x16x8x16x16 on two threads 6.4 -> 5.2; ATen 4.1 at 16x16, 21 at 32x32).
# Out of cache it prefetches the values and indices of the pixel two ahead (every line of them:
# prefetch_lines.h; the runtime's prefetch_pays sets the flag): f32 i64, ms, one / two threads,
# Zen 4 VM, four interleaved rounds, medians, 8x64x112x112 k3s2p1 3.05 / 1.52 -> 2.53 / 1.34 (one,
# two and four pixels ahead alike: 2.51, 2.53, 2.47); in cache they cost 4-6% (1x64x56x56 50.5 ->
# 52.9 us) and do not run.
set(POOLGEN_KNOBS_max_pool_backward_scatter_cl_f32 scalar_index_bits:64,unroll:4,prefetch_pixels:2)
# The channels-last gathers read values in place: staging them measured slower (2-D k2s2p0 on
# 8x64x112x112: 4.7 -> 2.95 ms on one thread). The 2-D k2s2p0 one, built by default, keeps one
# loop per stage (partition_cells:false: 33 -> 18 KB of AVX2 code, 1x64x56x56 and 8x64x112x112 at
# the same speed) and leaves rows of fewer channels than a vector to the scatter
# (narrow_vectors:false: 18 -> 13 KB). Tasks of a few output rows share one image between two
# threads (1x64x28x28 f32 on two threads: 0.0148 -> 0.0094 ms with 8 rows). 4 rows rather than 8
# balance the two threads better where 8 leave an odd count of tasks (f32 i64, us on two threads,
# 8 -> 4 rows: 1x64x56x56 54 -> 40, i32 indices 41 -> 32, 1x64x64x64 55 -> 50, 1x64x90x90 137 ->
# 111; 1x64x28x28 10.1 -> 10.7, 1x64x46x46 24-26 -> 26-29; one thread, and 8x64x112x112 and
# 1x64x256x256 on either, within 2%). Each cell's 2x2 slots run together inside the channel loop
# (slot_tile:2): a vector of marks and values loaded once for four slots, and two output rows
# written side by side, as XNNPACK's scatter writes them (f32, us, one / two threads, three
# interleaved rounds: 8x64x112x112 2720-2910 / 1400-1580 -> 2450-2600 / 1230-1360, i32 indices
# 2350-2530 / 1140-1260 -> 2090-2150 / 1040-1130; 1x64x256x256 1580-1620 / 717-849 -> 1210-1260
# / 573-619; 1x64x56x56 43-44 / 23-34 -> 35-37 / 19-21; 1x64x16x16 3.7-3.9 -> 3.1-3.2).
set(POOLGEN_KNOBS_max_unpool2d_k2s2p0_cl stage_cells:false,narrow_vectors:false,partition_cells:false,rows_per_task:4,slot_tile:2)
# Each cell is marked and checked right before its slots (the tile is its window), not a block
# of cells in a pass of their own: f32 i64 8x64x112x112 2.36-2.60 -> 1.71-1.81 ms on one thread
# and 1.25-1.28 -> 0.76-0.90 on two, 1x64x56x56 and 1x64x16x16 no slower (docs/kernels.md).
# Pooling's gradient as that gather (accumulating) takes the same schedule, and so do the 3-D
# gathers (2x16x32x64x64 unpooling 1.52 -> 0.86-0.93 ms, gradient 1.10-1.16 -> 0.85-0.95).
set(POOLGEN_KNOBS_max_pool2d_backward_k2s2p0_cl ${POOLGEN_KNOBS_max_unpool2d_k2s2p0_cl})
# The 2-D k3s2p1 channels-last gradient gather (AVX-512 only, cmake/PoolgenKernels.cmake) takes
# that schedule with its loops split into border and interior pieces (the interior without the
# cells' clamps) and tasks of 16 rows (the marks of a task's cells, computed in a pass of their
# own since windows overlap, are then recomputed for one cell row in eight rather than in two):
# f32 i64 8x64x112x112 AVX-512, ms, one / two threads: 4.11 / 2.03 (one piece, 4 rows) -> 3.42 /
# 1.64 (pieces) -> 2.91 / 1.38 (8 rows) -> 2.64 / 1.36 (16 rows; 32: 2.90 / 1.47); one piece
# at 16 rows, 3.39 / 1.61, would save 16 of its 32.5 KB. Its floor variant, which AVX-512 CPUs
# never run, keeps one piece (35 -> 16 KB).
set(POOLGEN_KNOBS_max_pool2d_backward_k3s2p1_cl stage_cells:false,narrow_vectors:false,rows_per_task:16,slot_tile:2)
set(POOLGEN_FLOOR_KNOBS_max_pool2d_backward_k3s2p1_cl partition_cells:false)
set(POOLGEN_KNOBS_max_unpool3d_k2s2p0_cl ${POOLGEN_KNOBS_max_unpool2d_k2s2p0_cl})
set(POOLGEN_KNOBS_max_pool3d_backward_k2s2p0_cl ${POOLGEN_KNOBS_max_unpool2d_k2s2p0_cl})
# The contiguous k2s2p0 gathers (1-D to 3-D; built `tiled`, cmake/PoolgenKernels.cmake) run vectors
# of cells, each cell's window unrolled into interleaved stores, with each row of cells checked
# right before its slots (cell_vectors), reading values in place: f32 i64 8x64x112x112, one
# thread, ms, gather / scatter in the same runs: pooling's gradient 1.63-1.90 / 2.23-2.43 (the
# slot-vector schedule 3.5-3.8), i32 indices 1.30 / 1.84, unpooling 1.65 / 1.9 (3.59 before); 3-D
# NCDHW gradient 2x16x32x64x64 0.57 / 0.69. One loop per stage (partition_cells:false): 32.6 ->
# 25.2 KB a kernel (AVX2 and SSE4.1) at the same speed. A row of cells writes its output rows one
# after the other (whole_rows), not side by side: on 64-byte-aligned tensors, as frameworks give
# them, the two streams of 14-line rows stalled on their stores (f32 i64 8x64x112x112, ms, one /
# two threads: unpooling 2.28-2.50 / 0.75-1.18 -> 1.22-1.37 / 0.57-0.66, pooling's gradient
# 2.86-3.03 / 0.79 -> 1.25-1.31 / 0.65; 16 bytes past the boundary 1.97 / 2.08 -> 1.47 / 1.38).
# In cache it costs 8-12% (each slot row redoes its compares), where the scatter serves.
set(POOLGEN_KNOBS_max_unpool2d_k2s2p0 cell_vectors:true,stage_cells:false,partition_cells:false,whole_rows:true)
set(POOLGEN_KNOBS_max_unpool3d_k2s2p0 ${POOLGEN_KNOBS_max_unpool2d_k2s2p0})
set(POOLGEN_KNOBS_max_pool2d_backward_k2s2p0 ${POOLGEN_KNOBS_max_unpool2d_k2s2p0})
set(POOLGEN_KNOBS_max_pool1d_backward_k2s2p0 ${POOLGEN_KNOBS_max_unpool2d_k2s2p0})
set(POOLGEN_KNOBS_max_pool3d_backward_k2s2p0 ${POOLGEN_KNOBS_max_unpool2d_k2s2p0})
# Channels-last 3-D fixed windows: row loops not split into border and interior pieces (the
# bounds tests of a row's taps are scalar, one per row) halves their code (3-D k3s2p1 f32 AVX2:
# 122 -> 60 KB) at the same speed (2x16x32x64x64 on one thread: k3s2p1 4.72 -> 4.69 ms,
# k2s2p0 2.06 -> 1.82 ms). Tasks of one output depth slice: with 8, an image of 8 or fewer
# (1x64x8x28x28 pools to 4) was one task, and two threads took one thread's time
# (poolgen_ab_bench against 8, Zen 4 VM, f32 i64, AVX-512, two threads: k2s2p0 1x64x8x28x28
# 0.56, 1x256x4x14x14 0.60, 1x16x16x32x32 0.54; k3s2p1 1x256x8x14x14 0.58, 1x64x8x14x14 0.63;
# 2x16x32x64x64 1.02 and 0.89; one thread 1.00-1.02).
set(POOLGEN_KNOBS_max_pool3d_k2s2p0_cl partition_rows:false,rows_per_task:1)
set(POOLGEN_KNOBS_max_pool3d_k3s2p1_cl partition_rows:false,rows_per_task:1)
# The contiguous general kernels (any window; 1-D above) vectorize full widths only: the halved
# vectors for rows narrower than a vector were a third to a half of their code (2-D and 3-D, f32
# and u8, AVX2: 395 -> 207 KB) and served only such rows in uncommon windows, which now run the
# scalar loop (1x64x7x7 k3s1p1 f32: 0.055 -> 0.10 ms). Channels-last keeps them: few channels would
# go scalar (1x4x56x56 k3s1p1: 6x slower) for less code (f32 and u8: 148 -> 95 KB).
# Rows narrower than a vector, which go scalar here, run vectors of planes instead where there
# are channels enough (4 vectors a task), their staged rows copied channels innermost so that
# every tap loads a dense vector (f32 i64, one thread, us: AVX2 1x64x7x7 k3s1p1 46 -> 8;
# AVX-512, whose 16 lanes left 14-wide rows scalar, 1x64x14x14 294 -> 37, 153 -> 37 on two
# threads).
set(POOLGEN_KNOBS_max_pool2d narrow_vectors:false,channel_vectors:4)
# 3-D the same for f32 only (POOLGEN_KNOBS_<family>_<value>: a value type's own knobs): f32 i64,
# one thread, us, 1x64x4x7x7 k3s1p1 741 -> 71 on AVX2, 1082 -> 69 on AVX-512, 1x64x8x14x14
# 8421 -> 605 on AVX-512 (whose 16 lanes left rows of 14 scalar). For every value type its
# copies added 410 KB to the linked example, which issue 14's 16 MB could not spare.
set(POOLGEN_KNOBS_max_pool3d narrow_vectors:false)
set(POOLGEN_KNOBS_max_pool3d_f32 channel_vectors:4)
# 2-D k3s2p1 contiguous likewise for rows of fewer than 16 outputs (planes up to 30 wide), which
# ran two halved or overlapping vectors and restaged each plane's rows (f32 i64 AVX2, us, one /
# two threads: 1x64x7x7 9.1-9.3 / 9-12 -> 3.0 / 3.0, 14x14 17 / 17 -> 8.4 / 8.5, 28x28 39 / 25
# -> 32 / 18-23; 1x64x56x56 measured 12% slower across planes, and keeps its rows). Tasks of 4
# vectors: 8 left 28x28 one task, 30 us on two threads. The AVX-512 variant (f32) never sees
# most of those rows: the runtime runs calls of rows under 12 outputs on AVX2
# (POOLGEN_AVX512_NARROW), so it goes without the vectors across planes (handed_off_below, which cmake/PoolgenKernels.cmake
# derives from that rule).
set(POOLGEN_KNOBS_max_pool2d_k3s2p1 channel_vectors:4,channel_vectors_below:16)
# Except rows of 12 to 15 on AVX-512 (f32, its only type), which a vector spanning the row serves
# better than AVX2's vectors across planes: one / two threads, us, 1x64x24x24 29-32 / 17.1 ->
# 24 / 15.7-16.2, 28x28 39-49 / 22 -> 30 / 18.7-19.1, 30x30 43 -> 33 (AVX2's exact rows of 5-7
# measured 2x slower than its vectors across planes; rows of 10 even: POOLGEN_AVX512_NARROW
# gives AVX-512 rows from 12).
set(POOLGEN_AVX512_KNOBS_max_pool2d_k3s2p1 exact_rows:12)
# Channels-last tasks are blocks of 8 output rows (2-D) or depth slices (3-D), not 64: one image
# is one task below 128 output rows otherwise, and the second thread idles (1x64x56x56 k2s2p0 f32
# AVX2: 0.031 -> 0.019 ms on two threads; one thread and 8x64x112x112 unchanged within noise).
# k2s2p0 takes blocks of 2 rows: 8 left a 14x14 image of many channels one task (VGG's last
# pooling, 1x512x14x14 f32 on two threads: i64 indices 10.0-12.1 -> 6.0-6.7 us, i32 8.2-8.9 ->
# 5.1-6.5 against XNNPACK's 7.1-7.3), and the runtime hands each thread a range of tasks
# whatever their count (parallel_for). Zen 3 VM, AVX2, us, three interleaved rounds, 8 rows ->
# 2, one / two threads: 1x64x56x56 19-20 / 11.4-11.9 -> 19-24 / 10.9-11.4, 1x256x28x28 22-25 /
# 13.1-14.7 -> 22-25 / 13.5-13.8, 8x64x112x112 (ms) 1.25-1.36 / 0.72-0.89 -> 1.22-1.36 /
# 0.73-0.86 (4 rows: 1x512x14x14 5.9-8.4 on two; 1 row: 1x64x56x56 22-25 on one).
set(POOLGEN_KNOBS_max_pool2d_cl rows_per_task:8)
# Prefetching the input rows out of cache, as NCHW does (prefetch_rows:1), measured 1.16-1.29x
# the time (Zen 4 VM, 8x64x112x112, i64 and i32 indices, one and two threads, poolgen_ab_bench).
set(POOLGEN_KNOBS_max_pool2d_k2s2p0_cl rows_per_task:2)
# 2-D k3s2p1 channels-last likewise keeps one row loop: 43 -> 30 KB of f32 AVX2 code, 31 -> 22 KB
# SSE4.1, at the same speed (f32, ms on one / two threads, two runs each: 1x64x56x56 0.131 /
# 0.078 and 0.129 / 0.086 before, 0.130 / 0.078 and 0.132 / 0.085 after; 8x64x112x112 4.13 /
# 2.07 and 4.19 / 2.30 before, 4.21 / 2.18 and 4.36 / 2.31 after).
# Tasks of 2 output rows, as 2-D k2s2p0 channels-last: with 8, an image of 7 or fewer output rows
# (1x512x14x14) was one task, and two threads took one thread's time; the runtime still hands
# each thread several rows of small calls (poolgen_ab_bench against tasks of 8, Zen 4 VM, f32
# i64, AVX-512, two threads: 1x512x14x14 0.62, 1x1024x7x7 0.59, 1x64x56x56 0.89, 1x64x112x112
# 0.92; one thread and 8x64x112x112 within noise; tools/tune.py confirmed it for AVX-512).
set(POOLGEN_KNOBS_max_pool2d_k3s2p1_cl rows_per_task:2,partition_rows:false)
# 3-D general channels-last: tasks of one depth slice, as the fixed windows (above); with 8, an
# image of 8 output slices or fewer (1x64x8x28x28 k3s1p1, 0.84 ms) was one task.
set(POOLGEN_KNOBS_max_pool3d_cl rows_per_task:1)
# 2-D k2s2p0 contiguous: rows of fewer than 4 outputs (a 7x7 plane pools to rows of 3) run
# vectors of 8 planes, not the scalar loop (1x64x7x7 f32 AVX2 on one thread, us, three
# interleaved runs each: 3.04, 3.10, 2.97 -> 1.63, 1.67, 1.57), for 3-4 KB a variant. Rows
# of 4-7 keep their halved vectors: planes measured 20-40% slower at 1x64x14x14. Tasks of 8
# vectors (64 planes): tasks of one vector made 1x64x7x7 slower on two threads than on one (1.72
# -> 3.33 us). Rows of one or two whole vectors run without their column loop (short_rows): a
# harness calling the kernel alone, f32 i64, one thread, us, medians of 15, six interleaved runs:
# AVX2 1x64x16x16 2.98-5.00 -> 2.99-4.03 (up to 20% in this VM's slower phases), 28x28
# 11.0-17.2 -> 9.9-14.0 (8-20%); SSE4.1 14x14 7.2-7.6 -> 5.7-5.8, 16x16 6.3-6.4 -> 5.9-6.1;
# other sizes unchanged. 3.7-4.1 KB a variant.
set(POOLGEN_KNOBS_max_pool2d_k2s2p0 channel_vectors:8,short_rows:true)
# f32 rows of 5 outputs up to a vector (10x10 to 31x31 planes, VGG's 14x14) get a vector each that
# spans the row exactly, not a halved vector and a second one shifted back over it: AVX2 (which
# also serves rows of 5-7 on AVX-512 CPUs, POOLGEN_AVX512_NARROW), f32 i64, one thread, Intel
# Xeon, 1x64x14x14 2.75-2.77 -> 2.15-2.18 us (exact rows of 3, against the vectors of planes:
# 0.86 -> 1.9 us; rows of 7 two at a time, unrolled: no faster); AVX-512, rows of 8-15, against
# AVX2's: 1x64x24x24 6.6-6.7 -> 3.6-3.7 us, 28x28 8.0 -> 5.9 (docs/kernels.md).
# Calls out of cache prefetch the input rows two output rows ahead (every line: schedules/
# prefetch_lines.h; the runtime's prefetch_pays decides, a flag the kernel takes): f32 i64, one
# thread, ms, Zen 4 VM, without / with: 1x64x224x224 1.36 -> 0.39, 1x64x256x256 1.62 -> 0.51,
# 4x64x320x320 11.8 -> 6.2, 8x64x112x112 1.77 -> 1.44; in cache they cost their instructions
# (1x64x56x56 20 -> 28 us, 2x64x112x112 0.17 -> 0.24 ms) and do not run (docs/kernels.md).
set(POOLGEN_KNOBS_max_pool2d_k2s2p0_f32 exact_rows:5,prefetch_rows:2)
# 3-D k2s2p0 NCDHW the same for f32 (rows of fewer than 4 outputs: planes of 7 pool to 3, as in
# C3D's last pooling), whose AVX-512 variant compiled the scalar loop's selects through mask
# registers (kmovd round trips, masked vmovss): f32 i64, one thread, us, 1x64x4x7x7 AVX-512
# 16.9 -> 3.2, AVX2 5.7 -> 2.8. 51 KB of the f32 share; the other types keep the scalar rows.
# Rows of 5 up to a vector exactly, as in 2-D: 1x64x8x10x10 20.8-21.6 -> 13.0 us, 1x64x8x14x14
# 29 -> 19-20 (AVX2), 1x32x16x24x24 63-67 -> 28-29, 1x64x8x28x28 78-89 -> 51-53 (AVX-512).
set(POOLGEN_KNOBS_max_pool3d_k2s2p0_f32 channel_vectors:8,exact_rows:5)
# Unpooling's gradient by windows: full vectors of cells, read in place, loops in one piece, each
# row of cells (channels-last: each cell) marked and checked right before it is read: a block's
# marks in a pass of their own made the kernel slower than the gather by index (8x64x112x112 f32,
# one thread: 3.35-3.39 ms against 2.38-2.89; 2.01-2.09 checked by rows). Channels-last tasks of
# 8 rows: a 1x64x56x56 call was one task.
foreach (family max_unpool2d_backward_k2s2p0 max_unpool3d_backward_k2s2p0)
  set(POOLGEN_KNOBS_${family} stage_cells:false,narrow_vectors:false,partition_cells:false,check_groups:true)
  set(POOLGEN_KNOBS_${family}_cl ${POOLGEN_KNOBS_${family}},rows_per_task:8)
endforeach ()
# NCHW: each row of cells prefetches the grad_output rows of the one three ahead, every line of
# them (schedules/prefetch_lines.h: Halide's own split fetched one line in four). Rows that start
# on a 64-byte boundary, as frameworks' tensors do, were not prefetched by the hardware: 3.75 ->
# 2.01-2.19 ms at 8x64x112x112, one thread, two rows ahead (Intel Xeon; docs/kernels.md,
# "Alignment"). Zen 4 VM, f32 i64, ms, one thread, every line, three interleaved runs, two
# / three / four rows ahead: 8x64x112x112 1.52-1.80 / 1.37-1.88 / 1.40-1.49, 4x64x320x320
# 6.2-7.8 / 6.1-7.9 / 7.0-7.3 (one line in four, six ahead: 18.2-19.5), 16x64x224x224 11.6-15.0
# / 11.9-12.4 / 11.8-13.5; six and twelve ahead slower (4x64x320x320 9.8-10.4).
set(POOLGEN_KNOBS_max_unpool2d_backward_k2s2p0 ${POOLGEN_KNOBS_max_unpool2d_backward_k2s2p0},prefetch_rows:3)
# k3s2p1 over flat planes: tasks of about 1024 outputs (a 1x64x7x7 call is one task), each
# computing its stage from the plane before its first output. 4096 (a larger stage, fewer planes
# recomputed), f32 i64, us, one / two threads: 1x64x14x14 4.5 -> 5.4, 1x64x28x28 19.6 / 11.1 ->
# 18.5 / 12.5, 8x64x28x28 156 / 86 -> 149 / 80, 1x64x7x7 1.25 -> 1.33.
set(POOLGEN_KNOBS_max_pool2d_k3s2p1_flat outputs_per_task:1024)
# A family's knobs given on the command line (-DPOOLGEN_KNOBS_<family>=..., a value type's too)
# replace the ones above: those are plain variables, which would otherwise hide the cache entry.
get_cmake_property(poolgen_cached_variables CACHE_VARIABLES)
foreach (name IN LISTS poolgen_cached_variables)
  if (name MATCHES "^POOLGEN_KNOBS_")
    set(${name} "$CACHE{${name}}")
  endif ()
endforeach ()
