#!/usr/bin/python3
"""Generate poolgen's golden vectors (tests/golden/*.txt) with PyTorch.

Usage:  /usr/bin/python3 tools/make_golden.py [OUTPUT_DIR]      (default: tests/golden)

Uses Debian's python3-torch (PyTorch 1.13) on one CPU thread, fixed seeds: running it twice
gives identical files. Only pooling cases where PyTorch 1.13's padding check (p <= k/2, raw
kernel) agrees with the dilated rule of docs/semantics.md are generated.

File format (line based, read by tests/golden.hpp). A file holds cases; each case is

    case <name>
    op pool|unpool|pool_backward|unpool_backward
    nd <1|2|3>
    kernel_size <ints>          1 or nd entries, exactly as passed to PyTorch
    stride <ints>               empty line tail = default (kernel_size)
    padding <ints>
    dilation <ints>             (pool, pool_backward)
    ceil_mode <0|1>             (pool, pool_backward)
    output_size <ints>          (unpool, unpool_backward; 0, nd or nd+2 entries)
    input_shape <ints>
    in_values <f32 bits>        pool, pool_backward: the input; unpool: the values
    in_indices <ints>           (unpool, unpool_backward)
    output_shape <ints>
    out_values <f32 bits>       (pool, unpool)
    out_indices <ints>          (pool, pool_backward)
    grad_output <bits>          (backward ops; output_shape)
    grad_input <bits>           (pool_backward: the expected gradient, input_shape)
    grad_values <bits>          (unpool_backward: the expected gradient, input_shape)
    end

f32 values are written as their IEEE-754 bit pattern in 8 hex digits (bit-exact, NaN/inf/-0.0
included). Lines starting with '#' are comments.

Typed cases (files typed_pool{1,2,3}d.txt and typed_unpool{1,2,3}d.txt) add two optional lines
right after `nd`; a case without them is f32 and contiguous, which keeps the six original files
(pool{1,2,3}d.txt, unpool{1,2,3}d.txt) unchanged:

    dtype <f32|f64|f16|bf16|i8|u8|i16|i32|i64>     default f32
    layout <contiguous|channels_last>               default contiguous

Values (in_values, out_values) are then the dtype's bit pattern as one unsigned integer in hex,
2, 4, 8 or 16 digits per element (i8 -1 is `ff`, f16 1.0 is `3c00`). Data is always written in
logical row-major (N, C, spatial...) order; `layout` says which memory format the tensors had
when PyTorch computed the case: `channels_last` is torch.channels_last in 2-D,
torch.channels_last_3d in 3-D and, in 1-D, an (N, C, L) view x.transpose(1, 2) of a contiguous
(N, L, C) tensor. (PyTorch 1.13's CPU max_pool3d / max_unpool3d accept channels_last_3d input
but compute in contiguous memory; max_pool1d/2d and max_unpool2d have channels-last kernels.)

What PyTorch 1.13 CPU computes natively: f32 and f64 everything; bf16 max_pool1d/2d (both
layouts). Everything else raises "not implemented", so those cases are computed with PyTorch on
another dtype that represents them exactly and mapped back; such a case carries a comment line
`# computed via <dtype> ...`:
- f16 pooling, bf16 3-D pooling: via f32 (widening is exact, max is exact, narrowing back is
  exact; an empty window's -inf stays -inf).
- integer pooling (i8, u8, i16, i32, i64): via f64 on order-preserving ranks: each value is
  replaced by its rank among the tensor's distinct values (small integers, exact in f64), so
  comparisons, ties and therefore indices are PyTorch's own; ranks map back to the values, and
  an empty window's -inf maps to the type's lowest value (docs/semantics.md: integer pooling starts
  from the type's lowest value). This keeps every i64 exact, 2^63-1 included. For i8..i32 the
  script checks that pooling a plain f64 cast gives the same.
- unpooling of f16, bf16 and integers: via f64 on positions: PyTorch unpools 1, 2, ..., n (the
  values' flat positions, exact in f64) with the case's indices, and the output takes the value
  at the position that landed there, or zero where none did. So PyTorch decides which input
  wins every slot, and every bit pattern (NaN payloads included) is moved exactly.
The native bf16 pooling cases are checked against the via-f32 computation too.

Backward cases (files pool_backward{1,2,3}d.txt and unpool_backward{1,2,3}d.txt; every case
has `dtype` (f32, f64, f16 or bf16: the gradient types) and `layout` lines; every tensor of a
channels-last case was channels-last):
- pool_backward: the autograd of F.max_pool{1,2,3}d(return_indices=True). in_values is the
  pooling input and out_indices PyTorch's forward indices of it (computed as the typed pooling
  cases are); grad_output is the gradient given and grad_input the one expected. PyTorch's
  backward is the ATen op autograd calls (max_pool2d/3d_with_indices_backward; 1-D through 2-D,
  as max_pool1d does); where no index lies outside the input plane, the script checks that
  autograd itself gives the same bits. An empty window's index (dilation with padding) can lie
  outside the input plane: 1.13 then adds its gradient outside the plane (heap corruption for
  the last plane), so those indices are passed to the backward as -1, which ATen skips, while
  the file keeps the real indices (docs/semantics.md: such a gradient is dropped). An empty
  window's index inside the plane but outside its window is added like any other.
  The summation rule (docs/semantics.md, "Gradients"): grad_input is zero; within each (n, c)
  plane the gradients are added in ascending output order at the input positions their indices
  name, in the dtype's precision (f16 and bf16: widen to f32, add, round to nearest even after
  every addition). The script computes every case by this rule as well (torch's own .float(),
  .half() and .bfloat16() conversions) and asserts that it equals PyTorch's result wherever
  1.13 has the backward: f32 and f64 in every rank, bf16 in 1-D and 2-D. It also counts, per
  dtype, the native cases that descending order, and one rounding of a wider sum (f64 for f32,
  f32 for bf16), would get wrong, prints the counts and asserts that each is nonzero: the files
  tell the rule from those rivals. f16 (every rank) and bf16 3-D have no backward in 1.13 on
  CPU: those cases are computed by the rule and carry `# computed via f32 (forward); backward by
  the summation rule ...`.
- unpool_backward: the autograd of F.max_unpool{1,2,3}d, a gather: grad_values[n, c, i] =
  grad_output[n, c].flat[in_indices[n, c, i]]. f32 and f64 come from autograd (checked against
  torch.gather); 1.13 has no f16/bf16 max_unpool on CPU, so those cases are torch.gather's
  (`# computed via torch.gather ...`), which moves bit patterns exactly. Indices are valid (an
  invalid one is an error, which tests/errors/ covers).
"""

import os
import struct
import sys

import torch
import torch.nn.functional as F

torch.set_num_threads(1)
torch.use_deterministic_algorithms(False)

NAN = float("nan")
INF = float("inf")


def numel(shape):
    n = 1
    for e in shape:
        n *= e
    return n


def bits(t):
    out = []
    for v in t.reshape(-1).tolist():
        out.append("%08x" % struct.unpack("<I", struct.pack("<f", v))[0])
    return " ".join(out)


def ints(v):
    if v is None:
        return ""
    if isinstance(v, int):
        v = [v]
    return " ".join(str(int(x)) for x in v)


def line(key, val):
    return (key + " " + val).rstrip() + "\n"


def pool_params(k, s, p, d, ceil):
    """The window lines of a pooling case, as passed to PyTorch."""
    return (line("kernel_size", ints(k)) + line("stride", ints(s)) + line("padding", ints(p)) +
            line("dilation", ints(d)) + "ceil_mode %d\n" % int(ceil))


POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
UNPOOL = {1: F.max_unpool1d, 2: F.max_unpool2d, 3: F.max_unpool3d}


def as_list(v, nd):
    if isinstance(v, int):
        return [v] * nd
    if len(v) == 1:
        return list(v) * nd
    return list(v)


def check_pool_params(nd, k, s, p, d):
    """Generate only where PyTorch 1.13 and docs/semantics.md agree on the padding check."""
    kk, pp, dd = as_list(k, nd), as_list(p, nd), as_list(d, nd)
    for i in range(nd):
        raw = kk[i] // 2
        dil = (dd[i] * (kk[i] - 1) + 1) // 2
        ours = raw if nd == 3 else dil
        assert pp[i] <= raw and pp[i] <= ours, (nd, k, p, d)


