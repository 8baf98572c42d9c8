"""The mean-field view of attention, shown numerically (docs/paper.md, section 2, last paragraph).

[A] states that an accessibility threshold exists even with unbounded context and computation
("Corollary 4.10"), using a mean-field view: a transformer as a map between probability
measures over tokens, which attention's permutation equivariance allows. The exact statement of
that corollary was not available to us. This module does **not** implement it; it only
illustrates the mechanism it rests on, with a small numpy transformer:

- A position-free attention layer (no positional encoding, no causal mask) computes, for a
  token with value x in a context x_1..x_N,

      out(x) = sum_j exp(s(x, x_j)) v(x_j) / sum_j exp(s(x, x_j)),   s(x, y) = q(x).k(y)/sqrt(d_h)

  Both sums are N times an integral against the empirical measure mu_N = (1/N) sum_j delta_{x_j},
  and the N cancels: out(x) depends on the context only through mu_N. Consequences checked
  here to float precision: permuting the context changes nothing (beyond permuting the
  outputs); writing every token k times changes nothing (same mu_N); and a whole stack of such
  layers (with per-token MLPs and norms) can be run on the measure itself: one atom per token
  type, weighted by its frequency (:meth:`PositionFreeTransformer.forward_measure`).
- Adding positions or a causal mask breaks these invariances (shown for contrast).
- As N grows with tokens drawn from a distribution p, mu_N tends to p and the output tends to
  the output at p: a longer context does not give the layer new inputs beyond the set of
  probability vectors over the vocabulary, which is bounded whatever N is.

Pure numpy (no torch, no matplotlib).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from accesslib._checks import check_int, check_seed, fail


def _layer_norm(x):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5)


def _gelu(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def sinusoidal_positions(n, d):
    """The sinusoidal position code of Vaswani et al. [n, d] (used only to break the invariance)."""
    pos = np.arange(n)[:, None]
    i = np.arange(d)[None, :]
    ang = pos / 10000 ** (2 * (i // 2) / d)
    return np.where(i % 2 == 0, np.sin(ang), np.cos(ang))


@dataclass
class PositionFreeTransformer:
    """A small pre-norm transformer encoder in numpy, random weights, no positions by default.

    Each layer: h <- h + Attn(LN(h)); h <- h + MLP(LN(h)). ``forward_tokens`` runs it on a
    token sequence (optionally with sinusoidal positions and/or a causal mask),
    ``forward_measure`` on a probability vector over the vocabulary (mean-field form).
    """

    embed: np.ndarray          # [V, d]
    layers: list               # dicts of weight matrices
    heads: int

    @classmethod
    def random(cls, vocab_size=8, d=16, layers=2, heads=2, seed=0, scale=1.0):
        """Random weights (seeded); ``scale`` multiplies the attention logits' weights."""
        vocab_size = check_int("vocab_size", vocab_size, 2, 10_000)
        d = check_int("d", d, 2, 4096)
        layers = check_int("layers", layers, 1, 64)
        heads = check_int("heads", heads, 1, d)
        if d % heads:
            raise ValueError(f"d must be a multiple of heads; got d={d}, heads={heads}")
        rng = np.random.default_rng(check_seed("seed", seed))
        g = lambda *s: rng.standard_normal(s) / math.sqrt(s[0])  # noqa: E731
        ls = [dict(Wq=g(d, d) * scale, Wk=g(d, d) * scale, Wv=g(d, d), Wo=g(d, d),
                   W1=g(d, 4 * d), W2=g(4 * d, d)) for _ in range(layers)]
        return cls(embed=rng.standard_normal((vocab_size, d)), layers=ls, heads=heads)

    @property
    def vocab_size(self):
        return self.embed.shape[0]

    @property
    def d(self):
        return self.embed.shape[1]

    def _attend(self, L, hq, hk, log_w=None, causal=False):
        """Multi-head softmax attention of queries hq [Q,d] over keys/values hk [K,d].

        ``log_w`` [K] adds log weights to the logits: attention against a weighted measure
        sum_t w_t delta_{x_t} (w_t = 1 for plain tokens).
        """
        H, dh = self.heads, self.d // self.heads
        q = (hq @ L["Wq"]).reshape(len(hq), H, dh).transpose(1, 0, 2)
        k = (hk @ L["Wk"]).reshape(len(hk), H, dh).transpose(1, 0, 2)
        v = (hk @ L["Wv"]).reshape(len(hk), H, dh).transpose(1, 0, 2)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(dh)          # [H, Q, K]
        if log_w is not None:
            s = s + log_w[None, None, :]
        if causal:
            s = np.where(np.tril(np.ones((len(hq), len(hk)), bool))[None], s, -np.inf)
        s = s - s.max(-1, keepdims=True)
        a = np.exp(s)
        a /= a.sum(-1, keepdims=True)
        o = (a @ v).transpose(1, 0, 2).reshape(len(hq), self.d)
        return o @ L["Wo"]

    def forward_tokens(self, ids, *, positions=False, causal=False, layers=None):
        """Hidden states [N, d] of a token sequence (after a final layer norm)."""
        given, ids = ids, np.asarray(ids)
        if ids.ndim != 1 or len(ids) == 0 or ids.min() < 0 or ids.max() >= self.vocab_size:
            fail("ids", f"a non-empty 1-D sequence of token ids in 0..{self.vocab_size - 1}", given)
        h = self.embed[ids].astype(float)
        if positions:
            h = h + sinusoidal_positions(len(ids), self.d)
        for L in self.layers[:layers]:
            x = _layer_norm(h)
            h = h + self._attend(L, x, x, causal=causal)
            h = h + _gelu(_layer_norm(h) @ L["W1"]) @ L["W2"]
        return _layer_norm(h)

    def forward_measure(self, p, *, layers=None):
        """Mean-field forward: one atom per token type, weighted by p. Returns atoms [V, d].

        Atom t evolves as a token of type t would in any context whose empirical measure is p:
        attention is taken against sum_t p_t delta_{atom_t} (log p_t added to the logits).
        Token types with p_t = 0 get no weight as keys but their atom is still computed (the
        output a token of that type would have if it were added with vanishing frequency).
        """
        given, p = p, np.asarray(p, dtype=float)
        if p.shape != (self.vocab_size,) or np.any(p < 0) or not np.isfinite(p).all() or p.sum() <= 0:
            fail("p", f"{self.vocab_size} non-negative weights with a positive sum", given)
        p = p / p.sum()
        with np.errstate(divide="ignore"):
            log_w = np.log(p)
        h = self.embed.astype(float).copy()
        for L in self.layers[:layers]:
            x = _layer_norm(h)
            h = h + self._attend(L, x, x, log_w=log_w)
            h = h + _gelu(_layer_norm(h) @ L["W1"]) @ L["W2"]
        return _layer_norm(h)


