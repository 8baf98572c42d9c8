"""Geometry of the hidden space: support, precision and decoder cells ([A], docs/paper.md, sections 3-4).

Works on any causal LM that :func:`accesslib.models.loading.load_model` returns (a ``LoadedModel`` or
the bare transformers model). Four measurements:

* :func:`sample_support` - the final hidden state (after the final norm: the input of the
  unembedding, read by a hook on the output embedding, so it is right for every family) at the
  last position of uniform random token sequences over a range of lengths (section 3).
* :func:`support_stats` - r_inf, r_2, the per-coordinate box, the minimum pairwise cosine
  (subsampled, chunked) and the principal axes (:func:`fit_principal_axes`).
* :func:`effective_eps` - the smallest relative perturbation of a memory vector that changes
  the greedy output, per random direction (bisection).
* :func:`cell_shares` - Monte Carlo shares p_t of every token's decoder cell inside the support,
  assigned by the argmax of the logits (what greedy decoding does) or by the nearest decoder
  row (the paper's Voronoi cells); :func:`accesslib.theory.stats.fit_s_conv` turns them into
  the per-token cost s_conv of section 4.

:func:`geometry_report` runs all of it for one model and returns the refined slopes.

Devices and dtypes: every tensor that meets the model's weights lives on the model's device
(``next(model.parameters()).device``: CPU, CUDA, ...), so no operation mixes devices. Random
draws (token ids, memory vectors, directions, census samples) come from a seeded CPU
``torch.Generator`` and are then moved to the device: the same seed gives the same draws on
every device, so a GPU run reproduces a CPU run up to floating-point rounding (a device
generator would draw different numbers on each kind of device). Results come back to the host
once, as float32 CPU tensors or numpy arrays. Numbers are computed in float32 (float64 for the
principal axes) whatever the model's dtype, so a bfloat16 model works; only the forward
passes, the thing measured, run in the model's own dtype.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from accesslib._checks import check_choice, check_float, check_int, check_seed, fail
from accesslib.config import FAST
from accesslib.engine.decoding import greedy
from accesslib.models import facts
from accesslib.models.loading import hf_model
from accesslib.theory import bounds, refined
from accesslib.theory.stats import (
    ZERO_HIT,
    SConv,
    binomial_stderr,
    describe_threshold,
    fit_s_conv,
    sconv_convergence,
    threshold_quantiles,
)

__all__ = [
    "unwrap", "decoder_weights", "final_hidden", "sample_support", "SupportStats", "support_stats",
    "min_pairwise_cosine", "PrincipalAxes", "fit_principal_axes",
    "EffectiveEps", "effective_eps", "CellShares", "cell_shares", "assign_tokens",
    "GeometryReport",
    "geometry_report",
]

ASSIGNMENTS = ("argmax", "voronoi")
SUPPORTS = ("box", "ball", "hull")
CHECKPOINTS = 5   # cell_shares keeps the counts after N/2, N/4, ..., N/32 samples


# --------------------------------------------------------------------------- model access

unwrap = hf_model   # the transformers model inside a LoadedModel (kept under this name)


def decoder_weights(model):
    """(W [|V|, d], b [|V|] or None): the unembedding, logits = W h + b (detached)."""
    head = unwrap(model).get_output_embeddings()
    if head is None:
        raise ValueError("model has no output embedding (get_output_embeddings() is None)")
    b = getattr(head, "bias", None)
    return head.weight.detach(), (None if b is None else b.detach())


def _device_of(model):
    """The device of the model's weights."""
    return next(unwrap(model).parameters()).device


def _f64_device(device):
    """Where float64 work on ``device``'s tensors runs: the device itself, or the CPU for a device
    without float64 (Apple's MPS)."""
    device = torch.device(device)
    return torch.device("cpu") if device.type == "mps" else device


