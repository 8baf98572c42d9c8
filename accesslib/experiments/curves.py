"""Accessibility curves and length searches (docs/paper.md, section 5).

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

The fits of these curves (n50, slope) are in :mod:`accesslib.theory.stats`.
"""
from __future__ import annotations

import hashlib
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from scipy.special import expit

from accesslib._checks import (
    check_callable,
    check_choice,
    check_float,
    check_int,
    check_int_list,
    check_seed,
    fail,
    fail_short,
)
from accesslib.engine.cramming import RUN_ONLY, SCHEDULES, protocol_settings
from accesslib.results.bundles import ended_under
from accesslib.results.store import ResultsStore, inflight_key, protocol_hash, target_hash
from accesslib.theory.stats import N50Fit, fit_n50

__all__ = ["SEARCHES", "AccessibilityCurve", "accessibility_curve", "accessibility_curves", "search_paper", "search_bisect",
           "search_grid", "LengthSampler", "logistic_oracle", "hashed_settings", "protocol_hash_for", "hold_rule"]

SEARCHES = ("bisect", "paper", "grid")


def _derive_seed(*parts) -> int:
    """A 31-bit seed derived from the parts (stable across processes, unlike hash())."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


# ---------------------------------------------------------------------------------------------
# The protocol hash: which cramming settings a stored string was measured with
# ---------------------------------------------------------------------------------------------
def hashed_settings(protocol: str | Mapping[str, Any] = "paper", overrides: Mapping[str, Any] | None = None,
                    *, text: str | None = None) -> dict:
    """What the protocol hash is taken of, and what the store records under it: the cram settings
    ``protocol_settings(protocol, **overrides)`` (an override of None keeps the protocol's value),
    plus ``source_text`` (a digest of ``text``) when the targets come from a given text.
    A ``schedule`` must be a declared name (or None): a callable has no name that is the same
    in every process, so it is refused."""
    from accesslib.engine.targets import text_digest

    out = dict(protocol_settings(protocol, **dict(overrides or {})))
    for key in RUN_ONLY:          # how the engine runs, not what it computes
        out.pop(key, None)
    if out.get("patience_on") == "loss":   # the rule every stored row had before it was a setting
        out.pop("patience_on")
    if not out.get("add_special_tokens", True):   # the targets every stored row had before it was one
        out.pop("add_special_tokens")
    if out.get("init_scale") == "inputs":    # the initial memory every stored row had before it was one
        out.pop("init_scale")
    schedule = out.get("schedule")
    if schedule is not None and (not isinstance(schedule, str) or schedule not in SCHEDULES):
        # a callable's name (or repr) differs between processes and runs: a resumed run would
        # never find its rows again, so only a declared name is hashed
        fail("schedule", f"one of {', '.join(map(repr, SCHEDULES))} or None to be stored", schedule)
    if text is not None:
        out["source_text"] = text_digest(text)
    return out


def carries_up(row: Mapping[str, Any], smaller: Mapping[str, Any]) -> bool:
    """Whether a string crammed under the budget of ``smaller`` (settings: max_steps, patience,
    patience_on) is crammed at the very same step under any larger budget of the same settings
    otherwise (a constant learning rate): it crammed before its steps ran out and before its
    patience on accuracy was spent (from its accuracy history), so the greedy check that crammed it
    was due anyway, and a larger budget follows the same trajectory up to it and makes it too. A
    string that crammed at its last allowed step (that check may have been called by the stop
    alone), or without a history, or under a patience on the loss, is not taken: it is crammed again."""
    if not row.get("success") or smaller.get("patience_on") != "accuracy":
        return False
    hist, steps = row.get("accuracy_history"), row.get("steps")
    if not hist or steps is None or steps >= int(smaller["max_steps"]):
        return False
    last_rise = max(int(h[0]) for h in hist if int(h[0]) <= steps)
    return steps - last_rise < int(smaller["patience"])


def carried_note(ph_from) -> str:
    """The ``run_id`` of a row taken from a smaller budget's run (:func:`carries_up`)."""
    return f"carried up from protocol {ph_from}"


def _carry_up(store, key, ph_from, smaller, hash_input) -> bool:
    """With an earlier run of a smaller budget (``ph_from``): store its row of ``key``'s string
    under this run's protocol where :func:`carries_up` says this budget crams it at the same step;
    True when it did."""
    if ph_from is None:
        return False
    old = store.rows(memory=True, **dict(key, protocol_hash=ph_from))
    if not old or not carries_up(old[0], smaller):
        return False
    row = {k: v for k, v in old[0].items() if k not in ("id", "memory_shape")}
    row.update(protocol_hash=key["protocol_hash"], run_id=carried_note(ph_from))
    store.add(row, settings=hash_input)
    return True


def _extend_hash(extend_from, settings, protocol, overrides, text, store) -> str | None:
    """The protocol hash of the earlier run that ``extend_from`` ({"max_steps": .., "patience":
    ..}, either or both) names (:func:`accessibility_curves`), checked; None without one."""
    if extend_from is None:
        return None
    if not isinstance(extend_from, Mapping) or not extend_from or \
            set(extend_from) - {"max_steps", "patience"}:
        fail("extend_from", "None or a dict of the earlier run's max_steps and/or patience", extend_from)
    if store is None:
        fail("extend_from", "given with a store (the earlier run's strings are kept there)", extend_from)
    if settings.get("schedule") not in (None, "constant"):
        fail("extend_from", "used with a constant learning rate only (a schedule follows the step budget, "
             f"so a longer run is not the shorter one continued; this protocol has {settings.get('schedule')!r})",
             extend_from)
    for k, v in extend_from.items():
        check_int(f"extend_from[{k!r}]", v, 1)
        if v > int(settings[k]):
            fail(f"extend_from[{k!r}]", f"at most this run's {k} ({settings[k]})", v)
    return protocol_hash_for(protocol, {**dict(overrides), **dict(extend_from)}, text=text)


def hold_rule(hold_at, settings: Mapping[str, Any], store):
    """The engine's ``hold`` for :func:`accessibility_curves`' ``hold_at`` under cram ``settings``
    (:func:`accesslib.engine.cramming.protocol_settings`), checked (ValueError naming what is wrong);
    None without one."""
    if hold_at is None:
        return None
    if not isinstance(hold_at, Mapping) or set(hold_at) != {"max_steps", "patience"}:
        fail("hold_at", "None or a dict of a smaller budget's max_steps and patience", hold_at)
    if store is None:
        fail("hold_at", "given with a store (a string set aside keeps its state there)", hold_at)
    if settings.get("schedule") not in (None, "constant"):
        fail("hold_at", "used with a constant learning rate only (a schedule follows the step budget, so a "
             f"smaller budget is not this run cut short; this protocol has {settings.get('schedule')!r})", hold_at)
    steps, patience = (check_int(f"hold_at[{k!r}]", hold_at[k], 1) for k in ("max_steps", "patience"))
    own = (int(settings["max_steps"]), int(settings["patience"]))
    if steps > own[0] or patience > own[1] or (steps, patience) == own:
        fail("hold_at", f"a budget below this run's own ({own[0]} steps, patience {own[1]})", dict(hold_at))
    if patience < own[1] and settings.get("patience_on") != "accuracy":
        fail("hold_at['patience']", f"this run's patience ({own[1]}) under patience on the loss (a smaller "
             "patience is read from a string's accuracy history: patience_on='accuracy', protocol 'paper')",
             patience)
    by_patience = None if patience == own[1] else patience   # the run's own patience stops it itself

    def hold(step, history):
        return ended_under(step, history, steps, by_patience)
    return hold


def protocol_hash_for(protocol: str | Mapping[str, Any] = "paper", overrides: Mapping[str, Any] | None = None,
                      *, text: str | None = None) -> str:
    """The results store's ``protocol_hash`` of strings crammed with this protocol (a name of
    ``accesslib.engine.cramming.PROTOCOLS`` or a dict of cram settings), these ``overrides``
    (e.g. ``{"max_steps": 50}``) and, for targets cut from a given text, that ``text``.

    The one place a hash is made from settings: :func:`accessibility_curve` writes rows under it,
    the sweeps (``accesslib.experiments.sweep``) and the apps look rows up with it. The hash is
    :func:`accesslib.results.store.protocol_hash` of :func:`hashed_settings`; stores and shipped
    bundles depend on it staying the same for the same settings.
    """
    return protocol_hash(hashed_settings(protocol, overrides, text=text))


# ---------------------------------------------------------------------------------------------
# Length searches, written against an abstract "cram these sample indices at length n"
# ---------------------------------------------------------------------------------------------
class _Stopped(Exception):
    pass


class LengthSampler:
    """Success results per (length n, sample index i); cram only what is not known yet.

    ``evaluate(n, indices) -> dict[i, bool]`` crams the strings with those sample indices at
    length n (one batched call) and returns their successes. ``evaluate_many(requests)``, when
    given, takes several lengths at once (``[(n, indices), ...] -> dict[(n, i), bool]``, one engine
    call for all of them) and is used instead. Missing entries in the answer mean the run was
    stopped: the search ends there.
    """

    def __init__(self, evaluate: Callable[[int, list[int]], Mapping[int, bool]] | None = None, *,
                 min_length: int = 1, max_length: int = 1000, stop: Callable[[], bool] | None = None,
                 evaluate_many: Callable[[list], Mapping[tuple, bool]] | None = None):
        if evaluate is None and evaluate_many is None:
            raise ValueError("LengthSampler needs evaluate or evaluate_many")
        self.evaluate = evaluate
        self.evaluate_many = evaluate_many
        self.min_length, self.max_length = int(min_length), int(max_length)
        self.stop = stop
        self.results: dict[int, dict[int, bool]] = {}
        self.crammed = 0  # strings sent to evaluate (the cost of the search)
        self.order: list[int] = []  # lengths in the order they were first measured
        self.calls = 0    # engine calls (one per counts / counts_many that had strings to cram)

    def counts(self, n: int, samples: int) -> tuple[int, int]:
        """Make sure samples 0..samples-1 are measured at n; return (successes, total) at n."""
        return self.counts_many([(n, samples)])[0]

    def counts_many(self, wants) -> list[tuple[int, int]]:
        """:meth:`counts` for several (n, samples) at once: everything missing goes to the engine in
        one call (``evaluate_many``), so strings of different lengths share its batch."""
        requests = []
        for n, samples in wants:
            n = int(n)
            if not self.min_length <= n <= self.max_length:
                raise ValueError(f"length n={n} outside [{self.min_length}, {self.max_length}]")
            got = self.results.setdefault(n, {})
            if n not in self.order:
                self.order.append(n)
            todo = [i for i in range(samples) if i not in got]
            if todo:
                requests.append((n, todo))
        if requests:
            if self.stop is not None and self.stop():
                raise _Stopped
            self.calls += 1
            if self.evaluate_many is not None:
                answer = self.evaluate_many(requests)
            else:
                answer = {(n, i): v for n, todo in requests for i, v in self.evaluate(n, todo).items()}
            stopped = False
            for n, todo in requests:
                self.crammed += len(todo)
                self.results[n].update({int(i): bool(answer[(n, i)]) for i in todo if (n, i) in answer})
                stopped |= any((n, i) not in answer for i in todo)
            if stopped:
                raise _Stopped
        out = []
        for n, samples in wants:
            vals = [self.results[int(n)][i] for i in range(samples)]
            out.append((sum(vals), len(vals)))
        return out

    def frac(self, n: int, samples: int) -> float:
        s, t = self.counts(n, samples)
        return s / t

    def curve(self) -> dict[int, tuple[int, int]]:
        return {n: (sum(r.values()), len(r)) for n, r in sorted(self.results.items()) if r}


def search_grid(S: LengthSampler, lengths: Sequence[int], samples: int):
    """Measure ``samples`` strings at each given length (one engine call for all of them)."""
    S.counts_many([(n, samples) for n in lengths])


def search_paper(S: LengthSampler, m: int, samples: int, *, big_step: int = 100, small_step: int = 10,
                 hi: float = 0.9, lo: float = 0.1, start: int | None = None):
    """[A]'s adaptive search (docs/paper.md, section 5; their public code's "simplified adaptive sweep").

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
        S.counts_many([(n, (len(S.results.get(n, {})) // samples + 1) * samples) for n in pts])


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
    strings_resumed: int = 0     # crammed on from the state an interrupted run kept in the store
    strings_extended: int = 0    # of those, from where a run with a smaller budget finished them
    strings_carried: int = 0     # taken as a run with a smaller budget crammed them (:func:`carries_up`)
    wall_time: float = 0.0
    interrupted: bool = False
    engine: Any = field(default=None, repr=False)   # the engine's CramResult (timings, steps; no strings)

    @property
    def fractions(self) -> list[float]:
        return [s / t for s, t in zip(self.successes, self.totals)]

    def fit(self) -> N50Fit:
        return fit_n50(self)

    def as_dict(self) -> dict[int, tuple[int, int]]:
        return {n: (s, t) for n, s, t in zip(self.lengths, self.successes, self.totals)}


def _unwrap(model, tokenizer, model_name):
    """(hf_model, tokenizer, name, vocab_size, max_context) from a LoadedModel or a module.

    vocab_size: the ids random-token targets are drawn from, the ones both embeddings have
    (:func:`accesslib.models.facts.shared_vocab_size`, what cramming accepts); max_context:
    :func:`accesslib.models.facts.max_context`."""
    from accesslib.models import facts

    loaded = getattr(model, "facts", None)
    if loaded is not None and hasattr(model, "model"):
        hf, name, tok = model.model, model_name or loaded.name, tokenizer or model.tokenizer
    else:
        config = getattr(model, "config", None)
        if config is None:
            raise ValueError("model must be a LoadedModel (accesslib.models.loading.load_model) or a transformers "
                             "causal LM, or a name to load")
        hf, name, tok = model, model_name or getattr(config, "_name_or_path", "") or "", tokenizer
        if not name:
            raise ValueError("model_name is needed for a model built in memory (it keys the results store)")
    return hf, tok, name, facts.shared_vocab_size(hf), facts.max_context(hf)


def accessibility_curve(model, m: int, lengths: Sequence[int] | None = None, samples: int = 16,
                        source: str = "natural", seed: int = 0, store: ResultsStore | str | None = None,
                        search: str | None = None, protocol: str | Mapping[str, Any] = "paper", *,
                        tokenizer=None, model_name: str | None = None, text: str | None = None,
                        pilot: int = 4, precision: float = 0.02, max_length: int = 1000,
                        start: int | None = None,
                        on_string: Callable[[dict], None] | None = None, on_step=None, stop=None,
                        batch_size: int | None = None, rows_per_pass: int | None = None,
                        **cram_overrides) -> AccessibilityCurve:
    """Measure the accessibility curve (success fraction per target length) for m memory vectors.

    model: a LoadedModel, a transformers causal LM (give ``model_name``), or a name for
    :func:`accesslib.models.loading.load_model`. lengths: measure exactly these (``search="grid"``);
    otherwise the length search ``search`` ("bisect" default, "paper") picks them.
    All strings go through one continuous-batching engine
    (:class:`accesslib.engine.cramming.CramSession`): a grid's lengths, the bisect search's
    refinement lengths, share its batch of at most ``batch_size`` strings. Each finished string is
    written to ``store`` at once (and skipped when already there). ``on_string(row)`` after every
    string crammed; ``on_step`` is passed to the engine; ``stop`` (threading.Event or callable) ends
    the run between steps, returning what was finished (``interrupted=True``). ``cram_overrides``
    change single cram settings (e.g. ``max_steps=50``); they enter the protocol hash
    (``batch_size`` and ``rows_per_pass`` do not: they change no result).
    """
    m = check_int("m", m, 1)
    return accessibility_curves(model, [m], lengths, samples, source, seed, store, search, protocol,
                                tokenizer=tokenizer, model_name=model_name, text=text, pilot=pilot,
                                precision=precision, max_length=max_length, start=start, on_string=on_string,
                                on_step=on_step, stop=stop, batch_size=batch_size, rows_per_pass=rows_per_pass,
                                **cram_overrides)[0]


class _Pending:
    """Strings one search thread waits for; the engine thread calls :meth:`done` per string."""

    def __init__(self, count: int):
        self.left = count
        self.event = threading.Event()
        if count == 0:
            self.event.set()

    def one_done(self):
        self.left -= 1
        if self.left <= 0:
            self.event.set()


class _Tag:
    __slots__ = ("done", "held")

    def __init__(self, done, held):
        self.done, self.held = done, held


def accessibility_curves(model, ms: Sequence[int], lengths=None, samples: int = 16, source: str = "natural",
                         seed: int = 0, store: ResultsStore | str | None = None, search: str | None = None,
                         protocol: str | Mapping[str, Any] = "paper", *, tokenizer=None,
                         model_name: str | None = None, text: str | None = None, pilot: int = 4,
                         precision: float = 0.02, max_length: int = 1000, start: int | None = None,
                         on_string: Callable[[dict], None] | None = None, on_step=None, stop=None,
                         batch_size: int | None = None, rows_per_pass: int | None = None,
                         extend_from: Mapping[str, int] | None = None, keep_final: bool = False,
                         hold_at: Mapping[str, int] | None = None,
                         **cram_overrides) -> list[AccessibilityCurve]:
    """:func:`accessibility_curve` for several m at once: one length search per m, all feeding one
    continuous-batching engine, so the pilot batches of every m fill its batch together.
    ``lengths`` (search="grid") may be a dict {m: lengths}. Returns the curves in the order of ``ms``.

    ``extend_from`` (with a ``store``): the ``max_steps`` and/or ``patience`` of an earlier run of
    the same strings in that store with the same settings otherwise, no larger than this run's
    (a constant learning rate only): each string goes on from the state that run finished it in,
    where the store keeps it (:meth:`accesslib.engine.cramming.CramSession.submit`, ``extend``),
    with exactly the result of a run from the start; a string that run crammed before its budget
    could have stopped it is taken as it is (:func:`carries_up`: the same step under any larger
    budget; ``run_id`` says so); the others are crammed from the start. A run keeps those states
    with ``keep_final`` (and a ``store``; a constant learning rate).

    ``hold_at`` (with a ``store``; a constant learning rate): {"max_steps": .., "patience": ..} of a
    budget below this run's. Each string is crammed only until its outcome within that budget is
    known: one that crams finishes as usual; one that budget would have ended uncrammed (past its
    steps, or its patience on teacher-forced accuracy: :func:`accesslib.results.bundles.ended_under`)
    is set aside with its state kept in the store, as an interrupted run keeps it, and its curve
    reads ``interrupted`` (``held`` counts them). The smaller budget is then decided
    (``accesslib store ladder``, ``make_bundles.py --read-budget``) hours before this run's own, and
    the same call without ``hold_at`` goes on from those states with exactly this run's result."""
    from accesslib.engine import targets as _targets
    from accesslib.engine.cramming import CramSession

    ms = check_int_list("ms", list(ms) if isinstance(ms, (list, tuple)) else ms, 1)
    samples = check_int("samples", samples, 1)
    seed = check_seed("seed", seed)
    check_choice("source", source, _targets.SOURCES)
    # the store, the callbacks and the text before anything loads or runs
    if store is not None and not isinstance(store, (str, os.PathLike, ResultsStore)):
        fail_short("store", "None, a results store file path or a ResultsStore", store)
    if text is not None and (not isinstance(text, str) or not text.strip()):
        fail_short("text", "None or a non-empty string", text)
    if model_name is not None and (not isinstance(model_name, str) or not model_name.strip()):
        fail_short("model_name", "None or a non-empty string", model_name)
    check_callable("on_string", on_string)
    check_callable("on_step", on_step)
    if search is None:
        search = "grid" if lengths is not None else "bisect"
    check_choice("search", search, SEARCHES)
    grid: dict[int, list[int]] = {}
    if search == "grid":
        if lengths is None:
            fail("lengths", "given with search='grid'", lengths)
        for m in ms:
            grid[m] = check_int_list("lengths", lengths[m] if isinstance(lengths, Mapping) else lengths, 1)
    elif lengths is not None:
        fail("lengths", f"None with search={search!r}, which picks them (give lengths only with "
             f"search='grid')", lengths)
    pilot = min(check_int("pilot", pilot, 1), samples)   # strings per length while bracketing
    check_float("precision", precision, 0, low_open=True)   # target relative stderr of n50
    max_length = check_int("max_length", max_length, 1)
    if start is not None:
        start = check_int("start", start, 1)
    if batch_size is not None:
        check_int("batch_size", batch_size, 1)

    if isinstance(model, str):
        from accesslib.models.loading import load_model
        model = load_model(model)
    hf, tok, name, vocab_size, max_ctx = _unwrap(model, tokenizer, model_name)
    if store is not None and not isinstance(store, ResultsStore):
        store = ResultsStore(store)
    settings = protocol_settings(protocol, **cram_overrides)
    first_as_input = bool(settings.get("first_token_as_input", False))
    # a target setting, not an engine one: the tokenizer's special tokens (BOS) start each target
    specials = bool(settings.get("add_special_tokens", False))
    hash_input = hashed_settings(protocol, cram_overrides, text=text)   # recorded with the rows
    ph = protocol_hash_for(protocol, cram_overrides, text=text)
    ph_from = _extend_hash(extend_from, settings, protocol, cram_overrides, text, store)
    hold = hold_rule(hold_at, settings, store)
    settings_from = None if ph_from is None else {**settings, **dict(extend_from)}
    floor = 2 if first_as_input else 1   # the first target token is an input, not an output
    if specials:
        if tok is None:
            fail("add_special_tokens", "False for a model without a tokenizer", True)
        floor = max(floor, len(_targets.leading_special_ids(tok)) + 1)
    if max_length < floor:
        fail("max_length", f">= {floor} with first_token_as_input={first_as_input}", max_length)
    cap_of = {}
    for m in ms:
        cap = max_length
        if max_ctx:
            prefix_len = len(settings.get("prefix_ids") or []) + 1  # room for a BOS-like prefix
            cap = min(max_length, int(max_ctx) - m - prefix_len)
            if cap < floor:
                fail("m", f"small enough to leave room in the model's context ({max_ctx} tokens) for a "
                     f"target of {floor} token(s) after the memory", m)
        cap_of[m] = cap
    exclude = list(getattr(tok, "all_special_ids", []) or []) if tok is not None else []

    stop_fn = None
    if stop is not None:
        stop_fn = stop.is_set if isinstance(stop, threading.Event) else stop
    # with a store, strings still being crammed are kept there (every minute, and when the run
    # stops or fails), so a run interrupted mid-string goes on where it was
    engine = CramSession(hf, seed=int(seed), on_step=on_step, stop=stop, batch_size=batch_size,
                         rows_per_pass=rows_per_pass, checkpoint=store, keep_final=keep_final, hold=hold,
                         **{k: v for k, v in settings.items() if k != "add_special_tokens"})
    finished = threading.Event()      # the engine loop has returned (done, stopped or failed)
    t_start = time.perf_counter()

    def run_curve(m: int, curve: AccessibilityCurve):
        rows_by_n: dict[int, dict[int, dict]] = {}

        def evaluate_many(requests) -> dict[tuple, bool]:
            got: dict[tuple, bool] = {}
            todo = []
            for n, indices in requests:
                ids, texts = _targets.make_targets(source, n, max(indices) + 1, _derive_seed(seed, n, source),
                                                   tokenizer=tok, vocab_size=vocab_size, exclude=exclude,
                                                   text=text, add_special_tokens=specials)
                for i in indices:
                    tids = ids[i].tolist()
                    key = dict(model=name, m=int(m), n=n, source=source, target_hash=target_hash(tids),
                               seed=int(seed), protocol_hash=ph)
                    if store is not None and (store.has(key) or _carry_up(store, key, ph_from, settings_from,
                                                                           hash_input)):
                        row = store.rows(**key)[0]
                        rows_by_n.setdefault(n, {})[i] = row
                        got[(n, i)] = bool(row["success"])
                        curve.strings_from_store += 1
                        curve.strings_carried += row.get("run_id") == carried_note(ph_from)
                    else:
                        todo.append((n, i, tids, key, texts[i] if texts else None))
            pending = _Pending(len(todo))
            t0 = time.perf_counter()

            def done_fn(n, i, tids, key, target_text):
                def done(res):
                    row = dict(key, sample=i, success=bool(res.success), tf_success=bool(res.tf_success),
                               steps=res.steps, final_loss=res.final_loss, token_accuracy=res.token_accuracy,
                               greedy_accuracy=res.greedy_accuracy, target_text=target_text,
                               target_ids=tids, greedy_ids=res.greedy_ids, memory=res.memory,
                               prefix_ids=res.prefix_ids, first_token_as_input=res.first_token_as_input,
                               wall_time=time.perf_counter() - t0, reason=res.reason,
                               accuracy_history=res.accuracy_history, ran_on=res.ran_on)
                    try:
                        if store is not None:
                            store.add(row, settings=hash_input)
                        row.pop("memory", None)
                        rows_by_n.setdefault(n, {})[i] = row
                        got[(n, i)] = row["success"]
                        curve.strings_crammed += 1
                        curve.strings_resumed += res.resumed_at > 0 or res.extended   # (extended: also from step 0)
                        curve.strings_extended += res.extended
                        if on_string is not None:
                            on_string(row)
                    finally:
                        pending.one_done()
                return done

            for n, i, tids, key, target_text in todo:
                # held (hold_at): no answer for it, so the search stops there (the curve is interrupted)
                engine.submit(tids, m, tag=_Tag(done_fn(n, i, tids, key, target_text), pending.one_done),
                              key=None if store is None else inflight_key(key),
                              extend=None if ph_from is None else inflight_key(dict(key, protocol_hash=ph_from)))
            while not pending.event.wait(0.05):
                if finished.is_set():
                    break
            return got

        sampler = LengthSampler(evaluate_many=evaluate_many, min_length=floor, max_length=cap_of[m],
                                stop=stop_fn)
        try:
            if search == "grid":
                search_grid(sampler, grid[m], samples)
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

    curves = [AccessibilityCurve(name, int(m), source, ph, settings, int(seed), search) for m in ms]
    errors: list[BaseException] = []

    def guarded(m, curve):
        try:
            run_curve(m, curve)
        except BaseException as err:   # re-raised in the caller's thread below
            errors.append(err)

    threads = [threading.Thread(target=guarded, args=(m, c), daemon=True, name=f"curve-m{m}")
               for m, c in zip(ms, curves)]
    for t in threads:
        t.start()
    try:
        engine.run(wait=lambda: any(t.is_alive() for t in threads))
    finally:
        finished.set()
        for t in threads:
            t.join()
    if errors:
        raise errors[0]
    if engine.interrupted:
        for c in curves:
            c.interrupted = True
    wall = time.perf_counter() - t_start
    summary = engine.result()
    summary.strings = []          # the rows are in curve.results
    for c in curves:
        c.wall_time = wall
        c.engine = summary
    return curves
