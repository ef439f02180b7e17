#!/usr/bin/env python3
"""Golden vectors of other frameworks' pooling and index formats, made by those frameworks.

    . ~/.cache/poolgen-frameworks/env.sh   # ../shared/tools/framework-env.sh makes it, or any
    $FRAMEWORKS_PY tools/make_framework_golden.py [OUTDIR]   # venv with numpy, torch, onnx,
                                                             # onnxruntime 1.31, tensorflow 2.21
                                                             # (default OUTDIR: tests/golden)

Writes index_formats.txt: pooling cases (1-, 2- and 3-D, N = 2, C = 3, distinct values so that
every convention picks the same element) with PyTorch's plane indices (out_indices) and the same
maxima's indices as ONNX Runtime's CPU MaxPool returns them (opset 12, storage_order 0 and 1:
indices_onnx, indices_onnx_column_major) and, for 2-D windows TensorFlow can express (no padding
or dilation), as tf.nn.max_pool_with_argmax returns them (NHWC, without and with the batch:
indices_tensorflow, indices_tensorflow_with_batch). The format is make_golden.py's with op
index_formats and the indices_* lines.

Writes frameworks_pool.txt: op pool cases computed by ONNX Runtime's CPU MaxPool with Indices
(opset 12: asymmetric pads up to kernel - 1, auto_pad, dilations, ceil_mode, storage_order) and
by tf.nn.max_pool_with_argmax (SAME / VALID, with and without the batch in the index) and its
gradient (MaxPoolGradWithArgmax, op pool_backward), on values with ties, NaN and infinities in
every dtype each framework takes, and by tf.nn.max_pool2d with explicit padding (tf2d_explicit_*:
the argmax of the -inf-padded input), with the PoolOptions that ask poolgen for the same
(padding_end, auto_pad, max_rule first_tap, index_format lines); then ONNX's own backend node
tests for MaxPool (the onnx package's cases, onnxnode_*), their expected values and indices
(ONNX Runtime's indices where a test has none).

Writes frameworks_unpool.txt: op unpool cases (output_size_rule, index_format and padding_end
lines) computed by ONNX Runtime's CPU MaxUnpool (opset 11) from its MaxPool's outputs and from
random indices that cross planes (onnxrt*), by ONNX's reference evaluator where an output_shape
exceeds the default (onnxref*), ONNX's two MaxUnpool node tests (onnxnode_*), and TensorFlow
Addons' MaxUnpooling2D arithmetic (tf.scatter_nd, duplicates adding) of max_pool_with_argmax's
argmax, as op pool_backward cases (tfaddons2d_*: in_values zero, unused).

tests/frameworks_test.cpp reads all three. CI needs none of these frameworks: the output is
checked in.
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
import tensorflow as tf
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper

POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}


def ints(v):
    return " ".join(str(int(x)) for x in np.asarray(v).reshape(-1))


def onnx_max_pool(x, k, s, p, d, ceil, storage_order):
    nd = x.ndim - 2
    node = helper.make_node("MaxPool", ["X"], ["Y", "I"], kernel_shape=k, strides=s,
                            pads=p + p, dilations=d, ceil_mode=int(ceil),
                            storage_order=storage_order)
    graph = helper.make_graph(
        [node], "pool", [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("I", TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)], ir_version=8)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"X": x})


def case(name, nd, shape, k, s, p, d, ceil, seed):
    g = np.random.default_rng(seed)
    x = (g.permutation(int(np.prod(shape))).astype(np.float32) - 7.5).reshape(shape)
    vals, idx = POOL[nd](torch.from_numpy(x), k, s, p, d, ceil, return_indices=True)
    t = "case %s\nop index_formats\nnd %d\n" % (name, nd)
    t += "kernel_size %s\nstride %s\npadding %s\ndilation %s\nceil_mode %d\n" % (
        ints(k), ints(s), ints(p), ints(d), int(ceil))
    t += "input_shape %s\n" % ints(shape)
    t += "in_values %s\n" % " ".join("%08x" % b for b in x.view(np.uint32).reshape(-1))
    t += "output_shape %s\n" % ints(vals.shape)
    t += "out_values %s\n" % " ".join(
        "%08x" % b for b in vals.numpy().view(np.uint32).reshape(-1))
    t += "out_indices %s\n" % ints(idx)
    for order, key in ((0, "onnx"), (1, "onnx_column_major")):
        y, i = onnx_max_pool(x, k, s, p, d, ceil, order)
        assert np.array_equal(y, vals.numpy()), (name, key)
        t += "indices_%s %s\n" % (key, ints(i))
    if nd == 2 and not any(p) and d == [1, 1]:
        nhwc = np.transpose(x, (0, 2, 3, 1))
        for batch, key in ((False, "tensorflow"), (True, "tensorflow_with_batch")):
            y, i = tf.nn.max_pool_with_argmax(nhwc, [1] + k + [1], [1] + s + [1], "VALID",
                                              include_batch_in_index=batch)
            assert np.array_equal(np.transpose(y.numpy(), (0, 3, 1, 2)), vals.numpy()), name
            t += "indices_%s %s\n" % (key, ints(np.transpose(i.numpy(), (0, 3, 1, 2))))
    return t + "end\n"


CASES = [
    # name, nd, input shape, kernel, stride, padding, dilation, ceil_mode
    ("f1_k3s2", 1, [2, 3, 11], [3], [2], [0], [1], False),
    ("f1_k3s1p1d2", 1, [2, 3, 9], [3], [1], [1], [2], False),
    ("f1_k2s2_ceil", 1, [2, 3, 7], [2], [2], [0], [1], True),
    ("f2_k2s2", 2, [2, 3, 4, 4], [2, 2], [2, 2], [0, 0], [1, 1], False),
    ("f2_k3s2", 2, [2, 3, 9, 7], [3, 3], [2, 2], [0, 0], [1, 1], False),
    ("f2_k3x2s1x2", 2, [2, 3, 6, 8], [3, 2], [1, 2], [0, 0], [1, 1], False),
    ("f2_k3s2p1", 2, [2, 3, 8, 9], [3, 3], [2, 2], [1, 1], [1, 1], False),
    ("f2_k2s1d2", 2, [2, 3, 7, 6], [2, 2], [1, 1], [0, 0], [2, 2], False),
    ("f2_k3s2p1_ceil", 2, [2, 3, 8, 10], [3, 3], [2, 2], [1, 1], [1, 1], True),
    ("f3_k2s2", 3, [2, 3, 4, 6, 4], [2, 2, 2], [2, 2, 2], [0, 0, 0], [1, 1, 1], False),
    ("f3_k3s2p1", 3, [2, 3, 5, 6, 7], [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1], False),
    ("f3_k2x3x2d2", 3, [2, 3, 5, 7, 6], [2, 3, 2], [1, 2, 1], [0, 1, 0], [2, 1, 2], False),
]


# Element types: (golden dtype, numpy dtype, ONNX element type).
TYPES = {
    "f32": (np.float32, TensorProto.FLOAT),
    "f64": (np.float64, TensorProto.DOUBLE),
    "f16": (np.float16, TensorProto.FLOAT16),
    "i8": (np.int8, TensorProto.INT8),
    "u8": (np.uint8, TensorProto.UINT8),
}


def hexbits(a):
    a = np.ascontiguousarray(a)
    width = a.dtype.itemsize
    return " ".join("%0*x" % (2 * width, b) for b in a.view("u%d" % width).reshape(-1))


def sample(g, shape, dt):
    """Values with ties; floats also NaN, -inf and +inf now and then."""
    kind = np.dtype(dt).kind
    if kind == "f":
        x = g.integers(-3, 4, shape).astype(np.float64) + 0.5 * g.integers(0, 2, shape)
        x[g.random(shape) < 0.08] = np.nan
        x[g.random(shape) < 0.05] = -np.inf
        x[g.random(shape) < 0.02] = np.inf
        return x.astype(dt)
    info = np.iinfo(dt)
    x = g.integers(-3, 4, shape) + (0 if info.min < 0 else 3)
    x[g.random(shape) < 0.1] = info.min
    x[g.random(shape) < 0.05] = info.max
    return x.astype(dt)


def pool_case(name, nd, dt, x, opts, y, i, grads=None):
    """A pool case; with grads (grad_output, grad_input), the gradient's pool_backward case."""
    op = "pool" if grads is None else "pool_backward"
    t = "case %s\nop %s\nnd %d\ndtype %s\n" % (name, op, nd, dt)
    for key in ("kernel_size", "stride", "padding", "padding_end", "dilation"):
        if key in opts:
            t += "%s %s\n" % (key, ints(opts[key]))
    t += "ceil_mode %d\n" % int(opts.get("ceil_mode", 0))
    for key in ("auto_pad", "max_rule", "index_format", "pool_rule"):
        if key in opts or key != "pool_rule":
            t += "%s %s\n" % (key, opts[key])
    t += "input_shape %s\nin_values %s\n" % (ints(x.shape), hexbits(x))
    if y is None:  # the framework refuses the shape
        return t + "error 1\nend\n"
    t += "output_shape %s\n" % ints(y.shape)
    if grads is None:
        t += "out_values %s\n" % hexbits(y)
    else:
        t += "grad_output %s\ngrad_input %s\n" % tuple(hexbits(v) for v in grads)
    return t + "out_indices %s\nend\n" % ints(i)