class Writer:
    def __init__(self):
        self.files = {}
        self.names = set()

    def add(self, fname, text):
        self.files.setdefault(fname, []).append(text)

    def pool(self, name, nd, x, k, s=None, p=0, d=1, ceil=False):
        assert name not in self.names, name
        self.names.add(name)
        check_pool_params(nd, k, s, p, d)
        kw = dict(kernel_size=k, padding=p, dilation=d, ceil_mode=ceil, return_indices=True)
        if s is not None:
            kw["stride"] = s
        vals, idx = POOL[nd](x, **kw)
        t = "case %s\nop pool\nnd %d\n" % (name, nd)
        t += pool_params(k, s, p, d, ceil)
        t += line("input_shape", ints(x.shape))
        t += line("in_values", bits(x))
        t += line("output_shape", ints(vals.shape))
        t += line("out_values", bits(vals))
        t += line("out_indices", ints(idx.reshape(-1).tolist()))
        t += "end\n"
        self.add("pool%dd.txt" % nd, t)
        return vals, idx

    def unpool(self, name, nd, vals, idx, k, s=None, p=0, output_size=None):
        assert name not in self.names, name
        self.names.add(name)
        kw = dict(kernel_size=k, padding=p)
        if s is not None:
            kw["stride"] = s
        if output_size is not None:
            kw["output_size"] = list(output_size)
        out = UNPOOL[nd](vals, idx, **kw)
        t = "case %s\nop unpool\nnd %d\n" % (name, nd)
        t += line("kernel_size", ints(k))
        t += line("stride", ints(s))
        t += line("padding", ints(p))
        t += line("output_size", ints(output_size))
        t += line("input_shape", ints(vals.shape))
        t += line("in_values", bits(vals))
        t += line("in_indices", ints(idx.reshape(-1).tolist()))
        t += line("output_shape", ints(out.shape))
        t += line("out_values", bits(out))
        t += "end\n"
        self.add("unpool%dd.txt" % nd, t)
        return out

    def write(self, outdir):
        os.makedirs(outdir, exist_ok=True)
        for fname, cases in sorted(self.files.items()):
            with open(os.path.join(outdir, fname), "w") as f:
                f.write("# Generated by tools/make_golden.py with PyTorch %s; do not edit.\n"
                        % torch.__version__)
                f.writelines(cases)


def rand(g, shape):
    return torch.randn(shape, generator=g, dtype=torch.float32)


def choice(g, shape, options):
    opts = torch.tensor(options, dtype=torch.float32)
    i = torch.randint(0, len(options), shape, generator=g)
    return opts[i]


def sprinkle(g, x, value, count):
    x = x.clone()
    flat = x.view(-1)
    pos = torch.randperm(flat.numel(), generator=g)[:count]
    flat[pos] = value
    return x


def spatial(nd, extents2, extents3, extents1):
    return {1: extents1, 2: extents2, 3: extents3}[nd]


def pool_cases(w, nd, g):
    # Shapes per rank: (N, C, spatial...), small enough to keep the files small.
    sp = {1: [11], 2: [7, 6], 3: [5, 4, 5]}[nd]
    sp_even = {1: [12], 2: [6, 6], 3: [4, 4, 6]}[nd]
    nc = {1: [2, 2], 2: [2, 2], 3: [1, 2]}[nd]
    full = nc + sp
    P = "p%dd_" % nd

    w.pool(P + "plain_k3s1", nd, rand(g, full), 3, 1)
    w.pool(P + "plain_k1", nd, rand(g, [1, 2] + sp), 1)
    w.pool(P + "k2s2_even", nd, rand(g, nc + sp_even), 2, 2)
    w.pool(P + "k2s2_odd", nd, rand(g, full), 2, 2)
    w.pool(P + "k2_default_stride", nd, rand(g, full), 2)
    w.pool(P + "k3s2p1_odd", nd, rand(g, full), 3, 2, 1)
    w.pool(P + "k3s2p1_even", nd, rand(g, nc + sp_even), 3, 2, 1)
    w.pool(P + "k2s2_odd_ceil", nd, rand(g, full), 2, 2, 0, 1, True)
    w.pool(P + "k3s2p1_even_ceil", nd, rand(g, nc + sp_even), 3, 2, 1, 1, True)
    w.pool(P + "k3s2p1_odd_ceil", nd, rand(g, full), 3, 2, 1, 1, True)
    # ceil_mode where the last window would start in the right padding and is dropped:
    # in=5, k=2, s=2, p=1 -> 4 windows by the formula, the last starts at 6-1=5 >= in: 3 remain.
    drop = {1: [5], 2: [5, 7], 3: [5, 5, 3]}[nd]
    vals, _ = w.pool(P + "ceil_drop_last", nd, rand(g, [1, 2] + drop), 2, 2, 1, 1, True)
    assert list(vals.shape[2:])[0] == 3, vals.shape
    w.pool(P + "k3s3_ceil", nd, rand(g, full), 3, 3, 0, 1, True)
    # Dilation with padding.
    w.pool(P + "k3s1p1d2", nd, rand(g, full), 3, 1, 1, 2)
    w.pool(P + "k2s1p1d2_ceil", nd, rand(g, full), 2, 1, 1, 2, True)
    w.pool(P + "k3s2p1d3", nd, rand(g, [1, 2] + [x + 3 for x in sp]), 3, 2, 1, 3)
    # Empty windows: k=2, p=1, d = in+1 in one dimension: both taps fall outside, PyTorch gives
    # -inf and the stepped start index (outside the plane).
    if nd == 1:
        w.pool(P + "empty_window", nd, rand(g, [2, 3, 3]), 2, 1, 1, 4)
        w.pool(P + "empty_window_s2", nd, rand(g, [1, 2, 4]), 2, 2, 1, 5)
    elif nd == 2:
        w.pool(P + "empty_window_h", nd, rand(g, [1, 2, 3, 6]), [2, 2], [1, 2], [1, 0], [4, 1])
        w.pool(P + "empty_window_w", nd, rand(g, [1, 2, 5, 2]), [3, 2], [2, 1], [1, 1], [1, 3])
        w.pool(P + "empty_window_hw", nd, rand(g, [2, 3, 3]), 2, 1, 1, 4)
    else:
        w.pool(P + "empty_window_d", nd, rand(g, [1, 2, 3, 4, 5]), [2, 2, 2], 1, [1, 0, 1],
               [4, 1, 2])
        w.pool(P + "empty_window_w", nd, rand(g, [1, 1, 4, 3, 2]), [2, 2, 2], [2, 1, 1],
               [1, 1, 1], [1, 2, 3])
    # NaN: single NaNs, and several NaNs per window (index of the last NaN).
    w.pool(P + "nan_single", nd, sprinkle(g, rand(g, full), NAN, 3), 3, 2, 1)
    w.pool(P + "nan_many", nd, sprinkle(g, rand(g, full), NAN, full[0] * full[1] * 4), 3, 1)
    w.pool(P + "nan_many_d2", nd, sprinkle(g, rand(g, full), NAN, full[0] * full[1] * 3), 2, 1, 1,
           2)
    w.pool(P + "nan_and_inf", nd, choice(g, full, [NAN, INF, -INF, 1.0]), 2, 2)
    # -inf everywhere (index of the first in-bounds tap), also with padding.
    ninf = torch.full(full, -INF)
    w.pool(P + "all_neg_inf", nd, ninf, 2, 2)
    w.pool(P + "all_neg_inf_k3s2p1", nd, ninf, 3, 2, 1)
    w.pool(P + "neg_inf_mixed_d2", nd, choice(g, full, [-INF, -INF, -INF, 0.5]), 3, 1, 1, 2)
    # Ties: first maximum in scan order wins.
    w.pool(P + "ties_k3s1", nd, choice(g, full, [0.0, 1.0, 2.0]), 3, 1)
    w.pool(P + "ties_k3s2p1", nd, choice(g, full, [1.0, 2.0]), 3, 2, 1)
    w.pool(P + "ties_constant", nd, torch.full(full, 3.5), 3, 2, 1, 1, True)
    # -0.0 vs 0.0 (equal: the first wins, sign preserved).
    w.pool(P + "signed_zero", nd, choice(g, full, [-0.0, 0.0]), 2, 1)
    w.pool(P + "signed_zero_neg", nd, choice(g, full, [-0.0, 0.0, -1.0]), 3, 2, 1)
    # Batch-less input.
    w.pool(P + "batchless_k3s2p1", nd, rand(g, [3] + sp), 3, 2, 1)
    w.pool(P + "batchless_k2s2_ceil", nd, rand(g, [2] + sp), 2, 2, 0, 1, True)
    # Non-square parameters.
    if nd >= 2:
        k = [2, 3, 2][:nd] if nd == 2 else [2, 3, 2]
        s = [1, 2, 2][:nd]
        p = [1, 0, 1][:nd]
        d = [2, 1, 1][:nd]
        w.pool(P + "nonsquare", nd, rand(g, full), k, s, p, d)
        w.pool(P + "nonsquare_ceil", nd, rand(g, full), k, s, p, d, True)
        w.pool(P + "nonsquare_k", nd, rand(g, full), [3, 1, 2][:nd], [2, 1, 2][:nd])
    else:
        w.pool(P + "k4s3p2", nd, rand(g, full), 4, 3, 2)
        w.pool(P + "k5s2p2d2_ceil", nd, rand(g, full), 5, 2, 2, 2, True)
    w.pool(P + "big_stride", nd, rand(g, full), 2, 4, 1)


