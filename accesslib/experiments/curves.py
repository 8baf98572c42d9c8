"""Accessibility curves, n50 fits and slope fits (shared/PAPER.md, section 5).

- :func:`accessibility_curve` crams ``samples`` strings per length n with m memory vectors and
  returns the success fraction per length; every finished string goes to the results store at
  once, and strings already in the store are not crammed again (resume).
- Length search. ``search="paper"`` is [A]'s adaptive search: from max(10, m+1) in steps of
  +100 while success > 0.9, then +10 from the last length above 0.9 until success < 0.1, one
  more +100 step, capped at 1000, ``samples`` strings at every length.
  ``search="bisect"`` (the default) is ours; see :func:`search_bisect`. It spends strings
  where they inform n50: a logistic's Fisher information about its midpoint x0 from t strings
  at length n is t k^2 p(1-p), largest at p = 1/2 and nearly zero on the plateaus where the
  published search spends most of its strings. ``search="grid"`` measures given lengths.
- :func:`fit_n50`: binomial maximum-likelihood logistic fit p(n) = 1/(1+exp(-k(n-x0))),
  n50 = x0 with its standard error from the inverse Fisher information (delta method); Firth's
  bias-reduced likelihood when the data are separated (a step with no partial length), where
  the plain MLE does not exist.
- :func:`fit_slope`: (weighted) least squares n50 = a*m + b, with R^2 and stderr of a.
"""
from __future__ import annotations

import hashlib
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from scipy.special import expit

from accesslib.results.store import ResultsStore, protocol_hash as _protocol_hash, target_hash as _target_hash

__all__ = ["PROTOCOLS", "SEARCHES", "AccessibilityCurve", "N50Fit", "SlopeFit", "accessibility_curve",
           "fit_n50", "fit_slope", "protocol_settings", "search_paper", "search_bisect", "search_grid",
           "LengthSampler", "logistic_oracle"]

#: Protocol names: the engine's presets (accesslib.engine.cramming.PROTOCOLS) plus the target layout.
#: "paper" is [A]'s protocol (section 5): AdamW lr 1e-2, betas (0.9, 0.9), weight decay 0.01,
#: <= 3000 steps, patience 500, first target token given as input. "fast" is the engine's faster
#: schedule and predicts every target token from the memory. Successes are greedy-confirmed in both.
PROTOCOL_LAYOUT = {"paper": dict(first_token_as_input=True), "fast": dict(first_token_as_input=False)}
PROTOCOLS = tuple(PROTOCOL_LAYOUT)
SEARCHES = ("bisect", "paper", "grid")


def protocol_settings(protocol: str | Mapping[str, Any] = "paper", **overrides) -> dict[str, Any]:
    """The cramming settings for a protocol name (or a dict of settings), with overrides applied."""
    if isinstance(protocol, str):
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS} or a dict of cram settings, "
                             f"got {protocol!r}")
        from accesslib.engine.cramming import PROTOCOLS as ENGINE_PRESETS
        settings = dict(ENGINE_PRESETS[protocol], **PROTOCOL_LAYOUT[protocol])
    elif isinstance(protocol, Mapping):
        settings = dict(protocol)
    else:
        raise ValueError(f"protocol must be a name {PROTOCOLS} or a dict, got {type(protocol).__name__}")
    settings.update({k: v for k, v in overrides.items() if v is not None})
    return settings