def onnx_run(x, attrs):
    elem = TYPES[[k for k, v in TYPES.items() if v[0] == x.dtype][0]][1]
    node = helper.make_node("MaxPool", ["X"], ["Y", "I"], **attrs)
    graph = helper.make_graph(
        [node], "pool", [helper.make_tensor_value_info("X", elem, list(x.shape))],
        [helper.make_tensor_value_info("Y", elem, None),
         helper.make_tensor_value_info("I", TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)], ir_version=8)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"X": x})


# name, nd, spatial extents, ONNX attributes (besides storage_order)
ONNX_CASES = [
    ("pads_beyond_half", 1, [9], dict(kernel_shape=[3], pads=[2, 2])),
    ("asym", 1, [10], dict(kernel_shape=[3], strides=[2], pads=[0, 2])),
    ("asym_ceil", 1, [8], dict(kernel_shape=[2], strides=[2], pads=[0, 1], ceil_mode=1)),
    ("same_upper_dil", 1, [9], dict(kernel_shape=[2], dilations=[2], auto_pad="SAME_UPPER")),
    ("asym", 2, [7, 8], dict(kernel_shape=[3, 2], strides=[2, 1], pads=[2, 0, 0, 1])),
    ("same_upper", 2, [7, 9], dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")),
    ("same_lower", 2, [8, 7], dict(kernel_shape=[2, 3], strides=[2, 2], auto_pad="SAME_LOWER")),
    ("valid_ceil", 2, [7, 9], dict(kernel_shape=[2, 2], strides=[2, 2], auto_pad="VALID",
                                   ceil_mode=1)),
    ("dil_pads", 2, [8, 8], dict(kernel_shape=[3, 2], dilations=[2, 3], pads=[2, 1, 1, 1])),
    ("k2s2_end", 2, [7, 7], dict(kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 1, 1])),
    ("asym", 3, [4, 5, 6], dict(kernel_shape=[2, 3, 2], strides=[1, 2, 2],
                                pads=[1, 0, 1, 0, 2, 0])),
    ("same_upper", 3, [5, 4, 6], dict(kernel_shape=[3, 2, 3], strides=[2, 1, 2],
                                      auto_pad="SAME_UPPER")),
]