def unpool_cases(w, nd, g):
    sp = {1: [11], 2: [7, 6], 3: [5, 4, 5]}[nd]
    sp_even = {1: [12], 2: [6, 6], 3: [4, 4, 6]}[nd]
    U = "u%dd_" % nd
    nc = {1: [2, 2], 2: [2, 2], 3: [1, 2]}[nd]
    POOLF = POOL[nd]

    # Indices from pooling, k2s2 (even: default size gives the input shape back).
    x = rand(g, nc + sp_even)
    v, i = POOLF(x, 2, 2, return_indices=True)
    w.unpool(U + "from_pool_k2s2", nd, v, i, 2, 2)
    w.unpool(U + "from_pool_k2s2_default_stride", nd, v, i, 2)
    # Odd input: output_size recovers the odd extents (upper edge region).
    x = rand(g, nc + sp)
    v, i = POOLF(x, 2, 2, return_indices=True)
    w.unpool(U + "from_pool_k2s2_odd_outsize", nd, v, i, 2, 2, 0, list(x.shape[2:]))
    w.unpool(U + "from_pool_k2s2_odd_outsize_full", nd, v, i, 2, 2, 0, list(x.shape))
    # k3s2p1: overlapping windows, the same slot named by several cells (same value).
    for tag, shape in (("odd", sp), ("even", sp_even)):
        x = choice(g, [2, 2] + shape, [0.0, 1.0, 2.0, 3.0])
        v, i = POOLF(x, 3, 2, 1, return_indices=True)
        if all((n - 1) * 2 - 2 + 3 == e for n, e in zip(v.shape[2:], shape)):
            w.unpool(U + "from_pool_k3s2p1_" + tag, nd, v, i, 3, 2, 1)
        w.unpool(U + "from_pool_k3s2p1_" + tag + "_outsize", nd, v, i, 3, 2, 1,
                 list(x.shape[2:]))
    # ceil mode pooling.
    x = rand(g, [1, 2] + sp)
    v, i = POOLF(x, 2, 2, ceil_mode=True, return_indices=True)
    w.unpool(U + "from_pool_k2s2_ceil", nd, v, i, 2, 2)
    # Random indices with duplicates (latest in input order wins), default size.
    in_sp = {1: [6], 2: [3, 4], 3: [2, 3, 2]}[nd]
    k, s, p = 3, 2, 1
    out_sp = [(n - 1) * s - 2 * p + k for n in in_sp]
    plane = numel(out_sp)
    vals = rand(g, nc + in_sp)
    idx = torch.randint(0, plane, nc + in_sp, generator=g, dtype=torch.int64)
    w.unpool(U + "random_dups", nd, vals, idx, k, s, p)
    # Many duplicates: indices from a tiny range.
    idx2 = torch.randint(0, min(3, plane), nc + in_sp, generator=g, dtype=torch.int64)
    w.unpool(U + "random_many_dups", nd, vals, idx2, k, s, p)
    # output_size at both edges of the allowed range (default - s + 1, default + s - 1).
    for edge, delta in (("lo", -(s - 1)), ("hi", s - 1)):
        osz = [e + delta for e in out_sp]
        pl = numel(osz)
        idx3 = torch.randint(0, pl, nc + in_sp, generator=g, dtype=torch.int64)
        w.unpool(U + "outsize_" + edge, nd, vals, idx3, k, s, p, osz)
        w.unpool(U + "outsize_full_" + edge, nd, vals, idx3, k, s, p, [7, 9] + osz)
    # Stride 3 edges: a range of 5 sizes.
    k3, s3 = 2, 3
    out3 = [(n - 1) * s3 + k3 for n in in_sp]
    for delta in (-2, 2):
        osz = [e + delta for e in out3]
        pl = numel(osz)
        idx4 = torch.randint(0, pl, [1, 2] + in_sp, generator=g, dtype=torch.int64)
        w.unpool(U + "s3_outsize_%s" % ("lo" if delta < 0 else "hi"), nd, rand(g, [1, 2] + in_sp), idx4, k3, s3, 0, osz)
    # Special values are moved, not interpreted.
    sv = choice(g, [1, 2] + in_sp, [NAN, INF, -INF, -0.0, 0.0, 1.5])
    idx5 = torch.randint(0, plane, [1, 2] + in_sp, generator=g, dtype=torch.int64)
    w.unpool(U + "special_values", nd, sv, idx5, k, s, p)
    # Batch-less.
    x = rand(g, [3] + sp_even)
    v, i = POOLF(x, 2, 2, return_indices=True)
    w.unpool(U + "batchless_from_pool", nd, v, i, 2, 2)
    idx6 = torch.randint(0, plane, [2] + in_sp, generator=g, dtype=torch.int64)
    w.unpool(U + "batchless_random", nd, rand(g, [2] + in_sp), idx6, k, s, p)
    # Non-square parameters.
    if nd >= 2:
        kk, ss, pp = [2, 3, 1][:nd], [3, 2, 1][:nd], [1, 0, 0][:nd]
        outs = [(n - 1) * ss[j] - 2 * pp[j] + kk[j] for j, n in enumerate(in_sp)]
        pl = numel(outs)
        idx7 = torch.randint(0, pl, [1, 2] + in_sp, generator=g, dtype=torch.int64)
        w.unpool(U + "nonsquare", nd, rand(g, [1, 2] + in_sp), idx7, kk, ss, pp)


# ---------------------------------------------------------------------------------------------
# Typed cases: every value dtype, contiguous and channels-last.

DTYPES = ["f32", "f64", "f16", "bf16", "i8", "u8", "i16", "i32", "i64"]
TORCH_DTYPE = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
               "bf16": torch.bfloat16, "i8": torch.int8, "u8": torch.uint8, "i16": torch.int16,
               "i32": torch.int32, "i64": torch.int64}
FLOATS = ("f32", "f64", "f16", "bf16")
# The integer type of the same width whose bits are written.
BITS_VIEW = {"f32": torch.int32, "f64": torch.int64, "f16": torch.int16, "bf16": torch.int16,
             "i8": torch.uint8, "u8": torch.uint8, "i16": torch.int16, "i32": torch.int32,
             "i64": torch.int64}
WIDTH = {"f32": 4, "f64": 8, "f16": 2, "bf16": 2, "i8": 1, "u8": 1, "i16": 2, "i32": 4, "i64": 8}


def int_range(dt):
    info = torch.iinfo(TORCH_DTYPE[dt])
    return info.min, info.max


def typed_bits(t, dt):
    """Hex bit patterns of t's elements in logical row-major order."""
    flat = t.reshape(-1).contiguous().view(BITS_VIEW[dt])
    mask = (1 << (8 * WIDTH[dt])) - 1
    fmt = "%%0%dx" % (2 * WIDTH[dt])
    return " ".join(fmt % (v & mask) for v in flat.tolist())


