"""poolgen.openvino against ONNX Runtime: every ONNX MaxPool-with-Indices and MaxUnpool case of
tests/golden/frameworks_{pool,unpool}.txt (ONNX Runtime 1.31's outputs, checked in by
tools/make_framework_golden.py) built as an ONNX model, read by OpenVINO with poolgen's
extension and run on its CPU device, bit for bit; MaxPool without Indices left to OpenVINO; and
a SegNet-style model run with poolgen's ops and with OpenVINO's own (its MaxPool's indices and a
ScatterElements unpooling), same bits.

    $PYTHON -m pytest -q tests/openvino   # a Python with openvino, onnx and poolgen.openvino

Skips (saying why) where any is missing.
"""
import os
import pathlib

import numpy as np
import pytest

ov = pytest.importorskip("openvino", reason="OpenVINO is not installed here")
onnx = pytest.importorskip("onnx", reason="the onnx package (to build the models) is missing")
po = pytest.importorskip("poolgen.openvino", reason="poolgen.openvino is not installed here")
from onnx import TensorProto, helper  # noqa: E402

GOLDEN = pathlib.Path(__file__).resolve().parents[1] / "golden"
TYPES = {"f32": (np.float32, TensorProto.FLOAT), "f64": (np.float64, TensorProto.DOUBLE),
         "f16": (np.float16, TensorProto.FLOAT16), "i8": (np.int8, TensorProto.INT8),
         "u8": (np.uint8, TensorProto.UINT8)}
AUTO_PAD = {"same_upper": "SAME_UPPER", "same_lower": "SAME_LOWER", "valid": "VALID"}


def golden(name):
    """The cases of a golden file: {field: words} each."""
    cases, case = [], None
    for line in (GOLDEN / name).read_text().splitlines():
        if line.startswith("#") or not line:
            continue
        key, _, rest = line.partition(" ")
        if key == "case":
            case = {"case": rest}
        elif key == "end":
            cases.append(case)
        else:
            case[key] = rest.split()
    return cases


def ints(case, key):
    return [int(v) for v in case.get(key, [])]


def array(case, key, dtype, shape):
    """Hex bit patterns (floats) or decimal integers, as the golden files hold them."""
    np_type = np.dtype(dtype)
    words = case[key]
    if np_type.kind == "f":
        bits = np.array([int(w, 16) for w in words], dtype=f"u{np_type.itemsize}")
        return bits.view(np_type).reshape(shape)
    return np.array([int(w, 16) for w in words]).astype(np_type).reshape(shape)


def window(case):
    """The case's options as ONNX attributes."""
    nd = int(case["nd"][0])
    attrs = dict(kernel_shape=ints(case, "kernel_size"))
    if "stride" in case:
        attrs["strides"] = ints(case, "stride")
    if "dilation" in case:
        attrs["dilations"] = ints(case, "dilation")
    auto_pad = case.get("auto_pad", ["explicit_padding"])[0]
    if auto_pad in AUTO_PAD:
        attrs["auto_pad"] = AUTO_PAD[auto_pad]
    elif "padding" in case:
        attrs["pads"] = ints(case, "padding") + ints(case, "padding_end") or [0] * nd
    return attrs


def model(nodes, inputs, outputs, opset, initializers=()):
    graph = helper.make_graph(nodes, "case", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                             ir_version=8).SerializeToString()


def core_with_poolgen():
    core = ov.Core()
    core.add_extension(po.EXTENSION)
    return core


def run(core, onnx_model, feed):
    compiled = core.compile_model(core.read_model(onnx_model, b""), "CPU")
    results = compiled(feed)
    return [results[o] for o in compiled.outputs]


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "f":
        return np.array_equal(a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}"))
    return np.array_equal(a, b)


def pool_cases():
    return [c for c in golden("frameworks_pool.txt")
            if c["case"].startswith("onnx") and c["op"] == ["pool"] and c["dtype"][0] in TYPES]


@pytest.mark.parametrize("case", pool_cases(), ids=lambda c: c["case"])
def test_max_pool_with_indices_is_onnx_runtimes(case):
    if case["dtype"] == ["f64"]:
        pytest.skip("OpenVINO's CPU device runs float64 models in float32 (its own conversion, "
                    "infinities becoming the largest finite value) before poolgen sees them")
    dtype, elem = TYPES[case["dtype"][0]]
    x = array(case, "in_values", dtype, ints(case, "input_shape"))
    attrs = window(case)
    attrs["ceil_mode"] = int(case["ceil_mode"][0])
    attrs["storage_order"] = int(case["index_format"][0] == "onnx_column_major")
    node = helper.make_node("MaxPool", ["X"], ["Y", "I"], **attrs)
    onnx_model = model([node], [helper.make_tensor_value_info("X", elem, list(x.shape))],
                       [helper.make_tensor_value_info("Y", elem, None),
                        helper.make_tensor_value_info("I", TensorProto.INT64, None)], 12)
    core = core_with_poolgen()
    if "error" in case:  # ONNX Runtime refuses it: so does OpenVINO with poolgen, saying why
        with pytest.raises(Exception, match="poolgen MaxPool"):
            run(core, onnx_model, {"X": x})
        return
    before = po.stats()["max_pool"]
    try:
        y, i = run(core, onnx_model, {"X": x})
    except RuntimeError as e:
        if "no max_pool kernel" not in str(e):
            raise
        pytest.skip(f"this poolgen build has no {case['dtype'][0]} kernels")
    shape = ints(case, "output_shape")
    assert same_bits(y, array(case, "out_values", dtype, shape))
    assert np.array_equal(i, np.array(ints(case, "out_indices"), np.int64).reshape(shape))
    assert po.stats()["max_pool"] == before + 1


