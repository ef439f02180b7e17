"""What every framework adapter does as it is imported: refuse a framework version other than the
one it was built for, and find its compiled library beside it; and the window arithmetic the
TensorFlow-side adapters share: SAME padding and the unpooled size they infer."""
import glob
import os


def check_built_for(adapter, framework, built_for, installed, how):
    """ImportError naming both versions where the adapter was built for another."""
    if built_for != installed:
        raise ImportError(f"{adapter} was built for {framework} {built_for}, but this Python has "
                          f"{framework} {installed}: {how}")


def compiled_library(package_file, pattern, adapter):
    """The adapter's compiled library (`pattern` in its package's folder)."""
    found = sorted(glob.glob(os.path.join(os.path.dirname(package_file), pattern)))
    if not found:
        raise ImportError(f"{adapter}: the compiled library ({pattern}) is missing; install the "
                          "package with `pip install --no-build-isolation ./python` where the "
                          "framework is installed")
    return found[0]


def unpooled_extent(pooled, kernel, stride, same):
    """The extent TensorFlow models unpool a pooled extent to (TensorFlow Addons' and TensorFlow
    Lite's MaxUnpooling2D): SAME pooled * stride, VALID (pooled - 1) * stride + kernel."""
    return pooled * stride if same else (pooled - 1) * stride + kernel


def same_padding(size, kernel, stride, dilation=1):
    """TensorFlow's (and lax's) SAME padding of one extent: (before, after), after >= before, the
    total what the dilated window needs past the extent."""
    total = max((-(-size // stride) - 1) * stride + dilation * (kernel - 1) + 1 - size, 0)
    return total // 2, total - total // 2