AUTO_PAD = {"SAME_UPPER": "same_upper", "SAME_LOWER": "same_lower", "VALID": "valid"}


def onnx_cases(out):
    count = 0
    for j, (name, nd, spatial, attrs) in enumerate(ONNX_CASES):
        for dt in TYPES:
            for order in (0, 1):
                g = np.random.default_rng(100 * j + 10 * order + list(TYPES).index(dt))
                x = sample(g, ([1, 2] if nd == 3 else [2, 2]) + spatial, TYPES[dt][0])
                try:
                    y, i = onnx_run(x, dict(attrs, storage_order=order))
                except Exception as e:  # a type ONNX Runtime's MaxPool with Indices lacks
                    print("onnx %s %s: skipped (%s)" % (name, dt, str(e).splitlines()[0][:80]))
                    break
                opts = dict(kernel_size=attrs["kernel_shape"],
                            stride=attrs.get("strides", [1] * nd),
                            dilation=attrs.get("dilations", [1] * nd),
                            ceil_mode=attrs.get("ceil_mode", 0), max_rule="first_tap",
                            index_format="onnx_column_major" if order else "onnx")
                if "auto_pad" in attrs:
                    opts["auto_pad"] = AUTO_PAD[attrs["auto_pad"]]
                else:
                    pads = attrs.get("pads", [0] * 2 * nd)
                    opts.update(auto_pad="explicit_padding", padding=pads[:nd],
                                padding_end=pads[nd:])
                out.write(pool_case("onnx%dd_%s_%s_order%d" % (nd, name, dt, order), nd, dt, x,
                                    opts, y, i))
                count += 1
    return count


TF_TYPES = {"f32": tf.float32, "f64": tf.float64, "f16": tf.float16, "bf16": tf.bfloat16}

# name, spatial extents, ksize, strides, padding
TF_CASES = [
    ("k2s2_valid", [6, 7], [2, 2], [2, 2], "VALID"),
    ("k3s2_same", [7, 8], [3, 3], [2, 2], "SAME"),
    ("k3x2s1x2_same", [5, 9], [3, 2], [1, 2], "SAME"),
    ("k2s1_valid", [4, 5], [2, 2], [1, 1], "VALID"),
]


