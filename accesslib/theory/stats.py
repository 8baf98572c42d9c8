"""Statistics of measurements: n50 and slope fits, binomial error bars, the cell-share cost s_conv.

Pure numpy and scipy (docs/paper.md, sections 4-5):

- :func:`fit_n50`: binomial maximum-likelihood logistic fit p(n) = 1/(1+exp(-k(n-x0))) of an
  accessibility curve, n50 = x0 with its standard error from the inverse Fisher information
  (delta method); Firth's bias-reduced likelihood when the data are separated (a step with no
  partial length), where the plain MLE does not exist.
- :func:`fit_slope`: (weighted) least squares n50 = a*m + b, with R^2 and the stderr of a.
- :func:`binomial_stderr`: the one error bar of a success fraction.
- :func:`fit_s_conv` and its helpers: from Monte Carlo decoder-cell shares to the per-token cost
  s_conv that replaces ln|V| in the cell bound, with confidence bounds for cells never hit and
  a convergence check over the number of samples.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
from scipy.special import expit

from accesslib._checks import check_choice, check_float, check_int, fail

ZERO_HIT = ("bound", "drop")


def binomial_stderr(successes, totals, *, pseudo=0.5):
    """Standard error sqrt(p(1-p)/t) of a success fraction s/t.

    ``pseudo`` counts are added to each side (p = (s + pseudo)/(t + 2 pseudo)) so that 0/t and
    t/t still get an error bar (the default, for plots); ``pseudo=0`` is the plain estimate.
    """
    s = np.asarray(successes, dtype=float)
    t = np.asarray(totals, dtype=float)
    p = (s + pseudo) / (t + 2 * pseudo) if pseudo else s / np.maximum(t, 1)
    return np.sqrt(np.clip(p * (1 - p), 0, None) / np.maximum(t, 1))


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
    if all(hasattr(curve, a) for a in ("lengths", "successes", "totals")):  # an AccessibilityCurve
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
    """Least-squares line n50 = slope*m + intercept (docs/paper.md, section 5), with R^2."""
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


def slope_coefficients(ms: Sequence[float]) -> np.ndarray:
    """The weights c_i of the unweighted least-squares slope of y = a*m + b, a = sum c_i y_i:
    c_i = (m_i - mean m) / sum (m_j - mean m)^2 (the middle m of an odd, evenly spaced count gets
    0). The caller checks that there are two distinct m."""
    m = np.asarray(ms, dtype=float).ravel()
    return (m - m.mean()) / np.sum((m - m.mean()) ** 2)


def propagated_slope_stderr(ms: Sequence[float], stderrs: Sequence[float]) -> float:
    """The stderr that the points' own n50 stderrs give the least-squares slope a of n50 = a*m + b
    (unweighted, as :func:`fit_slope` without stderrs fits it): a = sum c_i y_i with c_i =
    (m_i - mean m) / sum (m_j - mean m)^2, so stderr = sqrt(sum c_i^2 se_i^2). With two points
    it is sqrt(se1^2 + se2^2) / |m2 - m1|, where the residual stderr has no degree of freedom
    left. nan with fewer than two distinct m or any stderr not finite (no point is dropped)."""
    m = np.asarray(ms, dtype=float).ravel()
    se = np.asarray(stderrs, dtype=float).ravel()
    if m.shape != se.shape:
        raise ValueError(f"ms and stderrs must have the same length, got {m.size} and {se.size}")
    if not (np.all(np.isfinite(m)) and np.all(np.isfinite(se))) or np.unique(m).size < 2:
        return float("nan")
    c = slope_coefficients(m)
    return float(np.sqrt(np.sum(c ** 2 * se ** 2)))


def threshold_quantiles(rel, q=(0.1, 0.5, 0.9)):
    """Quantiles of effective-eps thresholds, each one an observed threshold (inf where the
    output did not change up to t_max)."""
    return np.quantile(np.asarray(rel, dtype=float), q, method="inverted_cdf")


def describe_threshold(value, t_max):
    """A threshold as text: '> t_max' for directions that never changed the output."""
    return f"> {t_max:.3g}" if not np.isfinite(value) else f"{value:.3g}"


def _is_cells(shares) -> bool:
    """A ``CellShares`` (accesslib.engine.geometry) rather than an array of shares."""
    return hasattr(shares, "counts") and hasattr(shares, "n_samples")


def zero_hit_share(n_samples, level=0.95):
    """One-sided upper confidence bound on the share of a cell never hit in ``n_samples``
    uniform draws: the p with (1 - p)^n = 1 - level, i.e. 1 - (1 - level)^(1/n) (about 3/n at
    95%). A token whose true share were larger would have been hit with probability >= level."""
    n = int(n_samples)
    if n < 1:
        fail("n_samples", "a whole number >= 1", n_samples)
    check_float("level", level, 0, 1, low_open=True, high_open=True)
    return float(-math.expm1(math.log1p(-level) / n))


def upper_shares(counts, n_samples, level=0.95):
    """One-sided Clopper-Pearson upper confidence bounds on every share from its hit count:
    the p with P(Binomial(n, p) <= k) = 1 - level. For k = 0 this is :func:`zero_hit_share`."""
    from scipy.stats import beta

    k = np.asarray(counts, dtype=float)
    n = int(n_samples)
    zero_hit_share(n, level)   # validates n and level
    if np.any(k < 0) or np.any(k > n):
        raise ValueError(f"counts must lie in [0, n_samples={n}]")
    out = np.ones_like(k)
    inner = k < n
    out[inner] = beta.ppf(level, k[inner] + 1, n - k[inner])
    return out


def _log_shares(shares, zero_hit, n_samples, level):
    """ln p_t for the convolution: measured shares with zero-hit tokens dropped ([A]), or every
    share at its upper confidence bound (:func:`upper_shares`)."""
    if _is_cells(shares):
        n_samples = shares.n_samples if n_samples is None else n_samples
        shares = shares.shares
    p = np.asarray(shares, dtype=float)
    if p.ndim != 1 or np.any(p < 0) or not np.all(np.isfinite(p)):
        raise ValueError("shares must be a 1-D array of finite shares >= 0")
    check_choice("zero_hit", zero_hit, ZERO_HIT)
    if not np.any(p > 0):
        raise ValueError("shares must contain at least one positive share")
    if zero_hit == "drop":
        return p, np.log(p[p > 0])
    if n_samples is None:
        raise ValueError("zero_hit='bound' needs n_samples (or pass the CellShares itself)")
    return p, np.log(upper_shares(np.rint(p * n_samples), n_samples, level))


def log_share_medians(shares, ks=range(1, 7), *, bins=8192, zero_hit="drop", n_samples=None,
                      level=0.95):
    """Median of the sum of k iid draws of ln p_t (t uniform over tokens).

    ``shares``: an array of p_t, or a :class:`CellShares`. ``zero_hit="drop"``: the measured
    shares, tokens never hit left out, as in [A]; ``zero_hit="bound"``: every share at its
    one-sided upper confidence bound (:func:`upper_shares`; a token never hit gets
    :func:`zero_hit_share`), which needs ``n_samples`` (taken from a CellShares). The median of a sum of logs is the log of the
    median of the product of k shares (ln is monotone), so this is [A]'s "ln(median)" of the
    k-fold product. The k-fold distribution is the k-fold convolution of the histogram of ln p
    on a grid of ``bins`` points (FFT); each value is rounded to the grid (error <= half a
    bin per draw, unbiased on average).
    """
    from scipy.signal import fftconvolve

    _, lp = _log_shares(shares, zero_hit, n_samples, level)
    ks = [int(k) for k in ks]
    if not ks or min(ks) < 1:
        fail("ks", "whole numbers >= 1", ks)
    check_int("bins", bins, 2)
    lo, hi = float(lp.min()), float(lp.max())
    if hi - lo < 1e-12:
        return np.array([k * lo for k in ks])
    h = (hi - lo) / (bins - 1)
    j = np.rint((lp - lo) / h).astype(int)
    pmf = np.bincount(j, minlength=bins).astype(float) / lp.size
    out, dist, kk = {}, np.array([1.0]), 0
    for k in range(1, max(ks) + 1):
        dist = np.clip(fftconvolve(dist, pmf) if kk else pmf.copy(), 0, None)
        dist /= dist.sum()
        kk = k
        if k in ks:
            cdf = np.cumsum(dist)
            i = int(np.searchsorted(cdf, 0.5))
            # the mass of grid point i spread over [i - 1/2, i + 1/2]: a continuous median
            prev = cdf[i - 1] if i > 0 else 0.0
            frac = (0.5 - prev) / max(dist[i], 1e-300)
            out[k] = k * lo + (i - 0.5 + frac) * h
    return np.array([out[k] for k in ks])


@dataclass
class SConv:
    """Fit of median_k(sum of k ln p) = s_conv * k + intercept over k ([A] section 4).

    zero_hit: the rule for the shares ("drop" as [A], or "bound"); n_zero tokens never hit.
    """
    s_conv: float
    intercept: float
    r2: float
    ks: np.ndarray
    medians: np.ndarray
    n_tokens: int
    n_zero: int
    zero_hit: str = "drop"
    floor: float | None = None   # "bound": ln of the share given to a token never hit

    @property
    def zero_fraction(self):
        return self.n_zero / max(1, self.n_tokens + self.n_zero)

    @property
    def sample_limited(self):
        """True when at least half the tokens were never hit: the median token's cell is below
        the Monte Carlo resolution, so with "bound" |s_conv| is about -ln(floor), a lower bound
        that grows with the number of samples, and with "drop" the estimate describes the hit
        tokens only."""
        return self.zero_fraction >= 0.5


def fit_s_conv(shares, ks=range(1, 7), *, bins=8192, zero_hit="drop", n_samples=None, level=0.95):
    """s_conv (nats/token, negative): least-squares slope of the k-fold log-share medians.

    Reading of [A] (docs/paper.md, section 4): "fit ln(median) against k". ln of the median of the
    product of k shares = median of the sum of k ln p_t, which grows linearly in k; the slope
    is s_conv and |s_conv| replaces ln|V| (:func:`accesslib.theory.refined.cell_slope`). By Jensen,
    the mean of ln p_t over the hit tokens is <= -ln(#hit tokens), so |s_conv| >= about ln|V|
    when most tokens are hit: non-uniform cells make tokens dearer.

    Tokens never hit (``zero_hit``, see :func:`log_share_medians`): "drop" is [A]'s rule; it
    describes the hit tokens only, and when few tokens are hit it can make |s_conv| far too
    small (even below ln|V|). "bound" puts every share at its 95% upper confidence bound
    (an unseen token at about 3/N): the true shares are smaller, so the fitted |s_conv| errs
    low and the cell slope high, i.e. it stays an upper bound on the slope. The two rules
    converge as N grows. When most tokens are never hit (``sample_limited``) the "bound"
    value is about ln(N/3): a statement about the Monte Carlo resolution that tightens only
    with more samples, and which lowers the slope below the ball only once N > 3|V|.
    """
    if _is_cells(shares):
        n_samples = shares.n_samples if n_samples is None else n_samples
        shares = shares.shares
    p = np.asarray(shares, dtype=float)
    ks = np.array([int(k) for k in ks], dtype=float)
    if ks.size < 2:
        raise ValueError(f"ks must hold at least two values; got {ks.tolist()}")
    med = log_share_medians(p, ks.astype(int), bins=bins, zero_hit=zero_hit, n_samples=n_samples,
                            level=level)
    A = np.vstack([ks, np.ones_like(ks)]).T
    (s, c), *_ = np.linalg.lstsq(A, med, rcond=None)
    pred = A @ np.array([s, c])
    ss = np.sum((med - med.mean()) ** 2)
    r2 = 1.0 - np.sum((med - pred) ** 2) / ss if ss > 0 else 1.0
    floor = math.log(zero_hit_share(n_samples, level)) if zero_hit == "bound" else None
    return SConv(float(s), float(c), float(r2), ks.astype(int), med, int(np.sum(p > 0)),
                 int(np.sum(p == 0)), zero_hit, floor)


def sconv_convergence(cells, ks=range(1, 7), *, level=0.95):
    """s_conv refitted on the first n samples of one Monte Carlo run, for every checkpoint n
    (about N/32, N/16, ..., N/2) and N: rows dict(n, s_conv ("bound" rule), s_conv_drop
    ([A]'s rule), zero_hit). Converged when both rules agree and stop moving as n doubles;
    while most tokens are never hit the "bound" value tracks ln(n/3) instead
    (:attr:`SConv.sample_limited`)."""
    rows = []
    for n, counts in list(cells.checkpoints) + [(cells.n_samples, cells.counts)]:
        p = np.asarray(counts, dtype=float) / n
        b = fit_s_conv(p, ks, zero_hit="bound", n_samples=n, level=level)
        dr = fit_s_conv(p, ks, zero_hit="drop", n_samples=n, level=level)
        rows.append(dict(n=int(n), s_conv=b.s_conv, s_conv_drop=dr.s_conv, zero_hit=b.n_zero,
                         sample_limited=bool(b.sample_limited)))
    return rows


def describe_convergence(rows):
    """One line on a :func:`sconv_convergence` table: how much the last doubling of the samples
    moved s_conv, and what that means for the cell bound."""
    if len(rows) < 2:
        return "one sample count only: no convergence check"
    a, b = rows[-2], rows[-1]
    moved = b["s_conv"] - a["s_conv"]
    gap = abs(b["s_conv"] - b["s_conv_drop"])
    head = (f"s_conv moved {moved:+.2f} from N = {a['n']:,} to {b['n']:,} (rules differ by {gap:.2f})")
    if b["sample_limited"]:
        return head + ": sample-limited, more samples would tighten the cell bound"
    if abs(moved) < 0.05 and gap < 0.1:
        return head + ": converged"
    return head + ": not yet converged, more samples would move it"