def unpool_cases():
    """ONNX Runtime's cases, and ONNX's own node test without output_shape (where the two
    agree)."""
    return [c for c in golden("frameworks_unpool.txt")
            if c.get("output_size_rule") == ["onnx_runtime"] or
            (c["case"].startswith("onnxnode") and "output_size" not in c)]


@pytest.mark.parametrize("form", ["opset11_input", "opset11_constant", "opset9"])
@pytest.mark.parametrize("case", unpool_cases(), ids=lambda c: c["case"])
def test_max_unpool_is_onnx_runtimes(case, form):
    """output_shape, where the case has one, as a graph input (the output's shape known only at
    run time) or a constant; opset 9 has no output_shape."""
    given = ints(case, "output_size")
    if form == "opset9" and given:
        pytest.skip("opset 9's MaxUnpool takes no output_shape")
    shape = ints(case, "input_shape")
    x = array(case, "in_values", np.float32, shape)
    indices = np.array(ints(case, "in_indices"), np.int64).reshape(shape)
    attrs = {k: v for k, v in window(case).items() if k != "dilations"}
    names = ["X", "I"] + (["S"] if given else [])
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, shape),
              helper.make_tensor_value_info("I", TensorProto.INT64, shape)]
    feed, initializers = {"X": x, "I": indices}, []
    if given and form == "opset11_input":
        inputs.append(helper.make_tensor_value_info("S", TensorProto.INT64, [len(given)]))
        feed["S"] = np.array(given, np.int64)
    elif given:
        initializers.append(helper.make_tensor("S", TensorProto.INT64, [len(given)], given))
    node = helper.make_node("MaxUnpool", names, ["Y"], **attrs)
    onnx_model = model([node], inputs, [helper.make_tensor_value_info("Y", TensorProto.FLOAT,
                                                                      None)],
                       9 if form == "opset9" else 11, initializers)
    before = po.stats()["max_unpool"]
    (y,) = run(core_with_poolgen(), onnx_model, feed)
    assert same_bits(y, array(case, "out_values", np.float32, ints(case, "output_shape")))
    assert po.stats()["max_unpool"] == before + 1


def test_errors_name_the_argument():
    """An index outside the output: OpenVINO's exception with poolgen's message."""
    shape = [1, 1, 2, 2]
    node = helper.make_node("MaxUnpool", ["X", "I"], ["Y"], kernel_shape=[2, 2], strides=[2, 2])
    onnx_model = model([node], [helper.make_tensor_value_info("X", TensorProto.FLOAT, shape),
                                helper.make_tensor_value_info("I", TensorProto.INT64, shape)],
                       [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], 11)
    feed = {"X": np.ones(shape, np.float32), "I": np.array([0, 1, 2, 16]).reshape(shape)}
    with pytest.raises(Exception, match=r"poolgen MaxUnpool: indices: .*16"):
        run(core_with_poolgen(), onnx_model, feed)
    # An output_shape past what memory or int64 can hold, given at run time: poolgen's error
    # (OpenVINO's CPU device hands it over as int32, so 2^40 arrives as 0), never an abort.
    node = helper.make_node("MaxUnpool", ["X", "I", "S"], ["Y"], kernel_shape=[2, 2],
                            strides=[2, 2])
    onnx_model = model([node], [helper.make_tensor_value_info("X", TensorProto.FLOAT, shape),
                                helper.make_tensor_value_info("I", TensorProto.INT64, shape),
                                helper.make_tensor_value_info("S", TensorProto.INT64, [4])],
                       [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], 11)
    feed["I"] = np.arange(4).reshape(shape)
    for size in ([1, 1, 1 << 40, 1 << 40], [1, 1, 1 << 62, 4], [1, 1, -4, 4]):
        with pytest.raises(Exception, match=r"poolgen MaxUnpool: output_size: expected"):
            run(core_with_poolgen(), onnx_model, {**feed, "S": np.array(size, np.int64)})