def tf_cases(out):
    count = 0
    for j, (name, spatial, k, s, padding) in enumerate(TF_CASES):
        for dt, tf_dt in TF_TYPES.items():
            for batch in (False, True):
                g = np.random.default_rng(5000 + 100 * j + 10 * batch + list(TF_TYPES).index(dt))
                x32 = sample(g, [2, 2] + spatial, np.float32)
                nhwc = tf.cast(tf.constant(np.transpose(x32, (0, 2, 3, 1))), tf_dt)
                try:
                    y, i = tf.nn.max_pool_with_argmax(nhwc, [1] + k + [1], [1] + s + [1],
                                                      padding, include_batch_in_index=batch)
                except Exception as e:
                    print("tf %s %s: skipped (%s)" % (name, dt, str(e).splitlines()[0][:80]))
                    break
                x = np.transpose(nhwc.numpy(), (0, 3, 1, 2))
                y = np.transpose(y.numpy(), (0, 3, 1, 2))
                i = np.transpose(i.numpy(), (0, 3, 1, 2))
                opts = dict(kernel_size=k, stride=s, dilation=[1, 1], max_rule="first_tap",
                            auto_pad="same_upper" if padding == "SAME" else "valid",
                            index_format="tensorflow_with_batch" if batch else "tensorflow")
                label = "%s_%s%s" % (name, dt, "_batch" if batch else "")
                out.write(pool_case("tf2d_" + label, 2, dt, x, opts, y, i))
                # The gradient, MaxPoolGradWithArgmax, with TensorFlow's own argmax.
                grad = tf.cast(tf.constant(g.normal(size=y.shape[:1] + y.shape[2:] + y.shape[1:2])
                                           .astype(np.float32)), tf_dt)
                _, argmax = tf.nn.max_pool_with_argmax(nhwc, [1] + k + [1], [1] + s + [1],
                                                       padding, include_batch_in_index=batch)
                gin = tf.raw_ops.MaxPoolGradWithArgmax(
                    input=nhwc, grad=grad, argmax=argmax, ksize=[1] + k + [1],
                    strides=[1] + s + [1], padding=padding, include_batch_in_index=batch)
                out.write(pool_case("tf2d_grad_" + label, 2, dt, x, opts, y, i, grads=(
                    np.transpose(grad.numpy(), (0, 3, 1, 2)),
                    np.transpose(gin.numpy(), (0, 3, 1, 2)))))
                count += 2
    return count


# Where the frameworks' window arithmetic differs from PyTorch's (PoolOptions::pool_rule): windows
# that do not fit the padded input (ONNX Runtime's truncating division: an extent of 1 where
# floor gives 0, then empty outputs, then an error; TensorFlow's VALID: empty outputs, then an
# error), windows with no tap inside the input (ONNX Runtime: the lowest finite value, the index
# of coordinates (n, c, -1, ...)), ceil_mode's last window. name, input shape (NC...), ONNX
# attributes.
ORT_RULE_CASES = [
    ("extent1", [1, 1, 3], dict(kernel_shape=[2], strides=[2], dilations=[3])),
    ("empty", [1, 2, 1], dict(kernel_shape=[3], strides=[2])),
    ("refused", [1, 1, 1], dict(kernel_shape=[3], strides=[1])),
    ("extent1_w", [1, 1, 4, 2], dict(kernel_shape=[2, 3], strides=[1, 2])),
    ("empty_h", [2, 2, 2, 5], dict(kernel_shape=[4, 2], strides=[3, 1])),
    ("extent1_dil", [1, 2, 3, 4, 2], dict(kernel_shape=[2, 2, 3], strides=[2, 2, 2])),
    ("notap", [1, 2, 1], dict(kernel_shape=[2], strides=[2], dilations=[3], pads=[1, 1])),
    ("notap_h", [1, 2, 3, 5], dict(kernel_shape=[3, 1], strides=[5, 1], dilations=[5, 1],
                                   pads=[2, 0, 2, 0])),
    ("notap_w", [1, 2, 2, 1], dict(kernel_shape=[1, 2], strides=[1, 2], dilations=[1, 3],
                                   pads=[0, 1, 0, 1])),
    ("notap_d", [1, 2, 3, 5, 2], dict(kernel_shape=[3, 1, 1], strides=[5, 1, 1],
                                      dilations=[5, 1, 1], pads=[2, 0, 0, 2, 0, 0])),
    ("same_dil", [1, 1, 5], dict(kernel_shape=[3], dilations=[2], auto_pad="SAME_UPPER")),
    ("same_refused", [1, 1, 1], dict(kernel_shape=[3], dilations=[3], auto_pad="SAME_UPPER")),
    # SAME with the stride past the kernel: negative padding, windows start inside the input.
    ("same_negative_upper", [1, 2, 3], dict(kernel_shape=[1], strides=[4], auto_pad="SAME_UPPER")),
    ("same_negative_lower", [1, 2, 3], dict(kernel_shape=[1], strides=[4], auto_pad="SAME_LOWER")),
    ("same_negative_k2", [1, 1, 8], dict(kernel_shape=[2], strides=[4], auto_pad="SAME_UPPER")),
    ("same_negative_2d", [2, 2, 7, 9], dict(kernel_shape=[2, 1], strides=[4, 4],
                                            auto_pad="SAME_LOWER")),
    ("same_negative_dil", [1, 2, 5, 6, 9], dict(kernel_shape=[1, 2, 1], strides=[3, 4, 4],
                                                dilations=[1, 2, 1], auto_pad="SAME_UPPER")),
    ("ceil_kept", [1, 1, 5], dict(kernel_shape=[2], strides=[2], ceil_mode=1)),
    ("ceil_dropped", [1, 1, 5], dict(kernel_shape=[2], strides=[2], pads=[1, 1], ceil_mode=1)),
    ("ceil_dil", [1, 1, 6], dict(kernel_shape=[2], strides=[2], dilations=[2], ceil_mode=1)),
    ("ceil_2d", [1, 1, 4, 5], dict(kernel_shape=[2, 2], strides=[3, 3], pads=[0, 1, 1, 1],
                                   ceil_mode=1)),
]