def to_layout(t, nd, layout):
    """t (logical shape (N, C, spatial...)) in the memory format `layout`."""
    if layout == "contiguous":
        return t.contiguous()
    assert t.dim() == nd + 2, "channels-last cases need a batch dimension"
    if nd == 1:
        r = t.transpose(1, 2).contiguous().transpose(1, 2)
    elif nd == 2:
        r = t.contiguous(memory_format=torch.channels_last)
    else:
        r = t.contiguous(memory_format=torch.channels_last_3d)
    assert r.stride(1) == 1 or r.shape[1] == 1, r.stride()
    assert r.stride(-1) == r.shape[1] or r.shape[-1] == 1, r.stride()
    return r


def same_bits(a, b, dt):
    """Bit-identical, any NaN equal to any NaN."""
    if a.shape != b.shape:
        return False
    if dt in FLOATS:
        na, nb = torch.isnan(a.float()), torch.isnan(b.float())
        if not torch.equal(na, nb):
            return False
        a, b = a[~na], b[~nb]
    return torch.equal(a.contiguous().view(BITS_VIEW[dt]), b.contiguous().view(BITS_VIEW[dt]))


def pool_native(nd, dt):
    return dt in ("f32", "f64") or (dt == "bf16" and nd in (1, 2))


def run_pool(nd, x, dt, layout, kw):
    """PyTorch's max pooling of x (dtype dt) in `layout`: (values, indices, via-comment)."""
    f = POOL[nd]
    if pool_native(nd, dt):
        v, i = f(to_layout(x, nd, layout), **kw)
        if dt == "bf16":  # cross-check the native kernel against the exact f32 computation
            v2, i2 = f(to_layout(x.float(), nd, layout), **kw)
            assert torch.equal(i, i2) and same_bits(v, v2.to(torch.bfloat16), dt), kw
        return v, i, None
    if dt in FLOATS:
        v, i = f(to_layout(x.float(), nd, layout), **kw)
        return v.to(TORCH_DTYPE[dt]), i, "f32"
    lo, _ = int_range(dt)
    uniq = torch.unique(x.reshape(-1), sorted=True)
    ranks = torch.searchsorted(uniq, x).to(torch.float64)
    v, i = f(to_layout(ranks, nd, layout), **kw)
    empty = torch.isinf(v)
    assert bool((v[empty] < 0).all())
    out = uniq[torch.where(empty, torch.zeros_like(v), v).to(torch.int64)]
    out[empty] = lo
    out = out.to(TORCH_DTYPE[dt])
    if dt != "i64":  # a plain f64 cast is exact for these: it must agree
        v2, i2 = f(to_layout(x.to(torch.float64), nd, layout), **kw)
        v2 = torch.where(torch.isinf(v2), torch.full_like(v2, lo), v2).to(TORCH_DTYPE[dt])
        assert torch.equal(i, i2) and torch.equal(out, v2), kw
    return out, i, "f64 (order-preserving ranks)"


def run_unpool(nd, vals, idx, dt, layout, kw):
    """PyTorch's max unpooling of vals (dtype dt) in `layout`: (output, via-comment)."""
    f = UNPOOL[nd]
    if dt in ("f32", "f64"):
        return f(to_layout(vals, nd, layout), to_layout(idx, nd, layout), **kw), None
    n = vals.numel()
    pos = torch.arange(1, n + 1, dtype=torch.float64).reshape(vals.shape)
    p = f(to_layout(pos, nd, layout), to_layout(idx, nd, layout), **kw)
    assert bool((p == p.round()).all())
    p = p.to(torch.int64)
    src = torch.cat([torch.zeros(1, dtype=vals.dtype), vals.reshape(-1)])
    return src[p.reshape(-1)].reshape(p.shape), "f64 (positions)"


def typed_header(name, op, nd, dt, layout, via):
    t = "case %s\n" % name
    if via:
        t += "# computed via %s\n" % via
    t += "op %s\nnd %d\ndtype %s\nlayout %s\n" % (op, nd, dt, layout)
    return t


def typed_pool(w, name, nd, dt, layout, x, k, s=None, p=0, d=1, ceil=False):
    assert name not in w.names, name
    w.names.add(name)
    check_pool_params(nd, k, s, p, d)
    assert x.dtype == TORCH_DTYPE[dt]
    kw = dict(kernel_size=k, padding=p, dilation=d, ceil_mode=ceil, return_indices=True)
    if s is not None:
        kw["stride"] = s
    vals, idx, via = run_pool(nd, x, dt, layout, kw)
    t = typed_header(name, "pool", nd, dt, layout, via)
    t += pool_params(k, s, p, d, ceil)
    t += line("input_shape", ints(x.shape))
    t += line("in_values", typed_bits(x, dt))
    t += line("output_shape", ints(vals.shape))
    t += line("out_values", typed_bits(vals, dt))
    t += line("out_indices", ints(idx.reshape(-1).tolist()))
    t += "end\n"
    w.add("typed_pool%dd.txt" % nd, t)
    return vals.contiguous(), idx.contiguous()


def typed_unpool(w, name, nd, dt, layout, vals, idx, k, s=None, p=0, output_size=None):
    assert name not in w.names, name
    w.names.add(name)
    assert vals.dtype == TORCH_DTYPE[dt]
    kw = dict(kernel_size=k, padding=p)
    if s is not None:
        kw["stride"] = s
    if output_size is not None:
        kw["output_size"] = list(output_size)
    out, via = run_unpool(nd, vals, idx, dt, layout, kw)
    t = typed_header(name, "unpool", nd, dt, layout, via)
    t += line("kernel_size", ints(k))
    t += line("stride", ints(s))
    t += line("padding", ints(p))
    t += line("output_size", ints(output_size))
    t += line("input_shape", ints(vals.shape))
    t += line("in_values", typed_bits(vals, dt))
    t += line("in_indices", ints(idx.reshape(-1).tolist()))
    t += line("output_shape", ints(out.shape))
    t += line("out_values", typed_bits(out, dt))
    t += "end\n"
    w.add("typed_unpool%dd.txt" % nd, t)
    return out


def pick(g, shape, options, dt):
    """Elements drawn from `options` (python numbers), as dtype dt."""
    if dt in FLOATS:
        opts = torch.tensor(options, dtype=torch.float64).to(TORCH_DTYPE[dt])
    else:
        opts = torch.tensor(options, dtype=torch.int64).to(TORCH_DTYPE[dt])
    return opts[torch.randint(0, len(options), shape, generator=g)]


def typed_rand(g, shape, dt):
    """Random values with plenty of ties."""
    if dt in FLOATS:
        # Quarters in [-8, 8): exact in every float type, ties frequent.
        q = torch.randint(-32, 32, shape, generator=g).to(torch.float64) / 4
        return q.to(TORCH_DTYPE[dt])
    lo, hi = int_range(dt)
    if dt == "i64":
        r = torch.randint(-2 ** 63, 2 ** 63 - 1, shape, generator=g, dtype=torch.int64)
    else:
        r = torch.randint(lo, hi + 1, shape, generator=g, dtype=torch.int64)
    # Half the elements from a small set, so windows tie.
    small = pick(g, shape, [lo + 1, -7 if lo < 0 else 7, 0, 3, hi - 1], "i64")
    coin = torch.randint(0, 2, shape, generator=g).bool()
    return torch.where(coin, small, r).to(TORCH_DTYPE[dt])


def specials(dt):
    if dt in FLOATS:
        fi = torch.finfo(TORCH_DTYPE[dt])
        sub = float(fi.tiny) * float(fi.eps)  # the smallest subnormal: no flushing to zero
        return [NAN, INF, -INF, -0.0, 0.0, float(fi.max), float(fi.min), float(fi.tiny), sub, -sub]
    lo, hi = int_range(dt)
    return [lo, hi, lo, hi, lo + 1, hi - 1]


def typed_special(g, shape, dt, frac=5):
    """Random values with about one in `frac` elements special (NaN, +-inf, +-0, extremes and
    +-the smallest subnormal for floats; the lowest and highest values for integers)."""
    x = typed_rand(g, shape, dt)
    sp = pick(g, shape, specials(dt), dt)
    coin = torch.randint(0, frac, shape, generator=g) == 0
    return torch.where(coin, sp, x)


def typed_lowest(shape, dt):
    if dt in FLOATS:
        return torch.full(shape, -INF, dtype=torch.float64).to(TORCH_DTYPE[dt])
    return torch.full(shape, int_range(dt)[0], dtype=TORCH_DTYPE[dt])