def test_max_pool_without_indices_stays_openvinos():
    x = np.random.default_rng(1).standard_normal((2, 3, 9, 10)).astype(np.float32)
    x[0, 0, 0, :3] = np.nan
    for attrs in (dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 1, 1]),
                  dict(kernel_shape=[2, 3], auto_pad="SAME_UPPER", dilations=[2, 1]),
                  dict(kernel_shape=[3, 2], strides=[2, 2], ceil_mode=1)):
        node = helper.make_node("MaxPool", ["X"], ["Y"], **attrs)
        onnx_model = model([node], [helper.make_tensor_value_info("X", TensorProto.FLOAT,
                                                                  list(x.shape))],
                           [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], 12)
        core = core_with_poolgen()
        types = [op.get_type_name() for op in core.read_model(onnx_model, b"").get_ordered_ops()]
        assert "MaxPool" in types and "PoolgenMaxPool" not in types, types
        before = po.stats()["max_pool"]
        (ours,) = run(core, onnx_model, {"X": x})
        (stock,) = run(ov.Core(), onnx_model, {"X": x})
        assert same_bits(ours, stock), attrs
        assert po.stats()["max_pool"] == before


def segnet(unpool_by_scatter):
    """Conv, MaxPool with Indices, Conv, MaxUnpool to the pooled input's shape, Conv; or, for
    OpenVINO alone, the unpooling as ScatterElements into a flat zero tensor (the same where no
    two indices repeat: windows that do not overlap, as here)."""
    g = np.random.default_rng(58)
    weights = [g.standard_normal(s).astype(np.float32) * 0.3
               for s in ([8, 3, 3, 3], [8, 8, 3, 3], [2, 8, 3, 3])]
    init = [helper.make_tensor(f"W{k}", TensorProto.FLOAT, w.shape, w.ravel())
            for k, w in enumerate(weights)]
    conv = lambda i, o, w: helper.make_node("Conv", [i, w], [o], pads=[1, 1, 1, 1])
    nodes = [conv("X", "E1", "W0"), helper.make_node("Relu", ["E1"], ["R1"]),
             helper.make_node("MaxPool", ["R1"], ["P", "I"], kernel_shape=[2, 2],
                              strides=[2, 2]),
             conv("P", "E2", "W1"), helper.make_node("Relu", ["E2"], ["R2"]),
             helper.make_node("Shape", ["R1"], ["S"])]
    if unpool_by_scatter:
        init.append(helper.make_tensor("flat", TensorProto.INT64, [1], [-1]))
        nodes += [helper.make_node("ReduceProd", ["S"], ["count"], keepdims=1),
                  helper.make_node("ConstantOfShape", ["count"], ["zeros"]),
                  helper.make_node("Reshape", ["I", "flat"], ["If"]),
                  helper.make_node("Reshape", ["R2", "flat"], ["Vf"]),
                  helper.make_node("ScatterElements", ["zeros", "If", "Vf"], ["Uf"]),
                  helper.make_node("Reshape", ["Uf", "S"], ["U"])]
    else:
        nodes.append(helper.make_node("MaxUnpool", ["R2", "I", "S"], ["U"],
                                      kernel_shape=[2, 2], strides=[2, 2]))
    nodes.append(conv("U", "Y", "W2"))
    return model(nodes, [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3, 16, 16])],
                 [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], 11, init)


def test_segnet_runs_to_openvinos_bits():
    x = np.random.default_rng(5).standard_normal((2, 3, 16, 16)).astype(np.float32)
    with pytest.raises(Exception, match="MaxUnpool"):  # OpenVINO alone cannot read it
        ov.Core().read_model(segnet(False), b"")
    before = po.stats()
    (ours,) = run(core_with_poolgen(), segnet(False), {"X": x})
    (stock,) = run(ov.Core(), segnet(True), {"X": x})
    assert same_bits(ours, stock)
    after = po.stats()
    assert after["max_pool"] == before["max_pool"] + 1
    assert after["max_unpool"] == before["max_unpool"] + 1


def test_threads():
    """poolgen's threads inside OpenVINO: checked, and the results the same on two."""
    with pytest.raises(ValueError, match="positive int"):
        po.set_num_threads(0)
    x = np.random.default_rng(2).standard_normal((2, 8, 40, 40)).astype(np.float32)
    node = helper.make_node("MaxPool", ["X"], ["Y", "I"], kernel_shape=[3, 3], strides=[2, 2])
    onnx_model = model([node], [helper.make_tensor_value_info("X", TensorProto.FLOAT,
                                                              list(x.shape))],
                       [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None),
                        helper.make_tensor_value_info("I", TensorProto.INT64, None)], 12)
    one = run(core_with_poolgen(), onnx_model, {"X": x})
    po.set_num_threads(2)
    try:
        two = run(core_with_poolgen(), onnx_model, {"X": x})
    finally:
        po.set_num_threads(1)
    assert all(same_bits(a, b) for a, b in zip(one, two))