# name, input shape (NCHW), ksize, strides, padding
TF_RULE_CASES = [
    ("valid_empty", [1, 1, 2, 3], [3, 1], [2, 1], "VALID"),
    ("valid_refused", [1, 1, 1, 2], [3, 1], [1, 1], "VALID"),
    ("valid_empty_w", [1, 3, 5, 2], [3, 3], [3, 3], "VALID"),
    ("valid_k4s4", [1, 2, 5, 1], [4, 1], [4, 1], "VALID"),
    ("same_s4", [1, 1, 3, 3], [1, 1], [4, 4], "SAME"),
    ("same_k3s2", [2, 2, 4, 4], [3, 3], [2, 2], "SAME"),
]


def rule_cases(out):
    """The pool_rule cases: each framework's answer (or refusal) as golden cases."""
    count = 0
    for j, (name, shape, attrs) in enumerate(ORT_RULE_CASES):
        nd = len(shape) - 2
        for order in (0, 1) if nd > 1 else (0,):
            g = np.random.default_rng(7000 + 10 * j + order)
            x = sample(g, shape, np.float32)
            try:
                y, i = onnx_run(x, dict(attrs, storage_order=order))
            except Exception:  # ONNX Runtime refuses the shape ("negative" output dimension)
                y = i = None
            opts = dict(kernel_size=attrs["kernel_shape"], stride=attrs.get("strides", [1] * nd),
                        dilation=attrs.get("dilations", [1] * nd),
                        ceil_mode=attrs.get("ceil_mode", 0), max_rule="first_tap",
                        index_format="onnx_column_major" if order else "onnx",
                        pool_rule="onnx_runtime")
            if "auto_pad" in attrs:
                opts["auto_pad"] = AUTO_PAD[attrs["auto_pad"]]
            else:
                pads = attrs.get("pads", [0] * 2 * nd)
                opts.update(auto_pad="explicit_padding", padding=pads[:nd], padding_end=pads[nd:])
            out.write(pool_case("onnxrule%dd_%s_order%d" % (nd, name, order), nd, "f32", x, opts,
                                y, i))
            count += 1
    for j, (name, shape, k, s, padding) in enumerate(TF_RULE_CASES):
        for batch in (False, True):
            g = np.random.default_rng(7500 + 10 * j + batch)
            x = sample(g, shape, np.float32)
            try:
                y, i = tf.nn.max_pool_with_argmax(np.transpose(x, (0, 2, 3, 1)), [1] + k + [1],
                                                  [1] + s + [1], padding,
                                                  include_batch_in_index=batch)
                y = np.transpose(y.numpy(), (0, 3, 1, 2))
                i = np.transpose(i.numpy(), (0, 3, 1, 2))
            except Exception:  # "Computed output size would be negative"
                y = i = None
            opts = dict(kernel_size=k, stride=s, dilation=[1, 1], max_rule="first_tap",
                        auto_pad="same_upper" if padding == "SAME" else "valid",
                        index_format="tensorflow_with_batch" if batch else "tensorflow",
                        pool_rule="tensorflow")
            out.write(pool_case("tfrule2d_%s%s" % (name, "_batch" if batch else ""), 2, "f32",
                                x, opts, y, i))
            count += 1
    return count


# ONNX's own backend node tests (the onnx package's test cases) above this many input elements
# stay out of the checked-in file (test_maxpool_3d_default, ..._use_ref_impl_large: 1 MB of
# text); bench/onnx_node_tests.py runs every one against the library by hand.
NODE_TEST_LIMIT = 4096


def onnx_node_cases(out):
    """ONNX's backend node tests for MaxPool: the spec's expected values (and indices where the
    test has them; else ONNX Runtime's for the same values)."""
    from onnx.backend.test.case.node import collect_testcases
    count = 0
    for c in collect_testcases(None):
        node = c.model.graph.node[0]
        if node.op_type != "MaxPool":
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
        (x,), expected = c.data_sets[0]
        if x.size > NODE_TEST_LIMIT:
            print("onnx node test %s: %d elements, left out" % (c.name, x.size))
            continue
        nd = x.ndim - 2
        y, i = onnx_run(x, dict(attrs))
        assert np.array_equal(y, expected[0]), c.name
        if len(expected) > 1:
            assert np.array_equal(i, expected[1]), c.name
        dt = [k for k, v in TYPES.items() if v[0] == x.dtype][0]
        opts = dict(kernel_size=attrs["kernel_shape"], stride=attrs.get("strides", [1] * nd),
                    dilation=attrs.get("dilations", [1] * nd),
                    ceil_mode=attrs.get("ceil_mode", 0), max_rule="first_tap",
                    index_format="onnx_column_major" if attrs.get("storage_order") else "onnx")
        if attrs.get("auto_pad", "NOTSET") != "NOTSET":
            opts["auto_pad"] = AUTO_PAD[attrs["auto_pad"]]
        else:
            pads = attrs.get("pads", [0] * 2 * nd)
            opts.update(auto_pad="explicit_padding", padding=pads[:nd], padding_end=pads[nd:])
        out.write(pool_case("onnxnode_" + c.name, nd, dt, x, opts, expected[0], i))
        count += 1
    return count


