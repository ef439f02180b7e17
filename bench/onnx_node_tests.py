#!/usr/bin/env python3
"""ONNX's own backend node tests for MaxPool and MaxUnpool, run on poolgen's C API by hand.

    . ~/.cache/poolgen-frameworks/env.sh
    $FRAMEWORKS_PY bench/onnx_node_tests.py [install/lib/libpoolgen.so]

Every node test of the onnx package's backend cases whose operator is MaxPool or MaxUnpool,
the large ones included (tests/golden/frameworks_pool.txt holds the others, which CI runs).
poolgen gets the options that give ONNX's definition; a test passes when its expected outputs
come back exactly (values bit for bit, indices equal). MaxUnpool runs with ONNX's own output
size rule (output_size_rule onnx: the indices address the default-sized output), which its
node test with an output_shape needs (ONNX Runtime's rule fails that one).
"""
import os
import sys

import numpy as np
from onnx import helper
from onnx.backend.test.case.node import collect_testcases

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import frameworks_bench as fb  # noqa: E402  (its ctypes mirror of the C API)

DTYPES = {np.dtype(np.float32): 0, np.dtype(np.float64): 2, np.dtype(np.float16): 3,
          np.dtype(np.int8): 5, np.dtype(np.uint8): 6}
AUTO_PAD = {"NOTSET": 0, "SAME_UPPER": 1, "SAME_LOWER": 2, "VALID": 3}


def run_maxpool(pg, x, attrs, out_shape):
    nd = x.ndim - 2
    o = fb.PoolOptions()
    for j in range(nd):
        o.kernel_size[j] = attrs["kernel_shape"][j]
        o.stride[j] = attrs.get("strides", [1] * nd)[j]
        o.dilation[j] = attrs.get("dilations", [1] * nd)[j]
    o.ceil_mode = attrs.get("ceil_mode", 0)
    o.auto_pad = AUTO_PAD[attrs.get("auto_pad", "NOTSET")]
    if o.auto_pad == 0:
        pads = attrs.get("pads", [0] * 2 * nd)
        o.padding_end_given = 1
        for j in range(nd):
            o.padding[j], o.padding_end[j] = pads[j], pads[nd + j]
    o.max_rule = 1
    o.index_format = 2 if attrs.get("storage_order") else 1
    values = np.empty(out_shape, x.dtype)
    indices = np.empty(out_shape, np.int64)
    dtype = DTYPES[x.dtype]
    pg.bind(pg.lib.poolgen_max_pool, x, values, indices, o, nd, (dtype, dtype, fb.I64))()
    return values, indices


def run_maxunpool(pg, x, indices, output_shape, attrs, out_shape):
    nd = x.ndim - 2
    o = fb.UnpoolOptions()
    pads = attrs.get("pads", [0] * 2 * nd)
    for j in range(nd):
        o.kernel_size[j] = attrs["kernel_shape"][j]
        o.stride[j] = attrs.get("strides", [1] * nd)[j]
        o.padding[j], o.padding_end[j] = pads[j], pads[nd + j]
    o.padding_end_given = 1
    if output_shape is not None:
        o.output_size_len = len(output_shape)
        for j, e in enumerate(output_shape):
            o.output_size[j] = e
    o.output_size_rule = 2  # onnx
    o.index_format = 1  # onnx
    out = np.empty(out_shape, x.dtype)
    pg.unpool(x, indices, out, o, nd)()  # f32, as ONNX's MaxUnpool
    return out


def main():
    lib = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "install", "lib", "libpoolgen.so")
    pg = fb.Poolgen(lib, 1)
    counts = {}
    for c in collect_testcases(None):
        node = c.model.graph.node[0]
        if node.op_type not in ("MaxPool", "MaxUnpool"):
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
        inputs, expected = c.data_sets[0]
        x = np.ascontiguousarray(inputs[0])
        try:
            if node.op_type == "MaxPool":
                values, indices = run_maxpool(pg, x, attrs, expected[0].shape)
                ok = values.tobytes() == expected[0].tobytes() and (
                    len(expected) < 2 or np.array_equal(indices, expected[1]))
            else:
                shape = list(inputs[2]) if len(inputs) > 2 else None
                out = run_maxunpool(pg, x, np.ascontiguousarray(inputs[1]), shape, attrs,
                                    expected[0].shape)
                ok = out.tobytes() == expected[0].tobytes()
        except RuntimeError as e:
            ok = False
            print(e)
        print("%-50s %s" % (c.name, "pass" if ok else "FAIL"))
        passed, failed = counts.get(node.op_type, (0, 0))
        counts[node.op_type] = (passed + ok, failed + (not ok))
    print("; ".join("%s: %d passed, %d failed" % (op, p, f) for op, (p, f) in counts.items()))
    sys.exit(1 if any(f for _, f in counts.values()) else 0)


if __name__ == "__main__":
    main()
