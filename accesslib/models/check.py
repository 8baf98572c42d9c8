"""Is a loaded model the model it claims to be, and what does "its support" measure? (docs/gemma.md)

Identity (is the offline GGUF copy the real model?):

* :func:`continuations` - greedy continuations of a few fixed plain prompts (:data:`PROMPTS`),
  to see at a glance that the model writes fluent text.
* :func:`fingerprint` - the logits on one fixed input (:data:`PROBE_TEXT`): the top-5 ids and
  values and the L2 norm at the last position, a float64 sum of all the logits and a sha256 of
  their float32 bytes (equal hashes: bit-identical logits).
* :func:`compare_logits` / :func:`compare_models` - two models' logits on the same input: max
  and mean |difference|, top-1 agreement and KL(p_a || p_b) per position.

Readings of the support (docs/paper.md, section 3: r_inf, r_2 and the minimum pairwise cosine
of the final hidden states): :func:`support_readings` runs the model on the random-token inputs
that ``accesslib.engine.geometry.sample_support`` draws (same lengths, counts, seed and draw
order, so the "decoder input, float32, last" row is that function's sample) and measures the
final hidden state under every reading one might mean by it: what the unembedding reads; the
residual stream before the final norm; the normalised vector with gain 1; with the norm's
weight read as the gain (w) or as Gemma reads it (1 + w); in float32, bfloat16 or float16; at
the last position or at every position. :func:`untrained_like` builds a randomly initialised
model of the same class and config and :func:`with_norm_weight` a copy with every norm weight
set to one value: the references for a support measured on weights that were never loaded.

This module sits in the models layer, below the engine: the minimum pairwise cosine, which
lives in ``accesslib.engine.geometry.min_pairwise_cosine``, is passed in by the caller
(``min_cosine=``); the command line ``python -m accesslib check-model`` does so.
"""
from __future__ import annotations

import copy
import hashlib
import math
import os
import time
from dataclasses import asdict, dataclass, field

import torch

from accesslib._checks import check_callable, check_choice, check_int, check_seed, check_token_ids
from accesslib.models import facts
from accesslib.models.loading import hf_model, load_model, torch_dtype

__all__ = ["PROMPTS", "PROBE_TEXT", "READINGS", "POSITIONS", "Continuation", "continuations",
           "probe_ids", "logits", "Fingerprint", "fingerprint", "LogitsComparison", "compare_logits",
           "compare_models", "check_reference", "load_reference", "final_norm", "gain_offset",
           "support_jobs", "iter_support_ids", "support_inputs", "SupportReading", "SupportTable", "support_readings", "with_norm_weight",
           "untrained_like"]

#: Plain prompts whose greedy continuations show that a model writes fluent text.
PROMPTS = ("The capital of France is", "Once upon a time", "def fibonacci(n):")

#: The fixed input of :func:`fingerprint` (tokenized with the model's tokenizer).
PROBE_TEXT = "The quick brown fox jumps over the lazy dog. The capital of France is"

#: reading -> what it is. "decoder input" is what ``geometry.support_stats`` measures.
READINGS = {
    "decoder input": "what the unembedding reads (the final norm's output)",
    "before final norm": "the residual stream entering the final norm",
    "normalised, gain 1": "the final norm with gain 1 and no bias",
    "gain w": "normalised x w (the norm's weight read as its gain)",
    "gain 1 + w": "normalised x (1 + w) (the weight read as Gemma reads it)",
}
POSITIONS = ("last", "all")
_NORM_NAMES = ("norm", "final_layer_norm", "ln_f", "norm_f")


# --------------------------------------------------------------------------- forward passes

def _device_of(hf):
    return next(hf.parameters()).device


def _forward(hf, ids, last_only):
    """Logits [B, L or 1, |V|] of token ids [B, L] (no cache)."""
    ids = torch.as_tensor(ids).to(_device_of(hf))
    with torch.inference_mode():
        if last_only:
            try:
                return hf(input_ids=ids, use_cache=False, logits_to_keep=1).logits
            except TypeError:   # families without logits_to_keep
                return hf(input_ids=ids, use_cache=False).logits[:, -1:]
        return hf(input_ids=ids, use_cache=False).logits


