"""The cramming engine: batched soft-prompt optimisation on a frozen causal LM (docs/paper.md, section 5).

A target string t = (t_1..t_n) is *accessible* with m memory vectors if some x in R^{m x d}
placed after a fixed prefix makes greedy decoding output exactly t. ``cram`` searches for such an
x by gradient descent on the cross-entropy of the targets, for B strings at once:

    input sequence   [prefix ids (p)] [memory x_1..x_m] [t_1 .. t_{n-1}]       (length p+m+n-1)
    loss of string b  = mean over predicted positions of CE(logits, t)          (one number per row)
    batch objective   = sum over active rows of the per-row losses

Because rows never interact inside a causal LM and the objective is a sum of per-row means, the
gradient that row b receives is exactly the gradient of its own single-string loss; AdamW is
applied by hand per row on the [B, m, d] tensor (its moments are per element, its step count is
shared), and each string's initial memory is drawn from its own generator seeded by
(seed, target ids). So a string gets the same treatment alone or in a batch (up to floating-point
summation order), and strings that finish leave the batch (the batch is compacted) so that solved
strings cost nothing more.

Default: all n target tokens are predicted from the memory (the logits at the last memory position
predict t_1). ``first_token_as_input=True`` follows [A] and [K]: t_1 is given as input and only
t_2..t_n are predicted.

Success is judged twice. The teacher-forced test (argmax of every predicted position equals the
target) is cheap and runs every step; it may stop a string. Every such string is then confirmed
by real greedy generation from (prefix + memory) (:func:`accesslib.engine.decoding.greedy`, with
the model's cache) before it is reported as a success; a string whose greedy check fails keeps
optimising.
``StringResult.tf_success`` and ``StringResult.success`` keep both verdicts.

Protocols (``PROTOCOLS``): "paper" is the published one ([A] following [K]): init normal * std
of the embedding matrix (as [K]'s MemoryCell draws it: without the embedding layer's own scale,
e.g. sqrt(d) for Gemma), AdamW lr 1e-2, betas (0.9, 0.9), weight decay 0.01, at most 3000 steps,
patience 500 on teacher-forced accuracy. "fast" is ours; the evidence for it is in
``FAST_EVIDENCE`` below and in benchmarks/cramming_throughput.py.

An interrupted run keeps each unfinished string's state in its results store;
:func:`kept_progress` says where those strings stand (steps, best loss and accuracy so far).
"""
from __future__ import annotations

import functools
import hashlib
import io
import math
import statistics
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

import torch
import torch.nn.functional as F

from accesslib._checks import (
    check_callable,
    check_choice,
    check_float,
    check_int,
    check_seed,
    check_token_ids,
    fail,
    fail_short,
)
from accesslib.config import cpu_id, cpu_kernels, cpu_name
from accesslib.engine.decoding import (
    as_autocast_dtype,
    autocast,
    contiguous_head,
    forward_options,
    greedy,
    token_ids,
)
from accesslib.engine.lean import lean_forward, lean_greedy
from accesslib.models import facts
from accesslib.models.loading import hf_model

#: The one protocol table: every :func:`cram` setting a named protocol fixes.
#: "paper" is [A]'s protocol (docs/paper.md, section 5): AdamW lr 1e-2, betas (0.9, 0.9), weight
#: decay 0.01, <= 3000 steps, patience 500, first target token given as input. "fast" is the
#: engine's faster schedule and predicts every target token from the memory. Successes are
#: greedy-confirmed in both.
PROTOCOLS = {
    # [A] section "cramming", following [K]
    # the memory drawn as [K]'s MemoryCell (which [A]'s train.py uses) draws it: std of the
    # embedding matrix itself, without the embedding layer's scale (Gemma: sqrt(d))
    "paper": dict(lr=1e-2, betas=(0.9, 0.9), weight_decay=0.01, max_steps=3000, patience=500,
                  schedule=None, first_token_as_input=True, patience_on="accuracy", init_scale="weights"),
    # Measured on tiny random and embedded models: same successes as "paper" in far fewer steps
    # (see FAST_EVIDENCE). A higher peak rate with a short warm-up and cosine decay.
    "fast": dict(lr=5e-2, betas=(0.9, 0.9), weight_decay=0.01, max_steps=1000, patience=200,
                 schedule="warmup_cosine", first_token_as_input=False, patience_on="loss", init_scale="inputs"),
}


def protocol_settings(protocol="paper", **overrides) -> dict:
    """The cramming settings for a protocol name (or a dict of settings), with overrides applied
    (an override of None keeps the protocol's value)."""
    allowed = f"one of {', '.join(map(repr, PROTOCOLS))} or a dict of cram settings"
    if isinstance(protocol, str):
        if protocol not in PROTOCOLS:
            fail("protocol", allowed, protocol)
        settings = dict(PROTOCOLS[protocol])
    elif isinstance(protocol, Mapping):
        settings = dict(protocol)
    else:
        fail("protocol", allowed, protocol)
    settings.update({k: v for k, v in overrides.items() if v is not None})
    return settings

#: Why "fast" (measured on this 2-core CPU, 1 thread, 16 uniform random strings per row, m as
#: given; successes greedy-confirmed; benchmarks/cramming_throughput.py --protocols):
#:   tiny gpt_neox d=64 |V|=256 n=3 m=1 (targets seed 1): paper 9/16 in 33.8 s; fast 9/16 in 11.1 s
#:   (lr 3e-2 const 9/16 28.1 s; lr 1e-1 const 10/16 27.6 s; lr 1e-1 warmup_cosine 11/16 31.3 s,
#:   all with 3000 steps / patience 500)
#:   tiny gpt_neox d=32 |V|=64  n=2 m=1 (targets seed 2): paper 10/16 in 24.7 s; fast 10/16 in 8.5 s
#:   tiny gpt_neox d=64 |V|=256 n=3 m=1 (targets seed 2): paper  8/16 in 32.1 s; fast  9/16 in 12.2 s
#:   tiny llama    d=32 |V|=64  n=3 m=2 (targets seed 2): paper 16/16 in  1.9 s; fast 16/16 in 1.0 s
#: The gain is mostly from failing strings, which stop after 200 stale / 1000 steps instead of
#: 500 / 3000; successes arrive in about half the steps (median 59 against 116). Not yet checked
#: on trained or real models: use "paper" when comparing with [A]'s numbers.
FAST_EVIDENCE = {
    "tiny gpt_neox d64 V256 n3 m1 s1": {"paper": (9, 33.8), "fast": (9, 11.1)},
    "tiny gpt_neox d32 V64 n2 m1 s2": {"paper": (10, 24.7), "fast": (10, 8.5)},
    "tiny gpt_neox d64 V256 n3 m1 s2": {"paper": (8, 32.1), "fast": (9, 12.2)},
    "tiny llama d32 V64 n3 m2 s2": {"paper": (16, 1.9), "fast": (16, 1.0)},
}

SCHEDULES = ("constant", "cosine", "warmup_cosine")

#: what the patience clock watches: "loss" (a string stops when its loss has not improved for
#: `patience` steps) or "accuracy" (its teacher-forced accuracy: the published code's rule)
PATIENCE_ON = ("loss", "accuracy")

#: the std of the initial memory, as a multiple of the embedding matrix's std: "inputs" times the
#: embedding layer's scale (the spread of the token inputs the model receives; the default), or
#: "weights", the matrix's own std ([K]'s and [A]'s code: ``randn * embeddings.weight.std()``,
#: while the targets pass through the scaled layer). The two differ only where the layer scales
#: its rows (Gemma: by sqrt(d), about 25 for Gemma-3-270M).
INIT_SCALES = ("inputs", "weights")

#: cram() settings that change how the engine runs but no string's result: left out of the
#: results store's protocol hash (accesslib.experiments.curves.hashed_settings).
RUN_ONLY = ("batch_size", "rows_per_pass", "profile", "checkpoint_every")


@dataclass
class StepInfo:
    """What ``on_step`` receives after each forward pass.

    active: original indices of the strings still optimising at this step (len = how many);
    losses / best_losses: their current and best per-row losses, in the same order."""
    step: int
    active: list
    losses: list
    best_losses: list
    elapsed: float
    n_total: int = 0
    n_done: int = 0
    n_success: int = 0
    lr: float = 0.0


