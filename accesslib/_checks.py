"""Every argument check of the package, in one message style.

A failed check raises ``ValueError("<name> must be <allowed>; got <value>")``: the parameter,
what it may be, and what was given, so that an app can show the message as it is and a command
line can print it as one line. Numpy and the standard library only (every layer may import it).
"""
from __future__ import annotations

import argparse
import math
from typing import Any, Iterable, Mapping

import numpy as np

__all__ = ["fail", "check_int", "check_float", "check_array", "check_choice", "check_int_list",
           "parse_int_list", "arg_type", "short_repr", "fail_short", "check_seed", "SEED_MAX",
           "check_callable", "check_token_ids"]

#: The largest seed accepted anywhere (numpy's and torch's generators take 64-bit seeds).
SEED_MAX = 2**64 - 1


def _range(low, high, *, low_open=False, high_open=False, whole=False, plural=False) -> str:
    kind = ("whole numbers" if plural else "a whole number") if whole else ("numbers" if plural else "a number")
    if low is not None and high is not None and not (low_open or high_open):
        return f"{kind} in {low:g}..{high:g}"
    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {low:g}")
    if high is not None:
        parts.append(f"{'<' if high_open else '<='} {high:g}")
    return f"{kind} {' and '.join(parts)}".rstrip()


def fail(name: str, allowed: str, value: Any) -> None:
    """Raise the package's ValueError for ``name``: '<name> must be <allowed>; got <value>'."""
    raise ValueError(f"{name} must be {allowed}; got {value!r}")


def _is_number(value) -> bool:
    return not isinstance(value, (bool, np.bool_)) and isinstance(value, (int, float, np.integer, np.floating))


def check_int(name: str, value, low=None, high=None) -> int:
    """A whole number (Python or numpy int; never a bool, a float or a string) in [low, high]."""
    allowed = _range(low, high, whole=True)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        fail(name, allowed, value)
    if (low is not None and value < low) or (high is not None and value > high):
        fail(name, allowed, value)
    return int(value)


def check_float(name: str, value, low=None, high=None, *, low_open=False, high_open=False) -> float:
    """A finite real number (not a bool or a string) in the given range."""
    allowed = _range(low, high, low_open=low_open, high_open=high_open)
    if not _is_number(value) or not math.isfinite(value):
        fail(name, "a finite " + allowed.removeprefix("a "), value)
    v = float(value)
    if low is not None and (v <= low if low_open else v < low):
        fail(name, allowed, value)
    if high is not None and (v >= high if high_open else v > high):
        fail(name, allowed, value)
    return v


def check_seed(name: str, value) -> int:
    """A seed: a whole number (Python or numpy int; never a bool, a float such as 1.7 or 1.0, or
    a string) in 0..2**64 - 1. A huge value is named in a short message, never a traceback."""
    allowed = f"a whole number in 0..{SEED_MAX} (2**64 - 1)"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        fail_short(name, allowed, value)
    if not 0 <= int(value) <= SEED_MAX:
        fail_short(name, allowed, value)
    return int(value)


def check_callable(name: str, value, allowed: str = "a callable or None"):
    """None or a callable (a function given where one is called back later)."""
    if value is not None and not callable(value):
        fail_short(name, allowed, value)
    return value


def check_token_ids(name: str, value) -> list[int]:
    """None (no ids) or a sequence of whole numbers >= 0 (list, tuple, 1-D array or tensor).
    A string or bytes is not a sequence of ids ('12' is refused, never read as [1, 2]); bools
    and fractional numbers are refused."""
    allowed = "None or a list of token ids (whole numbers >= 0)"
    if value is None:
        return []
    if isinstance(value, (str, bytes, bytearray, Mapping)) or not hasattr(value, "__iter__"):
        fail_short(name, allowed, value)
    if hasattr(value, "tolist") and getattr(value, "ndim", 1) != 1:
        fail_short(name, allowed + " (1-D)", value)
    items = value.tolist() if hasattr(value, "tolist") else list(value)
    for v in items:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 0:
            fail_short(name, allowed, value)
    return [int(v) for v in items]


def _has_bool(value) -> bool:
    """True when ``value`` is a bool or holds one (a bool array, a list with a bool anywhere)."""
    if isinstance(value, (bool, np.bool_)):
        return True
    if isinstance(value, np.ndarray):
        if value.dtype == bool:
            return True
        return value.dtype == object and any(_has_bool(v) for v in value.flat)
    if isinstance(value, (list, tuple)):
        return any(_has_bool(v) for v in value)
    return str(getattr(value, "dtype", "")) in ("bool", "torch.bool")


