#!/usr/bin/env python3
"""ONNX MaxPool with Indices and MaxUnpool in OpenVINO, on its CPU device: with poolgen's extension
(poolgen.openvino), and without it (OpenVINO's own MaxPool for the pooling; for the unpooling,
which OpenVINO cannot convert, the ScatterElements model a user would write instead), as a model
calls them (an infer request's infer(), outputs included): median of 15 calls, f32, on 1 and 2 of
OpenVINO's threads (INFERENCE_NUM_THREADS; poolgen's ops run on one, the extension's default).

    $PYTHON bench/openvino_bench.py     # rows: case|threads|stock ms|poolgen ms
"""
import numpy as np
import openvino as ov
from onnx import TensorProto, helper

import poolgen.openvino as po

ROWS = [("8x64x112x112 k2s2", (8, 64, 112, 112), 2, 2, 0),
        ("8x64x112x112 k3s2p1", (8, 64, 112, 112), 3, 2, 1),
        ("1x64x56x56 k2s2", (1, 64, 56, 56), 2, 2, 0)]


def onnx_model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "bench", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)],
                             ir_version=8).SerializeToString()


def pool_model(shape, k, s, p):
    node = helper.make_node("MaxPool", ["X"], ["Y", "I"], kernel_shape=[k, k], strides=[s, s],
                            pads=[p] * 4)
    return onnx_model([node], [helper.make_tensor_value_info("X", TensorProto.FLOAT, shape)],
                      [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None),
                       helper.make_tensor_value_info("I", TensorProto.INT64, None)])


def unpool_model(pooled, shape, k, s, p, by_scatter):
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, pooled),
              helper.make_tensor_value_info("I", TensorProto.INT64, pooled)]
    out = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)]
    size = helper.make_tensor("S", TensorProto.INT64, [4], list(shape))
    if not by_scatter:
        node = helper.make_node("MaxUnpool", ["X", "I", "S"], ["Y"], kernel_shape=[k, k],
                                strides=[s, s], pads=[p] * 4)
        return onnx_model([node], inputs, out, [size])
    flat = helper.make_tensor("flat", TensorProto.INT64, [1], [-1])
    zeros = helper.make_tensor("zeros", TensorProto.FLOAT, [int(np.prod(shape))],
                               np.zeros(int(np.prod(shape)), np.float32))
    nodes = [helper.make_node("Reshape", ["I", "flat"], ["If"]),
             helper.make_node("Reshape", ["X", "flat"], ["Xf"]),
             helper.make_node("ScatterElements", ["zeros", "If", "Xf"], ["Yf"]),
             helper.make_node("Reshape", ["Yf", "S"], ["Y"])]
    return onnx_model(nodes, inputs, out, [size, flat, zeros])


def median_ms(core, model, feed):
    import time
    request = core.compile_model(core.read_model(model, b""), "CPU").create_infer_request()
    request.infer(feed)
    times = []
    for _ in range(15):
        start = time.perf_counter()
        request.infer(feed)
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2] * 1e3


def core_for(threads, extension):
    core = ov.Core()
    core.set_property("CPU", {"INFERENCE_NUM_THREADS": threads})
    if extension:
        core.add_extension(po.EXTENSION)
    return core


for threads in (1, 2):
    stock, ours = core_for(threads, False), core_for(threads, True)
    for name, shape, k, s, p in ROWS:
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        model = pool_model(list(shape), k, s, p)
        values, indices = ours.compile_model(ours.read_model(model, b""), "CPU")({"X": x}).values()
        a, b = median_ms(stock, model, {"X": x}), median_ms(ours, model, {"X": x})
        print(f"MaxPool+Indices {name}|{threads}|{a:.3f}|{b:.3f}|{a / b:.1f}x", flush=True)
        feed = {"X": values, "I": indices}
        if k == s:  # (ScatterElements matches MaxUnpool only where no index repeats)
            a = median_ms(stock, unpool_model(list(values.shape), shape, k, s, p, True), feed)
            b = median_ms(ours, unpool_model(list(values.shape), shape, k, s, p, False), feed)
            print(f"MaxUnpool {name}|{threads}|{a:.3f}|{b:.3f}|{a / b:.1f}x", flush=True)