def unpool_case(name, nd, x, i, opts, y, dt="f32"):
    """An unpool case: values x, indices i (in opts' index_format), output y."""
    t = "case %s\nop unpool\nnd %d\ndtype %s\n" % (name, nd, dt)
    for key in ("kernel_size", "stride", "padding", "padding_end", "output_size"):
        if key in opts:
            t += "%s %s\n" % (key, ints(opts[key]))
    for key in ("output_size_rule", "index_format"):
        t += "%s %s\n" % (key, opts[key])
    t += "input_shape %s\nin_values %s\nin_indices %s\n" % (ints(x.shape), hexbits(x), ints(i))
    return t + "output_shape %s\nout_values %s\nend\n" % (ints(y.shape), hexbits(y))


def onnx_unpool_run(x, i, attrs, output_shape=None, reference=False):
    """ONNX Runtime's CPU MaxUnpool (opset 11), or ONNX's reference evaluator."""
    names = ["X", "I"] + (["S"] if output_shape is not None else [])
    node = helper.make_node("MaxUnpool", names, ["Y"], **attrs)
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(x.shape)),
              helper.make_tensor_value_info("I", TensorProto.INT64, list(i.shape))]
    if output_shape is not None:
        inputs.append(helper.make_tensor_value_info("S", TensorProto.INT64, [len(output_shape)]))
    graph = helper.make_graph([node], "unpool", inputs,
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], ir_version=8)
    feed = {"X": x, "I": i}
    if output_shape is not None:
        feed["S"] = np.array(output_shape, dtype=np.int64)
    if reference:
        from onnx.reference import ReferenceEvaluator
        return ReferenceEvaluator(model).run(None, feed)[0]
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feed)[0]


# name, nd, pooling input's spatial extents, MaxPool attributes, MaxUnpool attributes (strides
# default 1, as ONNX's), output_shape's spatial extents (None: none given), "reference": ONNX's
# reference evaluator computes it (output_size_rule onnx) instead of ONNX Runtime.
ONNX_UNPOOL_CASES = [
    ("k2s2", 2, [6, 8], dict(kernel_shape=[2, 2], strides=[2, 2]),
     dict(kernel_shape=[2, 2], strides=[2, 2]), None, False),
    ("k3s2p1_shape", 2, [8, 10], dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
     dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), [8, 10], False),
    ("asym_stride1", 1, [9], dict(kernel_shape=[3], pads=[2, 0]),
     dict(kernel_shape=[3], pads=[2, 0]), None, False),
    ("k2s2_larger", 2, [6, 6], dict(kernel_shape=[2, 2], strides=[2, 2]),
     dict(kernel_shape=[2, 2], strides=[2, 2]), [7, 7], False),
    ("k2s2_reshaped", 2, [6, 8], dict(kernel_shape=[2, 2], strides=[2, 2]),
     dict(kernel_shape=[2, 2], strides=[2, 2]), [4, 12], False),
    ("k2s2", 3, [4, 6, 6], dict(kernel_shape=[2, 2, 2], strides=[2, 2, 2]),
     dict(kernel_shape=[2, 2, 2], strides=[2, 2, 2]), None, False),
    ("k3s2_end", 3, [5, 4, 7], dict(kernel_shape=[3, 2, 3], strides=[2, 2, 2],
                                    pads=[0, 0, 1, 1, 0, 1]),
     dict(kernel_shape=[3, 2, 3], strides=[2, 2, 2], pads=[0, 0, 1, 1, 0, 1]), [5, 4, 7], False),
    ("k2s2_larger", 2, [6, 6], dict(kernel_shape=[2, 2], strides=[2, 2]),
     dict(kernel_shape=[2, 2], strides=[2, 2]), [7, 9], True),
    ("k3s2_larger", 1, [9], dict(kernel_shape=[3], strides=[2]),
     dict(kernel_shape=[3], strides=[2]), [11], True),
]


def onnx_unpool_opts(nd, attrs, output_shape, rule):
    pads = attrs.get("pads", [0] * 2 * nd)
    opts = dict(kernel_size=attrs["kernel_shape"], stride=attrs.get("strides", [1] * nd),
                padding=pads[:nd], padding_end=pads[nd:], output_size_rule=rule,
                index_format="onnx")
    if output_shape is not None:
        opts["output_size"] = output_shape
    return opts