def check_array(name: str, value, *, low, low_open=False, integer=False, allowed: str | None = None):
    """A number or an array of numbers, all finite and in range; returned as a float array.
    Bools are refused anywhere (a bool array, a list of bools, one bool among numbers)."""
    rng = allowed or _range(low, None, low_open=low_open, whole=integer)
    if isinstance(value, (str, bytes)) or value is None or _has_bool(value):
        fail_short(name, rng, value)
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        fail(name, rng, value)
    if np.asarray(value).dtype == bool or arr.dtype == object or not np.all(np.isfinite(arr)):
        fail(name, rng, value)
    if np.any(arr <= low if low_open else arr < low) or (integer and np.any(arr != np.round(arr))):
        fail(name, rng, value)
    return arr


def check_choice(name: str, value, choices: Iterable) -> Any:
    """One of ``choices``."""
    choices = tuple(choices)
    if value not in choices:
        fail(name, f"one of {', '.join(map(repr, choices))}", value)
    return value


def check_int_list(name: str, value, low=1, high=None) -> list[int]:
    """Whole numbers from a number, a list or a range mapping {start, stop[, step]} (stop
    included); order kept, repeats dropped."""
    allowed = f"a non-empty list of {_range(low, high, whole=True, plural=True)}"
    if isinstance(value, Mapping) and set(value) <= {"start", "stop", "step"} and "stop" in value:
        start, stop, step = (value.get("start", low), value["stop"], value.get("step", 1))
        for k, v in (("start", start), ("stop", stop), ("step", step)):
            check_int(f"{name}.{k}", v, 1 if k == "step" else None)
        value = range(int(start), int(stop) + 1, int(step))
    elif _is_number(value):
        value = [value]
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        fail(name, allowed, value)
    out = list(value)
    if not out:
        fail(name, allowed, out)
    for v in out:
        if isinstance(v, (bool, np.bool_)) or not _is_number(v) or v != int(v):
            fail(name, allowed, out)
        if (low is not None and v < low) or (high is not None and v > high):
            fail(name, allowed, out)
    return list(dict.fromkeys(int(v) for v in out))


def parse_int_list(text: str, name: str, *, low=1, high=None) -> list[int]:
    """Typed text '1, 2, 4' (commas, semicolons or spaces) -> sorted distinct whole numbers."""
    parts = [p for p in str(text).replace(";", ",").replace(" ", ",").split(",") if p]
    allowed = f"{_range(low, high, whole=True, plural=True)} separated by commas, e.g. '1, 2, 4'"
    try:
        values = [int(p) for p in parts]
    except ValueError:
        fail(name, allowed, text)
    if not values or min(values) < low or (high is not None and max(values) > high):
        fail(name, allowed, text)
    return sorted(set(values))


def arg_type(check, *args, **kwargs):
    """An argparse ``type=`` from a check: parses the text (int or float as the check expects)
    and turns the check's message into argparse's one-line error."""
    def parse(text):
        try:
            value = int(text) if check in (check_int, check_seed) else float(text)
        except ValueError:
            value = text
        try:
            return check("value", value, *args, **kwargs)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err).removeprefix("value ")) from None
    parse.__name__ = check.__name__.removeprefix("check_")
    return parse


def short_repr(value, limit: int = 80) -> str:
    """``repr(value)``, cut to at most ``limit`` characters ("..." at the end) without building
    the whole text: a list of 10**9 elements (or a nest of shared lists) costs as much as its
    first few. Lists, tuples, dicts and sets are walked; anything else is repr'd and cut."""
    out: list[str] = []
    size = 0

    def emit(text: str) -> None:
        nonlocal size
        out.append(text)
        size += len(text)

    def walk(v, depth: int) -> None:
        if size > limit:
            return
        kind = type(v)
        if kind in (list, tuple, set, frozenset, dict) and depth < 50:
            if kind in (set, frozenset) and not v:
                emit(f"{kind.__name__}()")
                return
            opening, closing = {list: "[]", tuple: "()", dict: "{}"}.get(kind, "{}")
            if kind is frozenset:
                opening, closing = "frozenset({", "})"
            emit(opening)
            for i, item in enumerate(v.items() if kind is dict else v):
                if size > limit:
                    return
                if i:
                    emit(", ")
                if kind is dict:
                    walk(item[0], depth + 1)
                    emit(": ")
                    walk(item[1], depth + 1)
                else:
                    walk(item, depth + 1)
            if kind is tuple and len(v) == 1:
                emit(",")
            emit(closing)
        elif isinstance(v, str) and len(v) > limit + 2:
            emit(repr(v[:limit + 2]))
        else:
            try:
                text = repr(v)
            except Exception:  # e.g. an int too long to print
                text = f"<{kind.__name__}>"
            emit(text[:limit + 2])

    walk(value, 0)
    text = "".join(out)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def fail_short(name: str, allowed: str, value: Any, limit: int = 80) -> None:
    """:func:`fail` for values that may be huge (read from a file): the value's repr is cut to
    ``limit`` characters (:func:`short_repr`); a short value reads exactly as with :func:`fail`."""
    raise ValueError(f"{name} must be {allowed}; got {short_repr(value, limit)}")