def probe_ids(model, text=PROBE_TEXT):
    """Token ids of ``text`` with the model's tokenizer (its special tokens included, as
    ``tokenizer(text)`` gives them); a model without a tokenizer (tiny random models) gets 16
    fixed ids below its shared vocabulary size instead."""
    hf = hf_model(model)
    tok = getattr(model, "tokenizer", None)
    if tok is not None:
        ids = list(tok(text)["input_ids"])
        if not ids:
            raise ValueError(f"text must give at least one token; got {text!r}")
        return ids
    V = facts.shared_vocab_size(hf)
    return [(7919 * i + 11) % V for i in range(16)]


def logits(model, ids=None):
    """Logits of every position of ``ids`` (default :func:`probe_ids`), [L, |V|] float32 on the CPU."""
    hf = hf_model(model)
    ids = probe_ids(model) if ids is None else check_token_ids("ids", ids)
    return _forward(hf, torch.tensor([ids]), last_only=False)[0].float().cpu()


# --------------------------------------------------------------------------- continuations

@dataclass
class Continuation:
    """Greedy continuation of one prompt: ``text`` is the decoded ``new_ids`` (the ids
    themselves, space-separated, for a model without a tokenizer)."""
    prompt: str
    prompt_ids: list
    new_ids: list
    text: str


def continuations(model, prompts=None, n_tokens=20):
    """Greedy continuations (argmax at every step, no cache, stopping early at the tokenizer's
    end-of-sequence id) of ``prompts``: texts (default :data:`PROMPTS`), or lists of token ids
    for a model without a tokenizer (default: slices of :func:`probe_ids`)."""
    hf = hf_model(model)
    n_tokens = check_int("n_tokens", n_tokens, 1)
    tok = getattr(model, "tokenizer", None)
    if prompts is None:
        if tok is not None:
            prompts = PROMPTS
        else:
            base = probe_ids(model)
            prompts = [base[:4], base[4:8], base[8:12]]
    eos = getattr(tok, "eos_token_id", None) if tok is not None else None
    out = []
    for p in prompts:
        if isinstance(p, str):
            if tok is None:
                raise ValueError("prompts must be lists of token ids for a model without a tokenizer; "
                                 f"got {p!r}")
            ids = list(tok(p)["input_ids"])
        else:
            ids = check_token_ids("prompt", p)
        seq, new = list(ids), []
        for _ in range(n_tokens):
            nxt = int(_forward(hf, torch.tensor([seq]), last_only=True)[0, -1].argmax())
            if eos is not None and nxt == eos:
                break
            new.append(nxt)
            seq.append(nxt)
        text = tok.decode(new) if tok is not None else " ".join(map(str, new))
        out.append(Continuation(p if isinstance(p, str) else " ".join(map(str, ids)), ids, new, text))
    return out


# --------------------------------------------------------------------------- fingerprint

@dataclass
class Fingerprint:
    """The logits of one fixed input (``ids``).

    top_ids / top_values: the k largest logits at the last position; last_norm: their L2 norm
    over the vocabulary; checksum: the float64 sum of every logit of every position; sha256:
    hash of the float32 logits' bytes (equal hashes mean bit-identical logits)."""
    ids: list
    top_ids: list
    top_values: list
    last_norm: float
    checksum: float
    sha256: str
    shape: tuple

    def as_dict(self):
        return asdict(self)

    def lines(self):
        """The fingerprint as printable lines."""
        top = ", ".join(f"{i}:{v:.4f}" for i, v in zip(self.top_ids, self.top_values))
        return [f"input: {len(self.ids)} tokens {self.ids}",
                f"last position: top-{len(self.top_ids)} id:logit {top}; L2 norm {self.last_norm:.6f}",
                f"all {self.shape[0]} x {self.shape[1]:,} logits: float64 sum {self.checksum:.9g}, "
                f"sha256 {self.sha256[:16]}"]


def fingerprint(model, ids=None, k=5):
    """:class:`Fingerprint` of the model's logits on ``ids`` (default :func:`probe_ids`)."""
    ids = probe_ids(model) if ids is None else check_token_ids("ids", ids)
    k = check_int("k", k, 1)
    z = logits(model, ids)
    last = z[-1]
    top = last.topk(min(k, last.numel()))
    return Fingerprint(ids=list(ids), top_ids=[int(i) for i in top.indices],
                       top_values=[float(v) for v in top.values], last_norm=float(last.double().norm()),
                       checksum=float(z.double().sum()),
                       sha256=hashlib.sha256(z.contiguous().numpy().tobytes()).hexdigest(),
                       shape=tuple(z.shape))


