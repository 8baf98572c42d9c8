"""Geometry and precision keep every tensor on the model's device.

This machine has no GPU, so the tests emulate one. :class:`EmulatedCuda` is a TorchFunctionMode:
it sees every torch call made while it is active (inside transformers' forward passes too) and
keeps a set of the tensors that live "on the GPU": the model's parameters and buffers, whatever
is moved there (``.to(device)``, ``.cuda()``, ``device=`` in a factory), and every result of an
op that has such an input. The calls themselves run on the CPU, so values are real and can be
compared with a plain CPU run; a device tensor reports ``device == cuda:0``, so the code under
test takes its CUDA branches. The mode refuses what CUDA refuses:

* an op that mixes a device tensor with a CPU tensor of one or more dimensions (CUDA accepts
  only 0-dim CPU scalars) - stricter than CUDA only for CPU index tensors, which CUDA copies;
* ``.numpy()`` / ``np.asarray`` of a device tensor;
* a CPU ``torch.Generator`` drawing straight onto the device.

``.cpu()`` brings a tensor back (a copy: the device tensor stays on the device);
``torch.cuda.synchronize`` is replaced by a counter. Run against the earlier code, these
tests fail: the census multiplied CPU draws with the device's decoder matrix, and the precision
tests added CPU perturbations to a memory on the device.
"""
import math
import re
from collections import Counter
from contextlib import contextmanager
from itertools import chain
from unittest import mock

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.weak import WeakIdKeyDictionary

from accesslib.engine import geometry as geo
from accesslib.engine import precision as prec
from accesslib.models.loading import hf_model, tiny_model
from accesslib.theory.bounds import UNIT_ROUNDOFF

GPU = torch.device("cuda", 0)
CPU = torch.device("cpu")
_DEVICE_TEXT = re.compile(r"^(cpu|cuda)(:\d+)?$")
MATMULS = {torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.mm, torch.Tensor.mm,
           torch.addmm, torch.Tensor.addmm, torch.bmm, torch.nn.functional.linear}


class MixedDevices(RuntimeError):
    """An op got tensors on the (emulated) GPU and on the CPU."""


def _as_device(x):
    """x as a cpu/cuda device, or None when it is not a device argument."""
    if isinstance(x, torch.device):
        return x if x.type in ("cpu", "cuda") else None
    if isinstance(x, str) and _DEVICE_TEXT.match(x):
        return torch.device(x)
    return None