def _sync(device):
    """Wait for queued kernels on ``device`` (CUDA runs asynchronously), so timings are real."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def final_hidden(model, input_ids=None, inputs_embeds=None):
    """The input of the unembedding at the last position, [B, d] (float32, cpu).

    A forward pre-hook on the output embedding reads exactly what the logits are computed
    from (after the final norm), whatever the family calls its last norm. The inputs are
    moved to the model's device; the result comes back to the host.
    """
    return _final_hidden_on_device(model, input_ids, inputs_embeds).cpu()


def _final_hidden_on_device(model, input_ids=None, inputs_embeds=None):
    """:func:`final_hidden` left on the model's device, [B, d] float32."""
    hf = unwrap(model)
    dev = _device_of(hf)
    if input_ids is not None:
        input_ids = torch.as_tensor(input_ids).to(dev)
    if inputs_embeds is not None:
        inputs_embeds = torch.as_tensor(inputs_embeds).to(dev)
    head = hf.get_output_embeddings()
    seen = {}
    hook = head.register_forward_pre_hook(lambda mod, args: seen.__setitem__("h", args[0]))
    try:
        kw = {"input_ids": input_ids} if inputs_embeds is None else {"inputs_embeds": inputs_embeds}
        with torch.inference_mode():
            try:
                hf(**kw, logits_to_keep=1, use_cache=False)
            except TypeError:  # families without logits_to_keep
                hf(**kw, use_cache=False)
    finally:
        hook.remove()
    return seen["h"][:, -1, :].float()


def _default_lengths(max_context):
    top = 64 if FAST else 1024
    if max_context:
        top = min(top, max_context)
    lengths = [L for L in (2 ** k for k in range(2, 13)) if L <= top]
    return lengths or [max(1, top)]


def sample_support(model, lengths=None, per_length=None, *, batch_tokens=16384, seed=0,
                   progress=True):
    """Final hidden states on uniform random token sequences, [N, d] float32 ([A] section 3).

    [A]: 10,000 sequences at each length in {4, 8, ..., 4096}. Defaults here: lengths
    4, 8, ... up to min(1024, context) (64 in FAST mode) and ``per_length`` 256 (16 in FAST
    mode). Batches hold about ``batch_tokens`` tokens. The ids are drawn on the CPU (seeded) and
    moved to the model's device; the hidden states stay there until one copy to the host at
    the end.
    """
    hf = unwrap(model)
    ctx = facts.max_context(hf)
    lengths = list(lengths) if lengths is not None else _default_lengths(ctx)
    per_length = per_length if per_length is not None else (16 if FAST else 256)
    if not lengths or any(int(L) < 1 for L in lengths):
        raise ValueError(f"lengths must be a non-empty list of whole numbers >= 1; got {lengths!r}")
    check_int("per_length", int(per_length), 1)
    if ctx and max(lengths) > ctx:
        raise ValueError(f"lengths must be <= the model's context {ctx}; got max {max(lengths)}")
    check_int("batch_tokens", int(batch_tokens), 1)
    from tqdm.auto import tqdm

    from accesslib.models.check import iter_support_ids, support_jobs

    V = facts.shared_vocab_size(hf)   # input ids: ones both embeddings have, as cramming draws
    device = _device_of(hf)
    jobs = support_jobs(lengths, per_length, batch_tokens)
    out = []
    for ids in tqdm(iter_support_ids(V, jobs, check_seed("seed", seed)), total=len(jobs), desc="support samples",
                    disable=not progress, leave=False):
        out.append(_final_hidden_on_device(hf, input_ids=ids.to(device)))
    return torch.cat(out).cpu()


# --------------------------------------------------------------------------- statistics

def min_pairwise_cosine(x, max_points=4096, *, chunk=1024, seed=0):
    """Minimum cosine over pairs i != j of at most ``max_points`` random rows of ``x``.

    Chunked: never holds more than chunk x max_points cosines at once. Runs on ``x``'s device
    (the subsample is drawn on the CPU, seeded, so it is the same on every device).
    """
    x = torch.as_tensor(x, dtype=torch.float32)
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"x must be [N >= 2, d]; got shape {tuple(x.shape)}")
    check_int("max_points", max_points, 2)
    if x.shape[0] > max_points:
        gen = torch.Generator().manual_seed(check_seed("seed", seed))
        idx = torch.randperm(x.shape[0], generator=gen)[:max_points]
        x = x[idx.to(x.device)]
    u = x / x.norm(dim=1, keepdim=True).clamp_min(1e-30)
    best = []
    for s in range(0, u.shape[0], chunk):
        c = u[s:s + chunk] @ u.T
        rows = torch.arange(c.shape[0], device=c.device)
        c[rows, rows + s] = math.inf  # exclude i == j
        best.append(c.min())
    return max(-1.0, min(1.0, float(torch.stack(best).min())))   # one copy to the host