# --------------------------------------------------------------------------- comparison

@dataclass
class LogitsComparison:
    """Two models' logits [L, |V|] on the same ids.

    identical: bitwise equal; max_abs / mean_abs: |a - b| over every logit; top1_agreement:
    share of positions whose argmax agrees; kl_mean / kl_max: KL(p_a || p_b) in nats over the
    positions (softmax in float64)."""
    positions: int
    vocab: int
    identical: bool
    max_abs: float
    mean_abs: float
    top1_agreement: float
    kl_mean: float
    kl_max: float

    def as_dict(self):
        return asdict(self)

    def summary(self):
        if self.identical:
            return f"identical: all {self.positions} x {self.vocab:,} logits bit-identical"
        return (f"different: max |dlogit| {self.max_abs:.4g}, mean {self.mean_abs:.4g}; top-1 agrees at "
                f"{self.top1_agreement:.0%} of {self.positions} positions; KL(a||b) mean "
                f"{self.kl_mean:.4g} nats, max {self.kl_max:.4g}")


def compare_logits(a, b):
    """:class:`LogitsComparison` of logits ``a`` and ``b``, both [L, |V|] (or [|V|])."""
    a = torch.as_tensor(a).detach().cpu()
    b = torch.as_tensor(b).detach().cpu()
    a = a[None] if a.ndim == 1 else a
    b = b[None] if b.ndim == 1 else b
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"logits must both be [positions, vocabulary] of one shape; got {tuple(a.shape)} "
                         f"and {tuple(b.shape)}")
    a64, b64 = a.double(), b.double()
    d = (a64 - b64).abs()
    la, lb = a64.log_softmax(-1), b64.log_softmax(-1)
    kl = (la.exp() * (la - lb)).sum(-1)
    return LogitsComparison(positions=a.shape[0], vocab=a.shape[1], identical=bool(torch.equal(a, b)),
                            max_abs=float(d.max()), mean_abs=float(d.mean()),
                            top1_agreement=float((a.argmax(-1) == b.argmax(-1)).double().mean()),
                            kl_mean=float(kl.mean()), kl_max=float(kl.max()))


def compare_models(a, b, ids=None):
    """:func:`compare_logits` of models ``a`` and ``b`` on ``ids`` (default :func:`probe_ids` of ``a``).

    The models must have the same output vocabulary; when both have tokenizers that encode the
    probe text differently, ValueError says so (their logits would not be about the same input)."""
    ha, hb = hf_model(a), hf_model(b)
    va, vb = facts.vocab_size(ha), facts.vocab_size(hb)
    if va != vb:
        raise ValueError(f"the models have different vocabularies ({va:,} and {vb:,} output rows): "
                         "their logits cannot be compared")
    if ids is None:
        ids = probe_ids(a)
        tb = getattr(b, "tokenizer", None)
        if getattr(a, "tokenizer", None) is not None and tb is not None and list(tb(PROBE_TEXT)["input_ids"]) != ids:
            raise ValueError(f"the two tokenizers encode the probe text differently ({ids} and "
                             f"{list(tb(PROBE_TEXT)['input_ids'])})")
    return compare_logits(logits(a, ids), logits(b, ids))


def check_reference(name_or_path, *, what="name_or_path"):
    """``name_or_path`` as a string, refused (ValueError naming it as ``what``) when it looks like
    a path (it starts with /, . or ~, or has more than one /; a hub name is 'owner/name') and no
    such directory exists: checked before anything slow is loaded."""
    if not isinstance(name_or_path, (str, os.PathLike)) or not str(name_or_path).strip():
        raise ValueError(f"{what} must be a model directory or a hub name; got {name_or_path!r}")
    s = str(name_or_path)
    pathlike = s.startswith(("/", ".", "~")) or s.count("/") > 1 or (os.sep != "/" and os.sep in s)
    if pathlike and not os.path.isdir(os.path.expanduser(s)):
        raise ValueError(f"{what} must be an existing model directory (config.json and *.safetensors) "
                         f"or a hub name; got {s!r}, which does not exist")
    return s


