"""The counting bounds of [A] (docs/paper.md, section 2), in log space, pure numpy.

Every function is vectorised (numpy broadcasting over any argument) and never forms
(1 + 2r/eps)^(d*m) itself: for real models that number has millions of digits. Logs are
taken with ``log1p`` so that tiny 2r/eps stays exact.

Notation: d model width, V = |V| vocabulary size, eps precision, r support radius,
m number of prompt (memory) vectors, n output length in tokens.
"""
from __future__ import annotations

import math

import numpy as np

from accesslib._checks import check_array, fail

LN2 = math.log(2.0)
LN10 = math.log(10.0)

#: unit roundoff of the floating-point formats [A] discusses (docs/paper.md, section 3)
UNIT_ROUNDOFF = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": 2.0**-24}
_DTYPE_ALIASES = {
    "float16": "float16", "fp16": "float16", "half": "float16", "torch.float16": "float16",
    "bfloat16": "bfloat16", "bf16": "bfloat16", "torch.bfloat16": "bfloat16",
    "float32": "float32", "fp32": "float32", "float": "float32", "torch.float32": "float32",
    # [A] sets eps = r_inf * 2^-11, the fp16 unit roundoff, for every model
    "paper": "float16",
}
PAPER_DTYPE = "paper"


def _out(x):
    """Return a Python float for scalar results, an array otherwise."""
    x = np.asarray(x, dtype=float)
    return float(x) if x.ndim == 0 else x


# Each argument is checked by accesslib._checks.check_array (numbers or arrays, finite, in
# range): a ValueError "<name> must be <allowed>; got <value>" that an app shows as it is.
def _d(d):
    return check_array("d", d, low=1, integer=True)


def _vocab(vocab_size):
    return check_array("vocab_size", vocab_size, low=2, integer=True)


def _m(m):
    return check_array("m", m, low=0)


def _ln_cells(eps, r):
    """ln(1 + 2r/eps): the log packing number per coordinate (Theorem 4.5 of [A])."""
    eps = check_array("eps", eps, low=0, low_open=True)
    r = check_array("r", r, low=0)
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
    n = check_array("n", n, low=0)
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
        fail("dtype", "one of " + ", ".join(repr(k) for k in ("float16", "bfloat16", "float32", PAPER_DTYPE)),
             dtype)
    return _DTYPE_ALIASES[key]


def eps_for_dtype(dtype, r):
    """eps = r * unit roundoff of ``dtype`` (fp16 2^-11, bf16 2^-8, fp32 2^-24).

    ``dtype="paper"`` gives [A]'s choice, eps = r * 2^-11 (fp16-relative), which makes
    1 + 2r/eps = 4097 whatever r is.
    """
    u = UNIT_ROUNDOFF[canonical_dtype(dtype)]
    return _out(check_array("r", r, low=0, low_open=True) * u)


def theory_ratio(predicted_slope, measured_slope):
    """Theory/experiment ratio C / a (how loose the bound is); [A] reports 5.5-29."""
    p = check_array("predicted_slope", predicted_slope, low=0)
    a = check_array("measured_slope", measured_slope, low=0, low_open=True)
    return _out(p / a)


def bound_table(d, vocab_size, eps, r, ms, ns=()) -> dict:
    """The counting bound at one setting, for the command line (``accesslib bound``) and scripts.

    Returns ``{d, vocab_size, eps, r, ln_cells, slope, rows, shares}``: ``ln_cells`` = ln(1 + 2r/eps)
    nats per coordinate, ``slope`` C; ``rows`` one dict per m of ``ms`` (``m``, ``log10_prompts``
    = log10 (1 + 2r/eps)^(d m), ``n_star`` = C m, ``n50`` = :func:`n50_bound`); ``shares`` one
    dict per n of ``ns`` (``n``, ``log10_share``: a list over ``ms`` of the log10 of the largest
    share of the |V|^n strings of length n that a prompt of m vectors can force)."""
    from accesslib._checks import check_float, check_int

    d, vocab_size = check_int("d", d, 1), check_int("vocab_size", vocab_size, 2)
    eps, r = check_float("eps", eps, 0, low_open=True), check_float("r", r, 0)
    def number(name, x):   # whole numbers stay whole (as JSON shows them)
        x = check_float(name, x, 0)
        return int(x) if x.is_integer() else x
    ms, ns = [number("m", m) for m in ms], [number("n", n) for n in ns]
    c = float(slope(d, vocab_size, eps, r))
    rows = [dict(m=m, log10_prompts=float(log10_accessible(d, eps, r, m)),
                 n_star=float(n_star(m, d, vocab_size, eps, r)),
                 n50=float(n50_bound(m, d, vocab_size, eps, r))) for m in ms]
    shares = [dict(n=n, log10_share=[float(log10_accessible_fraction(n, m, d, vocab_size, eps, r))
                                     for m in ms]) for n in ns]
    return dict(d=d, vocab_size=vocab_size, eps=eps, r=r, ln_cells=float(_ln_cells(eps, r)), slope=c,
                rows=rows, shares=shares)


# The refined slopes of [A] section 4 (box, cone, ellipsoid, cells) are in
# accesslib.theory.refined, which imports this module (never the other way round).
