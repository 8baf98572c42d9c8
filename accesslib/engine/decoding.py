"""Greedy decoding after input vectors: the one decoder of the package (docs/paper.md, section 5).

A string t is accessible with memory x when greedy decoding after x outputs exactly t, so every
measurement that asks "what does the model say after these inputs?" uses :func:`greedy`:
cramming's success check, the effective precision of :mod:`accesslib.engine.geometry`, the
perturbation and saturation tests of :mod:`accesslib.engine.precision`, and the copy task's
evaluation (:mod:`accesslib.engine.copying`, token ids only).

The input sequence of row b is

    [prefix ids (shared by all rows)] [memory[b]: m input vectors] [given ids of row b]

where the ids enter through the model's own input-embedding module (so an embedding that scales
its rows, Gemma's sqrt(d), is applied to them as the model would), and the memory vectors are
given as they are, after that module: a soft prompt lives where the embedding's output does.

``cache=True`` runs one forward pass over the inputs, then one per new token with the model's
KV (or recurrent) cache. ``cache=False`` re-runs the whole sequence for every token (slower, but
it needs nothing beyond ``model(inputs_embeds=...)``); a model whose forward takes no cache, or
that returns none, or whose cached step fails, is decoded that way too. Both give the same
tokens up to floating-point rounding (tests/engine/test_decoding.py checks it on every family).
Full-sequence passes ask for the last position's logits only (``logits_to_keep=1``) when the
model's forward takes that argument, so a |V| = 262k head never fills [B, L, |V|].
"""
from __future__ import annotations

import inspect
from contextlib import contextmanager, nullcontext

import torch

from accesslib._checks import check_int, check_token_ids, fail
from accesslib.models.loading import hf_model, torch_dtype

__all__ = ["greedy", "forward_options", "autocast", "as_autocast_dtype", "token_ids"]


def forward_options(model) -> dict:
    """What the model's forward takes: ``cache_key`` ("cache", "past_key_values" or None: the
    name of its cache argument) and ``logits_to_keep`` (bool)."""
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        params = {}
    return {"cache_key": "cache" if "cache" in params else
            ("past_key_values" if "past_key_values" in params else None),
            "logits_to_keep": "logits_to_keep" in params}


def as_autocast_dtype(dtype):
    """None | 'bfloat16' | 'float16' | torch.dtype -> the torch dtype to autocast to, or None
    (no autocast: None and float32)."""
    if dtype is None:
        return None
    dt = torch_dtype(dtype)
    return None if dt == torch.float32 else dt


def autocast(device, dtype):
    """Context manager: autocast to ``dtype`` (see :func:`as_autocast_dtype`) on ``device``."""
    dt = as_autocast_dtype(dtype)
    if dt is None:
        return nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=dt)


def _contiguous_input(module, args):
    if args and isinstance(args[0], torch.Tensor) and not args[0].is_contiguous():
        return (args[0].contiguous(), *args[1:])
    return None


@contextmanager
def contiguous_head(model):
    """For the duration, the model's output layer gets a contiguous input (same logits, to the
    bit). A model asked for the logits of its last positions only (``logits_to_keep``) hands its
    head a strided slice of the hidden states, and on a CPU a matmul of a strided [B, K, d] input
    with a 2-d weight runs as a batched product over a broadcast weight, about half as fast as
    one matrix product: forward 4.13 s against 2.22 s for Gemma-3-270M's 262,144 x 640 head on
    8 x 24 positions, one thread (``benchmarks/head_layout.py``). Nothing is left on the model after."""
    get = getattr(model, "get_output_embeddings", None)
    head = get() if callable(get) else None
    if not isinstance(head, torch.nn.Module):
        yield
        return
    handle = head.register_forward_pre_hook(_contiguous_input)
    try:
        yield
    finally:
        handle.remove()


def token_ids(ids, name: str = "prefix_ids") -> list:
    """A 1-D sequence of token ids (list, tuple, 1-D array or tensor) or None -> list of ints
    (:func:`accesslib._checks.check_token_ids`: a string is refused, never read as digits)."""
    if isinstance(ids, torch.Tensor):
        if ids.dim() != 1:
            raise ValueError(f"{name} must be a 1-D sequence of token ids; got shape {tuple(ids.shape)}")
        ids = ids.tolist()
    return check_token_ids(name, ids)


def _cache_of(out):
    cache = getattr(out, "cache", None)
    return getattr(out, "past_key_values", None) if cache is None else cache


def _device_of(model, fallback):
    for p in getattr(model, "parameters", lambda: ())():
        return p.device, p.dtype
    return fallback.device, None


