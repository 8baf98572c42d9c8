"""Fixtures of the experiments tests."""
import pytest


@pytest.fixture
def one_thread():
    """torch on one thread for the test (an oversubscribed 2-core machine: OpenMP's spinning
    threads would slow torch 10x), restored after."""
    torch = pytest.importorskip("torch")
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
