#!/usr/bin/env python3
"""poolgen's ONNX and TensorFlow pooling against ONNX Runtime and TensorFlow themselves.

    . ~/.cache/poolgen-frameworks/env.sh    # onnx, onnxruntime, tensorflow, numpy
    $FRAMEWORKS_PY bench/frameworks_bench.py [install/lib/libpoolgen.so] [--threads 1,2]

Each row times one framework's operator as its users call it and poolgen's C API (writing into
the caller's arrays, as C and C++ users call it) on the same numpy arrays with the options that give that framework's definition (checked equal first:
values bit for bit, indices exactly): ONNX Runtime's CPU MaxPool with Indices (opset 12, an
InferenceSession of the one node, intra-op threads = threads, run through an IOBinding into
preallocated outputs) and MaxUnpool (opset 11) of its outputs; TensorFlow's tf.nn.max_pool_with_argmax (NHWC; intra-op threads = threads, set before
TensorFlow starts, so each thread count runs in a process of its own) and TensorFlow Addons'
MaxUnpooling2D of its argmax (Addons' tf.scatter_nd arithmetic as a tf.function: Addons itself
is retired; poolgen runs it as max_pool_backward with tensorflow indices). Medians of repeated timings, milliseconds;
poolgen through ctypes, its C structs built once per case as a C caller holds them (a ctypes call
costs a few microseconds, which the small rows include).
"""
import ctypes
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from poolgen._c_api import (  # noqa: E402  (no library load)
    F32, I64, INDEX_ONNX, INDEX_TENSORFLOW, INDEX_TENSORFLOW_WITH_BATCH, MAX_FIRST_TAP,
    OUTPUT_SIZE_ONNX_RUNTIME, SAME_UPPER, VALID, PoolOptions, Tensor, UnpoolOptions)
SHAPES = [  # name, N, C, H, W, kernel, stride, pads (begin h, w, end h, w) or SAME
    ("v0.1 8x64x112x112 k2s2", (8, 64, 112, 112), 2, 2, (0, 0, 0, 0)),
    ("v0.1 8x64x112x112 k3s2 SAME", (8, 64, 112, 112), 3, 2, "SAME"),
    ("1x64x56x56 k2s2", (1, 64, 56, 56), 2, 2, (0, 0, 0, 0)),
    ("1x64x56x56 k3s2 pads 0,0,1,1", (1, 64, 56, 56), 3, 2, (0, 0, 1, 1)),
]


def tensor(a, dtype):
    t = Tensor()
    t.data = a.ctypes.data
    t.dtype = dtype
    t.rank = a.ndim
    for i, e in enumerate(a.shape):
        t.shape[i] = e
        t.strides[i] = a.strides[i] // a.itemsize
    return t


class Poolgen:
    def __init__(self, path, threads):
        self.lib = ctypes.CDLL(path)
        self.lib.poolgen_set_num_threads(threads)
        self.message = ctypes.create_string_buffer(512)

    def bind(self, fn, a, b, c, options, nd=2, dtypes=(F32, I64, F32)):
        """The C call on numpy arrays (PyTorch's dimension order, any strides), its structs built
        once, as a C caller holds them: returns the call, which raises on an error."""
        refs = [ctypes.byref(tensor(t, d)) for t, d in zip((a, b, c), dtypes)]
        refs.append(ctypes.byref(options))

        def run():
            if fn(nd, *refs, self.message, 512):
                raise RuntimeError(self.message.value.decode())
        return run

    def pool(self, x, values, indices, options):
        return self.bind(self.lib.poolgen_max_pool, x, values, indices, options,
                         dtypes=(F32, F32, I64))

    def unpool(self, values, indices, out, options, nd=2):
        return self.bind(self.lib.poolgen_max_unpool, values, indices, out, options, nd)

    def pool_backward(self, grad_output, indices, grad_input, options):
        return self.bind(self.lib.poolgen_max_pool_backward, grad_output, indices, grad_input,
                         options)


def unpool_options(k, s, pads):
    """ONNX Runtime's MaxUnpool: global indices, its output size rule."""
    o = UnpoolOptions()
    o.kernel_size[0] = o.kernel_size[1] = k
    o.stride[0] = o.stride[1] = s
    o.padding[0], o.padding[1], o.padding_end[0], o.padding_end[1] = pads
    o.padding_end_given = 1
    o.output_size_rule = OUTPUT_SIZE_ONNX_RUNTIME
    o.index_format = INDEX_ONNX
    return o