def typed_empty_window(w, P, nd, dt, c, g):
    """Dilation with padding: some windows have no tap in bounds (value lowest, index the start)."""
    if nd == 1:
        typed_pool(w, P + "empty_window", nd, dt, c, typed_special(g, [2, 3, 3], dt), 2, 1, 1, 4)
    elif nd == 2:
        typed_pool(w, P + "empty_window", nd, dt, c, typed_special(g, [1, 2, 3, 6], dt), [2, 2],
                   [1, 2], [1, 0], [4, 1])
    else:
        typed_pool(w, P + "empty_window", nd, dt, c, typed_special(g, [1, 2, 3, 4, 5], dt),
                   [2, 2, 2], 1, [1, 0, 1], [4, 1, 2])

def typed_pool_cases(w, nd, dt, g):
    P = "t%dd_%s_" % (nd, dt)
    sp = {1: [13], 2: [7, 6], 3: [3, 4, 4]}[nd]
    nc = {1: [2, 2], 2: [1, 2], 3: [1, 2]}[nd]
    full = nc + sp
    small = [1, 2] + {1: [9], 2: [5, 4], 3: [3, 3, 4]}[nd]
    # Vector tails: 37 along the innermost dimension (18 or 19 outputs).
    wide = {1: [1, 2, 37], 2: [1, 1, 3, 37], 3: [1, 1, 2, 2, 37]}[nd]
    wide_d2 = {1: [1, 2, 37], 2: [1, 1, 3, 37], 3: [1, 1, 3, 3, 21]}[nd]
    c = "contiguous"
    typed_pool(w, P + "ties_k3s1", nd, dt, c, typed_rand(g, full, dt), 3, 1)
    typed_pool(w, P + "special_k3s1p1", nd, dt, c, typed_special(g, full, dt), 3, 1, 1)
    typed_pool(w, P + "k2s2p0_special", nd, dt, c, typed_special(g, full, dt), 2, 2)
    typed_pool(w, P + "k3s2p1_special", nd, dt, c, typed_special(g, full, dt), 3, 2, 1)
    typed_pool(w, P + "k2s2p0_wide", nd, dt, c, typed_special(g, wide, dt, 9), 2, 2)
    typed_pool(w, P + "k3s2p1_wide", nd, dt, c, typed_special(g, wide, dt, 9), 3, 2, 1)
    typed_pool(w, P + "k3s1p1d2_wide", nd, dt, c, typed_special(g, wide_d2, dt, 9), 3, 1, 1, 2)
    typed_pool(w, P + "k3s2p1_ceil", nd, dt, c, typed_special(g, full, dt), 3, 2, 1, 1, True)
    drop = {1: [5], 2: [5, 7], 3: [5, 5, 3]}[nd]
    typed_pool(w, P + "k2s2p1_ceil_drop", nd, dt, c, typed_rand(g, [1, 2] + drop, dt), 2, 2, 1, 1,
               True)
    typed_pool(w, P + "k3s2p1d2", nd, dt, c, typed_special(g, full, dt), 3, 2, 1, 2)
    typed_empty_window(w, P, nd, dt, c, g)
    typed_pool(w, P + "all_lowest_k3s2p1", nd, dt, c, typed_lowest(small, dt), 3, 2, 1)
    typed_pool(w, P + "extremes_k2s1", nd, dt, c, pick(g, small, specials(dt)[:3], dt), 2, 1)
    typed_pool(w, P + "batchless_k3s2p1", nd, dt, c, typed_special(g, small[1:], dt), 3, 2, 1)

    c = "channels_last"
    P = "t%dd_%s_cl_" % (nd, dt)
    ncl = {1: [2, 5], 2: [1, 3], 3: [1, 3]}[nd]
    spl = {1: [9], 2: [5, 6], 3: [3, 3, 4]}[nd]
    fcl = ncl + spl
    wcl = {1: [1, 37, 4], 2: [1, 19, 3, 3], 3: [1, 19, 2, 2, 3]}[nd]  # channel tails
    typed_pool(w, P + "k2s2p0", nd, dt, c, typed_special(g, fcl, dt), 2, 2)
    typed_pool(w, P + "k3s2p1", nd, dt, c, typed_special(g, fcl, dt), 3, 2, 1)
    typed_pool(w, P + "k3s1p1d2", nd, dt, c, typed_special(g, fcl, dt), 3, 1, 1, 2)
    typed_pool(w, P + "k3s2p0_ceil", nd, dt, c, typed_special(g, fcl, dt), 3, 2, 0, 1, True)
    typed_pool(w, P + "k3s2p1_wide_c", nd, dt, c, typed_special(g, wcl, dt, 9), 3, 2, 1)
    typed_pool(w, P + "k2s2p0_wide_c", nd, dt, c, typed_special(g, wcl, dt, 9), 2, 2)
    typed_empty_window(w, P, nd, dt, c, g)
    typed_pool(w, P + "all_lowest_k3s2p1", nd, dt, c, typed_lowest(ncl + [3] * nd, dt), 3, 2, 1)


def typed_unpool_cases(w, nd, dt, g):
    U = "tu%dd_%s_" % (nd, dt)
    sp = {1: [13], 2: [7, 6], 3: [3, 4, 5]}[nd]
    sp_even = {1: [12], 2: [6, 4], 3: [2, 4, 4]}[nd]
    nc = {1: [2, 2], 2: [1, 2], 3: [1, 2]}[nd]
    wide = {1: [1, 2, 37], 2: [1, 1, 3, 37], 3: [1, 1, 2, 2, 37]}[nd]
    in_sp = {1: [6], 2: [3, 4], 3: [2, 3, 2]}[nd]
    pk = dict(return_indices=True)

    for layout, U, ncs, wsh in (("contiguous", U, nc, wide),
                                ("channels_last", "tu%dd_%s_cl_" % (nd, dt),
                                 {1: [2, 5], 2: [1, 3], 3: [1, 3]}[nd],
                                 {1: [1, 37, 4], 2: [1, 19, 3, 3], 3: [1, 19, 2, 2, 3]}[nd])):
        # Indices from a real pooling (the values of the pooling too).
        x = typed_special(g, ncs + sp_even, dt)
        v, i, _ = run_pool(nd, x, dt, layout, dict(kernel_size=2, stride=2, **pk))
        typed_unpool(w, U + "from_pool_k2s2", nd, dt, layout, v.contiguous(), i.contiguous(), 2, 2)
        x = typed_special(g, ncs + sp, dt)
        v, i, _ = run_pool(nd, x, dt, layout, dict(kernel_size=3, stride=2, padding=1, **pk))
        typed_unpool(w, U + "from_pool_k3s2p1_outsize", nd, dt, layout, v.contiguous(),
                     i.contiguous(), 3, 2, 1, list(x.shape[2:]))
        x = typed_special(g, wsh, dt, 9)
        v, i, _ = run_pool(nd, x, dt, layout, dict(kernel_size=2, stride=2, ceil_mode=True, **pk))
        typed_unpool(w, U + "from_pool_k2s2_ceil_wide", nd, dt, layout, v.contiguous(),
                     i.contiguous(), 2, 2, 0, list(x.shape))
        # Random indices with duplicates (the latest in input order wins).
        k, s, p = 3, 2, 1
        out_sp = [(n - 1) * s - 2 * p + k for n in in_sp]
        plane = numel(out_sp)
        vals = typed_special(g, ncs + in_sp, dt)
        idx = torch.randint(0, plane, ncs + in_sp, generator=g, dtype=torch.int64)
        typed_unpool(w, U + "random_dups", nd, dt, layout, vals, idx, k, s, p)
        idx = torch.randint(0, min(3, plane), ncs + in_sp, generator=g, dtype=torch.int64)
        typed_unpool(w, U + "many_dups", nd, dt, layout, vals, idx, k, s, p)
        if layout == "channels_last":
            continue
        # output_size at both edges of the allowed range; special values are moved, not read.
        for edge, delta in (("lo", -(s - 1)), ("hi", s - 1)):
            osz = [e + delta for e in out_sp]
            pl = numel(osz)
            idx3 = torch.randint(0, pl, ncs + in_sp, generator=g, dtype=torch.int64)
            vals = pick(g, ncs + in_sp, specials(dt), dt)
            typed_unpool(w, U + "special_outsize_" + edge, nd, dt, layout, vals, idx3, k, s, p,
                         osz)
        # Batch-less.
        idx6 = torch.randint(0, plane, [2] + in_sp, generator=g, dtype=torch.int64)
        typed_unpool(w, U + "batchless_random", nd, dt, layout, typed_special(g, [2] + in_sp, dt),
                     idx6, k, s, p)


