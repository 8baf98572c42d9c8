"""What a visitor may run: open (local, ``make app``) or public (hosting for a class).

Public mode is read once at start-up from ``ACCESSLIB_PUBLIC``: unset, "", 0, false, no or off
mean open; 1, true, yes or on mean public (any case, spaces ignored). Any other value is an error
that names the variable and the allowed values (a typo must not silently open a class server);
the apps show it and refuse to run. In public mode the apps accept only
allow-listed models (no free-form hub names, no local paths) and cap lengths, samples, steps
and concurrent runs per visitor (one Voila kernel = one visitor). Every refusal is a
ValueError whose message the apps show as it is; nothing runs.

:data:`PUBLIC_CAPS` holds the public cap of every app's every input (by app class and widget
attribute); :class:`accesslib.apps.base.App` checks them before every update and every run
(:func:`check_app_inputs`), reading the widgets' values as they are, since a browser can send
any value (and a slider's limits with it) through the widget protocol.
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Policy:
    public: bool = False
    allowed_models: tuple = ()          # empty and not public: anything load_model accepts
    max_length: int | None = None       # longest target, tokens
    max_samples: int | None = None      # strings per length
    max_steps: int | None = None        # optimisation steps per string
    max_m: int | None = None
    max_concurrent_runs: int | None = None  # per visitor (kernel)
    error: str | None = None            # set: the policy could not be read; every run is refused
    _active: list = field(default_factory=lambda: [0], compare=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    def describe(self) -> str:
        """One line for the page: what this deployment allows."""
        if self.error is not None:
            return f"Nothing can run: {self.error}"
        if not self.public:
            return "Local mode: any model name or path, no caps."
        return (f"Public mode: models {', '.join(self.allowed_models)}; at most m={self.max_m}, "
                f"length {self.max_length}, {self.max_samples} strings per length, "
                f"{self.max_steps} steps, {self.max_concurrent_runs} run at a time.")

    def check_model(self, name: str) -> None:
        if self.error is not None:
            raise ValueError(self.error)
        if not isinstance(name, str) or not name.strip():
            raise ValueError("model: give a model name")
        if self.public and name not in self.allowed_models:
            raise ValueError(f"model {name!r} is not available on this public server; "
                             f"choose one of: {', '.join(self.allowed_models)}")

    def check_request(self, *, model, m, lengths, samples, max_steps) -> None:
        """Raise ValueError naming the first value over its cap (nothing is run)."""
        self.check_model(model)
        ms = [m] if isinstance(m, int) else list(m)
        if not ms or any((not isinstance(x, int)) or x < 1 for x in ms):
            raise ValueError(f"m must be whole numbers >= 1; got {m!r}")
        lengths = list(lengths)
        if not lengths or any((not isinstance(n, int)) or n < 1 for n in lengths):
            raise ValueError(f"lengths must be whole numbers >= 1; got {lengths!r}")
        if not isinstance(samples, int) or samples < 1:
            raise ValueError(f"samples must be a whole number >= 1; got {samples!r}")
        if not isinstance(max_steps, int) or max_steps < 1:
            raise ValueError(f"max_steps must be a whole number >= 1; got {max_steps!r}")
        caps = [("m", max(ms), self.max_m), ("length", max(lengths), self.max_length),
                ("samples", samples, self.max_samples), ("max_steps", max_steps, self.max_steps)]
        for what, value, cap in caps:
            if cap is not None and value > cap:
                raise ValueError(f"{what} = {value} is over this server's cap of {cap}")

    @contextmanager
    def run_slot(self):
        """Hold one of this visitor's concurrent-run slots; refuse when none is free."""
        if self.error is not None:
            raise ValueError(self.error)
        with self._lock:
            if self.max_concurrent_runs is not None and self._active[0] >= self.max_concurrent_runs:
                raise ValueError(f"a run is already going (at most {self.max_concurrent_runs} "
                                 "at a time on this server): stop it first")
            self._active[0] += 1
        try:
            yield
        finally:
            with self._lock:
                self._active[0] -= 1


def public_policy(allowed_models) -> Policy:
    """The caps used when hosting for a class (sized for a 2-core CPU server)."""
    return Policy(public=True, allowed_models=tuple(allowed_models), max_length=64,
                  max_samples=16, max_steps=500, max_m=4, max_concurrent_runs=1)


#: ACCESSLIB_PUBLIC's documented values (compared lower-cased, spaces stripped).
PUBLIC_OFF = ("", "0", "false", "no", "off")
PUBLIC_ON = ("1", "true", "yes", "on")