class EmulatedCuda(TorchFunctionMode):
    """Emulates a CUDA device on the CPU (see the module docstring)."""

    def __init__(self, tensors):
        super().__init__()
        self.on = WeakIdKeyDictionary()
        for t in tensors:
            self.on[t] = True
        self.matmuls = Counter()   # "cuda" / "cpu" -> matrix products run there
        self.syncs = 0

    def on_gpu(self, t) -> bool:
        return isinstance(t, torch.Tensor) and t in self.on

    def synchronize(self, device=None):
        self.syncs += 1

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.device:
            return func(*args, **kwargs)
        if func == torch.Tensor.device.__get__:
            return GPU if self.on_gpu(args[0]) else CPU
        if func == torch.Tensor.is_cuda.__get__:
            return self.on_gpu(args[0])
        if func == torch.Tensor.is_cpu.__get__:
            return not self.on_gpu(args[0])
        if func in (torch.Tensor.numpy, torch.Tensor.__array__) and self.on_gpu(args[0]):
            raise TypeError("can't convert cuda:0 device type tensor to numpy; use Tensor.cpu() first")
        target = None   # where a device argument sends the result

        def swap(x):    # run on the CPU what was asked of the GPU
            nonlocal target
            d = _as_device(x)
            if d is None:
                return x
            target = GPU if d.type == "cuda" else CPU
            return CPU if d.type == "cuda" else x

        args, kwargs = tree_map(swap, args), tree_map(swap, kwargs)
        if func is torch.Tensor.cpu:
            target = CPU
        elif func is torch.Tensor.cuda:
            target = GPU
            func = _identity
        elif func is torch.Tensor.to and target is None:
            other = next((a for a in args[1:] if isinstance(a, torch.Tensor)), kwargs.get("other"))
            if other is not None:
                target = GPU if self.on_gpu(other) else CPU
        moving = target is not None and func in (torch.Tensor.to, torch.Tensor.cpu, _identity)
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        if not moving and func is not torch.Tensor.copy_:
            gpu = [t for t in tensors if self.on_gpu(t)]
            cpu = [tuple(t.shape) for t in tensors if not self.on_gpu(t) and t.dim() > 0]
            if gpu and cpu:
                raise MixedDevices(f"{getattr(func, '__name__', func)}: expected all tensors on the same "
                                   f"device, found cuda:0 and cpu (cpu shapes {cpu})")
        gen = kwargs.get("generator")
        if target == GPU and isinstance(gen, torch.Generator) and gen.device.type != "cuda":
            raise RuntimeError("a cpu generator cannot draw on cuda:0")
        out = func(*args, **kwargs)
        if func in MATMULS:
            self.matmuls["cuda" if any(self.on_gpu(t) for t in tensors) else "cpu"] += 1
        if func is torch.Tensor.copy_:
            return out
        gpu_out = target == GPU or (target is None and any(self.on_gpu(t) for t in tensors))

        def settle(o):
            if not isinstance(o, torch.Tensor):
                return o
            if self.on_gpu(o) != gpu_out and any(o is t for t in tensors):
                o = o.clone()        # a real move makes a new tensor; the input stays where it was
            if gpu_out:
                self.on[o] = True
            else:
                self.on.pop(o, None)
            return o

        if isinstance(out, torch.Size):
            return out
        return tree_map(settle, out)


def _identity(t, *args, **kwargs):
    return t


@contextmanager
def emulated_cuda(*models):
    """The models' weights "on cuda:0" while the block runs (see :class:`EmulatedCuda`)."""
    tensors = [t for m in models for t in chain(hf_model(m).parameters(), hf_model(m).buffers())]
    mode = EmulatedCuda(tensors)
    with mock.patch.object(torch.cuda, "synchronize", mode.synchronize), mode:
        yield mode


@pytest.fixture(scope="module")
def llama():
    return tiny_model("llama", d=32, vocab_size=64, layers=2, seed=0).model


def _same(a, b):
    """Recursive exact equality of results (dataclasses, dicts, arrays, tensors, numbers)."""
    if hasattr(a, "__dataclass_fields__"):
        assert type(a) is type(b)
        for k in a.__dataclass_fields__:
            _same(getattr(a, k), getattr(b, k))
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, torch.Tensor):
        assert torch.equal(a, b)
    elif isinstance(a, np.ndarray):
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b)
    else:
        assert a == b


# ------------------------------------------------------------------ the emulation itself

