"""Radius of the hidden states against context length: bounded or growing?

[A]'s counting argument needs a bounded support: the final hidden state (the input of the
unembedding, after the final norm) must stay in a ball of radius r whatever the input. The
paper notes that this is where architectures beyond transformers could escape the bound:
"their hidden states can diverge". This module measures, for growing context lengths L, three
radii of one causal LM at the last position of L-token inputs:

* ``final``: the final hidden state, exactly what :func:`accesslib.engine.geometry.final_hidden`
  reads (the support of [A] and of :mod:`accesslib.engine.geometry`);
* ``residual``: the input of the final norm (the residual stream before it is normalised):
  the state that could diverge;
* ``ssm_state``: for recurrent models (Mamba), the recurrent state h_t of every mixer layer
  (max-abs over layers, channels and state dimensions), the "hidden state" of a state-space
  model in the usual sense; None for transformers.

Each as r_inf (max-abs coordinate) and r_2 (L2 norm), the maximum and the mean over the
samples of each length. :func:`norm_cap` is the radius the final norm allows at most (any
input, any length): a LayerNorm or RMSNorm output has ||z||_2 <= sqrt(d) before its gain g
and bias b, so ||h||_2 <= sqrt(d) max|g| + ||b||_2 and ||h||_inf <= sqrt(d) max|g| + max|b|.
:func:`growth_exponent` fits r ~ L^k on a log-log scale (k near 0: bounded).

Positions: a GPT-NeoX twin trained on 64-token windows has rotary positions, which are
computed for any position, so it runs on longer inputs (``allow_beyond_context=True``);
lengths beyond its training context are extrapolation and are flagged in the record.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from accesslib._checks import check_choice, check_int, check_int_list, check_seed, fail
from accesslib.models import facts
from accesslib.models.loading import facts_of, hf_model

__all__ = ["SOURCES", "DEFAULT_LENGTHS", "final_norm", "norm_cap", "hidden_radii", "RadiusCurve",
           "radius_curve", "growth_exponent"]

SOURCES = ("tokens", "natural")
DEFAULT_LENGTHS = tuple(2 ** k for k in range(2, 13))   # 4, 8, ..., 4096
_NORM_NAMES = ("final_layer_norm", "norm_f", "norm", "ln_f", "final_norm")


def final_norm(model):
    """The final normalisation module of a causal LM (the last module whose input is the
    residual stream and whose output feeds the unembedding): GPT-NeoX ``final_layer_norm``,
    Mamba ``norm_f``, Llama/Qwen/Gemma ``norm``, GPT-2 ``ln_f``."""
    hf = hf_model(model)
    base = getattr(hf, "base_model", hf)
    for name in _NORM_NAMES:
        mod = getattr(base, name, None)
        if isinstance(mod, torch.nn.Module):
            return mod
    raise ValueError(f"model must have a final norm named one of {', '.join(_NORM_NAMES)}; "
                     f"got {type(hf).__name__}")


def norm_cap(model) -> dict:
    """Largest r_inf and r_2 the final norm can output, for any input: {"r_inf", "r_2"}
    (sqrt(d) max|gain| plus the bias; see the module docstring)."""
    norm = final_norm(model)
    w = getattr(norm, "weight", None)
    b = getattr(norm, "bias", None)
    if not isinstance(w, torch.Tensor) or w.ndim != 1:
        fail("model", "a model whose final norm has a gain vector", type(norm).__name__)
    d = w.numel()
    g = float(w.detach().float().abs().max())
    bi = float(b.detach().float().abs().max()) if b is not None else 0.0
    b2 = float(b.detach().float().norm()) if b is not None else 0.0
    return {"r_inf": math.sqrt(d) * g + bi, "r_2": math.sqrt(d) * g + b2}


def _ssm_inf(out) -> torch.Tensor | None:
    """Per row [B], the max-abs of the recurrent states of every layer in a forward output's
    cache (Mamba: ``cache.get_recurrent_state(layer)``, [B, inner width, state]), else None."""
    cache = out.get("cache") if hasattr(out, "get") else None
    get = getattr(cache, "get_recurrent_state", None)
    if get is None:
        return None
    vals = []
    for i in range(len(getattr(cache, "layers", []))):
        try:
            s = get(i)
        except (IndexError, KeyError, AttributeError, TypeError):
            s = None
        if isinstance(s, torch.Tensor):
            vals.append(s.detach().float().abs().flatten(1).amax(1))
    if not vals:
        return None
    return torch.stack(vals).amax(0)


def hidden_radii(model, input_ids) -> dict:
    """Radii at the last position of ``input_ids`` [B, L]: per row (tensors [B]) ``final_inf``,
    ``final_2`` (the final hidden state), ``residual_inf``, ``residual_2`` (the input of the
    final norm) and ``ssm_inf`` (recurrent models' state, max-abs; None otherwise)."""
    hf = hf_model(model)
    ids = torch.as_tensor(input_ids)
    if ids.ndim != 2 or ids.shape[1] < 1:
        fail("input_ids", "a [B, L >= 1] tensor of token ids", tuple(ids.shape))
    seen = {}
    head = hf.get_output_embeddings()
    hooks = [final_norm(hf).register_forward_pre_hook(lambda mod, args: seen.__setitem__("res", args[0])),
             head.register_forward_pre_hook(lambda mod, args: seen.__setitem__("fin", args[0]))]
    recurrent = getattr(hf.config, "model_type", "") in ("mamba", "mamba2", "falcon_mamba")
    try:
        with torch.inference_mode():
            device = next(hf.parameters()).device
            out = hf(input_ids=ids.to(device), logits_to_keep=1, use_cache=recurrent)
    finally:
        for h in hooks:
            h.remove()
    fin = seen["fin"][:, -1, :].float().cpu()
    res = seen["res"][:, -1, :].float().cpu()
    ssm = _ssm_inf(out) if recurrent else None
    return dict(final_inf=fin.abs().amax(1), final_2=fin.norm(dim=1),
                residual_inf=res.abs().amax(1), residual_2=res.norm(dim=1),
                ssm_inf=None if ssm is None else ssm.cpu())


@dataclass
class RadiusCurve:
    """Radii against context length for one model (see the module docstring).

    ``max`` and ``mean`` map each radius name (final_inf, final_2, residual_inf, residual_2,
    ssm_inf) to one value per length (max / mean over the ``per_length`` samples of that
    length); ssm_inf is absent for transformers. ``cap``: :func:`norm_cap`. ``trained_context``:
    the window the model was trained on (lengths above it are extrapolation for a transformer;
    None when unknown or when the model has no positions)."""
    model: str
    family: str
    source: str
    lengths: list
    per_length: int
    max: dict
    mean: dict
    cap: dict
    trained_context: int | None
    seed: int
    growth: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def _inputs(source, L, B, vocab, text_ids, gen):
    if source == "tokens":
        return torch.randint(0, vocab, (B, L), generator=gen)
    starts = torch.randint(0, len(text_ids) - L, (B,), generator=gen).tolist()
    return torch.stack([text_ids[s:s + L] for s in starts])


def radius_curve(model, lengths=DEFAULT_LENGTHS, per_length: int = 16, *, source: str = "tokens",
                 seed: int = 0, batch_tokens: int = 8192, text: str | None = None, tokenizer=None,
                 name: str | None = None, allow_beyond_context: bool = False,
                 trained_context: int | None = None, progress: bool = False) -> RadiusCurve:
    """:class:`RadiusCurve` of ``model`` over ``lengths`` (``per_length`` inputs each).

    source: "tokens" (uniform random ids, as [A] samples the support) or "natural" (windows of
    ``text``, default the held-out split of the shipped corpus, tokenised by ``tokenizer`` or the
    model's). A model with position limit P refuses lengths > P unless ``allow_beyond_context``
    (rotary transformers run past it). ``trained_context`` defaults to the model's position
    limit. Batches hold about ``batch_tokens`` tokens.
    """
    hf = hf_model(model)
    check_choice("source", source, SOURCES)
    lengths = check_int_list("lengths", list(lengths), 1)
    per_length = check_int("per_length", per_length, 1)
    batch_tokens = check_int("batch_tokens", batch_tokens, 1)
    seed = check_seed("seed", seed)
    ctx = facts.max_context(hf)
    if ctx and max(lengths) > ctx and not allow_beyond_context:
        fail("lengths", f"<= the model's context {ctx} (or allow_beyond_context=True)", max(lengths))
    vocab = facts.shared_vocab_size(hf)
    text_ids = None
    if source == "natural":
        tok = tokenizer or getattr(model, "tokenizer", None)
        if tok is None:
            fail("tokenizer", "a tokenizer for source='natural'", None)
        if text is None:
            from accesslib.models import embedded
            text = embedded.corpus_split("heldout")
        text_ids = torch.tensor(tok(text, verbose=False)["input_ids"], dtype=torch.long)
        if len(text_ids) <= max(lengths):
            fail("lengths", f"shorter than the text ({len(text_ids)} tokens)", max(lengths))
    gen = torch.Generator().manual_seed(seed)
    keys = ("final_inf", "final_2", "residual_inf", "residual_2", "ssm_inf")
    mx, mean = {k: [] for k in keys}, {k: [] for k in keys}
    from tqdm.auto import tqdm

    for L in tqdm(lengths, desc="radius", disable=not progress, leave=False):
        bs = max(1, batch_tokens // L)
        acc = {k: [] for k in keys}
        for start in range(0, per_length, bs):
            ids = _inputs(source, L, min(bs, per_length - start), vocab, text_ids, gen)
            r = hidden_radii(hf, ids)
            for k in keys:
                if r[k] is not None:
                    acc[k].append(r[k])
        for k in keys:
            if acc[k]:
                v = torch.cat(acc[k])
                mx[k].append(float(v.max()))
                mean[k].append(float(v.mean()))
    mx = {k: v for k, v in mx.items() if v}
    mean = {k: v for k, v in mean.items() if v}
    f = facts_of(hf)
    curve = RadiusCurve(model=name or getattr(getattr(model, "facts", None), "name", None) or type(hf).__name__,
                        family=f.family,
                        source=source, lengths=lengths, per_length=per_length, max=mx, mean=mean,
                        cap=norm_cap(hf), trained_context=trained_context if trained_context else ctx,
                        seed=seed)
    curve.growth = {k: growth_exponent(lengths, v) for k, v in mx.items()}
    return curve


def growth_exponent(lengths, values) -> float | None:
    """Least-squares k of log r = k log L + c (r ~ L^k): about 0 for a bounded radius, 1 for a
    radius growing linearly with the length. None with fewer than two positive points."""
    x = np.asarray(lengths, dtype=float)
    y = np.asarray(values, dtype=float)
    ok = (x > 0) & (y > 0) & np.isfinite(y)
    if ok.sum() < 2 or np.ptp(np.log(x[ok])) == 0:
        return None
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])