def _derive_seed(*parts) -> int:
    """A 31-bit seed derived from the parts (stable across processes, unlike hash())."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


# ---------------------------------------------------------------------------------------------
# Fits
# ---------------------------------------------------------------------------------------------
@dataclass
class N50Fit:
    """Logistic fit p(n) = 1/(1+exp(-k(n-x0))) of an accessibility curve; n50 = x0.

    ``status``: "ok"; "separated" (a clean step: Firth's estimate, its stderr is a rough width);
    "all_success" / "all_fail" (n50 lies beyond the measured lengths: ``n50`` is nan and
    ``lower`` / ``upper`` bound it); "too_few" (fewer than two lengths). ``k`` < 0 for a
    falling curve.
    """
    n50: float
    stderr: float
    k: float
    k_stderr: float = float("nan")
    status: str = "ok"
    method: str = "mle"
    lower: float = float("nan")
    upper: float = float("nan")
    n_lengths: int = 0
    n_strings: int = 0
    loglik: float = float("nan")
    message: str = ""

    @property
    def x0(self) -> float:
        return self.n50

    @property
    def ok(self) -> bool:
        return self.status in ("ok", "separated") and math.isfinite(self.n50)

    def predict(self, n) -> np.ndarray:
        """Fitted success probability at length(s) n."""
        return expit(self.k * (np.asarray(n, dtype=float) - self.n50))

    def __iter__(self):  # so `n50, stderr, k = fit_n50(curve)` works (the shared contract)
        return iter((self.n50, self.stderr, self.k))


def _curve_arrays(curve) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if isinstance(curve, AccessibilityCurve):
        n, s, t = curve.lengths, curve.successes, curve.totals
    elif isinstance(curve, Mapping):
        items = sorted(curve.items())
        n = [k for k, _ in items]
        s = [v[0] for _, v in items]
        t = [v[1] for _, v in items]
    elif isinstance(curve, (tuple, list)) and len(curve) == 3:
        n, s, t = curve
    else:
        raise ValueError("curve must be an AccessibilityCurve, a dict {n: (successes, total)} or "
                         "a tuple (lengths, successes, totals)")
    n, s, t = (np.asarray(a, dtype=float).ravel() for a in (n, s, t))
    if not (len(n) == len(s) == len(t)):
        raise ValueError(f"lengths, successes and totals must have equal sizes, got {len(n)}, {len(s)}, {len(t)}")
    if np.any(t < 0) or np.any(s < 0) or np.any(s > t):
        raise ValueError("need 0 <= successes <= totals at every length")
    keep = t > 0
    n, s, t = n[keep], s[keep], t[keep]
    # merge repeated lengths
    un, inv = np.unique(n, return_inverse=True)
    return un, np.bincount(inv, weights=s), np.bincount(inv, weights=t)


def _separated(s: np.ndarray, t: np.ndarray) -> bool:
    """Quasi-complete separation of grouped binomial data sorted by n (either direction)."""
    full, zero = s == t, s == 0
    for a, b in ((full, zero), (zero, full)):
        for j in range(len(s)):
            if a[:j].all() and b[j + 1:].all():
                return True
    return False


def _logistic_irls(z, s, t, firth: bool, max_iter: int = 200):
    """Newton/IRLS for logit p = a + b z on grouped binomial data (Firth-penalised if asked).

    Returns (beta, cov, loglik, converged). cov is the inverse Fisher information at beta.
    """
    X = np.column_stack([np.ones_like(z), z])
    frac = np.clip(s.sum() / t.sum(), 0.05, 0.95)
    beta = np.array([math.log(frac / (1 - frac)), -1.0])

    def objective(bt):
        eta = X @ bt
        ll = float(np.sum(s * -np.logaddexp(0, -eta) + (t - s) * -np.logaddexp(0, eta)))
        if firth:
            mu = expit(eta)
            info = X.T @ ((t * mu * (1 - mu))[:, None] * X)
            sign, logdet = np.linalg.slogdet(info)
            ll += 0.5 * logdet if sign > 0 else -np.inf
        return ll

    cur = objective(beta)
    converged = False
    for _ in range(max_iter):
        mu = expit(X @ beta)
        w = t * mu * (1 - mu)
        info = X.T @ (w[:, None] * X) + 1e-12 * np.eye(2)
        resid = s - t * mu
        if firth:
            inv = np.linalg.inv(info)
            h = w * np.einsum("ij,jk,ik->i", X, inv, X)
            resid = resid + h * (0.5 - mu)
        try:
            step = np.linalg.solve(info, X.T @ resid)
        except np.linalg.LinAlgError:
            break
        lam = 1.0
        while lam > 1e-6:
            cand = beta + lam * step
            val = objective(cand)
            if val >= cur - 1e-12:
                break
            lam /= 2
        beta, cur = cand, val
        if np.max(np.abs(lam * step)) < 1e-9:
            converged = True
            break
    mu = expit(X @ beta)
    info = X.T @ ((t * mu * (1 - mu))[:, None] * X)
    try:
        cov = np.linalg.inv(info)
    except np.linalg.LinAlgError:
        cov = np.full((2, 2), np.nan)
    return beta, cov, cur, converged


def fit_n50(curve) -> N50Fit:
    """Fit p(n) = 1/(1+exp(-k(n-x0))) to success counts by binomial maximum likelihood.

    ``curve``: an :class:`AccessibilityCurve`, a dict ``{n: (successes, total)}`` or a tuple
    ``(lengths, successes, totals)``. n50 = x0; its stderr comes from the inverse Fisher
    information of the logistic regression logit p = a + b n (x0 = -a/b, delta method).
    Separated data (success at every length up to a step, failure after, at most one partial
    length between) have no finite MLE: Firth's penalised likelihood is used instead
    (``method="firth"``, ``status="separated"``). All-success / all-fail curves give
    ``n50 = nan`` with a bound and a message, never an exception.
    """
    n, s, t = _curve_arrays(curve)
    base = dict(n_lengths=len(n), n_strings=int(t.sum()))
    nan = float("nan")
    if len(n) == 0:
        return N50Fit(nan, nan, nan, status="too_few", method="none", message="no measured lengths", **base)
    if np.all(s == t):
        return N50Fit(nan, nan, nan, status="all_success", method="none", lower=float(n.max()),
                      message=f"every string succeeded up to n={n.max():g}: n50 > {n.max():g}", **base)
    if np.all(s == 0):
        return N50Fit(nan, nan, nan, status="all_fail", method="none", upper=float(n.min()),
                      message=f"no string succeeded from n={n.min():g}: n50 < {n.min():g}", **base)
    if len(n) < 2:
        return N50Fit(nan, nan, nan, status="too_few", method="none",
                      message="a logistic needs at least two lengths", **base)
    # standardise n for a well-conditioned Newton iteration, then map back
    c, sc = float(n.mean()), float(n.std()) or 1.0
    z = (n - c) / sc
    separated = _separated(s, t)
    beta, cov, ll, converged = _logistic_irls(z, s, t, firth=separated)
    method = "firth" if separated else "mle"
    if not converged and not separated:  # e.g. near-separation: Firth stays finite
        beta, cov, ll, converged = _logistic_irls(z, s, t, firth=True)
        method = "firth"
    a, b = beta
    k = b / sc
    x0 = c + sc * (-a / b)
    grad = np.array([-1.0 / b, a / b ** 2]) * sc  # d x0 / d(a, b)
    var = float(grad @ cov @ grad)
    stderr = math.sqrt(var) if var >= 0 else nan
    k_se = math.sqrt(cov[1, 1]) / sc if cov[1, 1] >= 0 else nan
    status = "separated" if separated else "ok"
    msg = ""
    if k > 0:
        msg = "success rises with n: not an accessibility curve"
    elif separated:
        msg = "no length with partial success near the step: Firth estimate, stderr is rough"
    return N50Fit(float(x0), stderr, float(k), k_se, status, method, loglik=ll, message=msg, **base)


@dataclass
class SlopeFit:
    """Least-squares line n50 = slope*m + intercept (PAPER.md section 5), with R^2."""
    slope: float
    intercept: float
    r2: float
    slope_stderr: float
    intercept_stderr: float = float("nan")
    n_points: int = 0

    def predict(self, m) -> np.ndarray:
        return self.slope * np.asarray(m, dtype=float) + self.intercept

    def __iter__(self):  # `slope, intercept, r2 = fit_slope(...)` (the shared contract)
        return iter((self.slope, self.intercept, self.r2))


def fit_slope(ms: Sequence[float], n50s: Sequence[float], stderrs: Sequence[float] | None = None) -> SlopeFit:
    """Fit n50 = a*m + b by least squares, weighted by 1/stderr^2 when stderrs are given.

    Points with a non-finite n50 (or stderr) are left out. R^2 = 1 - RSS/TSS (weighted sums
    when weighted); the stderrs of a and b are the usual sqrt(diag(s^2 (X^T W X)^-1)) with
    s^2 = RSS/(N-2) (nan with only two points).
    """
    m = np.asarray(ms, dtype=float).ravel()
    y = np.asarray(n50s, dtype=float).ravel()
    if m.shape != y.shape:
        raise ValueError(f"ms and n50s must have the same length, got {m.size} and {y.size}")
    w = np.ones_like(y)
    if stderrs is not None:
        se = np.asarray(stderrs, dtype=float).ravel()
        if se.shape != y.shape:
            raise ValueError(f"stderrs must have the same length as n50s, got {se.size} and {y.size}")
        good_se = np.isfinite(se) & (se > 0)
        w = np.where(good_se, 1.0 / np.where(good_se, se, 1.0) ** 2, 0.0)
    keep = np.isfinite(m) & np.isfinite(y) & (w > 0)
    m, y, w = m[keep], y[keep], w[keep]
    if m.size < 2 or np.unique(m).size < 2:
        raise ValueError(f"fit_slope needs at least two distinct m with a finite n50, got {m.size} point(s)")
    X = np.column_stack([m, np.ones_like(m)])
    xtwx = X.T @ (w[:, None] * X)
    beta = np.linalg.solve(xtwx, X.T @ (w * y))
    resid = y - X @ beta
    rss = float(np.sum(w * resid ** 2))
    ybar = float(np.sum(w * y) / np.sum(w))
    tss = float(np.sum(w * (y - ybar) ** 2))
    r2 = 1.0 - rss / tss if tss > 0 else float("nan")
    dof = m.size - 2
    if dof > 0:
        cov = rss / dof * np.linalg.inv(xtwx)
        se_a, se_b = float(np.sqrt(cov[0, 0])), float(np.sqrt(cov[1, 1]))
    else:
        se_a = se_b = float("nan")
    return SlopeFit(float(beta[0]), float(beta[1]), r2, se_a, se_b, int(m.size))


# ---------------------------------------------------------------------------------------------
# Length searches, written against an abstract "cram these sample indices at length n"
# ---------------------------------------------------------------------------------------------
class _Stopped(Exception):
    pass


class LengthSampler:
    """Success results per (length n, sample index i); cram only what is not known yet.

    ``evaluate(n, indices) -> dict[i, bool]`` crams the strings with those sample indices at
    length n (one batched call) and returns their successes. Missing entries in the answer mean
    the run was stopped: the search ends there.
    """

    def __init__(self, evaluate: Callable[[int, list[int]], Mapping[int, bool]], *, min_length: int = 1,
                 max_length: int = 1000, stop: Callable[[], bool] | None = None):
        self.evaluate = evaluate
        self.min_length, self.max_length = int(min_length), int(max_length)
        self.stop = stop
        self.results: dict[int, dict[int, bool]] = {}
        self.crammed = 0  # strings sent to evaluate (the cost of the search)
        self.order: list[int] = []  # lengths in the order they were first measured

    def counts(self, n: int, samples: int) -> tuple[int, int]:
        """Make sure samples 0..samples-1 are measured at n; return (successes, total) at n."""
        n = int(n)
        if not self.min_length <= n <= self.max_length:
            raise ValueError(f"length n={n} outside [{self.min_length}, {self.max_length}]")
        got = self.results.setdefault(n, {})
        if n not in self.order:
            self.order.append(n)
        todo = [i for i in range(samples) if i not in got]
        if todo:
            if self.stop is not None and self.stop():
                raise _Stopped
            answer = self.evaluate(n, todo)
            self.crammed += len(todo)
            got.update({int(i): bool(v) for i, v in answer.items()})
            if any(i not in answer for i in todo):
                raise _Stopped
        vals = [got[i] for i in range(samples)]
        return sum(vals), len(vals)

    def frac(self, n: int, samples: int) -> float:
        s, t = self.counts(n, samples)
        return s / t

    def curve(self) -> dict[int, tuple[int, int]]:
        return {n: (sum(r.values()), len(r)) for n, r in sorted(self.results.items()) if r}


def search_grid(S: LengthSampler, lengths: Sequence[int], samples: int):
    """Measure ``samples`` strings at each given length."""
    for n in lengths:
        S.counts(n, samples)


def search_paper(S: LengthSampler, m: int, samples: int, *, big_step: int = 100, small_step: int = 10,
                 hi: float = 0.9, lo: float = 0.1, start: int | None = None):
    """[A]'s adaptive search (PAPER.md section 5; their public code's "simplified adaptive sweep").

    From max(10, m+1): +big_step while success > hi; then from the last length above hi,
    +small_step until success < lo; then one more +big_step; never past ``S.max_length``.
    """
    cap = S.max_length
    n = start if start is not None else max(10, m + 1)
    last_high = None
    while n <= cap:
        if S.frac(n, samples) > hi:
            last_high, n = n, n + big_step
            continue
        break
    n = last_high + small_step if last_high is not None else n
    while n <= cap:
        if S.frac(n, samples) < lo:
            if n + big_step <= cap:
                S.counts(n + big_step, samples)
            break
        n += small_step


def search_bisect(S: LengthSampler, m: int, samples: int, *, pilot: int = 4, precision: float = 0.02,
                  max_rounds: int = 6, start: int | None = None, min_resolution: int = 2):
    """Our length search: bracket and bisect with small pilot batches, then full samples at the
    most informative lengths until the n50 stderr reaches ``precision`` (relative).

    1. Bracket: ``pilot`` strings at ``start`` (default max(10, m+1)); double n while at least
       half succeed (halve while fewer do) until the 50% point is bracketed [lo, hi].
    2. Bisect [lo, hi] with pilot batches until hi - lo <= max(min_resolution, 2% of lo).
       Near the 50% point a wrong pilot decision only moves the bracket by a little.
    3. Refine: fit the logistic to everything so far (Firth when separated) and measure
       ``samples`` strings at x0 -/+ 1.5/|k| (near the D-optimal 18%/82% points of a logistic)
       and at x0; refit; while stderr(n50) > precision * n50, add ``samples`` more strings at
       the two lengths nearest the refitted x0 -/+ 1.5/|k| (at most ``max_rounds`` rounds).

    The Fisher information about x0 from t strings at n is t k^2 p(1-p): the published search
    spends most strings on lengths with p near 1 (the +100 steps) or near 0, which carry almost
    none.

    Measured on a simulated engine (:func:`logistic_oracle`, 60 replicates per case, 20
    strings per length, precision 0.01), as strings crammed and RMSE of n50, and the saving at
    equal precision = (strings x MSE of "paper") / (strings x MSE of "bisect"):

        x0, k          paper: strings, RMSE    bisect: strings, RMSE    saving
        53,  -0.30     175, 1.25               243, 0.56                3.6x
        90,  -0.15     246, 1.79               319, 1.06                2.2x
        183, -0.15     260, 1.65               126, 2.05                1.3x
        278, -0.10     282, 2.22               128, 2.52                1.7x
        450, -0.05     440, 3.31               156, 4.15                1.8x
        183, -0.50     244, 0.89               104, 0.64                4.5x

    (precision 0.005 gives 2.0x-4.6x, e.g. 450/-0.05: 391 strings, RMSE 2.24: 2.5x). The
    paper search's cost grows with n50 (one +100 step per 100 tokens); this one's grows with
    log n50. Pass ``start`` (e.g. the n50 expected from a smaller m) to skip the doubling.
    """
    cap, floor = S.max_length, S.min_length
    n = min(cap, max(floor, start if start is not None else max(10, m + 1)))
    lo = hi = None
    if S.frac(n, pilot) >= 0.5:
        lo = n
        while lo < cap:
            nxt = min(cap, 2 * lo)
            if S.frac(nxt, pilot) >= 0.5:
                lo = nxt
            else:
                hi = nxt
                break
        if hi is None:
            return  # accessible up to the cap: nothing left to locate
    else:
        hi = n
        while hi > floor:
            nxt = max(floor, hi // 2)
            if S.frac(nxt, pilot) >= 0.5:
                lo = nxt
                break
            hi = nxt
        if lo is None:
            return  # inaccessible down to the shortest length
    while hi - lo > max(min_resolution, int(0.02 * lo)):
        mid = (lo + hi) // 2
        if S.frac(mid, pilot) >= 0.5:
            lo = mid
        else:
            hi = mid

    def design():
        fit = fit_n50(S.curve())
        if fit.ok and fit.k < 0 and floor <= fit.n50 <= cap:
            x0, half = fit.n50, 1.5 / abs(fit.k)
        else:
            x0, half = (lo + hi) / 2, (hi - lo) / 2
        # a wild k (few lengths) must neither collapse nor blow up the design
        half = min(max(half, 1.0), max(hi - lo, 0.1 * x0, 2.0))
        pts = sorted({min(cap, max(floor, int(round(x0 + d * half)))) for d in (-1, 0, 1)})
        return fit, pts

    for rounds in range(max_rounds + 1):
        fit, pts = design()
        # lengths are integers: a quarter token is as precise as n50 needs to be
        if rounds >= 1 and fit.ok and fit.stderr <= max(precision * fit.n50, 0.25):
            return
        if rounds == max_rounds:
            return
        for n in pts:
            have = len(S.results.get(n, {}))
            S.counts(n, (have // samples + 1) * samples)


def logistic_oracle(x0: float, k: float, seed: int = 0) -> Callable[[int, list[int]], dict[int, bool]]:
    """A simulated cramming engine: string i at length n succeeds with p = 1/(1+exp(-k(n-x0))).

    Deterministic per (seed, n, i), so a search can be replayed; used to compare searches.
    """
    def evaluate(n, indices):
        p = float(expit(k * (n - x0)))
        return {i: bool(np.random.default_rng([seed, int(n), int(i)]).random() < p) for i in indices}
    return evaluate


# ---------------------------------------------------------------------------------------------
# Accessibility curves on a real model
# ---------------------------------------------------------------------------------------------
@dataclass
class AccessibilityCurve:
    """Success counts per length for one (model, m, source, protocol, seed)."""
    model: str
    m: int
    source: str
    protocol_hash: str
    settings: dict
    seed: int
    search: str
    lengths: list[int] = field(default_factory=list)
    successes: list[int] = field(default_factory=list)
    totals: list[int] = field(default_factory=list)
    results: dict[int, list[dict]] = field(default_factory=dict)  # n -> row dicts, sample order
    strings_crammed: int = 0    # crammed by this call
    strings_from_store: int = 0  # found in the store (resume)
    wall_time: float = 0.0
    interrupted: bool = False

    @property
    def fractions(self) -> list[float]:
        return [s / t for s, t in zip(self.successes, self.totals)]

    def fit(self) -> N50Fit:
        return fit_n50(self)

    def as_dict(self) -> dict[int, tuple[int, int]]:
        return {n: (s, t) for n, s, t in zip(self.lengths, self.successes, self.totals)}


def _unwrap(model, tokenizer, model_name):
    """(hf_model, tokenizer, name, vocab_size, max_context) from a LoadedModel or a module."""
    facts = getattr(model, "facts", None)
    if facts is not None and hasattr(model, "model"):
        name = model_name or facts.name
        return model.model, tokenizer or model.tokenizer, name, facts.vocab_size, facts.max_context
    config = getattr(model, "config", None)
    if config is None:
        raise ValueError("model must be a LoadedModel (accesslib.models.loading.load_model) or a transformers "
                         "causal LM, or a name to load")
    name = model_name or getattr(config, "_name_or_path", "") or ""
    if not name:
        raise ValueError("model_name is needed for a model built in memory (it keys the results store)")
    ctx = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    return model, tokenizer, name, config.vocab_size, ctx


def accessibility_curve(model, m: int, lengths: Sequence[int] | None = None, samples: int = 16,
                        source: str = "natural", seed: int = 0, store: ResultsStore | str | None = None,
                        search: str | None = None, protocol: str | Mapping[str, Any] = "paper", *,
                        tokenizer=None, model_name: str | None = None, text: str | None = None,
                        pilot: int = 4, precision: float = 0.02, max_length: int = 1000,
                        start: int | None = None,
                        on_string: Callable[[dict], None] | None = None, on_step=None, stop=None,
                        **cram_overrides) -> AccessibilityCurve:
    """Measure the accessibility curve (success fraction per target length) for m memory vectors.

    model: a LoadedModel, a transformers causal LM (give ``model_name``), or a name for
    :func:`accesslib.models.loading.load_model`. lengths: measure exactly these (``search="grid"``);
    otherwise the length search ``search`` ("bisect" default, "paper") picks them.
    One :func:`accesslib.engine.cramming.cram` call per length, batched over the strings at that
    length; each finished string is written to ``store`` at once (and skipped when already
    there). ``on_string(row)`` after every string crammed; ``on_step`` is passed to cram;
    ``stop`` (threading.Event or callable) ends the run between steps, returning what was
    finished (``interrupted=True``). ``cram_overrides`` change single cram settings
    (e.g. ``max_steps=50``); they enter the protocol hash.
    """
    from accesslib.engine import targets as _targets
    from accesslib.engine.cramming import cram

    if not isinstance(m, (int, np.integer)) or m < 1:
        raise ValueError(f"m (number of memory vectors) must be an integer >= 1, got {m!r}")
    if not isinstance(samples, (int, np.integer)) or samples < 1:
        raise ValueError(f"samples must be an integer >= 1, got {samples!r}")
    if source not in _targets.SOURCES:
        raise ValueError(f"source must be one of {_targets.SOURCES}, got {source!r}")
    if search is None:
        search = "grid" if lengths is not None else "bisect"
    if search not in SEARCHES:
        raise ValueError(f"search must be one of {SEARCHES}, got {search!r}")
    if search == "grid":
        if not lengths:
            raise ValueError("search='grid' needs lengths")
        lengths = [int(n) for n in lengths]
        if min(lengths) < 1:
            raise ValueError(f"lengths must be >= 1, got {min(lengths)}")
    elif lengths is not None:
        raise ValueError(f"lengths are chosen by search={search!r}: give lengths only with search='grid'")
    if not isinstance(pilot, (int, np.integer)) or pilot < 1:
        raise ValueError(f"pilot (strings per length while bracketing) must be an integer >= 1, got {pilot!r}")
    pilot = min(int(pilot), int(samples))
    if not precision > 0:
        raise ValueError(f"precision (relative n50 stderr) must be > 0, got {precision}")

    if isinstance(model, str):
        from accesslib.models.loading import load_model
        model = load_model(model)
    hf, tok, name, vocab_size, max_ctx = _unwrap(model, tokenizer, model_name)
    if isinstance(store, str) or (store is not None and not isinstance(store, ResultsStore)):
        store = ResultsStore(store)
    settings = protocol_settings(protocol, **cram_overrides)
    first_as_input = bool(settings.get("first_token_as_input", False))
    hash_input = dict(settings)
    if text is not None:
        hash_input["source_text"] = _targets.text_digest(text)
    ph = _protocol_hash(hash_input)
    floor = max(2 if first_as_input else 1, 1)
    if max_ctx:
        prefix_len = len(settings.get("prefix_ids") or []) + 1  # room for a BOS-like prefix
        max_length = min(max_length, int(max_ctx) - m - prefix_len)
    if max_length < floor:
        raise ValueError(f"max_length={max_length} leaves no room for a target with m={m}")
    exclude = list(getattr(tok, "all_special_ids", []) or []) if tok is not None else []

    stop_fn = None
    if stop is not None:
        stop_fn = stop.is_set if isinstance(stop, threading.Event) else stop
    curve = AccessibilityCurve(name, int(m), source, ph, settings, int(seed), search)
    rows_by_n: dict[int, dict[int, dict]] = {}
    t_start = time.perf_counter()

    def evaluate(n: int, indices: list[int]) -> dict[int, bool]:
        ids, texts = _targets.make_targets(source, n, max(indices) + 1, _derive_seed(seed, n, source),
                                           tokenizer=tok, vocab_size=vocab_size, exclude=exclude, text=text)
        got: dict[int, bool] = {}
        todo = []
        for i in indices:
            tids = ids[i].tolist()
            key = dict(model=name, m=int(m), n=n, source=source, target_hash=_target_hash(tids),
                       seed=int(seed), protocol_hash=ph)
            if store is not None and store.has(key):
                row = store.rows(**key)[0]
                rows_by_n.setdefault(n, {})[i] = row
                got[i] = bool(row["success"])
                curve.strings_from_store += 1
            else:
                todo.append((i, tids, key))
        if not todo:
            return got
        batch = ids[[i for i, _, _ in todo]]
        t0 = time.perf_counter()

        def string_done(res):
            i, tids, key = todo[res.index]
            row = dict(key, sample=i, success=bool(res.success), tf_success=bool(res.tf_success),
                       steps=res.steps, final_loss=res.final_loss, token_accuracy=res.token_accuracy,
                       greedy_accuracy=res.greedy_accuracy, target_text=texts[i] if texts else None,
                       target_ids=tids, greedy_ids=res.greedy_ids, memory=res.memory,
                       prefix_ids=res.prefix_ids, first_token_as_input=res.first_token_as_input,
                       wall_time=time.perf_counter() - t0, reason=res.reason)
            if res.reason == "stopped":
                return  # an unfinished string is not a result
            if store is not None:
                store.add(row, settings=hash_input)
            row.pop("memory", None)
            rows_by_n.setdefault(n, {})[i] = row
            got[i] = row["success"]
            curve.strings_crammed += 1
            if on_string is not None:
                on_string(row)

        result = cram(hf, batch, int(m), seed=int(seed), on_step=on_step,
                      on_string=string_done, stop=stop, **settings)
        # strings the engine reported only in the result (no callback) are recorded too
        for res in result.strings:
            if todo[res.index][0] not in got:
                string_done(res)
        return got

    sampler = LengthSampler(evaluate, min_length=floor, max_length=max_length, stop=stop_fn)
    try:
        if search == "grid":
            search_grid(sampler, lengths, samples)
        elif search == "paper":
            search_paper(sampler, int(m), samples, start=start)
        else:
            search_bisect(sampler, int(m), samples, pilot=pilot, precision=precision, start=start)
    except _Stopped:
        curve.interrupted = True
    for n, (s, t) in sampler.curve().items():
        curve.lengths.append(n)
        curve.successes.append(s)
        curve.totals.append(t)
        curve.results[n] = [rows_by_n[n][i] for i in sorted(rows_by_n.get(n, {}))]
    curve.wall_time = time.perf_counter() - t_start
    return curve