def empirical_measure(ids, vocab_size):
    """mu_N as a probability vector over the vocabulary: counts / N."""
    ids = np.asarray(ids)
    return np.bincount(ids, minlength=vocab_size).astype(float) / len(ids)


def duplicate(ids, k):
    """Every token written k times in place: a b c -> a a b b c c (same empirical measure)."""
    k = check_int("k", k, 1, 1000)
    return np.repeat(np.asarray(ids), k)


def query_output(model, ids, *, positions=False, causal=False):
    """Output at the last token: what a causal LM would read its next token from."""
    return model.forward_tokens(ids, positions=positions, causal=causal)[-1]


@dataclass
class InvarianceCheck:
    """Max |difference| of the last-token output after a change of the context."""

    duplicated: float      # every token twice (k times), query token kept last
    permuted: float        # context permuted, query token kept last
    measure: float         # token-level vs mean-field (forward_measure) at the query's type


def invariance_check(model, ids, *, k=2, seed=0, positions=False, causal=False):
    """Apply the three checks to a context ``ids`` whose last token is the query.

    Duplication keeps the query last (the duplicate of the last token is last). Permutation
    shuffles all tokens but the last. With ``positions`` or ``causal`` the first two numbers
    are in general far from 0: the invariance belongs to position-free, unmasked attention.
    """
    ids = np.asarray(ids)
    base = query_output(model, ids, positions=positions, causal=causal)
    dup = query_output(model, duplicate(ids, k), positions=positions, causal=causal)
    rng = np.random.default_rng(check_seed("seed", seed))
    perm = np.concatenate([rng.permutation(ids[:-1]), ids[-1:]])
    per = query_output(model, perm, positions=positions, causal=causal)
    mf = model.forward_measure(empirical_measure(ids, model.vocab_size))[ids[-1]]
    return InvarianceCheck(float(np.abs(dup - base).max()), float(np.abs(per - base).max()),
                           float(np.abs(mf - base).max()))


def convergence(model, p, lengths, *, query=0, seed=0, repeats=5):
    """Output at a query token for contexts of growing length drawn i.i.d. from p.

    For each N: ``repeats`` contexts of N-1 tokens from p followed by the query token; returns
    dict(lengths, out_dist [len, repeats]: max |out_N - out_p| where out_p is the mean-field
    output at p (forward_measure), tv [len, repeats]: total variation |mu_N - p|_1 / 2).
    The context's measure converges to p (so the output does); whatever N is, the layer's input
    is a point of the probability simplex over the vocabulary.
    """
    given, p = p, np.asarray(p, dtype=float)
    if p.shape != (model.vocab_size,) or np.any(p < 0) or not np.isfinite(p).all() or p.sum() <= 0:
        fail("p", f"{model.vocab_size} non-negative weights with a positive sum", given)
    p = p / p.sum()
    query = check_int("query", query, 0, model.vocab_size - 1)
    repeats = check_int("repeats", repeats, 1, 1000)
    lengths = [check_int("length", int(n), 2, 100_000) for n in lengths]
    rng = np.random.default_rng(check_seed("seed", seed))
    out_p = model.forward_measure(p)[query]
    dist = np.zeros((len(lengths), repeats))
    tv = np.zeros_like(dist)
    for i, n in enumerate(lengths):
        for j in range(repeats):
            ids = np.concatenate([rng.choice(model.vocab_size, size=n - 1, p=p), [query]])
            dist[i, j] = np.abs(query_output(model, ids) - out_p).max()
            tv[i, j] = 0.5 * np.abs(empirical_measure(ids, model.vocab_size) - p).sum()
    return dict(lengths=np.array(lengths), out_dist=dist, tv=tv)