@dataclass
class PrincipalAxes:
    """PCA of the samples: x = center + sum_i z_i axes[:, i].

    sigmas: standard deviation along each axis (descending); semi_axes: max |z_i| over the
    samples, so the rotated box prod_i [-a_i, a_i] around the center holds every sample (the
    support :func:`accesslib.theory.refined.ellipsoid_slope` counts); mahalanobis_scale: the
    smallest s such that the covariance ellipsoid sum_i (z_i / (s sigma_i))^2 <= 1 holds them
    all (its semi-axes s*sigma_i are never smaller than semi_axes).
    """
    center: np.ndarray
    axes: np.ndarray
    sigmas: np.ndarray
    semi_axes: np.ndarray
    mahalanobis_scale: float


def fit_principal_axes(x):
    """Principal axes and containing semi-axes of samples ``x`` [N, d] (:class:`PrincipalAxes`).

    In float64 on ``x``'s device (the CPU for a device without float64); numpy results."""
    x = torch.as_tensor(x)
    x = x.to(device=_f64_device(x.device), dtype=torch.float64)
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"x must be [N >= 2, d]; got shape {tuple(x.shape)}")
    center = x.mean(0)
    xc = x - center
    _, s, vt = torch.linalg.svd(xc, full_matrices=False)
    axes = vt.T  # [d, k], k = min(N, d)
    z = xc @ axes
    sigmas = s / math.sqrt(max(1, x.shape[0] - 1))
    semi = z.abs().amax(0)
    nz = sigmas > sigmas.max() * 1e-12
    scale = float(((z[:, nz] / sigmas[nz]) ** 2).sum(1).sqrt().max()) if nz.any() else 0.0
    return PrincipalAxes(*(t.cpu().numpy() for t in (center, axes, sigmas, semi)), scale)


@dataclass
class SupportStats:
    """Shape of the sampled support: n samples in R^d; lo/hi the per-coordinate box;
    r_inf = max ||h||_inf, r_2 = max ||h||_2; min_cos over a subsample of cos_points rows."""
    n: int
    d: int
    r_inf: float
    r_2: float
    lo: np.ndarray
    hi: np.ndarray
    min_cos: float
    cos_points: int
    axes: PrincipalAxes | None

    @property
    def widths(self):
        return self.hi - self.lo

    @property
    def phi(self):
        """Cone half-angle theta/2, theta = arccos(min_cos) ([A])."""
        return refined.cone_half_angle(self.min_cos)


def support_stats(samples, *, cos_points=4096, seed=0, principal=True):
    """:class:`SupportStats` of hidden states ``samples`` [N, d] (numpy, or a tensor on any device:
    the statistics are computed where it lives, in float32)."""
    x = torch.as_tensor(samples, dtype=torch.float32)
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"samples must be [N >= 2, d]; got shape {tuple(x.shape)}")
    if not torch.isfinite(x).all():
        raise ValueError("samples must be finite (the model produced NaN/inf hidden states)")
    mc = min_pairwise_cosine(x, cos_points, seed=seed)
    return SupportStats(
        n=x.shape[0], d=x.shape[1], r_inf=float(x.abs().max()), r_2=float(x.norm(dim=1).max()),
        lo=x.amin(0).cpu().numpy().astype(float), hi=x.amax(0).cpu().numpy().astype(float), min_cos=mc,
        cos_points=min(cos_points, x.shape[0]),
        axes=fit_principal_axes(x) if principal else None)


# --------------------------------------------------------------------------- effective eps