def load_reference(name_or_path, *, what="name_or_path"):
    """The model to compare with (:func:`check_reference`, then
    :func:`accesslib.models.loading.load_model` in float32 on the CPU: a local directory or a hub
    name, which offline must be in the local hub cache; its errors are one line that names what
    is missing)."""
    return load_model(check_reference(name_or_path, what=what), dtype="float32", device="cpu")


# --------------------------------------------------------------------------- the final norm

def final_norm(model):
    """(attribute name, module) of the final norm: the first of ``norm``, ``final_layer_norm``,
    ``ln_f``, ``norm_f`` on the model's base model (Llama, Qwen2, Gemma-3 / GPT-NeoX / GPT-2 / Mamba)."""
    base = hf_model(model).base_model
    for name in _NORM_NAMES:
        mod = getattr(base, name, None)
        if isinstance(mod, torch.nn.Module) and getattr(mod, "weight", None) is not None:
            return name, mod
    raise ValueError(f"model {type(base).__name__} has no final norm with a weight among "
                     f"{', '.join(_NORM_NAMES)}")


def gain_offset(norm):
    """1.0 when ``norm`` multiplies by (1 + weight) (Gemma), 0.0 when by weight (Llama, LayerNorm).

    Measured, not guessed from the family: with its weight (and bias) set to zero, a (1 + w) norm
    still passes its normalised input through, a w norm returns zeros."""
    w = norm.weight
    x = torch.randn(2, w.shape[-1], generator=torch.Generator().manual_seed(0)).to(w.device, w.dtype)
    params = {"weight": torch.zeros_like(w)}
    if getattr(norm, "bias", None) is not None:
        params["bias"] = torch.zeros_like(norm.bias)
    with torch.inference_mode():
        y = torch.func.functional_call(norm, params, (x,))
    return 1.0 if float(y.float().abs().max()) > 0 else 0.0


def _normalised(norm, x, offset):
    """``norm`` applied to ``x`` with gain 1 and no bias (its weight set to 1 - offset)."""
    w = norm.weight
    params = {"weight": torch.full_like(w, 1.0 - offset)}
    if getattr(norm, "bias", None) is not None:
        params["bias"] = torch.zeros_like(norm.bias)
    with torch.inference_mode():
        return torch.func.functional_call(norm, params, (x,))


# --------------------------------------------------------------------------- support readings