def public_mode() -> bool:
    """ACCESSLIB_PUBLIC read strictly: False when unset or one of :data:`PUBLIC_OFF`, True for
    one of :data:`PUBLIC_ON`; any other value raises ValueError naming the variable and the
    allowed values."""
    raw = os.environ.get("ACCESSLIB_PUBLIC")
    value = "" if raw is None else raw.strip().lower()
    if value in PUBLIC_ON:
        return True
    if value in PUBLIC_OFF:
        return False
    shown = raw if len(raw) <= 40 else raw[:37] + "..."
    raise ValueError(f"ACCESSLIB_PUBLIC must be unset, '', 0, false, no or off (open mode) or 1, true, "
                     f"yes or on (public mode); got {shown!r}")


def current_policy(allowed_models=None) -> Policy:
    """The policy of this process: public when ACCESSLIB_PUBLIC is on, open when it is off or
    unset; ValueError for any other value (:func:`public_mode`)."""
    if public_mode():
        if allowed_models is None:
            from accesslib.models import embedded  # the shipped models: the only ones a class server offers
            allowed_models = embedded.names()
        return public_policy(allowed_models)
    return Policy(public=False, max_concurrent_runs=1)


def app_policy(allowed_models=None) -> Policy:
    """:func:`current_policy` for an app: when ACCESSLIB_PUBLIC has a value that is not allowed,
    a policy that refuses every run with that message (the app shows it), instead of raising
    while the page is built."""
    try:
        return current_policy(allowed_models)
    except ValueError as err:
        return Policy(public=False, max_concurrent_runs=0, error=str(err))


# ---------------------------------------------------------------------------------------------
# Public-mode caps of every app's every input (enforced by accesslib.apps.base.App, one place)
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Cap:
    """What one input of an app may hold on a public server.

    label: the input's name on the page (the message names it so). kind: "number" (a slider,
    a number field or a dropdown of numbers), "list" (typed whole numbers such as "4, 8, 16")
    or "model" (a model name: the policy's allowed models, plus ``extra``). low, high: the
    allowed range (inclusive); high may name a :class:`Policy` field ("max_m") so that the
    caps of 02 and the policy stay one number. A list holds at most ``max_items`` values and
    ``max_chars`` characters; the words in ``auto`` ("auto") stand for a computed choice.
    """

    label: str
    low: float | None = None
    high: float | str | None = None
    kind: str = "number"
    max_items: int | None = None
    max_chars: int = 200
    auto: tuple = ()
    extra: tuple = ()

    def bounds(self, policy: Policy) -> tuple:
        """(low, high) with a policy field name resolved to its number."""
        high = getattr(policy, self.high) if isinstance(self.high, str) else self.high
        return self.low, high


#: A 64-bit seed field holds at most this (numpy's generators take any seed up to it).
_SEED_HIGH = 2**64 - 1
#: the name of 05's random tiny model (built from a config, nothing downloaded)
_TINY_RANDOM = "tiny random gpt_neox (from a config)"

#: Public-mode caps, by app class and by the attribute that holds the input widget. Inputs
#: that only draw (the toy apps) are capped at the ranges their sliders were designed for;
#: inputs that start computation are capped at what a 2-core class server gives one visitor
#: in a few minutes (the shipped copy run, d = 64 and 2 layers for 2,500 steps, took 245 s
#: of CPU). Selection widgets not listed here (dropdowns, toggles, checkboxes) can hold only
#: the options the app made: ipywidgets checks an index sent by a browser.
PUBLIC_CAPS: dict[str, dict[str, Cap]] = {
    "BoundsApp": {
        "d": Cap("d (model width)", 1, 8192),
        "vocab": Cap("|V| (vocabulary)", 2, 1e6),
        "vocab_box": Cap("|V| (vocabulary)", 2, 1e6),
        "m": Cap("m (prompt vectors)", 0, 64),
        "r": Cap("r (support radius)", 0, 300),
        "eps": Cap("ε (precision)", 1e-10, 100),
    },
    "CrammingApp": {
        "model": Cap("model", kind="model"),
        "ms": Cap("m values", 1, "max_m", kind="list", max_items=8),
        "lengths": Cap("lengths", 1, "max_length", kind="list", max_items=16, auto=("", "auto")),
        "samples": Cap("strings/length", 1, "max_samples"),
        "max_steps": Cap("max steps", 1, "max_steps"),
    },
    "PredictedApp": {
        "r": Cap("r (support)", 0.01, 1000),
        "eps_rel": Cap("ε / r", 1e-8, 10**-0.5),
    },
    "SweepApp": {},
    "BudgetMapApp": {},
    "SlopeApp": {},
    "GeometryApp": {
        "angle": Cap("angle (deg)", -180, 180),
        "norm": Cap("norm |w|", 0, 1.5),
        "b": Cap("bias b (argmax)", -1, 1),
        "eps": Cap("ε (grid)", 0.01, 1),
    },
    "ModelGeometryApp": {
        "model": Cap("model", kind="model", extra=(_TINY_RANDOM,)),
        "per_length": Cap("samples / length", 4, 64),
        "n_cells": Cap("cell samples N", 1000, 50_000),
    },
    "CopyApp": {
        "steps": Cap("max steps", 1, 4000),
        "n_eval": Cap("strings/length", 1, 100),
        "lengths": Cap("eval lengths", 1, 300, kind="list", max_items=12),
        "max_len": Cap("train up to", 5, 100),
        "lr": Cap("learning rate", 1e-4, 1e-2),
        "d": Cap("width d", 16, 64),
        "layers": Cap("layers", 1, 2),
    },
    "PackingApp": {
        "r": Cap("r (radius)", 0, 10),
        "eps": Cap("ε (separation)", 10**-0.5, 10),
    },
    "PrecisionApp": {
        "n": Cap("output tokens n", 1, 32),
        "width": Cap("region width", 0.1, 10**1.5),
        "kmax": Cap("grid k (max)", 4, 128),
        "seed": Cap("seed", 0, _SEED_HIGH),
    },
    "MeanFieldApp": {
        "N": Cap("context length N", 2, 400),
        "k": Cap("write each token k×", 1, 5),
        "seed": Cap("context seed", 0, _SEED_HIGH),
    },
    "BeyondApp": {},
}