@dataclass
class EffectiveEps:
    """Smallest relative perturbation ||delta|| / ||x|| changing the greedy output, per direction.

    rel: [n_directions] thresholds (inf: no change up to t_max; t_min: changed already at
    t_min); memory_norm: ||x|| (Frobenius over the m vectors); dtype of the model.
    """
    rel: np.ndarray
    memory_norm: float
    n_tokens: int
    dtype: str
    t_min: float
    t_max: float

    def quantiles(self, q=(0.1, 0.5, 0.9)):
        """Quantiles over the directions (:func:`threshold_quantiles`)."""
        return threshold_quantiles(self.rel, q)

    def describe(self, value):
        """A threshold as text (:func:`describe_threshold`)."""
        return describe_threshold(value, self.t_max)



def effective_eps(model, memory=None, *, n_directions=16, n_tokens=4, prefix_ids=None, given_ids=None,
                  t_min=1e-9, t_max=1.0, steps=24, seed=0):
    """Measured effective precision: bisection per random direction ([A] section 3 assumes eps).

    memory: [m, d] (e.g. a crammed memory); default one random vector, standard normal times
    the std of the input-embedding matrix times the embedding scale (the cramming init,
    :func:`accesslib.engine.cramming.init_std_of`). For each unit direction u
    (Frobenius norm over [m, d]) it finds, by geometric bisection on t in [t_min, t_max], the
    smallest t such that memory + t ||memory|| u changes any of the first ``n_tokens`` greedy
    tokens. All directions are evaluated together at each step.

    prefix_ids: token ids before the memory, as in cramming; given_ids: token ids after it (a
    target's first token under ``first_token_as_input``). The sequence is
    [prefix_ids][memory][given_ids], decoded by :func:`accesslib.engine.decoding.greedy` without
    a cache: a full re-run per token, whose logits do not depend on how a cache was filled.

    Devices: the memory and the directions (drawn on the CPU from ``seed``, so the same on every
    device) live on the model's device, where the perturbed memories are formed (float32) and
    decoded; the bisection bounds are float64 numbers on the host, and each step brings one
    boolean per direction back.
    """
    hf = unwrap(model)
    n_directions = check_int("n_directions", n_directions, 1)
    n_tokens = check_int("n_tokens", n_tokens, 1)
    steps = check_int("steps", steps, 1)
    t_min = check_float("t_min", t_min, 0, low_open=True)
    t_max = check_float("t_max", t_max)
    if not t_max > t_min:
        fail("t_max", f"a number > t_min={t_min:g}", t_max)
    g = torch.Generator().manual_seed(check_seed("seed", seed))
    p = next(hf.parameters())
    dev = p.device
    if memory is None:   # the cramming init: normal * std(input embeddings) * embed_scale
        emb = hf.get_input_embeddings().weight.detach()
        memory = torch.randn(1, emb.shape[1], generator=g) * float(emb.float().std()) * facts.embed_scale(hf)
    x = torch.as_tensor(memory).to(device=dev, dtype=torch.float32)
    if x.ndim != 2:
        raise ValueError(f"memory must be [m, d]; got shape {tuple(x.shape)}")
    norm = float(x.norm())
    u = torch.randn(n_directions, *x.shape, generator=g).to(dev)
    u = u / u.flatten(1).norm(dim=1)[:, None, None]

    def outputs(mem):
        return greedy(hf, mem, n_tokens, prefix_ids=prefix_ids, given_ids=given_ids, cache=False)

    def changed(t):  # t: [n_dir] float64 on the host -> bool [n_dir] on the host
        scale = (t * norm).to(device=dev, dtype=torch.float32)
        pert = x[None] + scale[:, None, None] * u
        return (outputs(pert) != base).any(1).cpu()

    base = outputs(x[None])
    lo = torch.full((n_directions,), float(t_min), dtype=torch.float64)
    hi = torch.full((n_directions,), float(t_max), dtype=torch.float64)
    at_hi = changed(hi)
    at_lo = changed(lo)
    for _ in range(int(steps)):
        mid = (lo * hi).sqrt()
        c = changed(mid)
        hi = torch.where(c, mid, hi)
        lo = torch.where(c, lo, mid)
    rel = hi.numpy().copy()
    rel[~at_hi.numpy()] = np.inf
    rel[at_lo.numpy()] = t_min
    return EffectiveEps(rel, norm, int(n_tokens), str(p.dtype).replace("torch.", ""),
                        float(t_min), float(t_max))


