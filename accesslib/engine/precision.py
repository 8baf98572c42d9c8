"""Finite precision on a real model: close prompts give the same output, outputs saturate.

Two measurements behind notebook 07 (docs/paper.md, section 2), on any causal LM with m soft
prompt vectors (memory) and greedy decoding of n tokens:

- :func:`perturbation_test` - take a memory vector z, add perturbations of L2 size t in random
  directions, and check whether (i) the perturbed input is bit-for-bit the same number in the
  model's dtype and (ii) the greedy output is the same. With eps_in = max|z_i| * u (u the unit
  roundoff of the dtype: fp32 2^-24, bf16 2^-8, fp16 2^-11), perturbations far below eps_in
  are rounded away (same input, hence same output); larger ones leave the output unchanged
  as long as they stay inside the decoder cell, then outputs start to differ.
- :func:`saturation_test` - prompts on a k x k grid of spacing s in a small square of a 2-D
  plane through z: the number of distinct greedy outputs against the number of prompts. With
  the square fixed, a denser grid adds prompts but, past a point, no new outputs: the square
  meets only a bounded number of output cells.

These are illustrations measured here, not the paper's experiments.

Devices and dtypes: the memories are formed and decoded on the model's device (CPU, CUDA, ...),
so no operation mixes devices. Random draws (the base memory, the directions, the plane) come
from a seeded CPU ``torch.Generator`` and are then moved to the device, so the same seed gives
the same prompts on every device. Perturbed inputs are formed in float64 (on the CPU for a
device without float64) and rounded once to the model's dtype, e.g. bfloat16: what the model
receives. Results come back to the host as numpy arrays.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from accesslib._checks import check_float, check_int, check_seed
from accesslib.engine.cramming import init_std_of
from accesslib.engine.decoding import greedy
from accesslib.models.loading import hf_model
from accesslib.theory.bounds import UNIT_ROUNDOFF, canonical_dtype

#: Prompts per forward pass of the greedy decoder.
BATCH = 512


def _outputs(model, memory: torch.Tensor, n: int) -> np.ndarray:
    """Greedy outputs [k, n] of k memory prompts [k, m, d] (with the model's cache)."""
    return greedy(model, memory, n, batch=BATCH).cpu().numpy()


def _device_of(model) -> torch.device:
    return next(hf_model(model).parameters()).device


def _f64_device(device) -> torch.device:
    """Where float64 work runs: ``device``, or the CPU for a device without float64 (MPS)."""
    device = torch.device(device)
    return torch.device("cpu") if device.type == "mps" else device


def _memory(model, memory, m, seed) -> torch.Tensor:
    """The given memory [m, d] or :func:`base_memory`, float32 on the model's device."""
    z = base_memory(model, m, seed) if memory is None else torch.as_tensor(memory)
    return z.to(device=_device_of(model), dtype=torch.float32)


def model_dtype_name(model) -> str:
    return canonical_dtype(str(next(hf_model(model).parameters()).dtype))


def base_memory(model, m=1, seed=0) -> torch.Tensor:
    """A random memory [m, d]: the cramming init, standard normal times the std of the input
    embeddings times the embedding scale (:func:`accesslib.engine.cramming.init_std_of`;
    docs/paper.md, section 5). Drawn on the CPU from ``seed`` (the same vectors on every device),
    returned float32 on the model's device."""
    model = hf_model(model)
    m = check_int("m", m, 1, 64)
    d = model.get_input_embeddings().weight.shape[1]
    g = torch.Generator().manual_seed(check_seed("seed", seed))
    return (torch.randn(m, d, generator=g) * init_std_of(model)).to(_device_of(model))


def input_eps(memory: torch.Tensor, dtype: str) -> float:
    """eps_in = max|z_i| * unit roundoff of ``dtype`` (the rounding scale of the largest entry)."""
    return float(memory.abs().max()) * UNIT_ROUNDOFF[canonical_dtype(dtype)]


def perturbation_test(model, n=8, radii=None, *, m=1, directions=16, seed=0, memory=None):
    """Same input / same output fractions for perturbations of L2 size t (see module doc).

    Returns dict(radii, eps (eps_in), same_input [len], same_output [len], base (ids),
    dtype). ``radii`` default: eps_in * 10^(-2..9) (up to beyond |z|).
    """
    model = hf_model(model)
    n = check_int("n", n, 1, 256)
    directions = check_int("directions", directions, 1, 4096)
    dt = model_dtype_name(model)
    mdt = next(model.parameters()).dtype
    z = _memory(model, memory, m, seed)
    dev, wide = z.device, _f64_device(z.device)
    eps = input_eps(z, dt)
    radii = np.asarray(eps * 10.0 ** np.arange(-2, 9.01, 0.5) if radii is None else radii, dtype=float)
    if radii.ndim != 1 or np.any(radii < 0) or not np.isfinite(radii).all():
        raise ValueError("radii must be a 1-D list of finite sizes >= 0")
    g = torch.Generator().manual_seed(check_seed("seed", seed) + 1)
    u = torch.randn(directions, *z.shape, generator=g, dtype=torch.float64).to(wide)
    u /= u.flatten(1).norm(dim=1)[:, None, None]
    # perturb in float64, then round once to the model's dtype: what the model actually receives
    r = torch.as_tensor(radii, dtype=torch.float64).to(wide)
    zz = z.to(wide, torch.float64)[None] + r[:, None, None, None] * u[None]      # [R, D, m, d]
    inputs = zz.to(mdt).float().reshape(-1, *z.shape).to(dev)
    base_in = z.to(mdt).float()
    same_in = (inputs == base_in[None]).flatten(1).all(1).reshape(len(radii), directions)
    outs = _outputs(model, torch.cat([base_in[None], inputs]), n)
    base_out, outs = outs[0], outs[1:].reshape(len(radii), directions, n)
    same_out = (outs == base_out[None, None]).all(-1)
    return dict(radii=radii, eps=eps, dtype=dt, base=base_out.tolist(),
                same_input=same_in.double().mean(1).cpu().numpy(), same_output=same_out.mean(1))


def saturation_test(model, n=8, width=1.0, ks=(2, 4, 8, 16, 32), *, m=1, seed=0, memory=None):
    """Distinct greedy outputs of k*k prompts on a grid in a square of side ``width``.

    The square lies in the plane through z spanned by two random orthonormal directions (of
    the whole [m, d] memory); grid spacing s = width / (k - 1). ``width`` is in units of the
    embedding std times sqrt(d) (the typical norm of a memory vector), so 1.0 is a region as
    wide as the prompts themselves. Returns dict(ks, prompts, spacing, distinct). The plane is
    drawn and orthonormalised on the CPU (the same directions on every device), then moved to
    the model's device, where the grid of prompts is formed.
    """
    model = hf_model(model)
    n = check_int("n", n, 1, 256)
    width = check_float("width", width, 0, low_open=True)
    ks = [check_int("k", k, 2, 128) for k in ks]
    z = _memory(model, memory, m, seed)
    scale = float(z.norm() / math.sqrt(z.shape[0]))
    g = torch.Generator().manual_seed(check_seed("seed", seed) + 2)
    q, _ = torch.linalg.qr(torch.randn(z.numel(), 2, generator=g))
    q = q.to(z.device)
    u, v = q[:, 0].reshape(z.shape), q[:, 1].reshape(z.shape)
    distinct, spacing = [], []
    for k in ks:
        a = torch.linspace(-0.5, 0.5, k, device=z.device) * width * scale
        A, B = torch.meshgrid(a, a, indexing="ij")
        mem = z[None] + A.reshape(-1, 1, 1) * u[None] + B.reshape(-1, 1, 1) * v[None]
        outs = _outputs(model, mem, n)
        distinct.append(len({tuple(r) for r in outs.tolist()}))
        spacing.append(width * scale / (k - 1))
    return dict(ks=np.array(ks), prompts=np.array(ks) ** 2, spacing=np.array(spacing),
                distinct=np.array(distinct), scale=scale)
