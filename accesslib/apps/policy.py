"""What a visitor may run: open (local, ``make app``) or public (hosting for a class).

Public mode is read once at start-up from ``ACCESSLIB_PUBLIC``: unset, "", 0, false, no or off
mean open; 1, true, yes or on mean public (any case, spaces ignored). Any other value is an error
that names the variable and the allowed values (a typo must not silently open a class server);
the apps show it and refuse to run. In public mode the apps accept only
allow-listed models (no free-form hub names, no local paths) and cap lengths, samples, steps
and concurrent runs per visitor (one Voila kernel = one visitor). Every refusal is a
ValueError whose message the apps show as it is; nothing runs.
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
