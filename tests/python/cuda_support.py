"""What the CUDA Python tests share: whether PyTorch and a CUDA device are here, and running one
check function under pytest (skipped with the reason) or as a script (exit 77 when skipped: the GPU
machine has no pytest)."""
import sys


def torch_or_reason():
    """(torch, "") where PyTorch sees a CUDA device, else (None, why not)."""
    try:
        import torch
    except ImportError:
        return None, "PyTorch is not installed"
    if not torch.cuda.is_available():
        return None, "no CUDA device"
    return torch, ""


def run_under_pytest(check):
    """`check()` returns "" when it ran, else why it could not: a pytest skip with that reason."""
    import pytest
    reason = check()
    if reason:
        pytest.skip(reason)


def run_as_script(check, done):
    reason = check()
    print(f"skipped: {reason}" if reason else done)
    sys.exit(77 if reason else 0)