# ---------------------------------------------------------------------------------------------
# Backward cases: the gradients of both ops, float dtypes only (the types autograd uses).

GRAD_DTYPES = ("f32", "f64", "f16", "bf16")
POOL_BACKWARD = {2: torch.ops.aten.max_pool2d_with_indices_backward,
                 3: torch.ops.aten.max_pool3d_with_indices_backward}



def emulate_pool_backward(shape, nd, grad, idx, dt, reverse=False, acc=None):
    """Max pooling's backward by the summation rule of docs/semantics.md: per (n, c) plane,
    zeros, then every grad element added at the input position its index names, in ascending
    output order, in dt's precision (f16/bf16: widen to f32, add, round back after every
    addition, with torch's own conversions); indices outside the plane are dropped.
    `reverse` and `acc` (accumulate in that torch dtype, round once at the end) give the rules
    the PyTorch vectors must rule out."""
    planes, in_plane = numel(shape[:len(shape) - nd]), numel(shape[len(shape) - nd:])
    work = acc if acc is not None else TORCH_DTYPE[dt]
    gi = torch.zeros(planes, in_plane, dtype=work)
    go, ix = grad.reshape(planes, -1), idx.reshape(planes, -1)
    rows = torch.arange(planes)
    steps = range(go.shape[1])
    for o in (reversed(steps) if reverse else steps):  # one output per plane at a time
        j = ix[:, o]
        ok = (j >= 0) & (j < in_plane)
        r, j = rows[ok], j[ok]
        if acc is None and dt in ("f16", "bf16"):
            gi[r, j] = (gi[r, j].float() + go[ok, o].float()).to(work)
        else:
            gi[r, j] = gi[r, j] + go[ok, o].to(work)
    return gi.to(TORCH_DTYPE[dt]).reshape(shape)


def expand(v, nd, default):
    if v is None:
        return list(default)
    return as_list(v, nd)


def native_pool_backward(nd, x, grad, idx, dt, layout, k, s, p, d, ceil):
    """PyTorch's own backward in `layout`: the ATen op autograd calls (1-D through 2-D, as
    max_pool1d does). `idx` is the forward's own tensor: 1.13's 3-D backward reads indices as
    contiguous whatever their strides, and its forward returns them contiguous. Indices outside
    the input plane become -1, which ATen skips: 1.13 would add their gradient outside the plane
    (past grad_input's end for the last plane). Where no index was replaced, autograd of the
    forward must give the same bits."""
    kk = as_list(k, nd)
    ss, pp, dd = expand(s, nd, kk), as_list(p, nd), as_list(d, nd)
    in_plane = numel(x.shape[x.dim() - nd:])
    il = idx.clone()  # keeps idx's strides
    il[(idx < 0) | (idx >= in_plane)] = -1
    xl, gl = to_layout(x, nd, layout), to_layout(grad, nd, layout)
    if nd == 1:
        r = POOL_BACKWARD[2](gl.unsqueeze(-2), xl.unsqueeze(-2), [1] + kk, [1] + ss, [0] + pp,
                             [1] + dd, ceil, il.unsqueeze(-2)).squeeze(-2)
    else:
        r = POOL_BACKWARD[nd](gl, xl, kk, ss, pp, dd, ceil, il)
    if torch.equal(il, idx):
        xa = to_layout(x, nd, layout).detach().requires_grad_()
        kw = dict(kernel_size=k, padding=p, dilation=d, ceil_mode=ceil, return_indices=True)
        if s is not None:
            kw["stride"] = s
        v, i = POOL[nd](xa, **kw)
        v.backward(to_layout(grad, nd, layout))
        assert torch.equal(i, idx) and same_bits(xa.grad, r, dt), (nd, dt, layout)
    return r.contiguous()


class Evidence:
    """Counts, per dtype, the native backward cases that a rival summation rule gets wrong."""

    def __init__(self):
        self.native = {}
        self.beats = {}

    def add(self, dt, native, rivals):
        self.native[dt] = self.native.get(dt, 0) + 1
        for rule, value in rivals.items():
            key = (dt, rule)
            self.beats[key] = self.beats.get(key, 0) + int(not same_bits(native, value, dt))

    def report(self):
        for (dt, rule), n in sorted(self.beats.items()):
            print("%-5s %3d native pool_backward cases, %3d of them differ from %s"
                  % (dt, self.native[dt], n, rule))
            assert n > 0, "no golden case tells PyTorch's rule from " + rule + " for " + dt


EVIDENCE = Evidence()
WIDER = {"f32": torch.float64, "bf16": torch.float32}


def pool_backward(w, name, nd, dt, layout, x, grads, k, s=None, p=0, d=1, ceil=False):
    """A pooling backward case: PyTorch's forward of x gives the indices, grads(shape) the
    gradient, and grad_input is PyTorch's backward or, where 1.13 has none, the rule above."""
    assert name not in w.names, name
    w.names.add(name)
    check_pool_params(nd, k, s, p, d)
    assert x.dtype == TORCH_DTYPE[dt]
    kw = dict(kernel_size=k, padding=p, dilation=d, ceil_mode=ceil, return_indices=True)
    if s is not None:
        kw["stride"] = s
    _, raw_idx, _ = run_pool(nd, x, dt, layout, kw)
    idx = raw_idx.contiguous()
    grad = grads(list(idx.shape)).contiguous()
    shape = list(x.shape)
    ours = emulate_pool_backward(shape, nd, grad, idx, dt)
    via = None
    if pool_native(nd, dt):
        gi = native_pool_backward(nd, x, grad, raw_idx, dt, layout, k, s, p, d, ceil)
        assert same_bits(gi, ours, dt), (name, gi, ours)
        rivals = {"descending order": emulate_pool_backward(shape, nd, grad, idx, dt, True)}
        if dt in WIDER:
            rivals["one rounding of a %s sum" % str(WIDER[dt])[6:]] = emulate_pool_backward(
                shape, nd, grad, idx, dt, acc=WIDER[dt])
        EVIDENCE.add(dt, gi, rivals)
    else:
        gi = ours
        via = ("f32 (forward); backward by the summation rule (PyTorch's order, f32 additions "
               "rounded to %s after each)" % dt)
    t = typed_header(name, "pool_backward", nd, dt, layout, via)
    t += pool_params(k, s, p, d, ceil)
    t += line("input_shape", ints(shape))
    t += line("in_values", typed_bits(x, dt))
    t += line("output_shape", ints(idx.shape))
    t += line("out_indices", ints(idx.reshape(-1).tolist()))
    t += line("grad_output", typed_bits(grad, dt))
    t += line("grad_input", typed_bits(gi, dt))
    t += "end\n"
    w.add("pool_backward%dd.txt" % nd, t)


def order_values(dt):
    """Gradients whose sums depend on the order and the precision of the additions: with
    e = the ulp of 1, 1 + 0.375e rounds to 1 but 1 + 0.75e to 1 + e; 2/e + 1 rounds to 2/e; and
    0.6 * max doubles to infinity."""
    fi = torch.finfo(TORCH_DTYPE[dt])
    e, big = float(fi.eps), 0.6 * float(fi.max)
    vals = [1.0, 0.375 * e, -1.0, 2 / e, -2 / e, big, -big, 0.5]
    return vals + {"f32": [1e8, -1e8, 3e-8], "f64": [1e17, -1e17, 3e-17],
                   "f16": [3 * 2.0 ** -13], "bf16": [3 * 2.0 ** -10]}[dt]