@dataclass
class StringResult:
    """One crammed string; enough to re-check a success (memory + prefix + convention)."""
    index: int
    target_ids: list
    success: bool            # confirmed by greedy generation (or == tf_success when verify=False)
    tf_success: bool         # teacher-forced: every predicted position's argmax was right
    steps: int               # optimisation steps applied to the memory that is reported
    final_loss: float
    token_accuracy: float    # teacher-forced, at the reported memory
    greedy_accuracy: float   # fraction of greedily generated tokens equal to the target
    greedy_ids: list
    memory: torch.Tensor     # [m, d], cpu, float32
    prefix_ids: list
    first_token_as_input: bool
    reason: str | None = None    # None on success; "patience" | "max_steps" | "non-finite loss"
    best_loss: float = float("nan")
    resumed_at: int = 0      # the step it went on from, kept by an interrupted run (0: from the start)
    extended: bool = False   # resumed_at is where a run with a smaller budget finished it (submit's extend)
    #: [step, teacher-forced accuracy] at every step where the string's best accuracy rose (the
    #: first at step 0); None where unknown (resumed from a state kept before it was recorded).
    #: Enough to tell when any smaller patience on accuracy would have stopped it.
    accuracy_history: list | None = None
    #: what the string's steps ran on: one dict per stretch of steps with the same float sums,
    #: ``{"from": step, "cpu", "cpu_id", "kernels", "threads" (torch's), "torch", "device",
    #: "transformers", "engine"}``
    #: (:meth:`CramSession._environment`), a new one wherever a resume
    #: or a change of thread count changed them. The first starts after step 0 where a state kept
    #: before this was recorded was resumed (the steps before it: unknown).
    ran_on: list | None = None


@dataclass
class CramResult:
    strings: list            # StringResult in input order; unfinished ones absent when interrupted
    m: int
    settings: dict
    wall_time: float
    interrupted: bool = False
    steps_run: int = 0
    row_steps: int = 0       # sum over steps of the batch size: forward/backward row passes
    timings: dict = field(default_factory=dict)   # seconds: forward, backward, update, checks, greedy; syncs
    oom_retries: int = 0     # steps repeated with fewer rows per pass after an out-of-memory error
    resumed: int = 0         # strings that went on from a state an interrupted run kept (checkpoint)
    extended: int = 0        # of those, strings that went on from where a smaller budget finished them
    held: int = 0            # strings set aside unfinished by ``hold``, their states kept (CramSession)

    @property
    def n_success(self) -> int:
        return sum(s.success for s in self.strings)

    @property
    def n_tf_success(self) -> int:
        return sum(s.tf_success for s in self.strings)


# ---------------------------------------------------------------------------------------------
# helpers


def string_seed(seed: int, target_ids) -> int:
    """Seed of one string's initial memory: sha256 of (seed, target ids), 63 bits.

    Depends on the string, not on its position in the batch, so a string gets the same start
    alone or in any batch (and a results store keyed by (target, seed) can reproduce it)."""
    key = f"{int(seed)}:" + ",".join(str(int(t)) for t in target_ids)
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little") & ((1 << 63) - 1)


def init_std_of(model, init_scale: str = "inputs") -> float:
    """std of the input-embedding matrix, times the embedding layer's scale with ``init_scale=
    "inputs"`` (the spread of what the model actually receives as token inputs), alone with
    "weights" ([A]'s and [K]'s code; docs/paper.md, section 5). See :data:`INIT_SCALES`."""
    check_choice("init_scale", init_scale, INIT_SCALES)
    w = model.get_input_embeddings().weight
    std = float(w.detach().float().std())
    return std * facts.embed_scale(model) if init_scale == "inputs" else std


def lr_factor(schedule, step: int, max_steps: int) -> float:
    """Multiplier of the peak learning rate at `step` (0-based).

    None / "constant": 1. "cosine": from 1 down to 0.1 over max_steps.
    "warmup_cosine": linear warm-up over the first 2% of max_steps (at least 10 steps), then the
    same cosine. A callable schedule(step, max_steps) -> factor is used as given."""
    if schedule is None or schedule == "constant":
        return 1.0
    if callable(schedule):
        return float(schedule(step, max_steps))
    total = max(1, max_steps)
    floor = 0.1
    if schedule == "warmup_cosine":
        warm = max(10, int(0.02 * total))
        if step < warm:
            return (step + 1) / warm
        frac = (step - warm) / max(1, total - warm)
    else:
        frac = step / total
    frac = min(max(frac, 0.0), 1.0)
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * frac))


@contextmanager
def _frozen(model):
    """Eval mode, no parameter gradients; flags restored afterwards (weights are never written)."""
    flags = [p.requires_grad for p in model.parameters()]
    was_training = model.training
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    try:
        yield model
    finally:
        for p, f in zip(model.parameters(), flags):
            p.requires_grad_(f)
        model.train(was_training)


def _stopped(stop) -> bool:
    if stop is None:
        return False
    if hasattr(stop, "is_set"):
        return bool(stop.is_set())
    return bool(stop())


def default_prefix(model) -> list:
    """[bos_token_id] when the model's config names one, else []: many models need a real first
    token before the memory vectors (attention sinks)."""
    model = hf_model(model)
    bos = getattr(model.config, "bos_token_id", None)
    return [int(bos)] if isinstance(bos, int) and 0 <= bos < facts.shared_vocab_size(model) else []


# ---------------------------------------------------------------------------------------------
# the engine


def _is_beta(b) -> bool:
    try:
        check_float("beta", b, 0, 1, high_open=True)
    except ValueError:
        return False
    return True


def _check_model(model) -> None:
    """A causal LM: a torch module with input embeddings and a config (what cram reads)."""
    emb = None
    if isinstance(model, torch.nn.Module) and hasattr(model, "get_input_embeddings"):
        try:
            emb = model.get_input_embeddings()
        except (AttributeError, NotImplementedError, TypeError):
            emb = None
    if (emb is None or getattr(getattr(emb, "weight", None), "dim", lambda: 0)() != 2
            or getattr(model, "config", None) is None):
        fail_short("model", "a transformers causal LM or a LoadedModel (accesslib.models.loading.load_model)",
                   model)


def _validate_settings(model, m, prefix, lr, betas, weight_decay, max_steps, patience, schedule, stop,
                       seed=0, init_std=None, eps=1e-8, on_step=None, on_string=None, batch_size=None,
                       rows_per_pass=None, patience_on="loss", init_scale="inputs"):
    """Every setting of :func:`cram` but the targets, in the package's message style (accesslib._checks)."""
    _check_model(model)
    if isinstance(m, (list, tuple)):
        for v in m:
            check_int("m", v, 1)
    else:
        check_int("m", m, 1)
    check_seed("seed", seed)
    if init_std is not None:
        check_float("init_std", init_std, 0, low_open=True)
    check_float("eps", eps, 0, low_open=True)
    check_callable("on_step", on_step)
    check_callable("on_string", on_string)
    V = facts.shared_vocab_size(model)     # ids both embeddings have
    if prefix and (min(prefix) < 0 or max(prefix) >= V):
        raise ValueError(f"prefix_ids must be token ids in 0..{V - 1}; got {prefix} (outside the vocabulary)")
    check_float("lr", lr, 0, low_open=True)
    if (isinstance(betas, (str, bytes)) or not hasattr(betas, "__len__") or len(betas) != 2
            or not all(_is_beta(b) for b in betas)):
        fail("betas", "two numbers in [0, 1)", betas)
    check_float("weight_decay", weight_decay, 0)
    check_int("max_steps", max_steps, 0)
    check_int("patience", patience, 1)
    if patience_on not in PATIENCE_ON:
        fail("patience_on", f"one of {', '.join(map(repr, PATIENCE_ON))}", patience_on)
    check_choice("init_scale", init_scale, INIT_SCALES)
    if batch_size is not None:
        check_int("batch_size", batch_size, 1)
    if rows_per_pass is not None:
        check_int("rows_per_pass", rows_per_pass, 1)
    if not (schedule is None or callable(schedule) or schedule in SCHEDULES):
        fail("schedule", f"None, one of {', '.join(map(repr, SCHEDULES))} or a callable", schedule)
    if not (stop is None or hasattr(stop, "is_set") or callable(stop)):
        fail("stop", "a threading.Event, a callable returning bool, or None", stop)


def _target_list(targets) -> list:
    """targets -> a list of 1-D LongTensors (cpu): a LongTensor [B, n], or a list of sequences of
    token ids of any lengths (lists, tuples, 1-D tensors)."""
    if isinstance(targets, torch.Tensor):
        if targets.dtype != torch.long:
            raise ValueError(f"targets must be a LongTensor (int64) of shape [B, n]; got dtype {targets.dtype}")
        if targets.dim() != 2:
            hint = " (use targets[None] for one string)" if targets.dim() == 1 else ""
            raise ValueError(f"targets must be 2-D [B, n]; got shape {tuple(targets.shape)}{hint}")
        if targets.shape[0] < 1 or targets.shape[1] < 1:
            raise ValueError(f"targets must be non-empty (B >= 1 strings of n >= 1 tokens); "
                             f"got shape {tuple(targets.shape)}")
        return list(targets.detach().cpu().unbind(0))
    if isinstance(targets, (str, bytes)) or not isinstance(targets, (list, tuple)):
        raise ValueError("targets must be a torch.LongTensor of shape [B, n] or a list of token-id sequences; "
                         f"got {type(targets).__name__}")
    if not targets:
        raise ValueError("targets must be non-empty (at least one string); got an empty list")
    out = []
    for i, t in enumerate(targets):
        ids = token_ids(t, f"targets[{i}]")
        if not ids:
            raise ValueError(f"targets[{i}] must hold at least one token id; got an empty sequence")
        out.append(torch.tensor(ids, dtype=torch.long))
    return out


