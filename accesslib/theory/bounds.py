"""The counting bounds of [A] (shared/PAPER.md section 2), in log space, pure numpy.

Every function is vectorised (numpy broadcasting over any argument) and never forms
(1 + 2r/eps)^(d*m) itself: for real models that number has millions of digits. Logs are
taken with ``log1p`` so that tiny 2r/eps stays exact.

Notation: d model width, V = |V| vocabulary size, eps precision, r support radius,
m number of prompt (memory) vectors, n output length in tokens.
"""
from __future__ import annotations

import math

import numpy as np

LN2 = math.log(2.0)
LN10 = math.log(10.0)

#: unit roundoff of the floating-point formats [A] discusses (section 3 of PAPER.md)
UNIT_ROUNDOFF = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": 2.0**-24}
_DTYPE_ALIASES = {
    "float16": "float16", "fp16": "float16", "half": "float16", "torch.float16": "float16",
    "bfloat16": "bfloat16", "bf16": "bfloat16", "torch.bfloat16": "bfloat16",
    "float32": "float32", "fp32": "float32", "float": "float32", "torch.float32": "float32",
    # [A] sets eps = r_inf * 2^-11, the fp16 unit roundoff, for every model
    "paper": "float16",
}
PAPER_DTYPE = "paper"


def _as_array(name, value, *, low, low_inclusive=True, integer=False, allowed=None):
    """Validate one argument and return it as a float array.

    Raises ValueError naming ``name`` and the allowed range for wrong types, NaN/inf and
    out-of-range values, so that an app can show the message as it is.
    """
    rng = allowed or (f"{'>=' if low_inclusive else '>'} {low:g}" + (", a whole number" if integer else ""))
    if isinstance(value, (bool, np.bool_)) or value is None or isinstance(value, (str, bytes)):
        raise ValueError(f"{name} must be a number {rng}; got {value!r}")
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number {rng}; got {value!r}") from None
    if arr.dtype == object:
        raise ValueError(f"{name} must be a number {rng}; got {value!r}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite {rng}; got {value!r}")
    bad = arr < low if low_inclusive else arr <= low
    if np.any(bad):
        raise ValueError(f"{name} must be {rng}; got {value!r}")
    if integer and np.any(arr != np.round(arr)):
        raise ValueError(f"{name} must be a whole number {rng}; got {value!r}")
    return arr


def _out(x):
    """Return a Python float for scalar results, an array otherwise."""
    x = np.asarray(x, dtype=float)
    return float(x) if x.ndim == 0 else x


def _d(d):
    return _as_array("d", d, low=1, integer=True)


def _vocab(vocab_size):
    return _as_array("vocab_size", vocab_size, low=2, integer=True)


def _m(m):
    return _as_array("m", m, low=0)


def _ln_cells(eps, r):
    """ln(1 + 2r/eps): the log packing number per coordinate (Theorem 4.5 of [A])."""
    eps = _as_array("eps", eps, low=0, low_inclusive=False)
    r = _as_array("r", r, low=0)
    return np.log1p(2.0 * r / eps)


def log_accessible(d, eps, r, m):
    """Natural log of (1 + 2r/eps)^(d*m), the number of eps-distinguishable prompts."""
    return _out(_d(d) * _m(m) * _ln_cells(eps, r))


def log10_accessible(d, eps, r, m):
    """log10 of (1 + 2r/eps)^(d*m): the bound on accessible sequences ([A] Theorem 4.5)."""
    return _out(np.asarray(log_accessible(d, eps, r, m)) / LN10)


def slope(d, vocab_size, eps, r):
    """C = d * ln(1 + 2r/eps) / ln|V|, tokens per prompt vector ([A] Corollary 4.6)."""
    return _out(_d(d) * _ln_cells(eps, r) / np.log(_vocab(vocab_size)))


def n_star(m, d, vocab_size, eps, r):
    """n* = C*m: the longest length at which every sequence can still be accessible."""
    return _out(_m(m) * np.asarray(slope(d, vocab_size, eps, r)))


def log10_accessible_fraction(n, m, d, vocab_size, eps, r):
    """log10 of min(1, |V|^-(n - C*m)): upper bound on the accessible share of length-n strings.

    Zero (share 1) up to n* = C*m, then falling by log10|V| per extra token.
    """
    n = _as_array("n", n, low=0)
    lv = np.log10(_vocab(vocab_size))
    excess = n - np.asarray(n_star(m, d, vocab_size, eps, r))
    return _out(np.minimum(0.0, -excess * lv))


def n50_bound(m, d, vocab_size, eps, r):
    """Largest n with accessible share >= 1/2 under the bound: C*m + ln2/ln|V|."""
    return _out(np.asarray(n_star(m, d, vocab_size, eps, r)) + LN2 / np.log(_vocab(vocab_size)))


def canonical_dtype(dtype):
    """Map a dtype name ('float16', 'bf16', 'paper', torch.float32, ...) to a UNIT_ROUNDOFF key."""
    key = str(dtype).strip().lower() if dtype is not None else ""
    if key not in _DTYPE_ALIASES:
        names = ", ".join(repr(k) for k in ("float16", "bfloat16", "float32", PAPER_DTYPE))
        raise ValueError(f"dtype must be one of {names}; got {dtype!r}")
    return _DTYPE_ALIASES[key]


def eps_for_dtype(dtype, r):
    """eps = r * unit roundoff of ``dtype`` (fp16 2^-11, bf16 2^-8, fp32 2^-24).

    ``dtype="paper"`` gives [A]'s choice, eps = r * 2^-11 (fp16-relative), which makes
    1 + 2r/eps = 4097 whatever r is.
    """
    u = UNIT_ROUNDOFF[canonical_dtype(dtype)]
    return _out(_as_array("r", r, low=0, low_inclusive=False) * u)


def theory_ratio(predicted_slope, measured_slope):
    """Theory/experiment ratio C / a (how loose the bound is); [A] reports 5.5-29."""
    p = _as_array("predicted_slope", predicted_slope, low=0)
    a = _as_array("measured_slope", measured_slope, low=0, low_inclusive=False)
    return _out(p / a)


# The refined slopes of [A] section 4 (box, cone, ellipsoid, cells) live in accesslib.theory.refined
# (they need scipy); they are reachable from here too, loaded on first use so that importing
# this module stays numpy-only.
_REFINED = ("RefinedSlope", "box_slope", "cone_slope", "ellipsoid_slope", "cell_slope",
            "log_cone_fraction", "cone_half_angle", "ball_log_count", "log_betainc")


def __getattr__(name):
    if name in _REFINED:
        from accesslib.theory import refined
        return getattr(refined, name)
    raise AttributeError(f"module 'accesslib.theory.bounds' has no attribute {name!r}")