# --------------------------------------------------------------------------- decoder cells

def assign_tokens(x, W, b=None, assign="argmax", *, vocab_chunk=None):
    """Token index of each row of ``x`` [n, d]: argmax_t (W x + b)_t or the nearest row of W.

    Voronoi (nearest row) is an argmax too: ||x - w||^2 = ||x||^2 - 2 x.w + ||w||^2, so the
    nearest row maximises x.w - ||w||^2/2 (and ignores the model's bias). Running max over
    vocabulary chunks keeps memory at n x vocab_chunk. Runs on W's device (``x`` is moved
    there), in float32 at least (a bfloat16 W is widened chunk by chunk); the indices stay there.
    """
    check_choice("assign", assign, ASSIGNMENTS)
    V = W.shape[0]
    x = torch.as_tensor(x)
    x = x.to(device=W.device, dtype=torch.promote_types(x.dtype, torch.float32))
    if assign == "voronoi":
        b = -0.5 * (W.float() ** 2).sum(1)
    elif b is not None:
        b = torch.as_tensor(b).to(W.device)
    vc = vocab_chunk or V
    best_v = best_i = None
    for s in range(0, V, vc):
        Wc = W[s:s + vc].to(x.dtype)
        if b is not None:
            logits = torch.addmm(b[s:s + vc].to(x.dtype), x, Wc.T)
        else:
            logits = x @ Wc.T
        v, i = logits.max(1)
        if best_v is None:
            best_v, best_i = v, i
        else:
            better = v > best_v
            best_v = torch.where(better, v, best_v)
            best_i = torch.where(better, i + s, best_i)
    return best_i


@dataclass
class CellShares:
    """Monte Carlo cell shares: counts[t] hits of token t among n_samples support points.

    shares p_t = counts/n; stderr sqrt(p(1-p)/n); zero_hit: tokens never hit.
    """
    counts: np.ndarray
    n_samples: int
    assign: str
    support: str
    seconds: float = 0.0
    flops: float = 0.0
    # (n, counts) after the first n samples, n about N/32, N/16, ..., N/2 (the same draws):
    # :func:`sconv_convergence` refits s_conv on each, to show whether N was large enough
    checkpoints: list = field(default_factory=list)

    @property
    def shares(self):
        return self.counts / self.n_samples

    @property
    def stderr(self):
        return binomial_stderr(self.counts, self.n_samples, pseudo=0)

    @property
    def zero_hit(self):
        return int(np.sum(self.counts == 0))

    @property
    def throughput(self):
        """Multiply-adds n x |V| x d per second."""
        return self.flops / 2 / self.seconds if self.seconds > 0 else float("nan")


def _host(x):
    """A float32 CPU tensor of ``x`` (numpy, list or a tensor on any device)."""
    if isinstance(x, torch.Tensor):
        return x.detach().to(device="cpu", dtype=torch.float32)
    return torch.as_tensor(np.asarray(x), dtype=torch.float32)


def _support_sampler(support, *, lo=None, hi=None, radius=None, samples=None, hull_k=4, d, gen):
    """draw(n) -> [n, d] float32 points of the support, on the CPU from the generator ``gen``."""
    check_choice("support", support, SUPPORTS)
    if support == "box":
        if lo is None or hi is None:
            raise ValueError("support='box' needs lo and hi (per-coordinate bounds)")
        lo_t = _host(lo)
        w = _host(hi) - lo_t
        if lo_t.shape != (d,) or (w < 0).any():
            raise ValueError(f"lo and hi must be [d={d}] with hi >= lo")
        return lambda n: lo_t + w * torch.rand(n, d, generator=gen)
    if support == "ball":
        if radius is None or radius <= 0:
            raise ValueError(f"support='ball' needs radius > 0; got {radius!r}")
        def ball(n):
            g = torch.randn(n, d, generator=gen)
            g = g / g.norm(dim=1, keepdim=True)
            return g * (radius * torch.rand(n, 1, generator=gen) ** (1.0 / d))
        return ball
    if support == "hull":
        if samples is None or len(samples) < 2:
            raise ValueError("support='hull' needs samples [N >= 2, d]")
        check_int("hull_k", hull_k, 2)
        S = _host(samples)
        def hull(n):
            idx = torch.randint(0, S.shape[0], (n, hull_k), generator=gen)
            wts = -torch.log(torch.rand(n, hull_k, generator=gen).clamp_min(1e-30))  # Dirichlet(1)
            wts = wts / wts.sum(1, keepdim=True)
            return (wts[:, :, None] * S[idx]).sum(1)
        return hull
    raise AssertionError(support)