def _check_target(model, ids, m, prefix, first_token_as_input, where="targets") -> None:
    V = facts.shared_vocab_size(model)
    n = int(ids.numel())
    if first_token_as_input and n < 2:
        raise ValueError(f"{where} must have n >= 2 tokens with first_token_as_input=True; got n={n}")
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0 or hi >= V:
        raise ValueError(f"{where} must be token ids in 0..{V - 1}; got ids outside the vocabulary "
                         f"(min {lo}, max {hi})")
    L = len(prefix) + m + n - 1
    ctx = facts.max_context(model)
    if ctx is not None and L > ctx:
        raise ValueError(f"prefix + m + n - 1 must be <= the model's context {ctx}; got "
                         f"{len(prefix)} + {m} + {n - 1} = {L}")


def default_batch_size(model, max_len: int = 64) -> int:
    """How many strings :func:`cram` keeps active at once when ``batch_size`` is None.

    CPU: 64, measured on this project's 2-core CPU (benchmarks/cramming_throughput.py --quick
    --strings 16 --batch-sizes 8 16 32 64, tiny-d32-v257, 64 natural-text strings, paper protocol
    capped at 300 steps, one thread): 96, 141, 426 and 544 strings per minute at batch sizes 8, 16,
    32 and 64 (the same 38/64 solved at every size): a small model's step costs little more for
    more rows. CUDA: what a quarter of the free memory holds, from an estimate of the bytes one
    string of ``max_len`` positions needs (activations of every layer plus the fp32 logits, twice
    for backward),
    between 16 and 4096."""
    p = next(model.parameters())
    if p.device.type != "cuda":
        return 64
    cfg = model.config
    cfg = getattr(cfg, "get_text_config", lambda: cfg)()
    d = int(getattr(cfg, "hidden_size", 0) or getattr(cfg, "d_model", 0) or 1024)
    layers = int(getattr(cfg, "num_hidden_layers", 0) or getattr(cfg, "n_layer", 0) or 24)
    V = int(model.get_output_embeddings().weight.shape[0]) if model.get_output_embeddings() is not None else 50000
    per_row = max_len * (layers * d * 40 * p.element_size() + V * 4 * 3)
    free, _ = torch.cuda.mem_get_info(p.device)
    return int(min(4096, max(16, free // 4 // max(1, per_row))))


#: Elements of fp32 logits one forward pass may hold ([rows, kept positions, |V|]); more rows are
#: run in several passes (rows never interact, so the gradients are the same).
LOGITS_BUDGET = 1 << 26

#: Models with at least this many parameters run their rows in passes of one length each (shortest
#: first), every pass cut to its own length: a real model's step costs about rows x positions, so a
#: batch of mixed lengths padded to the longest wastes that much (lengths 12..32: a third). Smaller
#: models are bound by per-pass overhead instead and keep one pass.
BUCKET_MIN_PARAMS = 20_000_000


class _Row:
    """One string's place in the queue and, once active, its optimisation state."""
    __slots__ = ("index", "ids", "m", "tag", "init", "key", "resume", "resumed_at", "acc_history", "extended",
                 "ran_on", "went_on")

    def __init__(self, index, ids, m, tag, init, key=None, resume=None):
        self.index, self.ids, self.m, self.tag, self.init = index, ids, m, tag, init
        self.key, self.resume = key, resume
        self.resumed_at = int(resume["step"]) if resume else 0
        self.extended = bool(resume and resume.get("extended"))
        # StringResult.accuracy_history so far (a kept state from before it was recorded: unknown)
        self.acc_history = []
        if resume:
            kept = resume.get("acc_history")
            self.acc_history = None if kept is None else [list(p) for p in kept]
        # StringResult.ran_on so far (a kept state from before it was recorded: from its step on)
        self.ran_on = [dict(s) for s in (resume.get("ran_on") or [])] if resume else []
        # (step, Unix time) at which this session took the string on: its pace is counted from here
        self.went_on = None


#: the engine's own sources: a change in any of them may change the order of a step's sums
_ENGINE_SOURCES = ("cramming.py", "lean.py", "decoding.py")


@functools.cache
def engine_code() -> str:
    """12 hex digits of SHA-256 of the engine's sources (:data:`_ENGINE_SOURCES`), read once: the
    code a string's steps ran (StringResult.ran_on), since another version of it may sum otherwise."""
    from pathlib import Path

    here = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for name in _ENGINE_SOURCES:
        h.update((here / name).read_bytes())
    return h.hexdigest()[:12]


#: what a kept state must match to be resumed: everything that shapes a string's trajectory
_TRAJECTORY = ("lr", "b1", "b2", "wd", "max_steps", "patience", "patience_on", "seed", "std", "eps",
               "prefix", "first", "verify")


class CramSession:
    """The continuous-batching cramming engine behind :func:`cram` (see the module docstring).

    Strings are queued with :meth:`submit` (any length, any m; from any thread) and optimised by
    :meth:`run`: at most ``batch_size`` strings are active at once; when strings finish, queued
    ones take their rows at the next step. Each active string keeps its own memory, AdamW moments,
    step count (its learning-rate schedule and bias correction follow its own steps), best loss
    and patience clock, so its result does not depend on its batch-mates or on when it joined.
    Rows of different lengths (and m) are right-padded; the padded positions come after every
    predicted position of the row and a causal LM never lets them act on earlier positions, and
    their labels are masked, so padding changes no row's loss.

    The loss and its gradient are computed in passes of at most ``rows_per_pass`` rows (default:
    as many as keep the fp32 logits under ``LOGITS_BUDGET`` elements). An out-of-memory error
    halves ``rows_per_pass`` and repeats the step (nothing was updated yet); at one row it is
    raised with a message saying so. It is never swallowed.

    ``hold(step, accuracy_history) -> bool`` (with a ``checkpoint``): after each step, and on
    submit for a string resumed from a kept state, a keyed string still being crammed for which it
    says True is set aside unfinished: its state is kept in the checkpoint as an interrupted run
    keeps it, no result is recorded, its tag's ``held()`` is called, and the run goes on with the
    others (``held`` counts them). A run again without ``hold`` goes on from those states exactly.
    So a run with a large budget can first decide a smaller one (the curves' ``hold_at``).
    """

    def __init__(self, model, *, prefix_ids=None, first_token_as_input=False, lr=1e-2, betas=(0.9, 0.9),
                 weight_decay=0.01, max_steps=3000, patience=500, schedule=None, seed=0,
                 autocast_dtype=None, init_std=None, on_step=None, on_string=None, stop=None,
                 verify=True, eps=1e-8, batch_size=None, rows_per_pass=None, profile=False,
                 patience_on="loss", lean=True, checkpoint=None, checkpoint_every=60.0, init_scale="inputs",
                 keep_final=False, hold=None):
        model = hf_model(model)
        check_token_ids("prefix_ids", prefix_ids)   # a str is not a list of ids ('12' is not [1, 2])
        prefix = token_ids(prefix_ids, "prefix_ids")
        _validate_settings(model, 1, prefix, lr, betas, weight_decay, max_steps, patience, schedule, stop,
                           seed, init_std, eps, on_step, on_string, batch_size, rows_per_pass, patience_on,
                           init_scale)
        self.init_scale = init_scale
        self.patience_on = patience_on
        self.model, self.prefix = model, prefix
        self.first = bool(first_token_as_input)
        self.lr, self.b1, self.b2 = float(lr), float(betas[0]), float(betas[1])
        self.wd, self.max_steps, self.patience = float(weight_decay), int(max_steps), int(patience)
        self.schedule, self.seed, self.eps = schedule, int(seed), float(eps)
        self.ac_dtype = as_autocast_dtype(autocast_dtype)
        self.on_step, self.on_string, self.stop, self.verify = on_step, on_string, stop, bool(verify)
        self.profile = bool(profile)
        p0 = next(model.parameters())
        self.dev, self.mdt = p0.device, p0.dtype
        self.emb = model.get_input_embeddings()
        self.d = int(self.emb.weight.shape[1])
        self.std = float(init_std) if init_std is not None else init_std_of(model, init_scale)
        self.opts = forward_options(model)
        # the lean forward (bit-identical logits, less overhead) where it applies; see engine/lean.py
        self.fwd = lean_forward(model) if lean and self.ac_dtype is None else None
        self.batch_size = batch_size
        self.rows_per_pass = rows_per_pass
        self.bucket = sum(p.numel() for p in model.parameters()) >= BUCKET_MIN_PARAMS
        head = model.get_output_embeddings()
        self.V = int(head.weight.shape[0]) if head is not None else facts.vocab_size(model)
        self.extra_settings: dict = {}
        self._cap = None
        self.queue: list[_Row] = []
        self.results: dict[int, StringResult] = {}
        self.lock = threading.Condition()
        self.next_index = 0
        self.steps_run = self.row_steps = self.oom_retries = 0
        self.timings = dict(forward=0.0, backward=0.0, update=0.0, checks=0.0, greedy=0.0, syncs=0)
        self.interrupted = False
        self._state = None
        self.t0 = time.perf_counter()
        if checkpoint is not None and not all(callable(getattr(checkpoint, f, None)) for f in
                                              ("save_inflight", "load_inflight", "drop_inflight")):
            fail_short("checkpoint", "None or a results store (save_inflight, load_inflight, drop_inflight)",
                       checkpoint)
        if not (isinstance(checkpoint_every, (int, float)) and checkpoint_every >= 0):
            fail_short("checkpoint_every", "seconds >= 0 between saves of the strings being crammed",
                       checkpoint_every)
        self.checkpoint, self.checkpoint_every = checkpoint, float(checkpoint_every)
        self._saved_keys: set[str] = set()
        self._mid_step = False
        self._last_save = time.monotonic()
        self.resumed = 0
        self.keep_final = bool(keep_final)   # keep the state each keyed string finished in (checkpoint)
        if hold is not None and not callable(hold):
            fail_short("hold", "None or a callable (step, accuracy history) -> bool", hold)
        if hold is not None and checkpoint is None:
            fail_short("hold", "None without a checkpoint (a held string's state is kept there)", "a callable")
        self.hold = hold
        self.held = 0       # strings set aside unfinished by hold, their states in the checkpoint
        self.extended = 0   # strings that went on from where a smaller budget left them
        self._schedule_before: dict = {}
        self._env: dict | None = None   # what the steps run on now (_env_now)
        with torch.no_grad():
            self.pre = (self.emb(torch.tensor(prefix, device=self.dev)[None]) if prefix else None)

    # -- queue ------------------------------------------------------------------------------
    def submit(self, ids, m, *, tag=None, where="targets", key: str | None = None,
               extend: str | None = None) -> int:
        """Queue one target (a sequence of token ids) for m memory vectors; returns its index.
        ``where`` names the target in an error message. ``key`` (with a ``checkpoint``): the
        string's name in it; a state kept under it by an interrupted run with the same settings
        resumes where that run stopped. ``extend``: the name of the same string in a finished run
        with a smaller step budget or patience and otherwise the same settings (constant learning
        rate only); where that run kept the state the string finished in (:meth:`_extended`), the
        string goes on from it, exactly as if this run had crammed it from the start."""
        if not (isinstance(ids, torch.Tensor) and ids.dim() == 1 and ids.dtype == torch.long and ids.numel()):
            ids = _target_list([ids])[0]      # a row of a checked LongTensor is used as it is
        m = check_int("m", m, 1)
        _check_target(self.model, ids, m, self.prefix, self.first, where)
        g = torch.Generator().manual_seed(string_seed(self.seed, ids.tolist()))
        init = torch.randn(m, self.d, generator=g) * self.std
        resume = self._kept(key, ids, m) if key is not None and self.checkpoint is not None else None
        if resume is None and extend is not None and self.checkpoint is not None:
            resume = self._extended(extend, ids, m)
        with self.lock:
            idx = self.next_index
            self.next_index += 1
            row = _Row(idx, ids, m, tag, init, key, resume)
            # a kept state that hold sets aside already: it stays as it is (an extended one is a
            # finished run's, not kept in flight: it is crammed on)
            if resume is not None and not row.extended and self._holds(int(resume["step"]), row.acc_history):
                self.held += 1
                self._saved_keys.discard(key)
            else:
                self.queue.append(row)
                self.lock.notify_all()
                return idx
        if tag is not None and hasattr(tag, "held"):
            tag.held()
        return idx

    def _holds(self, step: int, history) -> bool:
        return self.hold is not None and bool(self.hold(step, history))

    def settings(self) -> dict:
        schedule = self.schedule
        return dict(prefix_ids=self.prefix, first_token_as_input=self.first, lr=self.lr,
                    betas=[self.b1, self.b2], weight_decay=self.wd, max_steps=self.max_steps,
                    patience=self.patience, patience_on=self.patience_on,
                    schedule=schedule if not callable(schedule) else getattr(schedule, "__name__", "callable"),
                    seed=self.seed,
                    autocast_dtype=None if self.ac_dtype is None else str(self.ac_dtype).replace("torch.", ""),
                    init_std=self.std, init_scale=self.init_scale,
                    init="normal*init_std, generator seeded by sha256(seed, target ids)",
                    verify=self.verify, eps=self.eps, success="greedy" if self.verify else "teacher-forced",
                    model_dtype=str(self.mdt).replace("torch.", ""), device=str(self.dev),
                    batch_size=self.batch_size, engine="continuous batching",
                    forward="transformers" if self.fwd is None else "lean gpt_neox")

    # -- the active rows --------------------------------------------------------------------
    def _admit(self, rows: list[_Row]):
        """Add queued rows to the active state (tensors re-padded to the new widest row)."""
        st = self._state
        dev = self.dev
        old = [] if st is None else st["rows"]
        allrows = old + rows
        M = max(r.m for r in allrows)
        k = len(rows)
        new = {key: torch.zeros(k, M, self.d) for key in ("memory", "exp_avg", "exp_avg_sq")}
        fresh = dict(best=float("inf"), best_acc=-1.0, best_step=0, tf_seen=False, step=0, next_check=0,
                     backoff=1)
        per_row = {key: [] for key in fresh}
        for j, r in enumerate(rows):
            kept = r.resume or {}
            new["memory"][j, :r.m] = kept["memory"] if kept else r.init
            if kept:
                new["exp_avg"][j, :r.m] = kept["exp_avg"]
                new["exp_avg_sq"][j, :r.m] = kept["exp_avg_sq"]
            for key, v in fresh.items():
                per_row[key].append(kept.get(key, v))
        new = {key: t.to(dev) for key, t in new.items()}
        scalars = dict(best=torch.tensor(per_row["best"], device=dev),
                       best_acc=torch.tensor(per_row["best_acc"], device=dev),
                       best_step=torch.tensor(per_row["best_step"], dtype=torch.long, device=dev),
                       tf_seen=torch.tensor(per_row["tf_seen"], dtype=torch.bool, device=dev))
        if st is None:
            st = dict(new, **scalars, step=per_row["step"], next_check=per_row["next_check"],
                      backoff=per_row["backoff"])
        else:
            def pad(t):
                if t.shape[1] < M:
                    t = torch.cat([t, t.new_zeros(t.shape[0], M - t.shape[1], self.d)], 1)
                return t
            for key, t in new.items():
                st[key] = torch.cat([pad(st[key]), t])
            for key, t in scalars.items():
                st[key] = torch.cat([st[key], t])
            for key in ("step", "next_check", "backoff"):
                st[key] += per_row[key]
        self._note_environment(rows, per_row["step"])
        now = time.time()
        for r, step in zip(rows, per_row["step"]):
            r.went_on = (int(step), now)
            self.resumed += r.resume is not None
            self.extended += r.extended
            r.init = r.resume = None
        st["rows"] = allrows
        self._state = st
        self._layout()

    def _environment(self) -> dict:
        """What a step's float sums depend on besides the strings: the processor (name, family /
        model / stepping, the kernels torch picks for it), torch's thread count and version, the
        device, transformers' version (its forward, where the lean one does not run) and the
        engine's code (:func:`engine_code`) (StringResult.ran_on)."""
        dev = self.dev
        device = torch.cuda.get_device_name(dev) if dev.type == "cuda" else dev.type
        import transformers

        return dict(cpu=cpu_name(), cpu_id=cpu_id(), kernels=cpu_kernels(), threads=torch.get_num_threads(),
                    torch=str(torch.__version__), device=device, transformers=str(transformers.__version__),
                    engine=engine_code())

    def _env_now(self) -> dict:
        """:meth:`_environment`, read once per session and again when torch's thread count changes
        (the one part that can change within a process, set by a caller between two steps)."""
        if self._env is None or self._env["threads"] != torch.get_num_threads():
            self._env = self._environment()
        return self._env

    def _note_environment(self, rows, steps):
        """Start a new stretch of ``ran_on`` at its step for each row whose last one ran elsewhere."""
        env = self._env_now()
        for r, step in zip(rows, steps):
            last = r.ran_on[-1] if r.ran_on else None
            if last is None or {k: v for k, v in last.items() if k != "from"} != env:
                r.ran_on.append({"from": int(step), **env})

    def _keep(self, keep: list[int]):
        st = self._state
        if not keep:
            self._state = None
            return
        if len(keep) == len(st["rows"]):
            return
        ki = torch.tensor(keep, device=self.dev)
        for key in ("memory", "exp_avg", "exp_avg_sq", "best", "best_acc", "best_step", "tf_seen"):
            st[key] = st[key][ki]
        for key in ("step", "next_check", "backoff", "rows"):
            st[key] = [st[key][i] for i in keep]
        M = max(r.m for r in st["rows"])
        if M < st["memory"].shape[1]:
            for key in ("memory", "exp_avg", "exp_avg_sq"):
                st[key] = st[key][:, :M].contiguous()
        self._layout()

    def _layout(self):
        """Index tensors of the padded batch: where each row's memory and target inputs sit, which
        kept logit positions predict which labels (-100: padding)."""
        st, dev = self._state, self.dev
        rows = st["rows"]
        p, g = len(self.prefix), (1 if self.first else 0)
        M = st["memory"].shape[1]
        n_in = [int(r.ids.numel()) - 1 for r in rows]           # target tokens that are inputs
        N = max(max(n_in), 1)
        L = p + max(r.m + k for r, k in zip(rows, n_in))
        b = len(rows)
        tin_ids = torch.zeros(b, N, dtype=torch.long)
        for j, r in enumerate(rows):
            tin_ids[j, :n_in[j]] = r.ids[:-1]
        # pool = [prefix p][memory M][target inputs N]; position pos of row j reads pool[idx[j, pos]]
        pos = torch.arange(L)[None].expand(b, -1)
        mrow = torch.tensor([r.m for r in rows])[:, None]
        idx = torch.where(pos < p + mrow, pos, pos + (M - mrow)).clamp(max=p + M + N - 1)
        starts = [p + r.m - 1 + g for r in rows]                # position predicting the first label
        s0 = min(starts)
        K = L - s0
        labels = torch.full((b, K), -100, dtype=torch.long)
        for j, r in enumerate(rows):
            lab = r.ids[g:]
            labels[j, starts[j] - s0: starts[j] - s0 + lab.numel()] = lab
        with torch.no_grad():
            st["tin"] = self.emb(tin_ids.to(dev))
        st["idx"] = idx.to(dev)
        st["labels"] = labels.to(dev)
        st["n_pred"] = torch.tensor([r.ids.numel() - g for r in rows], device=dev)
        st["given"] = torch.stack([r.ids[:g] for r in rows]).to(dev)
        st["K"], st["L"] = K, L
        st["row_len"] = [p + r.m + k for r, k in zip(rows, n_in)]   # each row's own input length
        # one m for every row: the pool is already the input sequence (no gather, no scatter back)
        st["uniform"] = all(r.m == M for r in rows) and p + M + N == L

    # -- one step ---------------------------------------------------------------------------
    def _passes(self, b: int, K: int) -> int:
        """Rows per forward pass: ``rows_per_pass`` when set, else as many as keep the logits of
        K positions under LOGITS_BUDGET elements."""
        if self.rows_per_pass is not None:
            return max(1, min(b, self.rows_per_pass))
        return max(1, min(b, LOGITS_BUDGET // max(1, K * self.V)))

    def _sync(self):
        if self.profile and self.dev.type == "cuda":
            torch.cuda.synchronize(self.dev)

    def _pass_rows(self, b: int, chunk: int) -> list:
        """The rows of each forward pass: slices of ``chunk`` rows, or for a large model (``bucket``)
        index lists of rows of one input length each (shortest first), split by ``chunk``."""
        st = self._state
        lens = st["row_len"]
        if not self.bucket or len(set(lens)) == 1:
            return [slice(lo, lo + chunk) for lo in range(0, b, chunk)]
        groups: dict[int, list[int]] = {}
        for j in range(b):
            groups.setdefault(lens[j], []).append(j)
        return [rows[lo:lo + chunk] for _, rows in sorted(groups.items()) for lo in range(0, len(rows), chunk)]

    def _forward_backward(self, want_grad: bool):
        """Losses, accuracies and gradients of every active row, in passes of ``rows_per_pass`` rows
        (:meth:`_pass_rows`; a pass of shorter rows is cut to their length: the cut positions are
        padding after every position they predict, which a causal LM never lets act on them)."""
        st = self._state
        b = len(st["rows"])
        chunk = self._passes(b, st["K"])
        passes = self._pass_rows(b, chunk)
        s0 = st["L"] - st["K"]                     # the first position whose logits are kept
        losses, correct_counts, grads = [], [], []
        for sel in passes:
            t = time.perf_counter()
            if not isinstance(sel, slice):
                Lp = max(st["row_len"][j] for j in sel)
                sel = torch.tensor(sel, device=self.dev)
            else:
                Lp = st["L"]
            Kp = Lp - s0
            mem = st["memory"][sel].detach().requires_grad_(want_grad)
            c = mem.shape[0]
            parts = [] if self.pre is None else [self.pre.expand(c, -1, -1)]
            pool = torch.cat(parts + [mem.to(self.mdt), st["tin"][sel]], 1)
            x = pool if st["uniform"] else pool.gather(1, st["idx"][sel, :, None].expand(-1, -1, self.d))
            if Lp < st["L"]:
                x = x[:, :Lp]
            if self.fwd is not None:
                logits = self.fwd(x, Kp)
            else:
                kw = {"inputs_embeds": x, "use_cache": False}
                if self.opts["logits_to_keep"]:
                    kw["logits_to_keep"] = Kp
                with autocast(self.dev, self.ac_dtype), contiguous_head(self.model):
                    logits = self.model(**kw).logits[:, -Kp:]
            labels = st["labels"][sel][:, :Kp]
            lf = logits.float()
            V = lf.shape[-1]
            ce = F.cross_entropy(lf.reshape(-1, V), labels.reshape(-1), reduction="none",
                                 ignore_index=-100).view(c, -1)           # no transposed copy
            loss_rows = ce.sum(1) / st["n_pred"][sel]
            with torch.no_grad():
                ok = (lf.argmax(-1) == labels) & (labels >= 0)
                correct_counts.append(ok.sum(1))
            self._sync()
            self.timings["forward"] += time.perf_counter() - t
            t = time.perf_counter()
            if want_grad:
                grads.append(torch.autograd.grad(loss_rows.sum(), mem)[0])
            self._sync()
            self.timings["backward"] += time.perf_counter() - t
            losses.append(loss_rows.detach())
            del logits, lf, ce, x, pool, mem, loss_rows
        out = [torch.cat(losses), torch.cat(correct_counts), torch.cat(grads) if want_grad else None]
        if not isinstance(passes[0], slice):      # back to the rows' own order
            inv = torch.empty(b, dtype=torch.long)
            inv[torch.tensor([j for p in passes for j in p])] = torch.arange(b)
            inv = inv.to(self.dev)
            out = [None if t is None else t[inv] for t in out]
        return tuple(out)

    def _greedy(self, rows: list[int], mem) -> torch.Tensor:
        """Greedy ids [len(rows), longest predicted length] after each row's own m memory vectors
        (rows grouped by m)."""
        st = self._state
        gq = 1 if self.first else 0
        n = max(int(st["rows"][r].ids.numel()) - gq for r in rows)
        out = torch.zeros(len(rows), n, dtype=torch.long)
        t = time.perf_counter()
        for m in sorted({st["rows"][r].m for r in rows}):
            js = [j for j, r in enumerate(rows) if st["rows"][r].m == m]
            ri = torch.tensor([rows[j] for j in js], device=self.dev)
            while True:
                try:
                    if self.fwd is not None:      # the lean forward, re-run per token (no cache)
                        g = lean_greedy(self.fwd, self.emb, self.pre, mem[ri, :m].to(self.mdt), st["given"][ri],
                                        n, batch=self._passes(len(js), 1)).cpu()
                    else:
                        g = greedy(self.model, mem[ri, :m], n, prefix_ids=self.prefix, given_ids=st["given"][ri],
                                   autocast_dtype=self.ac_dtype, batch=self._passes(len(js), 1)).cpu()
                    break
                except torch.OutOfMemoryError:
                    self._halve()
            out[js] = g
        self.timings["greedy"] += time.perf_counter() - t
        return out

    def _halve(self):
        b = len(self._state["rows"]) if self._state is not None else 1
        cur = self.rows_per_pass or self._passes(b, self._state["K"] if self._state else 1)
        if cur <= 1:
            raise torch.OutOfMemoryError(
                "out of memory with one string per forward pass: use a smaller model, a shorter target "
                "or a lower precision (dtype='bfloat16')")
        self.rows_per_pass = max(1, cur // 2)
        self.oom_retries += 1
        if self.dev.type == "cuda":
            torch.cuda.empty_cache()

    def _greedy_for(self, rows: list[int], mem):
        """Greedy ids of `rows` (local indices), each cut to its own predicted length."""
        if not rows:
            return {}
        g = self._greedy(rows, mem)
        st = self._state
        gq = 1 if self.first else 0
        return {r: g[j, :int(st["rows"][r].ids.numel()) - gq] for j, r in enumerate(rows)}

    def _step(self):
        st = self._state
        b = len(st["rows"])
        if torch.get_num_threads() != self._env["threads"]:   # set by the caller between two steps
            self._note_environment(st["rows"], st["step"])
        while True:
            try:
                lv, ncorrect, grad = self._forward_backward(want_grad=True)
                break
            except torch.OutOfMemoryError:
                self._halve()
        self.steps_run += 1
        self.row_steps += b
        t = time.perf_counter()
        steps = torch.tensor(st["step"], device=self.dev)
        n_pred = st["n_pred"]
        with torch.no_grad():
            tf_ok = ncorrect == n_pred
            acc = ncorrect.float() / n_pred
            finite = torch.isfinite(lv)
            improved = finite & (lv < st["best"])
            st["best"] = torch.where(improved, lv, st["best"])
            better_acc = finite & (acc > st["best_acc"])   # kept for every protocol (progress)
            st["best_acc"] = torch.where(better_acc, acc, st["best_acc"])
            if self.patience_on == "accuracy":
                improved = better_acc
            st["best_step"] = torch.where(improved, steps, st["best_step"])
            st["tf_seen"] |= tf_ok & finite
            stale = (steps - st["best_step"]) >= self.patience
            maxed = steps >= self.max_steps
            check_ready = torch.tensor(st["next_check"], device=self.dev) <= steps
            cand = tf_ok & finite & (check_ready | stale | maxed)
            event = cand | ~finite | stale | maxed | better_acc   # better_acc: for accuracy_history
            # one host-device synchronisation per step: is anything to decide?
            any_event = bool(event.any())
            self.timings["syncs"] += 1
        reasons: dict[int, str | None] = {}
        decoded: dict[int, torch.Tensor] = {}
        self._schedule_before = {}
        if any_event:
            flags = torch.stack([cand, finite, stale, maxed, better_acc, check_ready]).cpu()
            rose = flags[4].nonzero().flatten().tolist()
            if rose:
                acc_h = acc.cpu()
                for r in rose:
                    hist = st["rows"][r].acc_history
                    if hist is not None:
                        hist.append([int(st["step"][r]), round(float(acc_h[r]), 6)])
            cand_l = flags[0].nonzero().flatten().tolist()
            # a check that only the patience or the step budget called (not due yet): a run with a
            # larger budget would not make it, so the state a string finishes in keeps the verify
            # schedule from before it (:meth:`_final_states`)
            self._schedule_before = {r: (st["next_check"][r], st["backoff"][r]) for r in cand_l if not flags[5][r]}
            if cand_l:
                mem = st["memory"]
                if self.verify:
                    got = self._greedy_for(cand_l, mem)
                    for r in cand_l:
                        lab = st["rows"][r].ids[1 if self.first else 0:]
                        if torch.equal(got[r], lab):
                            reasons[r] = None
                            decoded[r] = got[r]
                        else:     # teacher-forced but not greedy: look again later, less often
                            st["next_check"][r] = st["step"][r] + st["backoff"][r]
                            st["backoff"][r] = min(64, 2 * st["backoff"][r])
                else:
                    for r in cand_l:
                        reasons[r] = None
            for r in (~flags[1]).nonzero().flatten().tolist():
                reasons[r] = "non-finite loss"
            for r in (flags[2] & flags[1]).nonzero().flatten().tolist():
                reasons.setdefault(r, "patience")
            for r in flags[3].nonzero().flatten().tolist():
                reasons.setdefault(r, "max_steps")
        self.timings["checks"] += time.perf_counter() - t

        if self.on_step is not None:
            ok_done = sum(1 for v in self.results.values() if v.success)
            self.on_step(StepInfo(step=max(st["step"]), active=[r.index for r in st["rows"]], losses=lv.tolist(),
                                  best_losses=st["best"].tolist(), elapsed=time.perf_counter() - self.t0,
                                  n_total=self.next_index, n_done=len(self.results), n_success=ok_done,
                                  lr=self.lr * lr_factor(self.schedule, max(st["step"]), self.max_steps)))
        if reasons:
            self._finish(reasons, decoded, lv, acc)
        keep = [j for j in range(b) if j not in reasons]
        if keep:
            t = time.perf_counter()
            if len(keep) < b:
                grad = grad[torch.tensor(keep, device=self.dev)]
            self._keep(keep)
            self._update(grad[:, :self._state["memory"].shape[1]])
            self._sync()
            self.timings["update"] += time.perf_counter() - t
            if self.hold is not None:
                self._hold_rows()
        else:
            self._state = None

    def _hold_rows(self):
        """Set aside the keyed rows ``hold`` says are held after this step: keep their states in the
        checkpoint (one transaction) and go on without them."""
        st = self._state
        held = [j for j, r in enumerate(st["rows"]) if r.key is not None and self._holds(st["step"][j], r.acc_history)]
        if not held:
            return
        fp = self._fingerprint()
        self.checkpoint.save_inflight({st["rows"][j].key: self._state_bytes(j, fp) for j in held})
        rows = [st["rows"][j] for j in held]
        gone = set(held)
        self._keep([j for j in range(len(st["rows"])) if j not in gone])
        self.held += len(held)
        for r in rows:
            self._saved_keys.discard(r.key)
            if r.tag is not None and hasattr(r.tag, "held"):
                r.tag.held()

    def _update(self, grad):
        """AdamW (decoupled weight decay; torch.optim.AdamW's update rule), per row and element, each
        row at its own step count."""
        st = self._state
        b1, b2 = self.b1, self.b2
        lr_t, step_size, bc2_sqrt = [], [], []
        for s in st["step"]:
            t = s + 1
            lr_s = self.lr * lr_factor(self.schedule, s, self.max_steps)
            lr_t.append(1 - lr_s * self.wd)
            step_size.append(-lr_s / (1 - b1 ** t))
            bc2_sqrt.append(math.sqrt(1 - b2 ** t))
        shape = (-1, 1, 1)
        decay = torch.tensor(lr_t, device=self.dev).view(shape)
        size = torch.tensor(step_size, device=self.dev).view(shape)
        bc2 = torch.tensor(bc2_sqrt, device=self.dev).view(shape)
        with torch.no_grad():
            mem, ea, eas = st["memory"], st["exp_avg"], st["exp_avg_sq"]
            mem.mul_(decay)
            ea.lerp_(grad, 1 - b1)
            eas.mul_(b2).addcmul_(grad, grad, value=1 - b2)
            denom = (eas.sqrt() / bc2).add_(self.eps)
            mem.add_(size * ea / denom)
        st["step"] = [s + 1 for s in st["step"]]

    def _finish(self, reasons, decoded, lv, acc):
        st = self._state
        mem = st["memory"]
        if self.verify:
            need = [r for r, why in reasons.items() if why is not None and why != "non-finite loss"]
            decoded.update(self._greedy_for(need, mem))
        gq = 1 if self.first else 0
        for r in sorted(reasons):
            row = st["rows"][r]
            want = row.ids[gq:]
            if r in decoded:
                gids = decoded[r]
                gacc = float((gids == want).float().mean())
                gl = [int(t) for t in gids.tolist()]
            else:
                gacc, gl = (float("nan") if not self.verify else 0.0), []
            res = StringResult(
                index=row.index, target_ids=[int(t) for t in row.ids.tolist()],
                success=reasons[r] is None, tf_success=bool(st["tf_seen"][r]), steps=int(st["step"][r]),
                final_loss=float(lv[r]), token_accuracy=float(acc[r]), greedy_accuracy=gacc, greedy_ids=gl,
                memory=mem[r, :row.m].detach().float().cpu().clone(), prefix_ids=list(self.prefix),
                first_token_as_input=self.first, reason=reasons[r], best_loss=float(st["best"][r]),
                resumed_at=row.resumed_at, accuracy_history=row.acc_history, extended=row.extended,
                ran_on=[dict(e) for e in row.ran_on])
            self.results[row.index] = res
            if self.on_string is not None:
                self.on_string(res)
            if row.tag is not None and hasattr(row.tag, "done"):
                row.tag.done(res)
            if row.key in self._saved_keys:   # finished (and stored by its tag): nothing to resume
                self.checkpoint.drop_inflight([row.key])
                self._saved_keys.discard(row.key)
        self._final_states(reasons)

    def _final_states(self, reasons):
        """With ``keep_final``, keep in a checkpoint that can (``save_final``) the state each
        finished keyed string was in at the start of this step, before anything only its stop did: a run with a larger
        budget redoes this step from it and goes on exactly as a fresh run would (:meth:`_extended`)."""
        save = getattr(self.checkpoint, "save_final", None)
        if not self.keep_final or not callable(save) or self.schedule not in (None, "constant"):
            return   # (a schedule follows the step budget: never gone on from)
        st = self._state
        fp = self._fingerprint()
        states = {}
        for r in sorted(reasons):
            row = st["rows"][r]
            if row.key is None:
                continue
            nc, bo = self._schedule_before.get(r, (st["next_check"][r], st["backoff"][r]))
            kept = self._state_of(r, fp, next_check=nc, backoff=bo)
            buf = io.BytesIO()
            torch.save(kept, buf)
            states[row.key] = (buf.getvalue(), kept["step"])
        save(states)

    # -- the loop ---------------------------------------------------------------------------
    def run(self, *, wait=None) -> None:
        """Optimise until the queue is empty and no string is active. ``wait()``, when given, says
        whether more strings may still be submitted (by other threads): the loop then waits for them
        instead of returning."""
        try:
            self._loop(wait)
        finally:   # stopped, failed or done: keep the strings still being crammed (unless a step
            # was cut off halfway: then the last kept state stands)
            if self.checkpoint is not None and self._state is not None and not self._mid_step:
                self._save_checkpoint()

    def _loop(self, wait) -> None:
        with _frozen(self.model), torch.enable_grad():
            while True:
                if self.checkpoint is not None and self._state is not None and \
                        time.monotonic() - self._last_save >= self.checkpoint_every:
                    self._save_checkpoint()
                if _stopped(self.stop):
                    self.interrupted = True
                    break
                with self.lock:
                    active = 0 if self._state is None else len(self._state["rows"])
                    if self._cap is None:
                        self._cap = self.batch_size or default_batch_size(self.model, self._max_len())
                    cap = self._cap
                    room = max(0, cap - active)
                    take, self.queue = self.queue[:room], self.queue[room:]
                    if not take and active == 0:
                        if wait is not None and wait():
                            self.lock.wait(timeout=0.05)
                            continue
                        break
                self._mid_step = True
                if take:
                    self._admit(take)
                self._step()
                self._mid_step = False

    # -- checkpoints ------------------------------------------------------------------------
    def _fingerprint(self) -> dict:
        """The settings a kept state must share to be resumed, and the model it was crammed on."""
        fp = {k: getattr(self, k) for k in _TRAJECTORY}
        fp["schedule"] = self.schedule if not callable(self.schedule) else None
        fp["dtypes"] = (str(self.mdt), str(self.ac_dtype))
        if not hasattr(self, "_model_fp"):
            w = self.emb.weight.detach().flatten()[:4096].float().cpu().numpy().tobytes()
            cfg = getattr(self.model, "config", None)
            self._model_fp = hashlib.sha256(w + (cfg.to_json_string(use_diff=False).encode()
                                                 if cfg is not None else b"")).hexdigest()
        fp["model"] = self._model_fp
        return fp

    def _save_checkpoint(self) -> None:
        """Keep the state of every active string that has a key (one transaction)."""
        st = self._state
        self._last_save = time.monotonic()
        if callable(self.schedule):    # a callable schedule cannot be compared on resume
            return
        fp = self._fingerprint()
        states = {r.key: self._state_bytes(j, fp) for j, r in enumerate(st["rows"]) if r.key is not None}
        self.checkpoint.save_inflight(states)
        self._saved_keys |= set(states)

    def _state_bytes(self, j: int, fp: dict) -> tuple[bytes, int]:
        """Active row ``j``'s state (:meth:`_state_of`) as the checkpoint keeps it: (bytes, step)."""
        kept = self._state_of(j, fp)
        buf = io.BytesIO()
        torch.save(kept, buf)
        return buf.getvalue(), kept["step"]

    def _state_of(self, j: int, fp: dict, **override) -> dict:
        """Active row ``j``'s whole optimisation state (what :meth:`_admit` resumes from)."""
        st, r = self._state, self._state["rows"][j]
        kept = dict(fingerprint=fp, ids=[int(t) for t in r.ids.tolist()], m=r.m,
                    memory=st["memory"][j, :r.m].detach().float().cpu().clone(),
                    exp_avg=st["exp_avg"][j, :r.m].float().cpu().clone(),
                    exp_avg_sq=st["exp_avg_sq"][j, :r.m].float().cpu().clone(),
                    best=float(st["best"][j]), best_acc=float(st["best_acc"][j]),
                    best_step=int(st["best_step"][j]), tf_seen=bool(st["tf_seen"][j]),
                    step=int(st["step"][j]), next_check=int(st["next_check"][j]),
                    backoff=int(st["backoff"][j]),
                    acc_history=None if r.acc_history is None else [list(p) for p in r.acc_history],
                    extended=r.extended, ran_on=[dict(e) for e in r.ran_on],
                    went_on=None if r.went_on is None else [int(r.went_on[0]), float(r.went_on[1])])
        kept.update({k: int(v) for k, v in override.items()})
        return kept

    def _extended(self, key: str, ids, m: int):
        """The state a finished run with a smaller budget kept for this string under ``key``
        (:meth:`_final_states`), or None: none kept; or kept by a run whose settings differ from
        this run's in more than the step budget and patience, whose step budget or patience is
        larger than this run's, or with a learning-rate schedule (it follows the step budget); or
        for another string or model. Such a state is left where it is (it is the other run's)."""
        load = getattr(self.checkpoint, "load_final", None)
        blob = load(key) if callable(load) else None
        if blob is None or self.schedule not in (None, "constant"):
            return None
        try:
            kept = torch.load(io.BytesIO(blob), weights_only=True)
            theirs, mine = kept["fingerprint"], self._fingerprint()
            ok = (set(theirs) == set(mine)
                  and all(theirs[k] == mine[k] for k in mine if k not in ("max_steps", "patience"))
                  and theirs["max_steps"] <= self.max_steps and theirs["patience"] <= self.patience
                  and kept["ids"] == [int(t) for t in ids.tolist()] and kept["m"] == m
                  and tuple(kept["memory"].shape) == (m, self.d))
        except Exception:   # unreadable: a fresh start, never a wrong one
            ok = False
        if not ok:
            return None
        kept["extended"] = True   # counted when admitted (as resumed strings are)
        return kept

    def _kept(self, key: str, ids, m: int):
        """The state an interrupted run kept under ``key``, or None (none kept, or kept for other
        settings, another model or another string: then it is dropped, not resumed)."""
        blob = self.checkpoint.load_inflight(key)
        if blob is None:
            return None
        try:
            kept = torch.load(io.BytesIO(blob), weights_only=True)
            ok = (kept["fingerprint"] == self._fingerprint() and kept["ids"] == [int(t) for t in ids.tolist()]
                  and kept["m"] == m and tuple(kept["memory"].shape) == (m, self.d))
        except Exception:   # unreadable: a fresh start, never a wrong resume
            ok = False
        if not ok:
            self.checkpoint.drop_inflight([key])
            return None
        self._saved_keys.add(key)
        return kept

    def _max_len(self) -> int:
        rows = self.queue[:64] + ([] if self._state is None else self._state["rows"])
        return len(self.prefix) + max((r.m + int(r.ids.numel()) for r in rows), default=64)

    def result(self, m=None) -> CramResult:
        strings = [self.results[i] for i in sorted(self.results)]
        settings = self.settings()
        settings.update(self.extra_settings)
        return CramResult(strings=strings, m=m, settings=settings, wall_time=time.perf_counter() - self.t0,
                          interrupted=self.interrupted, steps_run=self.steps_run, row_steps=self.row_steps,
                          timings=dict(self.timings), oom_retries=self.oom_retries, resumed=self.resumed,
                          extended=self.extended, held=self.held)


def cram(model, targets, m, *, prefix_ids=None, first_token_as_input=False, lr=1e-2,
         betas=(0.9, 0.9), weight_decay=0.01, max_steps=3000, patience=500, schedule=None,
         seed=0, autocast_dtype=None, init_std=None, on_step: Callable | None = None,
         on_string: Callable | None = None, stop=None, verify=True, eps=1e-8, batch_size=None,
         rows_per_pass=None, profile=False, patience_on="loss", lean=True, checkpoint=None,
         checkpoint_every=60.0, init_scale="inputs", keep_final=False, extend=False) -> CramResult:
    """Cram target strings into m memory vectors each; see the module docstring.

    model: a transformers causal LM (a LoadedModel is unwrapped); its weights are not changed.
    targets: a LongTensor [B, n], or a list of token-id sequences of any lengths (ragged).
    m: memory vectors per string (an int, or one per string).
    prefix_ids: fixed token ids before the memory (e.g. ``default_prefix(model)``), or None.
    first_token_as_input: [A]/[K] convention (t_1 is input, t_2..t_n are predicted).
    lr, betas, weight_decay: AdamW (decoupled decay, torch's update rule), applied per row.
    max_steps, patience: a string stops after max_steps updates, or when its loss (patience_on=
        "loss") or its teacher-forced accuracy ("accuracy", the published rule) has not improved on
        its best for `patience` steps.
    schedule: None | "constant" | "cosine" | "warmup_cosine" | callable(step, max_steps) -> factor.
    seed: with the target ids, seeds each string's initial memory (``string_seed``).
    autocast_dtype: None (model dtype) or "bfloat16"/"float16" autocast (weights stay as they are;
        loading the model in bf16 is cheaper: see accesslib.models.loading.load_model).
    init_std: absolute std of the initial memory; default ``init_std_of(model, init_scale)``.
    init_scale: "inputs" (default) or "weights" ([A]'s code): whether that default includes the
        embedding layer's scale (:data:`INIT_SCALES`; they differ for Gemma only).
    batch_size: at most this many strings active at once (continuous batching: finished strings
        are replaced from the queue); default :func:`default_batch_size`.
    rows_per_pass: at most this many rows per forward/backward pass (default: by LOGITS_BUDGET);
        halved on an out-of-memory error.
    profile: synchronise the GPU around each phase so ``CramResult.timings`` is exact there.
    lean: use the lean forward of :mod:`accesslib.engine.lean` where it applies (small GPT-NeoX
        models without autocast; bit-identical logits, less overhead); False: always the
        transformers forward. ``settings["forward"]`` says which one ran.
    on_step(StepInfo), on_string(StringResult): callbacks; stop: Event or callable -> bool,
        checked before every step; an interrupted run returns what finished (interrupted=True).
    verify: confirm teacher-forced successes by greedy generation (default). With verify=False
        success == tf_success and no greedy decoding is run (for speed measurements only).
    checkpoint: a :class:`accesslib.results.store.ResultsStore` that keeps the
        state of the strings still being crammed every ``checkpoint_every`` seconds and when the
        run stops or fails; the same call again resumes them where they were (same result as an
        uninterrupted run; a state kept for other settings or another model is not used).
    keep_final: with a ``checkpoint`` and a constant learning rate, also keep the state each string
        finished in (a few KB per string and memory vector: a float32 copy of the memory and its
        two AdamW moments), so that a larger budget can go on from it (``extend``).
    extend: with a ``checkpoint``, each target goes on from the state an earlier cram of it with a
        smaller ``max_steps`` or ``patience`` (the same settings otherwise, no schedule) finished it
        in, where the checkpoint keeps one: the result is that of a cram with this budget from the
        start, for the cost of the steps beyond the earlier one (``CramResult.extended`` counts them).
    """
    model = hf_model(model)
    check_token_ids("prefix_ids", prefix_ids)
    prefix = token_ids(prefix_ids, "prefix_ids")
    _validate_settings(model, m, prefix, lr, betas, weight_decay, max_steps, patience, schedule, stop,
                       seed, init_std, eps, on_step, on_string, batch_size, rows_per_pass, patience_on,
                       init_scale)
    tl = _target_list(targets)
    ms = list(m) if isinstance(m, (list, tuple)) else [int(m)] * len(tl)
    if len(ms) != len(tl):
        fail("m", f"an int or a list of {len(tl)} ints (one per target)", m)
    session = CramSession(model, prefix_ids=prefix, first_token_as_input=first_token_as_input, lr=lr,
                          betas=betas, weight_decay=weight_decay, max_steps=max_steps, patience=patience,
                          schedule=schedule, seed=seed, autocast_dtype=autocast_dtype, init_std=init_std,
                          on_step=on_step, on_string=on_string, stop=stop, verify=verify, eps=eps,
                          batch_size=batch_size, rows_per_pass=rows_per_pass, profile=profile,
                          patience_on=patience_on, lean=lean, checkpoint=checkpoint,
                          checkpoint_every=checkpoint_every, init_scale=init_scale, keep_final=keep_final)
    for i, (ids, mi) in enumerate(zip(tl, ms)):    # each target checked here, before anything runs
        key = None if checkpoint is None else "cram:" + hashlib.sha256(
            repr((int(mi), [int(t) for t in ids.tolist()])).encode()).hexdigest()
        session.submit(ids, int(mi), where="targets" if isinstance(targets, torch.Tensor) else f"targets[{i}]",
                       key=key, extend=key if extend else None)
    lens = sorted({int(t.numel()) for t in tl})
    session.extra_settings = dict(m=ms[0] if len(set(ms)) == 1 else ms,
                                  n=lens[0] if len(lens) == 1 else lens, B=len(tl))
    session.run()
    return session.result(m=ms[0] if len(set(ms)) == 1 else ms)


def kept_states(store) -> dict:
    """The strings a cram kept mid-way in ``store``, read from their kept states (needs no model):
    ``{"states": [...], "unreadable": k}``, one dict per readable state with ``key``, ``m``, ``n``
    (target length), ``step`` (steps done), ``best_loss``, ``best_accuracy`` (None where the run
    did not track it), ``ids`` (the target), ``accuracy_history`` ([step, best accuracy] at each
    rise; None where not kept or unreadable), ``ran_on`` (StringResult.ran_on so far; None where
    not kept) and ``went_on`` ((step, Unix time) at which the session that kept it took the string
    on, from a kept state or afresh: the start of its steps' stretch in that process, so its pace is
    (step - that step) over (the time it was kept - that time); None where not kept), ``best_step``
    (the last step its patience measure improved) and its run's ``patience``, ``patience_on`` and
    ``max_steps`` (None where the state does not say); ``unreadable`` counts states that could not
    be read (damaged or foreign: counted, never guessed at)."""
    if not all(callable(getattr(store, name, None)) for name in ("inflight", "load_inflight")):
        fail_short("store", "a results store (inflight, load_inflight)", store)
    states, unreadable = [], 0
    for row in store.inflight():
        try:
            kept = torch.load(io.BytesIO(store.load_inflight(row["key"])), weights_only=True)
            acc = float(kept.get("best_acc", -1.0))
            state = dict(key=row["key"], m=int(kept["m"]), ids=[int(t) for t in kept["ids"]], n=len(kept["ids"]),
                         step=int(kept["step"]), best_loss=float(kept["best"]),
                         best_accuracy=acc if acc >= 0 else None)
        except Exception:
            unreadable += 1
            continue
        try:     # a history that cannot be read is "not kept", the state itself still counts
            state["accuracy_history"] = [[int(a), float(b)] for a, b in kept["acc_history"]]
        except Exception:
            state["accuracy_history"] = None
        ran = kept.get("ran_on")
        state["ran_on"] = [dict(e) for e in ran] if isinstance(ran, list) and ran else None
        try:     # kept before the engine recorded it: None
            state["went_on"] = (int(kept["went_on"][0]), float(kept["went_on"][1]))
        except Exception:
            state["went_on"] = None
        fp = kept.get("fingerprint") if isinstance(kept.get("fingerprint"), dict) else {}
        state["best_step"] = int(kept["best_step"]) if isinstance(kept.get("best_step"), int) else None
        for k, kind in (("patience", int), ("patience_on", str), ("max_steps", int)):
            state[k] = fp[k] if isinstance(fp.get(k), kind) and not isinstance(fp.get(k), bool) else None
        states.append(state)
    return dict(states=states, unreadable=unreadable)


def kept_ends(states: Iterable[Mapping[str, Any]]) -> dict | None:
    """Where the strings kept mid-way end if none of them improves again on its patience measure
    (teacher-forced accuracy, or loss): each at its ``best_step`` plus its ``patience``, or at its
    ``max_steps`` if that comes first, as :class:`CramSession` ends a string whose patience runs
    out. A string that crams ends sooner; one that improves goes on. ``states``: from
    :func:`kept_states`. Returns ``dict(strings, last_step, steps_left, patience, patience_on,
    max_steps)`` (``steps_left``: the steps still to make, summed over the strings; ``patience``,
    ``patience_on`` and ``max_steps``: their distinct values, sorted), or None when no state says its
    patience and best step (kept by an older accesslib; those are left out of the counts)."""
    ends = []
    for k in states:
        if k.get("best_step") is None or k.get("patience") is None:
            continue
        end = k["best_step"] + k["patience"]
        if k.get("max_steps") is not None:
            end = min(end, k["max_steps"])
        ends.append((max(end, k["step"]), k))
    if not ends:
        return None
    return dict(strings=len(ends), last_step=max(e for e, _ in ends),
                steps_left=sum(e - k["step"] for e, k in ends),
                patience=sorted({k["patience"] for _, k in ends}),
                patience_on=sorted({k["patience_on"] for _, k in ends if k.get("patience_on")}),
                max_steps=sorted({k["max_steps"] for _, k in ends if k.get("max_steps") is not None}))


def kept_progress(store) -> dict:
    """Where the strings a cram kept mid-way in ``store`` stand (an interrupted run, or one still
    running): ``{"lengths": [...], "unreadable": k}``, one entry per (m, n) in that order with
    ``m``, ``n``, ``strings``, ``steps`` (min, max), ``best_loss`` (median over the strings of each
    one's best mean cross-entropy so far) and ``best_accuracy`` (each string's best teacher-forced
    token accuracy so far, sorted; strings whose run did not track it are left out of it);
    ``unreadable`` counts states that could not be read (:func:`kept_states`). Needs no model:
    ``accesslib store summary`` prints it under "kept mid-way"."""
    got = kept_states(store)
    groups: dict[tuple[int, int], list[dict]] = {}
    for k in got["states"]:
        groups.setdefault((k["m"], k["n"]), []).append(k)
    lengths = []
    for (m, n), states in sorted(groups.items()):
        steps = [k["step"] for k in states]
        accs = sorted(k["best_accuracy"] for k in states if k["best_accuracy"] is not None)
        lengths.append(dict(m=m, n=n, strings=len(states), steps=(min(steps), max(steps)),
                            best_loss=statistics.median(k["best_loss"] for k in states),
                            best_accuracy=accs))
    return dict(lengths=lengths, unreadable=got["unreadable"])