@torch.no_grad()
def greedy(model, memory, n: int, *, prefix_ids=None, given_ids=None, cache: bool = True,
           batch: int | None = None, autocast_dtype=None) -> torch.Tensor:
    """Greedy decoding of n tokens after [prefix_ids][memory][given_ids], B rows at once.

    model: a transformers causal LM (a ``LoadedModel`` is unwrapped); run in eval mode (its
        mode is restored afterwards); its weights are not changed.
    memory: [B, m, d] input vectors (a soft prompt, or any inputs_embeds) in the model's width
        d, or None for token ids only (then ``given_ids`` must be [B, g]).
    prefix_ids: token ids before the memory, the same for every row (e.g. [bos]), or None.
    given_ids: token ids after the memory: one list for every row, or a LongTensor [B, g]
        (e.g. the first target token of each row, cramming's first_token_as_input), or None.
    cache: decode with the model's cache (one forward pass per token) or, False, re-run the
        whole sequence for every token.
    batch: at most this many rows per forward pass (None: all B at once).
    autocast_dtype: None (the model's dtype) or 'bfloat16' / 'float16' autocast.

    Returns a LongTensor [B, n] on the model's device: the argmax of the last position's
    logits at every step (ties go to the lowest id).
    """
    model = hf_model(model)
    n = check_int("n", n, 1)
    prefix = token_ids(prefix_ids, "prefix_ids")
    if memory is not None:
        memory = torch.as_tensor(memory)
        if memory.dim() != 3:
            raise ValueError(f"memory must be a tensor [B, m, d] of input vectors (memory[None] for "
                             f"one row); got shape {tuple(memory.shape)}")
        d = model.get_input_embeddings().weight.shape[1]
        if memory.shape[2] != d:
            raise ValueError(f"memory must hold vectors of the model's width d={d}; got width {memory.shape[2]}")
        rows = memory.shape[0]
    if isinstance(given_ids, torch.Tensor) and given_ids.dim() == 2:
        given = given_ids.long()
        if memory is not None and given.shape[0] != rows:
            raise ValueError(f"given_ids must be a LongTensor [B={rows}, g] (one row per memory row); "
                             f"got shape {tuple(given.shape)}")
        rows = given.shape[0]
    elif memory is None:
        fail("given_ids", "a LongTensor [B, g] when memory is None", given_ids)
    else:
        ids = token_ids(given_ids, "given_ids")
        given = torch.tensor([ids] * rows, dtype=torch.long).reshape(rows, len(ids))
    if memory is None and not prefix and given.shape[1] == 0:
        raise ValueError("given_ids must hold at least one token id when there is no memory and no "
                         f"prefix; got shape {tuple(given.shape)}")
    step = rows if batch is None else check_int("batch", batch, 1)
    ac_dtype = as_autocast_dtype(autocast_dtype)
    was_training = getattr(model, "training", False)
    if was_training:
        model.eval()
    try:
        with contiguous_head(model):
            outs = [_greedy_rows(model, prefix, None if memory is None else memory[i:i + step],
                                 given[i:i + step], n, cache, ac_dtype)
                    for i in range(0, rows, max(1, step))]
    finally:
        if was_training:
            model.train(True)
    if not outs:
        return torch.zeros(0, n, dtype=torch.long)
    return torch.cat(outs)


def _greedy_rows(model, prefix, memory, given, n, use_cache, ac_dtype):
    """:func:`greedy` for one batch of rows (arguments already checked)."""
    dev, mdt = _device_of(model, given)
    k = given.shape[0]
    opts = forward_options(model)
    embedded = memory is not None
    if embedded:
        emb = model.get_input_embeddings()
        parts = []
        if prefix:
            parts.append(emb(torch.tensor(prefix, device=dev)[None]).expand(k, -1, -1))
        parts.append(memory.to(device=dev, dtype=mdt))
        if given.shape[1] > 0:
            parts.append(emb(given.to(dev)))
        seq = torch.cat(parts, 1)

        def extend(seq, toks):      # toks: [k, t] new ids
            return torch.cat([seq, emb(toks)], 1)
    else:
        pre = torch.tensor(prefix, dtype=torch.long, device=given.device)[None].expand(k, -1)
        seq = torch.cat([pre, given], 1).to(dev)

        def extend(seq, toks):
            return torch.cat([seq, toks], 1)

    def full(seq, want_cache):
        kw = {"inputs_embeds" if embedded else "input_ids": seq, "use_cache": want_cache}
        if opts["logits_to_keep"]:
            kw["logits_to_keep"] = 1
        with autocast(dev, ac_dtype):
            return model(**kw)

    use_cache = bool(use_cache) and opts["cache_key"] is not None
    out = full(seq, use_cache)
    past = _cache_of(out) if use_cache else None
    use_cache = past is not None
    # `seq` follows the generated tokens only while re-running; after a cached run it is rebuilt
    # from the tokens if the cache has to be given up
    synced = not use_cache
    tok = out.logits[:, -1].float().argmax(-1)
    out_ids = [tok]
    for _ in range(n - 1):
        out = None
        if use_cache:
            try:
                with autocast(dev, ac_dtype):
                    out = model(input_ids=tok[:, None], use_cache=True, **{opts["cache_key"]: past})
            except (TypeError, ValueError, RuntimeError) as err:
                if isinstance(err, torch.OutOfMemoryError):
                    raise
                out = None          # the cache API differs: re-run the whole sequence instead
            past = None if out is None else _cache_of(out)
            use_cache = past is not None
        if out is None:
            if synced:
                seq = extend(seq, tok[:, None])
            else:
                seq = extend(seq, torch.stack(out_ids, 1))
                synced = True
            out = full(seq, False)
        tok = out.logits[:, -1].float().argmax(-1)
        out_ids.append(tok)
    return torch.stack(out_ids, 1)