def options(k, s, pads, index_format):
    o = PoolOptions()
    o.kernel_size[0] = o.kernel_size[1] = k
    o.stride[0] = o.stride[1] = s
    if pads == "SAME":
        o.auto_pad = SAME_UPPER
    else:
        o.padding[0], o.padding[1], o.padding_end[0], o.padding_end[1] = pads
        o.padding_end_given = 1
    o.max_rule = MAX_FIRST_TAP
    o.index_format = index_format
    return o


def median_ms(f, reps):
    f()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return 1000 * sorted(times)[len(times) // 2]


def onnx_rows(pg, threads, reps):
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper
    rows = []

    def session(model):
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        return ort.InferenceSession(model.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])

    for name, shape, k, s, pads in SHAPES:
        attrs = dict(kernel_shape=[k, k], strides=[s, s])
        if pads == "SAME":
            attrs["auto_pad"] = "SAME_UPPER"
        else:
            attrs["pads"] = list(pads)
        node = helper.make_node("MaxPool", ["X"], ["Y", "I"], **attrs)
        graph = helper.make_graph(
            [node], "pool", [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(shape))],
            [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None),
             helper.make_tensor_value_info("I", TensorProto.INT64, None)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)],
                                  ir_version=8)
        x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
        y, i = session(model).run(None, {"X": x})
        values, indices = np.empty_like(y), np.empty_like(i)
        o = options(k, s, pads, INDEX_ONNX)
        run_pg = pg.pool(x, values, indices, o)
        run_pg()
        assert np.array_equal(values.view(np.uint32), y.view(np.uint32)), name
        assert np.array_equal(indices, i), name
        # Both write into preallocated outputs (ONNX Runtime through an IOBinding). poolgen runs
        # while no session lives: a session's idle threads spin, taking a core from poolgen's.
        t_pg = median_ms(run_pg, reps)
        t_ort = median_ms(bound_run(session(model), {"X": x}, {"Y": values, "I": indices}), reps)
        rows.append(("ONNX Runtime MaxPool " + name, threads, t_ort, t_pg))
        # MaxUnpool (opset 11) of that pooling (SAME as its explicit pads).
        pads = (0, 0, 1, 1) if pads == "SAME" else pads
        node = helper.make_node("MaxUnpool", ["X", "I"], ["Y"], kernel_shape=[k, k],
                                strides=[s, s], pads=list(pads))
        graph = helper.make_graph(
            [node], "unpool",
            [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(y.shape)),
             helper.make_tensor_value_info("I", TensorProto.INT64, list(i.shape))],
            [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)],
                                  ir_version=8)
        (z,) = session(model).run(None, {"X": y, "I": i})
        out = np.empty_like(z)
        uo = unpool_options(k, s, pads)
        run_pg = pg.unpool(y, i, out, uo)
        run_pg()
        assert np.array_equal(out.view(np.uint32), z.view(np.uint32)), name
        t_pg = median_ms(run_pg, reps)
        t_ort = median_ms(bound_run(session(model), {"X": y, "I": i}, {"Y": out}), reps)
        rows.append(("ONNX Runtime MaxUnpool " + name, threads, t_ort, t_pg))
    return rows


def bound_run(sess, inputs, outputs):
    """A call of `sess` reading `inputs` and writing into the arrays `outputs` (an IOBinding, as
    a deployed program calls it: no output allocated per run)."""
    binding = sess.io_binding()
    for name, a in inputs.items():
        binding.bind_cpu_input(name, a)
    for name, a in outputs.items():
        binding.bind_output(name, "cpu", 0, a.dtype, list(a.shape), a.ctypes.data)
    return lambda: sess.run_with_iobinding(binding)


