"""PyTorch's own test inputs for these ops (its OpInfo database: sample inputs in every dtype it
lists for the CPU, and error inputs), run through stock PyTorch, poolgen's functions and the
drop-in: the same bits, strides and gradients, and the same exceptions."""
import collections

import pytest
import torch

import poolgen.torch as pt
from helpers import assert_same, assert_same_outcome, dropin, outcome, raised, stock

common = pytest.importorskip("torch.testing._internal.common_methods_invocations",
                             reason="PyTorch's OpInfo database needs expecttest (pip)")

OPS = {op.name + (f".{op.variant_test_name}" if op.variant_test_name else ""): op
       for op in common.op_db
       if op.name.startswith(("nn.functional.max_pool", "nn.functional.max_unpool"))}
POOLGEN = {name: getattr(pt, name.split(".")[2]) for name in OPS}
CASES = [(name, dtype) for name, op in sorted(OPS.items())
         for dtype in sorted(op.supported_dtypes("cpu"), key=str)]
COUNTS = collections.Counter()


def run_all(name, sample):
    """Stock, poolgen.torch's function and the drop-in on one sample."""
    op = OPS[name].op
    args = (sample.input, *sample.args)
    return (stock(op, *args, **sample.kwargs), outcome(POOLGEN[name], *args, **sample.kwargs),
            dropin(op, *args, **sample.kwargs))


def gradients(f, sample, grad_seed):
    """The gradient of f's first output (with a fixed random grad_output) in the sample's input."""
    x = sample.input.detach().clone().requires_grad_()
    out = f(x, *sample.args, **sample.kwargs)
    out = out[0] if isinstance(out, tuple) else out
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(grad_seed)).to(out.dtype)
    return torch.autograd.grad(out, x, g)[0]


def test_the_database_has_these_ops():
    names = set(OPS)
    for nd in (1, 2, 3):
        assert f"nn.functional.max_pool{nd}d" in names and f"nn.functional.max_unpool{nd}d" in names


@pytest.mark.parametrize("name,dtype", CASES, ids=[f"{n}-{str(d)[6:]}" for n, d in CASES])
def test_samples(name, dtype):
    op = OPS[name]
    backward = dtype in op.supported_backward_dtypes("cpu")
    samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))
    assert samples, f"{name} has no {dtype} samples"
    for k, sample in enumerate(samples):
        want, got, through_dropin = run_all(name, sample)
        what = f"{name} {dtype} sample {k}: input {tuple(sample.input.shape)} {sample.kwargs}"
        assert_same_outcome(got, want, what)
        assert_same_outcome(through_dropin, want, what + " (drop-in)", same_message=True)
        if backward and not raised(want):
            want_grad = stock(gradients, op.op, sample, k)
            assert_same(outcome(gradients, POOLGEN[name], sample, k), want_grad, what + " grad")
            assert_same(dropin(gradients, op.op, sample, k), want_grad, what + " grad (drop-in)")
            COUNTS[name, str(dtype), "gradients"] += 1
        COUNTS[name, str(dtype), "samples"] += 1


@pytest.mark.parametrize("name", [n for n, op in sorted(OPS.items()) if op.error_inputs_func])
def test_error_inputs(name):
    """PyTorch's error inputs raise the same type through poolgen, and through the drop-in the
    same message too (it leaves such calls to PyTorch's kernel)."""
    op = OPS[name]
    errors = list(op.error_inputs("cpu"))
    assert errors
    for k, error in enumerate(errors):
        sample = error.sample_input
        want, got, through_dropin = run_all(name, sample)
        what = f"{name} error input {k}: {error.error_regex}"
        assert raised(want) and want[1] is error.error_type, what
        assert_same_outcome(got, want, what)
        assert_same_outcome(through_dropin, want, what + " (drop-in)", same_message=True)
        COUNTS[name, "errors", "inputs"] += 1


def test_report_counts():
    """Prints the samples checked per op and dtype (pytest -s shows them)."""
    for key, count in sorted(COUNTS.items()):
        print(" ".join(key), count)