def support_jobs(lengths, per_length, batch_tokens) -> list[tuple[int, int]]:
    """(L, B) of every batch of the support sample: ``per_length`` sequences at each length L,
    batches of about ``batch_tokens`` tokens, in the order they are drawn."""
    jobs = []
    for L in lengths:
        bs = max(1, int(batch_tokens) // int(L))
        for start in range(0, int(per_length), bs):
            jobs.append((int(L), min(bs, int(per_length) - start)))
    return jobs


def iter_support_ids(vocab_size, jobs, seed):
    """The uniform random token ids [B, L] of each job in turn, from one CPU generator seeded by
    ``seed`` (lazily: a large sample never holds all its ids at once)."""
    gen = torch.Generator().manual_seed(int(seed))
    for L, B in jobs:
        yield torch.randint(0, vocab_size, (B, L), generator=gen)


def support_inputs(model, lengths, per_length, *, seed=0, batch_tokens=16384):
    """The uniform random token ids [B, L] that ``accesslib.engine.geometry.sample_support``
    draws for these arguments, batch by batch in its order (it draws them with
    :func:`support_jobs` and :func:`iter_support_ids` too), so a reading here is measured on
    exactly the geometry's inputs."""
    hf = hf_model(model)
    lengths = [check_int("lengths", int(L), 1) for L in lengths]
    if not lengths:
        raise ValueError("lengths must be a non-empty list of whole numbers >= 1; got []")
    per_length = check_int("per_length", int(per_length), 1)
    batch_tokens = check_int("batch_tokens", int(batch_tokens), 1)
    ctx = facts.max_context(hf)
    if ctx and max(lengths) > ctx:
        raise ValueError(f"lengths must be <= the model's context {ctx}; got max {max(lengths)}")
    jobs = support_jobs(lengths, per_length, batch_tokens)
    return list(iter_support_ids(facts.shared_vocab_size(hf), jobs, check_seed("seed", seed)))


@dataclass
class SupportReading:
    """Statistics of one reading of the final hidden state over the sampled inputs.

    n: vectors (one per sequence for positions 'last', one per token for 'all'); nonfinite:
    vectors holding a NaN or inf (left out of every statistic); r_inf, r_2, r_1: the largest
    L-inf, L2, L1 norm; top_coords / top_values: the coordinates with the largest max |h_i|,
    in descending order; mean_cos: the mean cosine over all pairs (exact:
    (||sum_i u_i||^2 - n) / (n (n - 1)) for unit vectors u_i); min_cos: the minimum pairwise
    cosine by the caller's function (None when none was given)."""
    reading: str
    dtype: str
    positions: str
    n: int
    nonfinite: int
    r_inf: float
    r_2: float
    r_1: float
    top_coords: list
    top_values: list
    mean_cos: float
    min_cos: float | None


def _stats(reading, dtype, positions, h, min_cosine, k=3):
    h = h.float()
    ok = torch.isfinite(h).all(1)
    x = h[ok]
    n_ok = int(x.shape[0])
    nan = float("nan")
    if n_ok == 0:
        return SupportReading(reading, dtype, positions, int(h.shape[0]), int(h.shape[0]), nan, nan, nan,
                              [], [], nan, None if min_cosine is None else nan)
    per_coord = x.abs().amax(0)
    top = per_coord.topk(min(k, per_coord.numel()))
    norms = x.norm(dim=1, keepdim=True)
    u = (x / norms.clamp_min(1e-30)).double()
    s = u.sum(0)
    mean_cos = float((s @ s - n_ok) / (n_ok * (n_ok - 1))) if n_ok > 1 else nan
    mc = None
    if min_cosine is not None:
        mc = float(min_cosine(x)) if n_ok > 1 else nan
    return SupportReading(reading, dtype, positions, int(h.shape[0]), int(h.shape[0]) - n_ok,
                          float(per_coord.max()), float(norms.max()), float(x.abs().sum(1).max()),
                          [int(i) for i in top.indices], [float(v) for v in top.values], mean_cos, mc)


@dataclass
class SupportTable:
    """Every reading of :func:`support_readings`, with its conditions.

    norm: the final norm's attribute name; gain: 'w' or '1 + w' (how the model applies the
    weight, :func:`gain_offset`); weight_top / weight_bottom: the coordinates with the largest /
    smallest |gain| and that gain; gain_median: the median gain; gains: the gain at every
    coordinate some row names in top_coords; decoder_is_norm_output: whether the unembedding reads the final norm's output exactly
    (checked at the last position, in every dtype); residual_max: per dtype, the largest |h_i|
    of the residual stream after each block, over every position (inf: some value was inf or
    NaN, i.e. it overflowed), to compare with float16's largest finite value, 65,504; seconds: forward time
    per dtype."""
    rows: list
    lengths: list
    per_length: int
    seed: int
    sequences: int
    tokens: int
    norm: str
    gain: str
    weight_top: list
    weight_bottom: list
    gain_median: float
    gains: dict
    decoder_is_norm_output: bool
    residual_max: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)

    def row(self, reading, dtype="float32", positions="last"):
        for r in self.rows:
            if (r.reading, r.dtype, r.positions) == (reading, dtype, positions):
                return r
        raise KeyError(f"no row ({reading!r}, {dtype!r}, {positions!r})")

    def as_dict(self):
        return asdict(self)

    def lines(self):
        """The table as printable lines."""
        out = [f"inputs: uniform random token ids, lengths {self.lengths}, {self.per_length} per length "
               f"(seed {self.seed}): {self.sequences:,} sequences, {self.tokens:,} tokens",
               f"final norm: .{self.norm}, gain {self.gain}; largest |gain| at coordinates "
               + ", ".join(f"{i} ({g:.4g})" for i, g in self.weight_top) + "; smallest at "
               + ", ".join(f"{i} ({g:.4g})" for i, g in self.weight_bottom) + f"; median {self.gain_median:.4g}",
               "gain at the coordinates named below: "
               + ", ".join(f"{i}: {g:.4g}" for i, g in sorted(self.gains.items())),
               f"unembedding reads the norm's output: {'yes' if self.decoder_is_norm_output else 'no'}",
               "forward time: " + ", ".join(f"{k} {v:.1f} s" for k, v in self.seconds.items())]
        for dt, peaks in self.residual_max.items():
            out.append(f"largest |h_i| after each block ({dt}; float16 holds up to 65,504): "
                       + " ".join(f"{v:.4g}" for v in peaks))
        out += [f"{'reading':<20} {'dtype':<9} {'pos':<4} {'n':>7} {'NaN/inf':>7} {'r_inf':>10} {'r_2':>10} "
                f"{'r_1':>10} {'min cos':>8} {'mean cos':>8}  max |h_i| at"]
        for r in self.rows:
            mc = "-" if r.min_cos is None else f"{r.min_cos:.3f}"
            where = ", ".join(f"{i} ({v:.4g})" for i, v in zip(r.top_coords, r.top_values))
            out.append(f"{r.reading:<20} {r.dtype:<9} {r.positions:<4} {r.n:>7,} {r.nonfinite:>7,} "
                       f"{r.r_inf:>10.4g} {r.r_2:>10.4g} {r.r_1:>10.4g} {mc:>8} {r.mean_cos:>8.3f}  {where}")
        return out