def addons_unpool(tf, updates, mask, out_hw):
    """TensorFlow Addons' MaxUnpooling2D as it computes it (NHWC, argmax without the batch):
    tf.scatter_nd of each update to (batch, mask // (W*C), mask // C % W, its channel)."""
    n, _, _, c = updates.shape
    oh, ow = out_hw
    mask = tf.cast(mask, tf.int32)
    ones = tf.ones_like(mask)
    b = ones * tf.reshape(tf.range(n, dtype=tf.int32), [n, 1, 1, 1])
    coords = tf.stack([b, mask // (ow * c), (mask // c) % ow, ones * tf.range(c, dtype=tf.int32)],
                      axis=-1)
    return tf.scatter_nd(coords, updates, [n, oh, ow, c])


def tf_rows(pg, threads, reps):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    rows = []
    for name, shape, k, s, pads in SHAPES:
        if pads != "SAME" and any(pads):
            continue  # TensorFlow's argmax pooling takes SAME or VALID only
        n, c, h, w = shape
        x_nhwc = np.random.default_rng(0).standard_normal((n, h, w, c), dtype=np.float32)
        padding = "SAME" if pads == "SAME" else "VALID"
        xt = tf.constant(x_nhwc)
        run = lambda: tf.nn.max_pool_with_argmax(xt, [1, k, k, 1], [1, s, s, 1], padding,
                                                 include_batch_in_index=True)
        y, i = run()
        y = np.transpose(y.numpy(), (0, 3, 1, 2))
        i = np.transpose(i.numpy(), (0, 3, 1, 2))
        x = np.transpose(x_nhwc, (0, 3, 1, 2))  # an NHWC view in PyTorch's order
        # Outputs in NHWC memory, as TensorFlow's.
        values = np.transpose(np.empty((n, y.shape[2], y.shape[3], c), np.float32), (0, 3, 1, 2))
        indices = np.transpose(np.empty((n, y.shape[2], y.shape[3], c), np.int64), (0, 3, 1, 2))
        o = options(k, s, pads if pads == "SAME" else (0, 0, 0, 0), INDEX_TENSORFLOW_WITH_BATCH)
        if pads != "SAME":
            o.auto_pad = VALID
            o.padding_end_given = 0
        run_pg = pg.pool(x, values, indices, o)
        run_pg()
        assert np.array_equal(values, y) and np.array_equal(indices, i), name
        t_tf = median_ms(lambda: [t.numpy() for t in run()], reps)
        t_pg = median_ms(run_pg, reps)
        rows.append(("TensorFlow max_pool_with_argmax NHWC " + name, threads, t_tf, t_pg))
        # Addons' unpooling of that argmax (without the batch), as a tf.function; poolgen runs
        # it as max_pool_backward with tensorflow indices over the unpooled shape.
        _, mask = tf.nn.max_pool_with_argmax(xt, [1, k, k, 1], [1, s, s, 1], padding)
        updates = tf.constant(np.transpose(y, (0, 2, 3, 1)))
        oh, ow = (y.shape[2] * s, y.shape[3] * s) if padding == "SAME" else (h, w)
        unpool = tf.function(lambda: addons_unpool(tf, updates, mask, (oh, ow)))
        z = np.transpose(unpool().numpy(), (0, 3, 1, 2))
        m = np.transpose(mask.numpy(), (0, 3, 1, 2))
        out = np.transpose(np.empty((n, oh, ow, c), np.float32), (0, 3, 1, 2))
        o.index_format = INDEX_TENSORFLOW
        run_pg = pg.pool_backward(y, m, out, o)
        run_pg()
        assert np.array_equal(out, z), name
        t_tf = median_ms(lambda: unpool().numpy(), reps)
        t_pg = median_ms(run_pg, reps)
        rows.append(("TensorFlow Addons MaxUnpooling2D NHWC " + name, threads, t_tf, t_pg))
    return rows


def main():
    args = [a for j, a in enumerate(sys.argv[1:])  # positional: not a flag nor a flag's value
            if not a.startswith("--") and not sys.argv[j].startswith("--")]
    lib = args[0] if args else os.path.join(os.path.dirname(__file__), "..", "install", "lib",
                                           "libpoolgen.so")
    if "--child" in sys.argv:  # one framework, one thread count: rows as Python literals
        framework, threads = sys.argv[sys.argv.index("--child") + 1].split(":")
        pg = Poolgen(lib, int(threads))
        rows = (onnx_rows if framework == "onnx" else tf_rows)(pg, int(threads), 21)
        print(repr(rows))
        return
    threads = [1, 2]
    if "--threads" in sys.argv:
        threads = [int(t) for t in sys.argv[sys.argv.index("--threads") + 1].split(",")]
    rows = []
    for framework in ("onnx", "tf"):
        for t in threads:
            out = subprocess.run([sys.executable, __file__, lib, "--child", "%s:%d" % (framework, t)],
                                 check=True, capture_output=True, text=True).stdout
            rows += eval(out.strip().splitlines()[-1])
    print("| case | threads | framework ms | poolgen ms | speed-up |")
    print("|---|---:|---:|---:|---:|")
    for name, t, theirs, ours in rows:
        print("| %s | %d | %.3g | %.3g | %.2fx |" % (name, t, theirs, ours, theirs / ours))


if __name__ == "__main__":
    main()
