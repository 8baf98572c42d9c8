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
of the input embeddings (times the embedding layer's own scale, e.g. sqrt(d) for Gemma), AdamW
lr 1e-2, betas (0.9, 0.9), weight decay 0.01, at most 3000 steps, patience 500. "fast" is ours; the
evidence for it is in ``FAST_EVIDENCE`` below and in benchmarks/cramming_throughput.py.
"""
from __future__ import annotations

import hashlib
import math
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Mapping

import torch
import torch.nn.functional as F

from accesslib._checks import (
    check_callable,
    check_float,
    check_int,
    check_seed,
    check_token_ids,
    fail,
    fail_short,
)
from accesslib.engine.decoding import as_autocast_dtype, autocast, forward_options, greedy, token_ids
from accesslib.models import facts
from accesslib.models.loading import hf_model

#: The one protocol table: every :func:`cram` setting a named protocol fixes.
#: "paper" is [A]'s protocol (docs/paper.md, section 5): AdamW lr 1e-2, betas (0.9, 0.9), weight
#: decay 0.01, <= 3000 steps, patience 500, first target token given as input. "fast" is the
#: engine's faster schedule and predicts every target token from the memory. Successes are
#: greedy-confirmed in both.
PROTOCOLS = {
    # [A] section "cramming", following [K]
    "paper": dict(lr=1e-2, betas=(0.9, 0.9), weight_decay=0.01, max_steps=3000, patience=500,
                  schedule=None, first_token_as_input=True),
    # Measured on tiny random and embedded models: same successes as "paper" in far fewer steps
    # (see FAST_EVIDENCE). A higher peak rate with a short warm-up and cosine decay.
    "fast": dict(lr=5e-2, betas=(0.9, 0.9), weight_decay=0.01, max_steps=1000, patience=200,
                 schedule="warmup_cosine", first_token_as_input=False),
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


@dataclass
class CramResult:
    strings: list            # StringResult in input order; unfinished ones absent when interrupted
    m: int
    settings: dict
    wall_time: float
    interrupted: bool = False
    steps_run: int = 0
    row_steps: int = 0       # sum over steps of the batch size: forward/backward row passes

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


def init_std_of(model) -> float:
    """std of the input-embedding matrix times the embedding layer's scale (docs/paper.md, section 5):
    the spread of what the model actually receives as token inputs."""
    w = model.get_input_embeddings().weight
    return float(w.detach().float().std()) * facts.embed_scale(model)


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


def _logits(model, x, keep: int, opts) -> torch.Tensor:
    kw = {"inputs_embeds": x, "use_cache": False}
    if opts["logits_to_keep"]:
        kw["logits_to_keep"] = keep
    return model(**kw).logits[:, -keep:]


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


def _validate(model, targets, m, prefix, first_token_as_input, lr, betas, weight_decay,
              max_steps, patience, schedule, stop, seed=0, init_std=None, eps=1e-8,
              on_step=None, on_string=None):
    """Every argument of :func:`cram`, in the package's message style (accesslib._checks)."""
    _check_model(model)
    check_int("m", m, 1)
    check_seed("seed", seed)
    if init_std is not None:
        check_float("init_std", init_std, 0, low_open=True)
    check_float("eps", eps, 0, low_open=True)
    check_callable("on_step", on_step)
    check_callable("on_string", on_string)
    if not isinstance(targets, torch.Tensor):
        raise ValueError(f"targets must be a torch.LongTensor of shape [B, n]; got {type(targets).__name__}")
    if targets.dtype != torch.long:
        raise ValueError(f"targets must be a LongTensor (int64) of shape [B, n]; got dtype {targets.dtype}")
    if targets.dim() != 2:
        hint = " (use targets[None] for one string)" if targets.dim() == 1 else ""
        raise ValueError(f"targets must be 2-D [B, n]; got shape {tuple(targets.shape)}{hint}")
    B, n = targets.shape
    if B < 1 or n < 1:
        raise ValueError(f"targets must be non-empty (B >= 1 strings of n >= 1 tokens); "
                         f"got shape {tuple(targets.shape)}")
    if first_token_as_input and n < 2:
        raise ValueError(f"targets must have n >= 2 tokens with first_token_as_input=True; got n={n}")
    V = facts.shared_vocab_size(model)     # ids both embeddings have
    lo, hi = int(targets.min()), int(targets.max())
    if lo < 0 or hi >= V:
        raise ValueError(f"targets must be token ids in 0..{V - 1}; got ids outside the vocabulary "
                         f"(min {lo}, max {hi})")
    if prefix and (min(prefix) < 0 or max(prefix) >= V):
        raise ValueError(f"prefix_ids must be token ids in 0..{V - 1}; got {prefix} (outside the vocabulary)")
    L = len(prefix) + m + n - 1
    ctx = facts.max_context(model)
    if ctx is not None and L > ctx:
        raise ValueError(f"prefix + m + n - 1 must be <= the model's context {ctx}; got "
                         f"{len(prefix)} + {m} + {n - 1} = {L}")
    check_float("lr", lr, 0, low_open=True)
    if (isinstance(betas, (str, bytes)) or not hasattr(betas, "__len__") or len(betas) != 2
            or not all(_is_beta(b) for b in betas)):
        fail("betas", "two numbers in [0, 1)", betas)
    check_float("weight_decay", weight_decay, 0)
    check_int("max_steps", max_steps, 0)
    check_int("patience", patience, 1)
    if not (schedule is None or callable(schedule) or schedule in SCHEDULES):
        fail("schedule", f"None, one of {', '.join(map(repr, SCHEDULES))} or a callable", schedule)
    if not (stop is None or hasattr(stop, "is_set") or callable(stop)):
        fail("stop", "a threading.Event, a callable returning bool, or None", stop)


def cram(model, targets, m, *, prefix_ids=None, first_token_as_input=False, lr=1e-2,
         betas=(0.9, 0.9), weight_decay=0.01, max_steps=3000, patience=500, schedule=None,
         seed=0, autocast_dtype=None, init_std=None, on_step: Callable | None = None,
         on_string: Callable | None = None, stop=None, verify=True, eps=1e-8) -> CramResult:
    """Cram B target strings [B, n] into m memory vectors each; see the module docstring.

    model: a transformers causal LM (a LoadedModel is unwrapped); its weights are not changed.
    prefix_ids: fixed token ids before the memory (e.g. ``default_prefix(model)``), or None.
    first_token_as_input: [A]/[K] convention (t_1 is input, t_2..t_n are predicted).
    lr, betas, weight_decay: AdamW (decoupled decay, torch's update rule), applied per row.
    max_steps, patience: a string stops after max_steps updates, or when its loss has not
        improved on its best for `patience` steps.
    schedule: None | "constant" | "cosine" | "warmup_cosine" | callable(step, max_steps) -> factor.
    seed: with the target ids, seeds each string's initial memory (``string_seed``).
    autocast_dtype: None (model dtype, fp32 on CPU) or "bfloat16"/"float16" autocast.
    init_std: absolute std of the initial memory; default ``init_std_of(model)``.
    on_step(StepInfo), on_string(StringResult): callbacks; stop: Event or callable -> bool,
        checked before every step; an interrupted run returns what finished (interrupted=True).
    verify: confirm teacher-forced successes by greedy generation (default). With verify=False
        success == tf_success and no greedy decoding is run (for speed measurements only).
    """
    model = hf_model(model)
    check_token_ids("prefix_ids", prefix_ids)   # a str is not a list of ids ('12' is not [1, 2])
    prefix = token_ids(prefix_ids, "prefix_ids")
    _validate(model, targets, m, prefix, first_token_as_input, lr, betas, weight_decay,
              max_steps, patience, schedule, stop, seed, init_std, eps, on_step, on_string)
    m, max_steps, patience = int(m), int(max_steps), int(patience)
    ac_dtype = as_autocast_dtype(autocast_dtype)
    t0 = time.perf_counter()
    p0 = next(model.parameters())
    dev, mdt = p0.device, p0.dtype
    emb = model.get_input_embeddings()
    B, n = targets.shape
    d = emb.weight.shape[1]
    std = float(init_std) if init_std is not None else init_std_of(model)
    opts = forward_options(model)
    b1, b2 = float(betas[0]), float(betas[1])
    settings = dict(m=m, n=n, B=B, prefix_ids=prefix, first_token_as_input=bool(first_token_as_input),
                    lr=float(lr), betas=[b1, b2], weight_decay=float(weight_decay),
                    max_steps=max_steps, patience=patience,
                    schedule=schedule if not callable(schedule) else getattr(schedule, "__name__", "callable"),
                    seed=int(seed), autocast_dtype=None if ac_dtype is None else str(ac_dtype).replace("torch.", ""),
                    init_std=std, init="normal*init_std, generator seeded by sha256(seed, target ids)",
                    verify=bool(verify), eps=eps, success="greedy" if verify else "teacher-forced",
                    model_dtype=str(mdt).replace("torch.", ""), device=str(dev))

    targets_cpu = targets.detach().cpu()
    # initial memory: one generator per string, independent of batch position
    init = torch.empty(B, m, d)
    for b in range(B):
        g = torch.Generator().manual_seed(string_seed(seed, targets_cpu[b].tolist()))
        init[b] = torch.randn(m, d, generator=g) * std

    results: dict[int, StringResult] = {}
    interrupted = False
    steps_run = row_steps = 0
    with _frozen(model), torch.enable_grad():
        tg = targets_cpu.to(dev)
        with torch.no_grad():
            pre = emb(torch.tensor(prefix, device=dev)[None]) if prefix else None   # [1, p, d]
            tin = emb(tg[:, :-1])                                                   # [B, n-1, d]
        labels = tg[:, 1:] if first_token_as_input else tg
        given = tg[:, :1] if first_token_as_input else tg[:, :0]
        n_pred = labels.shape[1]

        memory = init.to(dev)                      # fp32 master copy
        exp_avg = torch.zeros_like(memory)
        exp_avg_sq = torch.zeros_like(memory)
        active = torch.arange(B, device=dev)
        best = torch.full((B,), float("inf"), device=dev)
        best_step = torch.zeros(B, dtype=torch.long, device=dev)

        def finish(rows, reasons, mem, loss_rows, acc, step, tf_flags):
            """Build StringResults for local rows `rows` (list) and report them."""
            if not rows:
                return
            idx = torch.tensor(rows, device=dev)
            decoded = None
            if verify:
                ok = [r for r in rows if reasons[r] != "non-finite loss"]
                if ok:
                    oi = torch.tensor(ok, device=dev)
                    g = greedy(model, mem[oi], n_pred, prefix_ids=prefix, given_ids=given[oi],
                               autocast_dtype=ac_dtype).cpu()
                    decoded = {r: g[j] for j, r in enumerate(ok)}
            for r in rows:
                orig = int(active[r])
                want = labels[r].cpu()
                if decoded is not None and r in decoded:
                    gids = decoded[r]
                    gacc = float((gids == want).float().mean())
                    gl = [int(t) for t in gids.tolist()]
                else:
                    gacc, gl = (float("nan") if not verify else 0.0), []
                tf_ok = bool(tf_flags[r])
                succ = (reasons[r] is None) and (tf_ok if not verify else gl == want.tolist())
                res = StringResult(
                    index=orig, target_ids=[int(t) for t in targets_cpu[orig].tolist()],
                    success=bool(succ), tf_success=tf_ok, steps=int(step),
                    final_loss=float(loss_rows[r]), token_accuracy=float(acc[r]),
                    greedy_accuracy=gacc, greedy_ids=gl,
                    memory=mem[r].detach().float().cpu().clone(), prefix_ids=list(prefix),
                    first_token_as_input=bool(first_token_as_input), reason=reasons[r],
                    best_loss=float(best[r]))
                results[orig] = res
                if on_string is not None:
                    on_string(res)
            del idx

        tf_seen = torch.zeros(B, dtype=torch.bool, device=dev)
        for step in range(max_steps + 1):
            if _stopped(stop):
                interrupted = True
                break
            b = active.numel()
            mem = memory.detach().requires_grad_(True)
            parts = [] if pre is None else [pre.expand(b, -1, -1)]
            x = torch.cat(parts + [mem.to(mdt), tin], 1)
            with autocast(dev, ac_dtype):
                logits = _logits(model, x, n_pred, opts)
            logits = logits.float()
            ce = F.cross_entropy(logits.transpose(1, 2), labels, reduction="none")   # [b, n_pred]
            loss_rows = ce.mean(1)
            steps_run += 1
            row_steps += b
            with torch.no_grad():
                lv = loss_rows.detach()
                correct = logits.argmax(-1) == labels
                acc = correct.float().mean(1)
                tf_ok = correct.all(1)
                finite = torch.isfinite(lv)
                improved = finite & (lv < best)
                best = torch.where(improved, lv, best)
                best_step = torch.where(improved, torch.full_like(best_step, step), best_step)
                tf_seen |= tf_ok & finite

            reasons = {}
            done = torch.zeros(b, dtype=torch.bool, device=dev)
            cand = (tf_ok & finite).nonzero().flatten().tolist()
            if cand:
                if verify:
                    ci = torch.tensor(cand, device=dev)
                    g = greedy(model, mem.detach()[ci], n_pred, prefix_ids=prefix, given_ids=given[ci],
                               autocast_dtype=ac_dtype)
                    confirmed = (g == labels[ci]).all(1).tolist()
                else:
                    confirmed = [True] * len(cand)
                for r, c in zip(cand, confirmed):
                    if c:
                        reasons[r] = None
                        done[r] = True
            for r in (~finite).nonzero().flatten().tolist():
                reasons[r] = "non-finite loss"
                done[r] = True
            stale = (step - best_step) >= patience
            for r in (stale & ~done).nonzero().flatten().tolist():
                reasons[r] = "patience"
                done[r] = True
            if step == max_steps:
                for r in (~done).nonzero().flatten().tolist():
                    reasons[r] = "max_steps"
                    done[r] = True

            if on_step is not None:
                ok_done = sum(1 for v in results.values() if v.success)
                on_step(StepInfo(step=step, active=active.tolist(), losses=lv.tolist(),
                                 best_losses=best.tolist(), elapsed=time.perf_counter() - t0,
                                 n_total=B, n_done=len(results), n_success=ok_done,
                                 lr=float(lr) * lr_factor(schedule, step, max_steps)))

            rows = done.nonzero().flatten().tolist()
            # tf_success of a finished row: it passed the teacher-forced test at some step
            finish(rows, reasons, mem.detach(), lv, acc, step, tf_seen)
            keep = (~done).nonzero().flatten()
            if keep.numel() == 0:
                break

            # gradient of the per-row losses of the rows that continue (rows never interact)
            grad = torch.autograd.grad(loss_rows[keep].sum(), mem)[0]
            if keep.numel() < b:
                grad, memory = grad[keep], memory[keep]
                exp_avg, exp_avg_sq = exp_avg[keep], exp_avg_sq[keep]
                active, best, best_step, tf_seen = active[keep], best[keep], best_step[keep], tf_seen[keep]
                tin, labels, given = tin[keep], labels[keep], given[keep]
            del logits, ce, loss_rows, mem, x

            # AdamW (decoupled weight decay; torch.optim.AdamW's update rule), per element
            with torch.no_grad():
                t = step + 1
                lr_t = float(lr) * lr_factor(schedule, step, max_steps)
                memory.mul_(1 - lr_t * weight_decay)
                exp_avg.lerp_(grad, 1 - b1)
                exp_avg_sq.mul_(b2).addcmul_(grad, grad, value=1 - b2)
                bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
                denom = (exp_avg_sq.sqrt() / math.sqrt(bc2)).add_(eps)
                memory.addcdiv_(exp_avg, denom, value=-lr_t / bc1)

    strings = [results[i] for i in sorted(results)]
    return CramResult(strings=strings, m=m, settings=settings, wall_time=time.perf_counter() - t0,
                      interrupted=interrupted, steps_run=steps_run, row_steps=row_steps)