def onnx_unpool_cases(out):
    """ONNX Runtime's MaxUnpool of its own MaxPool's outputs (duplicates where windows overlap),
    and of random indices anywhere in the tensor (crossing planes, duplicates); ONNX's reference
    where an output_shape is larger than the default (ONNX Runtime reads the indices in the given
    shape, the reference in the default one); ONNX's own backend node tests for MaxUnpool."""
    count = 0
    for j, (name, nd, spatial, pool_attrs, attrs, out_spatial, reference) in enumerate(
            ONNX_UNPOOL_CASES):
        g = np.random.default_rng(7000 + j)
        x = sample(g, [2, 3] + spatial, np.float32)
        x[np.isnan(x)] = 0  # the pooling's maxima: NaN rules are the pooling's business
        y, i = onnx_run(x, dict(pool_attrs))
        shape = None if out_spatial is None else [2, 3] + out_spatial
        rule = "onnx" if reference else "onnx_runtime"
        kind = "onnxref" if reference else "onnxrt"
        opts = onnx_unpool_opts(nd, attrs, shape, rule)
        z = onnx_unpool_run(y, i, attrs, shape, reference)
        out.write(unpool_case("%s%dd_%s" % (kind, nd, name), nd, y, i, opts, z))
        count += 1
        if not reference:  # random indices anywhere in the output
            r = g.integers(0, z.size, y.shape).astype(np.int64)
            r.reshape(-1)[::5] = r.reshape(-1)[0]  # duplicates across planes
            v = sample(g, list(y.shape), np.float32)
            out.write(unpool_case("%s%dd_%s_crossing" % (kind, nd, name), nd, v, r, opts,
                                  onnx_unpool_run(v, r, attrs, shape)))
            count += 1
    from onnx.backend.test.case.node import collect_testcases
    for c in collect_testcases(None):
        node = c.model.graph.node[0]
        if node.op_type != "MaxUnpool":
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        inputs, expected = c.data_sets[0]
        x, i = inputs[0], inputs[1]
        shape = list(inputs[2]) if len(inputs) > 2 else None
        nd = x.ndim - 2
        opts = onnx_unpool_opts(nd, attrs, shape, "onnx")
        assert np.array_equal(onnx_unpool_run(x, i, attrs, shape, True), expected[0]), c.name
        out.write(unpool_case("onnxnode_" + c.name, nd, x, i, opts, expected[0]))
        count += 1
    return count


# TensorFlow's explicit padding (tf.nn.max_pool2d; MaxPoolWithArgmax takes SAME and VALID only):
# name, extents, ksize, strides, [[top, bottom], [left, right]].
TF_EXPLICIT_CASES = [
    ("k3s2_pad1", [7, 8], [3, 3], [2, 2], [[1, 1], [1, 1]]),
    ("k3s1_pad2x0", [6, 5], [3, 2], [1, 2], [[2, 0], [0, 1]]),
    ("k4s3_pad3", [9, 10], [4, 4], [3, 3], [[3, 2], [0, 3]]),
]


def tf_explicit_cases(out):
    """tf.nn.max_pool2d with explicit padding gives the values; the argmax comes from
    max_pool_with_argmax over the input padded with -inf (VALID), which must give the same
    values. No NaN or -inf in the input, so that a padded tap never wins."""
    count = 0
    for j, (name, spatial, k, s, pads) in enumerate(TF_EXPLICIT_CASES):
        for dt, tf_dt in TF_TYPES.items():
            g = np.random.default_rng(8000 + 10 * j + list(TF_TYPES).index(dt))
            x32 = sample(g, [2, 2] + spatial, np.float32)
            x32[~np.isfinite(x32)] = 2.5
            nhwc = tf.cast(tf.constant(np.transpose(x32, (0, 2, 3, 1))), tf_dt)
            y = tf.nn.max_pool2d(nhwc, k, s, [[0, 0]] + pads + [[0, 0]])
            padded = tf.pad(nhwc, [[0, 0]] + pads + [[0, 0]], constant_values=-np.inf)
            y2, argmax = tf.nn.max_pool_with_argmax(padded, [1] + k + [1], [1] + s + [1], "VALID")
            assert np.array_equal(y.numpy(), y2.numpy()), name
            c = nhwc.shape[3]
            wp = spatial[1] + pads[1][0] + pads[1][1]
            a = argmax.numpy()
            yy, xx, ch = a // (wp * c), a // c % wp, a % c
            i = ((yy - pads[0][0]) * spatial[1] + (xx - pads[1][0])) * c + ch
            nchw = lambda t: np.transpose(t, (0, 3, 1, 2))
            opts = dict(kernel_size=k, stride=s, dilation=[1, 1], max_rule="first_tap",
                        auto_pad="explicit_padding", padding=[pads[0][0], pads[1][0]],
                        padding_end=[pads[0][1], pads[1][1]], index_format="tensorflow")
            out.write(pool_case("tf2d_explicit_%s_%s" % (name, dt), 2, dt,
                                nchw(nhwc.numpy()), opts, nchw(y.numpy()), nchw(i)))
            count += 1
    return count


