#!/usr/bin/env python3
"""poolgen against ONNX Runtime's MaxPool and TensorFlow's max_pool_with_argmax, live, on random
cases: shapes, values and indices bit for bit, and refusal where the framework refuses.

    . ~/.cache/poolgen-frameworks/env.sh     # ../shared/tools/framework-env.sh makes it
    $FRAMEWORKS_PY tools/framework_diff.py LIBPOOLGEN_SO [N_ONNX] [N_TF] [SEED]

LIBPOOLGEN_SO: the shared library (install/lib/libpoolgen.so, or a build's runtime/libpoolgen.so).
f32, ranks 1-3 (ONNX Runtime) and 2 (TensorFlow), small extents against windows that often do not
fit, dilations whose taps step past the input, every auto_pad, ceil_mode, both storage orders and
both TensorFlow index forms, values with ties, NaN and infinities. poolgen runs with the options
that ask it for each framework's definitions (docs/semantics.md, "Other frameworks"); the cases it
refuses as unsupported (ONNX Runtime's negative SAME padding) are counted apart. The checked-in
goldens (tools/make_framework_golden.py) are what CI checks; this is the wider sweep by hand.
"""
import collections
import ctypes
import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import onnxruntime as ort  # noqa: E402
import tensorflow as tf  # noqa: E402

from make_framework_golden import onnx_run  # noqa: E402  (beside this script)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from poolgen._c_api import (  # noqa: E402  (no library load)
    EXPLICIT_PADDING, F32, I64, INDEX_ONNX, INDEX_ONNX_COLUMN_MAJOR, INDEX_TENSORFLOW,
    INDEX_TENSORFLOW_WITH_BATCH, MAX_FIRST_TAP, OK, POOL_RULE_ONNX_RUNTIME, POOL_RULE_TENSORFLOW,
    SAME_LOWER, SAME_UPPER, UNSUPPORTED, VALID, PoolOptions, Tensor)

ort.set_default_logger_severity(4)


AUTO_PAD = {"NOTSET": EXPLICIT_PADDING, "SAME_UPPER": SAME_UPPER, "SAME_LOWER": SAME_LOWER,
            "VALID": VALID}


def tensor(a):
    t = Tensor()
    t.data, t.rank, t.dtype = a.ctypes.data, a.ndim, F32 if a.dtype == np.float32 else I64
    for i, e in enumerate(a.shape):
        t.shape[i] = e
    return t


def poolgen(lib, x, o):
    """poolgen's (values, indices) for input x (NC...), or the status code it refused with."""
    nd = x.ndim - 2
    shape = (ctypes.c_int64 * 5)(*x.shape)
    out = (ctypes.c_int64 * 5)()
    message = ctypes.create_string_buffer(512)
    rc = lib.poolgen_max_pool_output_shape(nd, x.ndim, shape, ctypes.byref(o), out, message, 512)
    if rc != OK:
        return rc, message.value.decode()
    pooled = tuple(out[:x.ndim])
    values, indices = np.full(pooled, 7.0, np.float32), np.full(pooled, -7, np.int64)
    t_in, t_v, t_i = tensor(x), tensor(values), tensor(indices)
    rc = lib.poolgen_max_pool(nd, ctypes.byref(t_in), ctypes.byref(t_v), ctypes.byref(t_i),
                              ctypes.byref(o), message, 512)
    return (values, indices) if rc == OK else (rc, message.value.decode())


def values_for(g, shape):
    x = g.integers(-3, 4, size=shape).astype(np.float32)  # many ties
    if g.random() < 0.3:
        x += g.random(shape).astype(np.float32) * 0.5
    if g.random() < 0.35:
        for special in (np.nan, -np.inf, np.inf):
            x[g.random(shape) < 0.1] = special
    return x


def onnx_runtime(x, attrs):
    try:
        return tuple(onnx_run(x, attrs))
    except Exception:  # its refusals: pads >= kernel, a negative output dimension
        return None


def same(a, b):
    return a.shape == b.shape and np.array_equal(a.view(np.uint32) if a.dtype == np.float32
                                                 else a, b.view(np.uint32)
                                                 if b.dtype == np.float32 else b)


def judge(counts, kind, want, got):
    """Counts one comparison: agree, unsupported (poolgen's own refusal), or a mismatch."""
    if isinstance(got[0], int) and got[0] == UNSUPPORTED:
        counts[kind + " unsupported"] += 1
    elif want is None or isinstance(got[0], int):
        counts[kind + (" agree" if want is None and isinstance(got[0], int) else " MISMATCH")] += 1
    else:
        ok = same(np.asarray(want[0]), got[0]) and same(np.asarray(want[1]), got[1])
        counts[kind + (" agree" if ok else " MISMATCH")] += 1
        return ok
    return True


