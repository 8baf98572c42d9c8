"""Facts about a causal LM, each computed in one place (docs/paper.md, sections 3-5).

Every part of the package that needs a model's vocabulary size, context length or embedding
scale asks these functions (``accesslib.models.loading.facts_of`` fills ``ModelFacts`` from them),
so the answers cannot drift apart:

- :func:`vocab_size` - |V| as greedy decoding sees it: the rows of the output embedding (the
  unembedding), which may exceed the tokenizer's size and, rarely, the input embedding's rows.
  The decoder-cell census and the bounds use it.
- :func:`shared_vocab_size` - the ids that both embeddings have, min(input rows, output rows):
  the ids a model can read as input *and* write as output. Cramming draws and accepts target
  and prefix ids below it, and the support is sampled from it.
- :func:`max_context` - the longest sequence the model's positions cover, read from the text
  config (multimodal configs such as Gemma-3's keep it there), or None (recurrent models).
- :func:`embed_scale` - the factor the input-embedding module multiplies its rows by (Gemma:
  sqrt(d)), measured rather than guessed from the family.

The functions take the transformers model (a ``LoadedModel`` is unwrapped by
``accesslib.models.loading.hf_model`` first); :func:`max_context` also takes a config.
"""
from __future__ import annotations

import torch

__all__ = ["vocab_size", "shared_vocab_size", "max_context", "embed_scale", "text_config",
           "CONTEXT_KEYS"]

#: Config fields that hold the context length, in the order they are tried.
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length",
                "max_seq_len")


def _rows(module) -> int | None:
    w = getattr(module, "weight", None) if module is not None else None
    return int(w.shape[0]) if w is not None else None


def vocab_size(model) -> int:
    """|V| of greedy decoding: rows of the output embedding (input rows when there is none)."""
    head = model.get_output_embeddings()
    rows = _rows(head)
    return rows if rows is not None else int(model.get_input_embeddings().weight.shape[0])


def shared_vocab_size(model) -> int:
    """Ids both embeddings have: min(input-embedding rows, output-embedding rows)."""
    return min(int(model.get_input_embeddings().weight.shape[0]), vocab_size(model))


def text_config(config):
    """The text (decoder) part of a config: itself for text-only models; Gemma-3's text config
    for its multimodal one (``config.get_text_config()`` where transformers provides it)."""
    get = getattr(config, "get_text_config", None)
    if callable(get):
        try:
            return get()
        except (TypeError, ValueError, AttributeError):
            return config
    return config


def max_context(model_or_config) -> int | None:
    """Longest sequence the model's positions cover (the first of :data:`CONTEXT_KEYS` that its
    text config sets to a positive whole number), or None: recurrent models (Mamba) have no
    fixed context. Takes a model (its ``.config`` is read) or a config."""
    config = getattr(model_or_config, "config", model_or_config)
    config = text_config(config)
    for key in CONTEXT_KEYS:
        v = getattr(config, key, None)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def embed_scale(model) -> float:
    """Factor by which the input-embedding module scales its rows (Gemma: sqrt(d)).

    Measured, not guessed from the family: embed a few ids and compare with the raw matrix rows,
    so that any model whose embedding layer rescales is handled. A soft prompt enters after
    that layer, so its natural scale is std(embedding matrix) * embed_scale (section 5)."""
    emb = model.get_input_embeddings()
    w = emb.weight
    ids = torch.arange(min(8, w.shape[0]), device=w.device)[None]
    with torch.no_grad():
        out = emb(ids)[0].float()
        raw = w[ids[0]].float()
    den = raw.norm()
    if den == 0:
        return float(getattr(emb, "scalar_embed_scale", 1.0))
    s = float(out.norm() / den)
    return 1.0 if abs(s - 1.0) < 1e-3 else s
