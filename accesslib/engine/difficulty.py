"""How hard a target is: its cost in nats per token under the model.

The cost of a target string t_1..t_n is the model's teacher-forced cross-entropy
-(1/n) sum_i ln p(t_i | BOS, t_1..t_{i-1}): the mean surprise of its tokens. A soft prompt must
supply what the model does not already expect, so a source whose strings cost more nats per token
is a harder target: uniform random tokens cost about ln|V| under any model that has not learned
them, natural text far less under a model trained on text like it, and random words sit between
(docs/paper.md, section 5: "Random" strings carry fewer nats per token than random token ids).

:func:`target_cost` measures one source at one length; :func:`cost_table` several sources and
models, for the results docs (``scripts/make_bundles.py``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from accesslib._checks import check_choice, check_int, check_seed
from accesslib.engine import targets as _targets
from accesslib.models import facts as _facts
from accesslib.models.loading import hf_model

__all__ = ["TargetCost", "target_cost", "cost_table", "tokens_per_word"]


@dataclass
class TargetCost:
    """Mean cost of B targets of one source, in nats per scored token, with its standard error
    over the strings; ``per_string`` holds each string's mean."""
    source: str
    n: int
    B: int
    nats_per_token: float
    stderr: float
    ln_vocab: float        # ln|V|: the cost of a uniform guess over the shared vocabulary
    prefix_ids: list[int]  # what came before the target (BOS), empty when the model has none
    scored: int            # tokens scored per string: n after a prefix, n - 1 without one
    per_string: list[float] = field(default_factory=list, repr=False)

    @property
    def bits_per_token(self) -> float:
        return self.nats_per_token / math.log(2)


def _prefix(model, prefix_ids) -> list[int]:
    if prefix_ids == "bos":
        from accesslib.engine.cramming import default_prefix
        return default_prefix(model)
    return [int(t) for t in (prefix_ids or [])]


@torch.no_grad()
def target_cost(model, source: str, n: int, B: int, seed: int = 0, *, tokenizer=None, text: str | None = None,
                prefix_ids="bos", batch_size: int = 64) -> TargetCost:
    """Mean teacher-forced cross-entropy (nats per token) of B targets of ``source`` with n tokens.

    model: a LoadedModel (or a transformers causal LM with ``tokenizer``). The targets are those
    :func:`accesslib.engine.targets.make_targets` gives for (source, n, B, seed), special ids
    excluded from random tokens, as the cramming curves draw them. Each target is scored after
    ``prefix_ids`` ("bos": the model's BOS token when its config names one, as cramming puts it
    before the memory); with no prefix the first token has no context and is given, and the
    other n - 1 are scored. ``text``: the natural-text source's text (default: the held-out
    corpus).
    """
    check_choice("source", source, _targets.SOURCES)
    n, B = check_int("n", n, 1), check_int("B", B, 1)
    seed = check_seed("seed", seed)
    batch_size = check_int("batch_size", batch_size, 1)
    hf = hf_model(model)
    tok = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    prefix = _prefix(hf, prefix_ids)
    if not prefix and n < 2:
        raise ValueError("n must be >= 2 when the model has no BOS token (the first token is given, not scored); "
                         f"got {n}")
    ctx = _facts.max_context(hf)
    if ctx and len(prefix) + n > ctx:
        raise ValueError(f"n must be at most {ctx - len(prefix)} (the model's context of {ctx} tokens "
                         f"minus the prefix); got {n}")
    vocab = _facts.shared_vocab_size(hf)
    exclude = list(getattr(tok, "all_special_ids", []) or []) if tok is not None else []
    ids, _ = _targets.make_targets(source, n, B, seed, tokenizer=tok, vocab_size=vocab, exclude=exclude,
                                   text=text)
    device = next(hf.parameters()).device
    full = torch.cat([torch.tensor([prefix] * B, dtype=torch.long).reshape(B, len(prefix)), ids], 1).to(device)
    first = max(len(prefix), 1)                     # the first scored position in ``full``
    per = []
    for lo in range(0, B, batch_size):
        x = full[lo:lo + batch_size]
        logits = hf(input_ids=x).logits[:, first - 1:-1].float()
        nll = -torch.log_softmax(logits, -1).gather(-1, x[:, first:, None])[..., 0]
        per.append(nll.mean(1).cpu())
    per = torch.cat(per).double()
    se = float(per.std(unbiased=True) / math.sqrt(B)) if B > 1 else float("nan")
    return TargetCost(source=source, n=n, B=B, nats_per_token=float(per.mean()), stderr=se,
                      ln_vocab=math.log(vocab), prefix_ids=prefix, scored=full.shape[1] - first,
                      per_string=[float(v) for v in per])


def cost_table(models, sources=("natural", "words", "words100k", "glove100k", "tokens"), n: int = 32, B: int = 64,
               seed: int = 0) -> list[dict]:
    """One row per (model, source): {model, source, n, B, nats_per_token, stderr, bits_per_token,
    ln_vocab}. ``models``: names for :func:`accesslib.models.loading.load_model` or LoadedModels."""
    from accesslib.models.loading import load_model

    rows = []
    for m in models:
        lm = load_model(m) if isinstance(m, str) else m
        name = m if isinstance(m, str) else lm.facts.name
        for s in sources:
            c = target_cost(lm, s, n, B, seed)
            rows.append(dict(model=name, source=s, n=n, B=B, nats_per_token=c.nats_per_token, stderr=c.stderr,
                             bits_per_token=c.bits_per_token, ln_vocab=c.ln_vocab))
    return rows


def tokens_per_word(tokenizer, source: str = "words", k: int = 2000, seed: int = 0) -> float:
    """Mean number of tokens of one word of a random-words ``source`` ("words" or "words100k"),
    as it appears inside a target (a space before it), over k words drawn uniformly with a seeded
    generator. Per token a list of short common words (one token each, every token a fresh draw)
    can cost more than a list of rare words split into several tokens, the later ones predictable;
    cost per word = nats per token x tokens per word compares the lists as words."""
    import numpy as np

    k = check_int("k", k, 1)
    words = _targets.word_list(source=source)
    rng = np.random.default_rng(check_seed("seed", seed))
    drawn = [words[j] for j in rng.integers(0, len(words), size=k)]
    return sum(len(_targets._encode(tokenizer, " " + w)) for w in drawn) / k