def onnx_cases(lib, g, n, counts):
    for _ in range(n):
        nd = int(g.integers(1, 4))
        small = g.random() < 0.3  # windows that do not fit, taps past the input
        spatial = [int(g.integers(1, 4 if small else 10)) for _ in range(nd)]
        k = [int(g.integers(2 if small else 1, 5)) for _ in range(nd)]
        s = [int(g.integers(1, 5)) for _ in range(nd)]
        d = [int(g.integers(2, 4)) if small or g.random() < 0.4 else 1 for _ in range(nd)]
        pads = [int(g.integers(0, k[i % nd])) for i in range(2 * nd)]
        ceil = int(g.random() < 0.5)
        auto_pad = ["NOTSET", "NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"][int(g.integers(0, 5))]
        if auto_pad.startswith("SAME"):
            ceil = 0
        order = int(nd > 1 and g.random() < 0.3)
        x = values_for(g, [int(g.integers(1, 3)), int(g.integers(1, 4))] + spatial)
        attrs = dict(kernel_shape=k, strides=s, dilations=d, ceil_mode=ceil,
                     storage_order=order)
        o = PoolOptions(max_rule=MAX_FIRST_TAP, pool_rule=POOL_RULE_ONNX_RUNTIME, ceil_mode=ceil,
                        index_format=INDEX_ONNX_COLUMN_MAJOR if order else INDEX_ONNX,
                        auto_pad=AUTO_PAD[auto_pad])
        if auto_pad == "NOTSET":
            attrs["pads"] = pads
            o.padding_end_given = 1
            for i in range(nd):
                o.padding[i], o.padding_end[i] = pads[i], pads[nd + i]
        else:
            attrs["auto_pad"] = auto_pad
        for i in range(nd):
            o.kernel_size[i], o.stride[i], o.dilation[i] = k[i], s[i], d[i]
        want = onnx_runtime(x, attrs)
        if not judge(counts, "ONNX Runtime", want, poolgen(lib, x, o)):
            print("mismatch: ONNX Runtime", x.shape, attrs)


def tf_cases(lib, g, n, counts):
    for _ in range(n):
        shape = [int(g.integers(1, 3)), int(g.integers(1, 4)), int(g.integers(1, 10)),
                 int(g.integers(1, 10))]
        k = [int(g.integers(1, 9 if g.random() < 0.1 else 5)) for _ in range(2)]
        s = [int(g.integers(1, 5)) for _ in range(2)]
        padding = "SAME" if g.random() < 0.5 else "VALID"
        batch = bool(g.random() < 0.5)
        x = values_for(g, shape)
        try:
            y, i = tf.nn.max_pool_with_argmax(np.transpose(x, (0, 2, 3, 1)), [1] + k + [1],
                                              [1] + s + [1], padding,
                                              include_batch_in_index=batch)
            want = (np.transpose(y.numpy(), (0, 3, 1, 2)), np.transpose(i.numpy(), (0, 3, 1, 2)))
        except Exception:  # "Computed output size would be negative"
            want = None
        o = PoolOptions(max_rule=MAX_FIRST_TAP, pool_rule=POOL_RULE_TENSORFLOW,
                        auto_pad=AUTO_PAD["SAME_UPPER" if padding == "SAME" else "VALID"],
                        index_format=INDEX_TENSORFLOW_WITH_BATCH if batch else INDEX_TENSORFLOW)
        for j in range(2):
            o.kernel_size[j], o.stride[j], o.dilation[j] = k[j], s[j], 1
        if not judge(counts, "TensorFlow", want, poolgen(lib, x, o)):
            print("mismatch: TensorFlow", x.shape, k, s, padding, batch)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    lib = ctypes.CDLL(sys.argv[1])
    n_onnx, n_tf, seed = (int(a) for a in (sys.argv[2:] + ["1000", "400", "1"][len(sys.argv) - 2:]))
    g = np.random.default_rng(seed)
    counts = collections.Counter()
    onnx_cases(lib, g, n_onnx, counts)
    tf_cases(lib, g, n_tf, counts)
    for key in sorted(counts):
        print(f"{key}: {counts[key]}")
    sys.exit(1 if any("MISMATCH" in key for key in counts) else 0)


if __name__ == "__main__":
    main()