#: relative slack for float inputs (a log slider's 10**x is not exactly the typed number)
_SLACK = 1e-9


def _show(x) -> str:
    """A number as the page shows it: whole numbers with thousands separators, others short."""
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int) or (isinstance(x, float) and x.is_integer() and abs(x) < 1e15):
        return f"{int(x):,}"
    return f"{x:.4g}"


def _check_number(cap: Cap, low, high, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise ValueError(f"{cap.label} must be a number; got {value!r}")
    if high is not None and value > high + _SLACK * abs(high):
        raise ValueError(f"{cap.label} = {_show(value)} is over this server's cap of {_show(high)}: "
                         f"set it to {_show(high)} or less")
    if low is not None and value < low - _SLACK * abs(low):
        raise ValueError(f"{cap.label} = {_show(value)} is under this server's lowest value {_show(low)}: "
                         f"set it to {_show(low)} or more")


def _check_list(cap: Cap, low, high, text):
    text = str(text)
    if len(text) > cap.max_chars:
        raise ValueError(f"{cap.label}: at most {cap.max_chars} characters on this server; got {len(text):,}")
    if text.strip().lower() in cap.auto:
        return
    parts = [p for p in text.replace(";", ",").replace(" ", ",").split(",") if p]
    try:
        values = sorted({int(p) for p in parts})
    except ValueError:
        raise ValueError(f"{cap.label} must be whole numbers separated by commas, e.g. '1, 2, 4'; "
                         f"got {text!r}") from None
    if cap.max_items is not None and len(values) > cap.max_items:
        raise ValueError(f"{cap.label}: at most {cap.max_items} values on this server; got {len(values)}")
    for v in values:
        _check_number(cap, low, high, v)


def check_input(cap: Cap, value, policy: Policy) -> None:
    """Raise ValueError (the input's label, its value, the cap, what to set) when ``value`` is
    outside ``cap`` under ``policy``; nothing when it is inside."""
    low, high = cap.bounds(policy)
    if cap.kind == "model":
        name = str(value).strip()
        if name not in cap.extra:
            policy.check_model(name)
    elif cap.kind == "list":
        _check_list(cap, low, high, value)
    else:
        _check_number(cap, low, high, value)


def caps_for(app) -> dict[str, Cap]:
    """The caps of ``app`` (an instance or a class name): its class's entry of
    :data:`PUBLIC_CAPS`, else the first base class's that has one; {} when none has."""
    classes = [app] if isinstance(app, str) else [c.__name__ for c in type(app).__mro__]
    for name in classes:
        if name in PUBLIC_CAPS:
            return PUBLIC_CAPS[name]
    return {}


def check_app_inputs(app, policy: Policy, *, run: bool) -> None:
    """Check every capped input of ``app`` (its widgets' values as they are now, whatever the
    browser sent) against :data:`PUBLIC_CAPS` when ``policy`` is public; ValueError names the
    first one outside its cap. ``run``: a computation is about to start (model caps count
    only then: a stored measurement may be shown for any model). A policy that could not be
    read (bad ACCESSLIB_PUBLIC) refuses every run and caps every input as a public one."""
    if policy.error is not None and run:
        raise ValueError(policy.error)
    if not policy.public and policy.error is None:
        return
    for attr, cap in caps_for(app).items():
        if cap.kind == "model" and not run:
            continue
        widget = getattr(app, attr, None)
        if widget is None:
            continue
        check_input(cap, getattr(widget, "value", widget), policy)