def _blocks(hf):
    """The list of residual blocks (``layers`` or ``h`` on the base model), or an empty list."""
    base = hf_model(hf).base_model
    for name in ("layers", "h"):
        mod = getattr(base, name, None)
        if isinstance(mod, torch.nn.ModuleList):
            return list(mod)
    return []


def _capture(work, batches, offset, dtype, progress):
    """Run ``work`` on every batch; (captured float32 CPU tensors, seconds, whether the unembedding
    read the final norm's output at the last position every time, the largest |h| of the
    residual stream after each block). Captured: the final norm's input x and output y and the
    normalised n (gain 1), [B, L, d] per batch; the unembedding's input at the last position,
    [B, d] per batch."""
    from tqdm.auto import tqdm

    _, norm = final_norm(work)
    seen = {}
    blocks = _blocks(work)
    peaks = [0.0] * len(blocks)

    def peak(i):
        def hook(m, a, o):
            t = o[0] if isinstance(o, tuple) else o
            peaks[i] = max(peaks[i], float(torch.nan_to_num(t.detach().abs().float(), nan=math.inf, posinf=math.inf).max()))
        return hook

    hooks = [norm.register_forward_hook(lambda m, a, o: seen.update(x=a[0], y=o)),
             work.get_output_embeddings().register_forward_pre_hook(lambda m, a: seen.update(head=a[0][:, -1]))]
    hooks += [b.register_forward_hook(peak(i)) for i, b in enumerate(blocks)]
    got = {"x": [], "y": [], "n": [], "head": []}
    same = True
    t0 = time.perf_counter()
    try:
        for ids in tqdm(batches, desc=f"support readings ({dtype})", disable=not progress, leave=False):
            seen.clear()
            _forward(work, ids, last_only=True)
            x, y, head = seen["x"], seen["y"], seen["head"]
            n = _normalised(norm, x, offset)   # (this call runs the norm's hook again)
            same = same and bool(torch.allclose(y[:, -1], head, rtol=0, atol=0, equal_nan=True))
            for key, t in (("x", x), ("y", y), ("n", n), ("head", head)):
                got[key].append(t.float().cpu())
    finally:
        for h in hooks:
            h.remove()
    return got, time.perf_counter() - t0, same, peaks


def _gather(tensors, positions):
    """[N, d] from per-batch [B, L, d] tensors: the last position of each sequence, or all."""
    if positions == "last":
        return torch.cat([t[:, -1] for t in tensors])
    return torch.cat([t.reshape(-1, t.shape[-1]) for t in tensors])