def sum_order_case(w, name, nd, dt, layout):
    """Four planes whose one input position receives three gradients (kernel 5, padding 2 over
    width 3 with a constant input: every window's first tap wins): [1, d, d], [d, d, 1],
    [2/e, 1, -2/e], [1, 2/e, -2/e] with d = 0.375e. In-order additions rounded each time give
    1, 1 + e, 0, 0; the reverse order or one final rounding give other sums."""
    e = float(torch.finfo(TORCH_DTYPE[dt]).eps)
    dd, b = 0.375 * e, 2 / e
    rows = [[1.0, dd, dd], [dd, dd, 1.0], [b, 1.0, -b], [1.0, b, -b]]
    ones = [1] * (nd - 1)
    grads = lambda shape: torch.tensor(rows, dtype=torch.float64).reshape(shape).to(
        TORCH_DTYPE[dt])
    x = torch.zeros([1, 4] + ones + [3], dtype=TORCH_DTYPE[dt])
    pool_backward(w, name, nd, dt, layout, x, grads, ones + [5], 1, [0] * (nd - 1) + [2])


def empty_window_backward(w, P, nd, dt, layout, g):
    """Empty windows (dilation with padding): their index is the stepped start, outside the
    plane (dropped) or inside it but outside the window (added like any other)."""
    grads = lambda shape: pick(g, shape, order_values(dt), dt)
    if nd == 1:  # width 2, taps -1 and 2: index 2, outside
        pool_backward(w, P + "empty_out_of_plane", nd, dt, layout, typed_special(g, [2, 3, 2], dt),
                      grads, 2, 1, 1, 3)
        return
    lead = [1] * (nd - 2)
    k, p, d = lead + [1, 2], [0] * (nd - 2) + [0, 1], lead + [3, 3]
    # An (h, w) = 1x2 plane, taps w = -1 and 2: index 2, outside the plane.
    pool_backward(w, P + "empty_out_of_plane", nd, dt, layout,
                  typed_special(g, [2, 3] + lead + [1, 2], dt), grads, k, lead + [3, 1], p, d)
    # 3x2, one row of windows: index 2 is position (1, 0), inside the plane.
    pool_backward(w, P + "empty_in_plane", nd, dt, layout,
                  typed_special(g, [2, 3] + lead + [3, 2], dt), grads, k, lead + [3, 1], p, d)
    # Every row: indices 2, 4 (inside, the next row's first element) and 6 (outside); in 3-D
    # 2x3x2, indices 2 .. 12, 6 the first element of the next depth slice, 12 outside.
    shape = [1, 3] + ([2] if nd == 3 else []) + [3, 2]
    pool_backward(w, P + "empty_rows", nd, dt, layout, typed_special(g, shape, dt), grads, k, 1,
                  p, d)


def pool_backward_cases(w, nd, dt, g):
    P = "pb%dd_%s_" % (nd, dt)
    sp = {1: [13], 2: [7, 6], 3: [3, 4, 4]}[nd]
    nc = {1: [2, 2], 2: [1, 2], 3: [1, 2]}[nd]
    full = nc + sp
    sp_small = {1: [9], 2: [5, 4], 3: [3, 3, 4]}[nd]
    wide = {1: [1, 2, 37], 2: [1, 1, 3, 37], 3: [1, 1, 2, 2, 37]}[nd]
    order = lambda shape: pick(g, shape, order_values(dt), dt)
    special = lambda shape: typed_special(g, shape, dt)  # NaN, +-inf, +-0, extremes, subnormals
    neg_zero = lambda shape: pick(g, shape, [-0.0], dt)
    signed_zero = lambda shape: pick(g, shape, [-0.0, 0.0, -0.0, 1.0], dt)
    c = "contiguous"
    sum_order_case(w, P + "sum_order", nd, dt, c)
    pool_backward(w, P + "k3s1p1", nd, dt, c, typed_rand(g, full, dt), order, 3, 1, 1)
    pool_backward(w, P + "k3s2p1", nd, dt, c, typed_rand(g, full, dt), order, 3, 2, 1)
    pool_backward(w, P + "k2s1", nd, dt, c, typed_rand(g, full, dt), order, 2, 1)
    pool_backward(w, P + "k2s2p0", nd, dt, c, typed_rand(g, full, dt), order, 2, 2)
    pool_backward(w, P + "k3s1p1d2", nd, dt, c, typed_rand(g, full, dt), order, 3, 1, 1, 2)
    pool_backward(w, P + "k2s1p1d2_ceil", nd, dt, c, typed_rand(g, full, dt), order, 2, 1, 1, 2,
                  True)
    # Ties: a constant input sends many windows to one position (the first tap wins).
    pool_backward(w, P + "ties_constant_k3s1p1", nd, dt, c, pick(g, full, [2.5], dt), order, 3, 1,
                  1)
    pool_backward(w, P + "ties_k3s2p1_ceil", nd, dt, c, pick(g, full, [0.0, 1.0], dt), order, 3,
                  2, 1, 1, True)
    drop = {1: [5], 2: [5, 7], 3: [5, 5, 3]}[nd]
    pool_backward(w, P + "k2s2p1_ceil_drop", nd, dt, c, typed_rand(g, [1, 2] + drop, dt), order,
                  2, 2, 1, 1, True)
    # Specials: NaN and infinities in the input (they win windows), in the gradients, in both.
    pool_backward(w, P + "special_input_k3s1p1", nd, dt, c, typed_special(g, full, dt), order, 3,
                  1, 1)
    pool_backward(w, P + "special_grads_k3s1p1", nd, dt, c, typed_rand(g, full, dt), special, 3,
                  1, 1)
    pool_backward(w, P + "special_both_k3s2p1", nd, dt, c, typed_special(g, full, dt), special, 3,
                  2, 1)
    # -0.0 gradients add to +0.0: grad_input starts at +0.0.
    pool_backward(w, P + "neg_zero_grads_k3s1p1", nd, dt, c, typed_rand(g, full, dt), neg_zero, 3,
                  1, 1)
    pool_backward(w, P + "signed_zero_grads_k2s1", nd, dt, c, typed_rand(g, full, dt),
                  signed_zero, 2, 1)
    # The fast windows, 37 wide (vector tails).
    pool_backward(w, P + "k2s2p0_wide", nd, dt, c, typed_special(g, wide, dt, 9), order, 2, 2)
    pool_backward(w, P + "k3s2p1_wide", nd, dt, c, typed_special(g, wide, dt, 9), order, 3, 2, 1)
    pool_backward(w, P + "k3s2p1_wide_ceil", nd, dt, c, typed_rand(g, wide, dt), order, 3, 2, 1,
                  1, True)
    empty_window_backward(w, P, nd, dt, c, g)
    pool_backward(w, P + "batchless_k3s2p1", nd, dt, c, typed_special(g, [3] + sp_small, dt),
                  order, 3, 2, 1)
    pool_backward(w, P + "batchless_k2s1_ceil", nd, dt, c, typed_rand(g, [2] + sp_small, dt),
                  order, 2, 1, 0, 1, True)
    if nd >= 2:
        pool_backward(w, P + "nonsquare", nd, dt, c, typed_rand(g, full, dt), order,
                      [2, 3, 2][:nd], [1, 2, 1][:nd], [1, 1, 0][:nd], [2, 1, 1][:nd])
    else:
        pool_backward(w, P + "k4s3p2", nd, dt, c, typed_rand(g, full, dt), order, 4, 3, 2)

    c = "channels_last"
    P = "pb%dd_%s_cl_" % (nd, dt)
    fcl = {1: [2, 5], 2: [1, 3], 3: [1, 3]}[nd] + {1: [9], 2: [5, 6], 3: [3, 3, 4]}[nd]
    wcl = {1: [1, 37, 4], 2: [1, 19, 3, 3], 3: [1, 19, 2, 2, 3]}[nd]  # channel tails
    sum_order_case(w, P + "sum_order", nd, dt, c)
    pool_backward(w, P + "k3s1p1", nd, dt, c, typed_rand(g, fcl, dt), order, 3, 1, 1)
    pool_backward(w, P + "k3s2p1", nd, dt, c, typed_rand(g, fcl, dt), order, 3, 2, 1)
    pool_backward(w, P + "k2s2p0", nd, dt, c, typed_rand(g, fcl, dt), order, 2, 2)
    pool_backward(w, P + "k3s1p1d2", nd, dt, c, typed_rand(g, fcl, dt), order, 3, 1, 1, 2)
    pool_backward(w, P + "k3s2p0_ceil", nd, dt, c, typed_rand(g, fcl, dt), order, 3, 2, 0, 1,
                  True)
    pool_backward(w, P + "ties_constant_k3s1p1", nd, dt, c, pick(g, fcl, [-1.5], dt), order, 3,
                  1, 1)
    pool_backward(w, P + "special_both_k3s2p1", nd, dt, c, typed_special(g, fcl, dt), special, 3,
                  2, 1)
    pool_backward(w, P + "neg_zero_grads_k3s1p1", nd, dt, c, typed_rand(g, fcl, dt), neg_zero, 3,
                  1, 1)
    pool_backward(w, P + "k3s2p1_wide_c", nd, dt, c, typed_special(g, wcl, dt, 9), order, 3, 2, 1)
    pool_backward(w, P + "k2s2p0_wide_c", nd, dt, c, typed_special(g, wcl, dt, 9), order, 2, 2)
    empty_window_backward(w, P, nd, dt, c, g)