def cell_shares(W, b=None, *, n_samples=None, support="box", assign="argmax", lo=None, hi=None,
                radius=None, samples=None, hull_k=4, sample_chunk=4096, vocab_chunk=None,
                seed=0, progress=True, threads=None):
    """Monte Carlo shares p_t of every token's cell inside the support ([A] section 4).

    W [|V|, d], b [|V|] or None: the unembedding (:func:`decoder_weights`). support: 'box'
    (uniform in [lo, hi], the default), 'ball' (uniform in the L2 ball of ``radius`` around 0)
    or 'hull' (random convex combinations, Dirichlet(1) weights, of ``hull_k`` rows of
    ``samples``: the paper's convex-hull sampling). assign: 'argmax' (greedy decoding's cells,
    default) or 'voronoi' (nearest decoder row, the paper's). Chunked over samples and over the
    vocabulary (``vocab_chunk`` rows at a time; default: whole |V| when the logits chunk fits
    in ~256 MB), so |V| = 262144 fits in memory.

    Devices: the census runs on W's device (a CUDA decoder matrix: CUDA matmuls), in float32
    whatever W's dtype. The samples are drawn on the CPU from a generator seeded with ``seed``
    and moved to the device chunk by chunk: the same seed gives the same points on every
    device, so CPU and GPU counts agree up to rounding at near-ties of the argmax. The counts
    stay on the device and come to the host at each checkpoint and at the end. ``seconds``
    times the assignment only (draws excluded), waiting for the device at each chunk.
    """
    import time

    from tqdm.auto import tqdm

    W = torch.as_tensor(W)
    if W.ndim != 2:
        raise ValueError(f"W must be [|V|, d]; got shape {tuple(W.shape)}")
    V, d = W.shape
    n_samples = int(n_samples if n_samples is not None else (20_000 if FAST else 1_000_000))
    check_int("n_samples", n_samples, 1)
    check_int("sample_chunk", sample_chunk, 1)
    check_choice("assign", assign, ASSIGNMENTS)
    W32 = W.detach().float().contiguous()
    dev = W32.device
    b32 = None if b is None else torch.as_tensor(b).detach().to(device=dev, dtype=torch.float32)
    if assign == "voronoi":
        b32 = -0.5 * (W32 ** 2).sum(1)
    if vocab_chunk is None:
        vocab_chunk = max(1024, min(V, (64 << 20) // max(1, sample_chunk)))
    gen = torch.Generator().manual_seed(check_seed("seed", seed))
    draw = _support_sampler(support, lo=lo, hi=hi, radius=radius, samples=samples, hull_k=hull_k,
                            d=d, gen=gen)
    counts = torch.zeros(V, dtype=torch.long, device=dev)
    marks = sorted({n_samples >> k for k in range(1, CHECKPOINTS + 1)} - {0})
    checkpoints = []
    old_threads = torch.get_num_threads()
    if threads:
        torch.set_num_threads(int(threads))
    t_mm = 0.0
    try:
        for s in tqdm(range(0, n_samples, sample_chunk), desc="cells", disable=not progress,
                      leave=False):
            x = draw(min(sample_chunk, n_samples - s)).to(dev)
            _sync(dev)
            t0 = time.perf_counter()
            idx = assign_tokens(x, W32, b32, "argmax", vocab_chunk=vocab_chunk)
            counts += torch.bincount(idx, minlength=V)
            _sync(dev)
            t_mm += time.perf_counter() - t0
            done = s + x.shape[0]
            if marks and done >= marks[0] and done < n_samples:
                checkpoints.append((done, counts.cpu().numpy().copy()))
                while marks and marks[0] <= done:
                    marks.pop(0)
    finally:
        torch.set_num_threads(old_threads)
    return CellShares(counts.cpu().numpy(), n_samples, assign, support, seconds=t_mm,
                      flops=2.0 * n_samples * V * d, checkpoints=checkpoints)


# --------------------------------------------------------------------------- s_conv


# --------------------------------------------------------------------------- the whole report

@dataclass
class GeometryReport:
    """Support statistics, cell shares and every refined slope for one model."""
    name: str
    d: int
    vocab_size: int
    eps: float
    dtype: str
    stats: SupportStats
    cells: CellShares | None
    sconv: SConv | None
    slopes: dict = field(default_factory=dict)
    sconv_drop: SConv | None = None   # [A]'s rule (zero-hit tokens dropped), for comparison
    convergence: list = field(default_factory=list)   # :func:`sconv_convergence` rows

    def table(self):
        """Rows (kind, C, log_fraction) for printing."""
        return [(k, s.C, s.log_fraction) for k, s in self.slopes.items()]


def geometry_report(model, *, name=None, dtype="paper", samples=None, lengths=None,
                    per_length=None, n_cells=None, cell_support="box", assign="argmax",
                    zero_hit="bound", seed=0, progress=True):
    """Everything of sections 3-4 for one model: stats, cells, and ball/box/cone/ellipsoid/cell
    slopes. eps = r_inf * unit roundoff of ``dtype`` ('paper': 2^-11 as [A]). The ellipsoid
    slope is left out when there are no more samples than dimensions (N <= d). The cell
    slopes use ``zero_hit`` (default "bound", see :func:`fit_s_conv`); ``sconv_drop`` holds
    [A]'s rule for comparison. The statistics and the census run on the model's device."""
    check_choice("zero_hit", zero_hit, ZERO_HIT)
    hf = unwrap(model)
    if samples is None:
        samples = sample_support(hf, lengths, per_length, seed=seed, progress=progress)
    W, b = decoder_weights(hf)
    st = support_stats(torch.as_tensor(samples).to(W.device), seed=seed)   # on the model's device
    V, d = W.shape
    eps = float(bounds.eps_for_dtype(dtype, st.r_inf))
    cells = sconv = sconv_drop = None
    convergence = []
    if n_cells != 0:
        cells = cell_shares(W, b, n_samples=n_cells, support=cell_support, assign=assign,
                            lo=st.lo, hi=st.hi, radius=st.r_2, samples=samples, seed=seed,
                            progress=progress)
        sconv = fit_s_conv(cells, zero_hit=zero_hit)
        sconv_drop = sconv if zero_hit == "drop" else fit_s_conv(cells, zero_hit="drop")
        convergence = sconv_convergence(cells)
    # ball, box (and cells, box+cells) as refined.slopes_at_eps composes them; cone, ellipsoid here
    composed = refined.slopes_at_eps(d, V, eps, st.r_inf, widths=st.widths,
                                     s_conv=None if sconv is None else sconv.s_conv)
    slopes = {"ball": composed["ball"], "box": composed["box"],
              "cone": refined.cone_slope(d, V, eps, st.r_inf, st.phi)}
    if st.n > d:  # with N <= d samples the fit sees a flat (N-1)-dim slice: no valid bound
        slopes["ellipsoid"] = refined.ellipsoid_slope(st.axes.semi_axes, V, eps, r=st.r_inf)
    for key in ("cells", "box+cells"):
        if key in composed:
            slopes[key] = composed[key]
    nm = name or getattr(getattr(model, "facts", None), "name", None) or type(hf).__name__
    return GeometryReport(nm, d, V, eps, str(dtype), st, cells, sconv, slopes, sconv_drop, convergence)