def support_readings(model, *, lengths=(4, 8, 16, 32, 64, 128), per_length=200, dtypes=("float32",),
                     positions=POSITIONS, seed=0, batch_tokens=16384, min_cosine=None, progress=False):
    """:class:`SupportTable`: the final hidden state under every reading of :data:`READINGS`,
    for each of ``dtypes`` and ``positions`` (docs/gemma.md).

    Inputs: :func:`support_inputs` (those of ``geometry.sample_support`` with the same
    arguments; the defaults are the documented geometry run of Gemma-3-270M, lengths 4-128 and
    200 per length). A model in another dtype is a copy of the model cast to it (``.to(dtype)``,
    as loading the weights in that dtype would give); the readings are captured by hooks on the
    final norm (its input and output, every position) and on the unembedding (its input at the
    last position: "decoder input, last" is exactly what ``geometry.sample_support`` returns).
    "normalised, gain 1" runs the model's own norm with gain 1 and no bias; "gain w" and
    "gain 1 + w" multiply it by the weight in float32. ``min_cosine``: a function of [N, d]
    samples (``accesslib.engine.geometry.min_pairwise_cosine``) or None (no min cos).
    """
    hf = hf_model(model)
    check_callable("min_cosine", min_cosine)
    dtypes = [check_choice("dtypes", str(torch_dtype(d)).replace("torch.", ""),
                           ("float32", "bfloat16", "float16")) for d in dtypes]
    for p in positions:
        check_choice("positions", p, POSITIONS)
    batches = support_inputs(hf, lengths, per_length, seed=seed, batch_tokens=batch_tokens)
    norm_name, norm = final_norm(hf)
    offset = gain_offset(norm)
    gain = norm.weight.detach().float().cpu() + offset
    top = gain.abs().topk(min(5, gain.numel()))
    bottom = gain.abs().topk(min(3, gain.numel()), largest=False)
    rows, seconds, residual_max, same = [], {}, {}, True
    for dt in dtypes:
        work = hf if next(hf.parameters()).dtype == torch_dtype(dt) else copy.deepcopy(hf).to(torch_dtype(dt))
        got, seconds[dt], agrees, residual_max[dt] = _capture(work, batches, offset, dt, progress)
        same = same and agrees
        w = final_norm(work)[1].weight.detach().float().cpu()
        for pos in positions:
            n = _gather(got["n"], pos)
            readings = {"decoder input": torch.cat(got["head"]) if pos == "last" else _gather(got["y"], pos),
                        "before final norm": _gather(got["x"], pos), "normalised, gain 1": n,
                        "gain w": n * w, "gain 1 + w": n * (1.0 + w)}
            for name, h in readings.items():
                rows.append(_stats(name, dt, pos, h, min_cosine))
        del work, got
    return SupportTable(rows=rows, lengths=[int(L) for L in lengths], per_length=int(per_length), seed=int(seed),
                        sequences=sum(int(b.shape[0]) for b in batches),
                        tokens=sum(int(b.numel()) for b in batches), norm=norm_name,
                        gain="1 + w" if offset else "w",
                        weight_top=[(int(i), float(gain[i])) for i in top.indices],
                        weight_bottom=[(int(i), float(gain[i])) for i in bottom.indices],
                        gain_median=float(gain.median()),
                        gains={i: float(gain[i]) for i in sorted({c for r in rows for c in r.top_coords})},
                        decoder_is_norm_output=bool(same), residual_max=residual_max, seconds=seconds)


def with_norm_weight(model, value):
    """A copy of the model (float32, eval mode) with the weight of every norm (each module with
    'Norm' in its class name) set to ``value``: what a checkpoint whose norm weights were not
    loaded computes when the initialisation put ``value`` there (for Gemma, whose norms multiply
    by 1 + w, a weight of 1 is a gain of 2)."""
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"norm_weight must be a finite number; got {value!r}")
    out = copy.deepcopy(hf_model(model)).float().eval()
    with torch.no_grad():
        for mod in out.modules():
            if "Norm" in type(mod).__name__ and getattr(mod, "weight", None) is not None:
                mod.weight.fill_(value)
    for p in out.parameters():
        p.requires_grad_(False)
    return out


def untrained_like(model, *, norm_weight=None, seed=0):
    """A model of the same class and config with transformers' random initialisation (seeded;
    the global RNG is left as it was), in eval mode and float32; ``norm_weight``: a value every
    norm weight is set to (:func:`with_norm_weight`), None keeps the initialisation's.

    The reference for a support measured on weights that were never loaded (docs/gemma.md)."""
    hf = hf_model(model)
    if norm_weight is not None and not math.isfinite(float(norm_weight)):
        raise ValueError(f"norm_weight must be a finite number or None; got {norm_weight!r}")
    cfg = hf.config.__class__.from_dict(hf.config.to_dict())
    if hasattr(cfg, "quantization_config"):
        del cfg.quantization_config
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(check_seed("seed", seed))
        fresh = hf.__class__(cfg)
    if norm_weight is not None:
        return with_norm_weight(fresh, norm_weight)
    fresh = fresh.float().eval()
    for p in fresh.parameters():
        p.requires_grad_(False)
    return fresh