def unpool_backward(w, name, nd, dt, layout, idx, grads, k, s=None, p=0, output_size=None):
    """An unpooling backward case: grads(shape) is the gradient of the unpooled output, and
    grad_values PyTorch's autograd of max_unpool (f32, f64) or, where 1.13 has no max_unpool
    (f16, bf16), the gather autograd computes, by torch.gather."""
    assert name not in w.names, name
    w.names.add(name)
    kw = dict(kernel_size=k, padding=p)
    if s is not None:
        kw["stride"] = s
    if output_size is not None:
        kw["output_size"] = list(output_size)
    idx = idx.contiguous()
    out_shape = list(UNPOOL[nd](torch.zeros(idx.shape, dtype=torch.float64), idx, **kw).shape)
    grad = grads(out_shape).contiguous()
    lead = idx.dim() - nd  # the gather works on (n, c) planes, flattened
    gathered = grad.flatten(lead).gather(lead, idx.flatten(lead)).view(idx.shape)
    via = None
    if dt in ("f32", "f64"):
        v = to_layout(torch.zeros(idx.shape, dtype=TORCH_DTYPE[dt]), nd, layout)
        v.requires_grad_()
        UNPOOL[nd](v, to_layout(idx, nd, layout), **kw).backward(to_layout(grad, nd, layout))
        assert same_bits(v.grad, gathered, dt), name
        gv = v.grad.contiguous()
    else:
        gv = gathered
        via = "torch.gather (PyTorch 1.13 has no %s max_unpool on CPU)" % dt
    t = typed_header(name, "unpool_backward", nd, dt, layout, via)
    t += line("kernel_size", ints(k))
    t += line("stride", ints(s))
    t += line("padding", ints(p))
    t += line("output_size", ints(output_size))
    t += line("input_shape", ints(idx.shape))
    t += line("in_indices", ints(idx.reshape(-1).tolist()))
    t += line("output_shape", ints(out_shape))
    t += line("grad_output", typed_bits(grad, dt))
    t += line("grad_values", typed_bits(gv, dt))
    t += "end\n"
    w.add("unpool_backward%dd.txt" % nd, t)


def unpool_backward_cases(w, nd, dt, g):
    sp = {1: [13], 2: [7, 6], 3: [3, 4, 5]}[nd]
    sp_even = {1: [12], 2: [6, 4], 3: [2, 4, 4]}[nd]
    in_sp = {1: [6], 2: [3, 4], 3: [2, 3, 2]}[nd]
    grads = lambda shape: typed_special(g, shape, dt)
    k, s, p = 3, 2, 1
    out_sp = [(n - 1) * s - 2 * p + k for n in in_sp]
    for layout, U, ncs, wsh in (("contiguous", "ub%dd_%s_" % (nd, dt),
                                 {1: [2, 2], 2: [1, 2], 3: [1, 2]}[nd],
                                 {1: [1, 2, 37], 2: [1, 1, 3, 37], 3: [1, 1, 2, 2, 37]}[nd]),
                                ("channels_last", "ub%dd_%s_cl_" % (nd, dt),
                                 {1: [2, 5], 2: [1, 3], 3: [1, 3]}[nd],
                                 {1: [1, 37, 4], 2: [1, 19, 3, 3], 3: [1, 19, 2, 2, 3]}[nd])):
        def pooled(shape, **kw):
            x = typed_rand(g, shape, dt)
            return run_pool(nd, x, dt, layout, dict(return_indices=True, **kw))[1], x.shape

        # Indices of a real pooling: k2s2 (distinct), k3s2p1 (a maximum of several windows is
        # named several times), a 37-wide ceil_mode pooling with the full output_size.
        i, _ = pooled(ncs + sp_even, kernel_size=2, stride=2)
        unpool_backward(w, U + "from_pool_k2s2", nd, dt, layout, i, grads, 2, 2)
        i, xs = pooled(ncs + sp, kernel_size=3, stride=2, padding=1)
        unpool_backward(w, U + "from_pool_k3s2p1_outsize", nd, dt, layout, i, grads, 3, 2, 1,
                        list(xs[2:]))
        i, xs = pooled(wsh, kernel_size=2, stride=2, ceil_mode=True)
        unpool_backward(w, U + "from_pool_k2s2_ceil_wide", nd, dt, layout, i, grads, 2, 2, 0,
                        list(xs))
        # Random indices with duplicates: every duplicate reads its slot.
        plane = numel(out_sp)
        idx = torch.randint(0, plane, ncs + in_sp, generator=g, dtype=torch.int64)
        unpool_backward(w, U + "random_dups", nd, dt, layout, idx, grads, k, s, p)
        idx = torch.randint(0, min(3, plane), ncs + in_sp, generator=g, dtype=torch.int64)
        unpool_backward(w, U + "many_dups", nd, dt, layout, idx, grads, k, s, p)
        if layout == "channels_last":
            continue
        # output_size at both edges of the allowed range, as nd and as nd + 2 entries.
        for edge, delta in (("lo", -(s - 1)), ("hi", s - 1)):
            osz = [e + delta for e in out_sp]
            idx = torch.randint(0, numel(osz), ncs + in_sp, generator=g, dtype=torch.int64)
            unpool_backward(w, U + "outsize_" + edge, nd, dt, layout, idx, grads, k, s, p, osz)
            unpool_backward(w, U + "outsize_full_" + edge, nd, dt, layout, idx, grads, k, s, p,
                            [5, 7] + osz)
        # Batch-less.
        idx = torch.randint(0, plane, [2] + in_sp, generator=g, dtype=torch.int64)
        unpool_backward(w, U + "batchless_random", nd, dt, layout, idx, grads, k, s, p)
        i, xs = pooled([3] + sp_even, kernel_size=2, stride=2)
        unpool_backward(w, U + "batchless_from_pool", nd, dt, layout, i, grads, 2)
        if nd >= 2:
            kk, ss, pp = [2, 3, 1][:nd], [3, 2, 1][:nd], [1, 0, 0][:nd]
            outs = [(n - 1) * ss[j] - 2 * pp[j] + kk[j] for j, n in enumerate(in_sp)]
            idx = torch.randint(0, numel(outs), ncs + in_sp, generator=g, dtype=torch.int64)
            unpool_backward(w, U + "nonsquare", nd, dt, layout, idx, grads, kk, ss, pp)


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden")
    w = Writer()
    for nd in (1, 2, 3):
        g = torch.Generator().manual_seed(1000 + nd)
        pool_cases(w, nd, g)
        g = torch.Generator().manual_seed(2000 + nd)
        unpool_cases(w, nd, g)
    for nd in (1, 2, 3):
        for j, dt in enumerate(DTYPES):
            g = torch.Generator().manual_seed(3000 + 100 * nd + j)
            typed_pool_cases(w, nd, dt, g)
            g = torch.Generator().manual_seed(4000 + 100 * nd + j)
            typed_unpool_cases(w, nd, dt, g)
    for nd in (1, 2, 3):
        for j, dt in enumerate(GRAD_DTYPES):
            g = torch.Generator().manual_seed(5000 + 100 * nd + j)
            pool_backward_cases(w, nd, dt, g)
            g = torch.Generator().manual_seed(6000 + 100 * nd + j)
            unpool_backward_cases(w, nd, dt, g)
    w.write(outdir)
    total = 0
    for fname in sorted(w.files):
        size = os.path.getsize(os.path.join(outdir, fname))
        total += size
        print("%-22s %3d cases %7d bytes" % (fname, len(w.files[fname]), size))
    print("total %d bytes" % total)
    EVIDENCE.report()


if __name__ == "__main__":
    main()