def test_emulation_refuses_what_a_gpu_refuses(llama):
    ids = torch.randint(0, 64, (2, 5), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        plain = llama(ids).logits
    with emulated_cuda(llama) as mode, torch.no_grad():
        W = llama.get_output_embeddings().weight.detach()
        dev = next(llama.parameters()).device
        assert dev == GPU and llama.device == GPU
        x = ids.to(dev)
        assert x.device == GPU and ids.device == CPU      # a copy moved, the original stayed
        out = llama(x).logits
        assert out.device == GPU and torch.equal(out.cpu(), plain) and out.cpu().device == CPU
        assert mode.matmuls["cuda"] > 0 and mode.matmuls["cpu"] == 0
        # the census as it was: CPU draws against the decoder matrix on the device
        draws = torch.rand(10, 32, generator=torch.Generator().manual_seed(0))
        with pytest.raises(MixedDevices):
            draws @ W.T
        with pytest.raises(MixedDevices):
            torch.zeros(64, dtype=torch.long) + torch.bincount((draws.to(dev) @ W.T).argmax(1), minlength=64)
        with pytest.raises(MixedDevices):
            ids + x
        with pytest.raises(TypeError, match="numpy"):
            W.numpy()
        with pytest.raises(RuntimeError, match="generator"):
            torch.randn(3, generator=torch.Generator(), device=dev)
        assert (W * torch.tensor(2.0)).device == GPU    # a 0-dim CPU scalar is fine, as on CUDA
        assert float(W.abs().max()) > 0                 # reading a number back is fine too


# ------------------------------------------------------------------ geometry

@pytest.mark.parametrize("family", ["gpt_neox", "gemma3"])
def test_support_paths_stay_on_the_device(family):
    m = tiny_model(family, d=32, vocab_size=64, layers=1, seed=1).model
    ids = torch.randint(0, 64, (3, 6), generator=torch.Generator().manual_seed(2))
    want_h = geo.final_hidden(m, input_ids=ids)
    want_x = geo.sample_support(m, [4, 8], 6, batch_tokens=16, progress=False)
    want_st = geo.support_stats(want_x, cos_points=8, seed=3)
    with emulated_cuda(m) as mode:
        h = geo.final_hidden(m, input_ids=ids)          # ids on the CPU: moved to the model
        assert h.device == CPU and torch.equal(h, want_h)
        x = geo.sample_support(m, [4, 8], 6, batch_tokens=16, progress=False)
        assert x.device == CPU and torch.equal(x, want_x)
        st = geo.support_stats(x.to(GPU), cos_points=8, seed=3)   # statistics where samples live
        assert mode.matmuls["cpu"] == 0
    _same(st, want_st)


CENSUS = [("box", "argmax", False), ("ball", "voronoi", False), ("hull", "argmax", True)]


@pytest.mark.parametrize("support,assign,bias", CENSUS)
def test_cell_census_runs_on_the_device(llama, support, assign, bias):
    W, _ = geo.decoder_weights(llama)
    b = torch.linspace(-0.5, 0.5, 64) if bias else None
    samples = geo.sample_support(llama, [4], 16, progress=False)
    kw = dict(n_samples=3000, support=support, assign=assign, lo=samples.amin(0).numpy(),
              hi=samples.amax(0).numpy(), radius=float(samples.norm(dim=1).max()), sample_chunk=1000,
              vocab_chunk=40, seed=5, progress=False)
    want = geo.cell_shares(W, b, samples=samples, **kw)
    with emulated_cuda(llama) as mode:
        Wd, _ = geo.decoder_weights(llama)
        assert Wd.device == GPU
        got = geo.cell_shares(Wd, None if b is None else b.to(GPU), samples=samples.to(GPU), **kw)
        assert mode.matmuls["cpu"] == 0 and mode.matmuls["cuda"] >= 3 * 2   # 3 chunks x 2 vocab chunks
        assert mode.syncs >= 3                          # timings wait for the device
        idx = geo.assign_tokens(torch.rand(4, 32), Wd, assign=assign)      # CPU points: moved to W
        assert idx.device == GPU
    assert np.array_equal(got.counts, want.counts) and got.counts.sum() == 3000
    assert [n for n, _ in got.checkpoints] == [n for n, _ in want.checkpoints] == [1000, 2000]
    for (_, c1), (_, c2) in zip(got.checkpoints, want.checkpoints):
        assert np.array_equal(c1, c2)


def test_effective_eps_on_the_device(llama):
    mem = torch.randn(2, 32, generator=torch.Generator().manual_seed(4)) * 0.05
    kw = dict(n_directions=3, n_tokens=2, steps=5, t_min=1e-4, t_max=10.0, seed=2)
    want_default = geo.effective_eps(llama, **kw)
    want_mem = geo.effective_eps(llama, mem, prefix_ids=[1, 2], **kw)
    with emulated_cuda(llama) as mode:
        got_default = geo.effective_eps(llama, **kw)
        got_mem = geo.effective_eps(llama, mem.to(GPU), prefix_ids=[1, 2], **kw)
        assert mode.matmuls["cpu"] == 0
    _same(got_default, want_default)
    _same(got_mem, want_mem)
    assert np.isfinite(got_mem.rel).any()          # the bisection found changes: a real comparison


def test_geometry_report_on_the_device(llama):
    kw = dict(lengths=[4, 8], per_length=24, n_cells=3000, seed=1, progress=False)
    want = geo.geometry_report(llama, **kw)
    with emulated_cuda(llama) as mode:
        got = geo.geometry_report(llama, **kw)
        assert mode.matmuls["cpu"] == 0
    got.cells.seconds = want.cells.seconds = 0.0    # timings differ from run to run
    _same(got, want)
    assert set(got.slopes) >= {"ball", "box", "cone", "ellipsoid", "cells", "box+cells"}


# ------------------------------------------------------------------ precision

def test_precision_tests_on_the_device(llama):
    mem = torch.randn(1, 32, generator=torch.Generator().manual_seed(6)) * 0.05
    pkw = dict(n=2, directions=3, radii=[0.0, 1e-9, 1e-3, 1.0, 100.0])
    skw = dict(n=2, ks=(2, 3), width=2.0)
    want = [prec.base_memory(llama, 2, seed=1), prec.perturbation_test(llama, **pkw),
            prec.perturbation_test(llama, memory=mem, **pkw), prec.saturation_test(llama, **skw),
            prec.saturation_test(llama, memory=mem, **skw)]
    with emulated_cuda(llama) as mode:
        z = prec.base_memory(llama, 2, seed=1)
        assert z.device == GPU
        got = [z.cpu(), prec.perturbation_test(llama, **pkw),
               prec.perturbation_test(llama, memory=mem.to(GPU), **pkw),
               prec.saturation_test(llama, **skw), prec.saturation_test(llama, memory=mem.to(GPU), **skw)]
        assert mode.matmuls["cpu"] == 0
    _same(got, want)
    assert got[1]["same_output"][0] == 1.0 and got[1]["same_output"][-1] < 1.0


# ------------------------------------------------------------------ a bfloat16 model

def test_bfloat16_model_on_the_device():
    m = tiny_model("llama", d=32, vocab_size=64, layers=1, seed=3, dtype="bfloat16").model
    W, _ = geo.decoder_weights(m)
    assert W.dtype == torch.bfloat16
    with emulated_cuda(m):
        rep = geo.geometry_report(m, lengths=[4, 8], per_length=24, n_cells=2000, seed=1, progress=False)
        ee = geo.effective_eps(m, n_directions=4, n_tokens=2, steps=6, t_min=1e-6, t_max=10.0)
        pt = prec.perturbation_test(m, n=2, directions=3, radii=[0.0, 1e-7, 100.0])
    assert rep.stats.n == 48 and np.isfinite(rep.stats.r_inf) and rep.stats.r_inf > 0
    # the census widens the bfloat16 decoder to float32: the same counts as a float32 copy of it
    fp32 = geo.cell_shares(W.float(), n_samples=2000, lo=rep.stats.lo, hi=rep.stats.hi, seed=1,
                           progress=False)
    assert np.array_equal(rep.cells.counts, fp32.counts)
    assert ee.dtype == "bfloat16" and ee.rel.shape == (4,)
    # bf16 rounds away a perturbation of relative size 1e-6 (2^-8 ~ 4e-3): no direction changes
    # there, and t_min is never reported
    assert np.all(ee.rel > ee.t_min)
    z = prec.base_memory(m, 1, seed=0)
    assert pt["dtype"] == "bfloat16" and pt["eps"] == pytest.approx(float(z.abs().max()) * UNIT_ROUNDOFF["bfloat16"])
    assert list(pt["same_input"][:2]) == [1.0, 1.0] and pt["same_input"][2] == 0.0