# TensorFlow Addons' MaxUnpooling2D (the layer TensorFlow models pair with
# max_pool_with_argmax): name, pooling input's extents, pool size, strides, padding.
TF_UNPOOL_CASES = [
    ("k2s2_same", [6, 7], [2, 2], [2, 2], "SAME"),
    ("k3s2_same", [7, 9], [3, 3], [2, 2], "SAME"),
    ("k2s2_valid", [6, 8], [2, 2], [2, 2], "VALID"),
    ("k3s1_valid", [5, 6], [3, 3], [1, 1], "VALID"),
]


def addons_unpool(updates, mask, k, s, padding):
    """TensorFlow Addons' MaxUnpooling2D as it computes it, on NHWC tensors: each update goes to
    (its batch, mask // (W*C), mask // C % W, its own channel) of the unpooled shape (SAME:
    in * stride, VALID: (in - 1) * stride + pool), by tf.scatter_nd, which adds duplicates."""
    n, h, w, c = updates.shape
    if padding == "SAME":
        oh, ow = h * s[0], w * s[1]
    else:
        oh, ow = (h - 1) * s[0] + k[0], (w - 1) * s[1] + k[1]
    mask = tf.cast(mask, tf.int32)
    ones = tf.ones_like(mask)
    b = ones * tf.reshape(tf.range(n, dtype=tf.int32), [n, 1, 1, 1])
    f = ones * tf.range(c, dtype=tf.int32)
    y = mask // (ow * c)
    x = (mask // c) % ow
    coords = tf.stack([b, y, x, f], axis=-1)
    return tf.scatter_nd(coords, updates, [n, oh, ow, c])


def tf_unpool_cases(out):
    """Addons' unpooling of max_pool_with_argmax's argmax, with random updates (so duplicates
    add distinct values, in TensorFlow's order): poolgen computes it as max_pool_backward with
    tensorflow indices over the unpooled shape (op pool_backward, grad_output = the updates)."""
    count = 0
    for j, (name, spatial, k, s, padding) in enumerate(TF_UNPOOL_CASES):
        for dt, tf_dt in TF_TYPES.items():
            g = np.random.default_rng(9000 + 10 * j + list(TF_TYPES).index(dt))
            x32 = sample(g, [2, 3] + spatial, np.float32)
            x32[~np.isfinite(x32)] = 0  # sums of finite values: no NaN bits to differ on
            nhwc = tf.cast(tf.constant(np.transpose(x32, (0, 2, 3, 1))), tf_dt)
            _, mask = tf.nn.max_pool_with_argmax(nhwc, [1] + k + [1], [1] + s + [1], padding)
            updates = tf.cast(tf.constant(
                (g.integers(-40, 41, mask.shape) / 8.0).astype(np.float32)), tf_dt)
            z = addons_unpool(updates, mask, k, s, padding)
            nchw = lambda t: np.transpose(t.numpy(), (0, 3, 1, 2))
            opts = dict(kernel_size=k, stride=s, dilation=[1, 1], max_rule="any_nan",
                        auto_pad="same_upper" if padding == "SAME" else "valid",
                        index_format="tensorflow")
            t = pool_case("tfaddons2d_%s_%s" % (name, dt), 2, dt, nchw(z) * 0, opts,
                          nchw(updates), nchw(mask), grads=(nchw(updates), nchw(z)))
            out.write(t)
            count += 1
    return count


def header():
    return ("# Generated by tools/make_framework_golden.py with PyTorch %s, ONNX Runtime %s, "
            "TensorFlow %s; do not edit.\n" % (torch.__version__, ort.__version__, tf.__version__))


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden")
    path = os.path.join(outdir, "index_formats.txt")
    with open(path, "w") as f:
        f.write(header())
        for seed, c in enumerate(CASES):
            f.write(case(*c, seed=seed))
    print("%s: %d cases, %d bytes" % (path, len(CASES), os.path.getsize(path)))
    path = os.path.join(outdir, "frameworks_pool.txt")
    with open(path, "w") as f:
        f.write(header())
        n_onnx = onnx_cases(f)
        n_tf = tf_cases(f) + tf_explicit_cases(f)
        n_node = onnx_node_cases(f)
        n_rule = rule_cases(f)
    print("%s: %d ONNX Runtime, %d TensorFlow, %d ONNX node test and %d pool_rule cases, "
          "%d bytes" % (path, n_onnx, n_tf, n_node, n_rule, os.path.getsize(path)))
    path = os.path.join(outdir, "frameworks_unpool.txt")
    with open(path, "w") as f:
        f.write(header())
        n_onnx = onnx_unpool_cases(f)
        n_tf = tf_unpool_cases(f)
    print("%s: %d ONNX (Runtime, reference, node tests) and %d TensorFlow Addons cases, "
          "%d bytes" % (path, n_onnx, n_tf, os.path.getsize(path)))


if __name__ == "__main__":
    main()
