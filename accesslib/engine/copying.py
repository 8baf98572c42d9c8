"""The copy task of [A] (after Jelassi et al. 2024), docs/paper.md, section 7.

A small causal transformer sees ``$abc...|`` and must write ``abc....`` (the same letters,
then EOS). It is trained on lengths 5..50 with the loss only on the copied part, then
evaluated by exact string match at lengths far beyond training: copying is perfect up to about
the trained length and then collapses abruptly instead of degrading slowly.

Vocabulary (30 ids, as in [A]): pad, BOS ``$``, separator ``|``, EOS ``.``, and the 26 letters.

Two accuracy measures, both exact-string:
- ``greedy``: the model generates len+1 tokens after ``$x|`` (greedy decoding, KV cache); the
  string counts only if the output is exactly ``x.``.
- ``teacher_forced``: one forward pass over ``$x|x.``; the string counts if the argmax at every
  copied position (letters and EOS) is the right token ("100% teacher-forced accuracy", as
  [A] judges success). Greedy success implies teacher-forced success; not the converse in
  general, which is why both are reported.

This module imports torch and transformers; ``import accesslib`` does not import it.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional

import torch

from accesslib._checks import check_float, check_int
from accesslib.engine import decoding
from accesslib.models import facts

# ---------------------------------------------------------------- vocabulary and data
PAD, BOS, SEP, EOS = 0, 1, 2, 3
SPECIALS = {"<pad>": PAD, "$": BOS, "|": SEP, ".": EOS}
LETTERS = "abcdefghijklmnopqrstuvwxyz"
FIRST_LETTER = 4
VOCAB_SIZE = FIRST_LETTER + len(LETTERS)  # 30, as in [A]
ID_TO_CHAR = ["_", "$", "|", "."] + list(LETTERS)


def encode(text: str) -> list[int]:
    """Map a string over ``$|.a-z`` to ids (``_`` is the pad symbol)."""
    out = []
    for ch in text:
        try:
            out.append(ID_TO_CHAR.index(ch))
        except ValueError:
            raise ValueError(f"text may only contain a-z, '$', '|', '.', '_'; got {ch!r}") from None
    return out


def decode(ids) -> str:
    """Inverse of :func:`encode`."""
    return "".join(ID_TO_CHAR[int(i)] for i in ids)


def random_strings(n: int, length: int, generator: torch.Generator) -> torch.Tensor:
    """[n, length] random letter ids (uniform over the 26 letters)."""
    return torch.randint(FIRST_LETTER, VOCAB_SIZE, (n, length), generator=generator)


def make_examples(letters: torch.Tensor) -> torch.Tensor:
    """``$x|x.`` for every row x of ``letters`` [B, L] -> ids [B, 2L+3]."""
    B, L = letters.shape
    col = lambda v: torch.full((B, 1), v, dtype=torch.long)  # noqa: E731
    return torch.cat([col(BOS), letters, col(SEP), letters, col(EOS)], dim=1)


def make_batch(lengths, generator: torch.Generator):
    """Training batch for the given per-example lengths.

    Returns (input_ids [B, T], labels [B, T]) with T = 2*max(lengths) + 3. Examples are padded
    on the right (with a causal model right padding never changes the real positions, so no
    attention mask is needed). ``labels`` holds the copied letters and EOS of each example and
    -100 everywhere else (prompt, separator, pad): the loss is only on the copied part
    (docs/paper.md, section 7). The labels are not shifted: the model shifts them itself.
    """
    lengths = [int(x) for x in lengths]
    if not lengths or min(lengths) < 1:
        raise ValueError(f"lengths must be a non-empty list of whole numbers >= 1; got {lengths!r}")
    T = 2 * max(lengths) + 3
    ids = torch.full((len(lengths), T), PAD, dtype=torch.long)
    labels = torch.full((len(lengths), T), -100, dtype=torch.long)
    for i, L in enumerate(lengths):
        ex = make_examples(random_strings(1, L, generator))[0]
        ids[i, : 2 * L + 3] = ex
        labels[i, L + 2 : 2 * L + 3] = ex[L + 2 :]  # the copy x and EOS
    return ids, labels


# ---------------------------------------------------------------- model
@dataclass
class CopyConfig:
    """Model and training settings for the copy task (defaults: the shipped run)."""

    d: int = 64
    layers: int = 2
    heads: int = 4
    intermediate: int = 256
    rotary_pct: float = 1.0
    max_position: int = 2048          # rotary: this is the only limit on eval length
    min_len: int = 5
    max_len: int = 50
    batch_size: int = 64
    lr: float = 3e-3
    warmup: int = 100
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    seed: int = 0
    same_length: bool = True          # one length per batch (no padding; each length still uniform)
    eval_every: int = 250             # steps between in-training checks at max_len (0: never)
    eval_n: int = 64                  # strings used by that check
    target_acc: float = 1.0           # stop early once that check reaches this (None: never)
    threads: int = 1                  # torch intra-op threads while training (1: no spin-waiting
                                      # on a shared CPU, where 2 threads ran 20x slower here)

    def validate(self):
        check_int("d", self.d, 8)
        check_int("layers", self.layers, 1, 48)
        check_int("heads", self.heads, 1)
        if self.d % self.heads:
            raise ValueError(f"d must be a multiple of heads; got d={self.d}, heads={self.heads}")
        check_int("intermediate", self.intermediate, 1)
        check_int("min_len", self.min_len, 1)
        check_int("max_len", self.max_len, self.min_len)
        check_int("max_position", self.max_position, 2 * self.max_len + 3)
        check_int("batch_size", self.batch_size, 1)
        check_int("warmup", self.warmup, 0)
        check_int("eval_every", self.eval_every, 0)
        check_int("eval_n", self.eval_n, 1)
        check_int("threads", self.threads, 0)
        check_float("lr", self.lr, 0, 1, low_open=True)
        check_float("rotary_pct", self.rotary_pct, 0, 1, low_open=True)
        return self

    def max_eval_length(self) -> int:
        """Longest copy length the model's positions cover: 2L + 3 <= max_position."""
        return (self.max_position - 3) // 2


def build_model(config: CopyConfig):
    """A GPT-NeoX causal LM (rotary positions) with the 30-id copy vocabulary, random init."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    config.validate()
    torch.manual_seed(config.seed)
    cfg = GPTNeoXConfig(
        vocab_size=VOCAB_SIZE, hidden_size=config.d, num_hidden_layers=config.layers,
        num_attention_heads=config.heads, intermediate_size=config.intermediate,
        rotary_pct=config.rotary_pct, max_position_embeddings=config.max_position,
        hidden_dropout=0.0, attention_dropout=0.0, use_parallel_residual=True,
        tie_word_embeddings=False, bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD,
    )
    model = GPTNeoXForCausalLM(cfg)
    model.eval()
    return model


def adapt_pretrained(model, *, max_position: Optional[int] = None):
    """Prepare any pretrained causal LM for the copy task, as [A] does with Pythia.

    Resizes the input (and output) embeddings to the 30 copy ids (``resize_token_embeddings``
    keeps the first 30 rows: the pretrained vectors serve as an initialisation, the copy task
    only needs 30 distinct ones) and sets the special-token ids in the model config. If
    ``max_position`` is given, the config's ``max_position_embeddings`` is raised to it (for
    rotary models the only thing that limits the eval length). Returns the model.
    [A] then fine-tunes with AdamW at lr 1e-5 for up to 10k steps (docs/paper.md, section 7).
    """
    if not hasattr(model, "resize_token_embeddings"):
        raise ValueError("model must be a transformers causal LM (has resize_token_embeddings)")
    model.resize_token_embeddings(VOCAB_SIZE)
    model.requires_grad_(True)   # loaders may hand out frozen models (cramming freezes them)
    model.config.bos_token_id, model.config.eos_token_id, model.config.pad_token_id = BOS, EOS, PAD
    gen = getattr(model, "generation_config", None)
    if gen is not None:
        gen.bos_token_id, gen.eos_token_id, gen.pad_token_id = BOS, EOS, PAD
    if max_position is not None:
        check_int("max_position", max_position, 1)
        if hasattr(model.config, "max_position_embeddings"):
            model.config.max_position_embeddings = max(int(max_position),
                                                       int(model.config.max_position_embeddings or 0))
    return model


# ---------------------------------------------------------------- evaluation
def _check_length(model, length):
    length = check_int("length", length, 1)
    mp = facts.max_context(model)
    if mp is not None and 2 * length + 3 > mp:
        raise ValueError(f"length must be <= {(mp - 3) // 2} for this model (2 length + 3 <= its "
                         f"context of {mp} positions); got {length}")
    return length


@torch.no_grad()
def teacher_forced_correct(model, letters: torch.Tensor) -> torch.Tensor:
    """Bool [B]: argmax at every copied position (letters and EOS) is right (one forward pass)."""
    B, L = letters.shape
    ids = make_examples(letters)
    logits = model(input_ids=ids).logits  # [B, 2L+3, V]
    # position t predicts token t+1; the copy x. occupies positions L+2 .. 2L+2
    pred = logits[:, L + 1 : 2 * L + 2].argmax(-1)
    return exact_match(pred, ids[:, L + 2 :])


def greedy_copy(model, letters: torch.Tensor) -> torch.Tensor:
    """Greedy continuation of ``$x|``: ids [B, L+1] (argmax at every step, KV cache).

    :func:`accesslib.engine.decoding.greedy` on token ids, so any callable with the transformers
    interface (``model(input_ids=, past_key_values= or cache=, use_cache=True)`` -> ``.logits``
    and the cache) can be evaluated, and EOS never ends the output early.
    """
    B, L = letters.shape
    return decoding.greedy(model, None, L + 1, given_ids=make_examples(letters)[:, : L + 2])


def exact_match(pred: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    """Bool [B]: row i of ``pred`` equals row i of ``want`` at every position."""
    if pred.shape != want.shape:
        raise ValueError(f"pred and want must have the same shape; got {tuple(pred.shape)} and {tuple(want.shape)}")
    return (pred == want).all(dim=1)


def greedy_correct(model, letters: torch.Tensor) -> torch.Tensor:
    """Bool [B]: the greedy output is exactly ``x.`` (all letters and the EOS)."""
    B, L = letters.shape
    want = torch.cat([letters, torch.full((B, 1), EOS, dtype=torch.long)], dim=1)
    return exact_match(greedy_copy(model, letters), want)


#: largest batch * length^2 per evaluation forward pass (memory of the attention scores)
EVAL_SCORE_BUDGET = 2e7


@dataclass
class LengthAccuracy:
    """Exact-string accuracy at one copy length."""

    length: int
    n: int
    greedy: Optional[float]
    teacher_forced: float


def evaluate(model, lengths, n: int = 100, *, seed: int = 1234, greedy: bool = True,
             batch_size: int = 100, stop=None, on_length: Optional[Callable] = None, threads: int = 1):
    """Exact-string accuracy of ``model`` at each copy length (docs/paper.md, section 7).

    ``n`` fresh random strings per length (seeded, independent of training data up to chance),
    evaluated by teacher-forced all-argmax and (if ``greedy``) by greedy generation.
    ``on_length(LengthAccuracy)`` is called after each length; ``stop`` (Event or callable)
    ends the sweep early. ``threads``: torch threads meanwhile (None: leave as is).
    Returns a list of LengthAccuracy in the order of ``lengths``.
    """
    n = check_int("n", n, 1)
    batch_size = check_int("batch_size", batch_size, 1)
    lengths = [_check_length(model, L) for L in lengths]
    was_training = model.training
    model.eval()
    out = []
    with torch_threads(threads):
        _evaluate_loop(model, lengths, n, seed, greedy, batch_size, stop, on_length, out, was_training)
    return out


def _evaluate_loop(model, lengths, n, seed, greedy, batch_size, stop, on_length, out, was_training):
    try:
        for L in lengths:
            if _stopped(stop):
                break
            g = torch.Generator().manual_seed(seed + 7919 * L)
            tf_ok = gr_ok = 0
            # cap B*T^2 (attention scores of the teacher-forced pass) at long lengths
            bs = max(1, min(batch_size, int(EVAL_SCORE_BUDGET // (2 * L + 3) ** 2)))
            for start in range(0, n, bs):
                letters = random_strings(min(bs, n - start), L, g)
                tf_ok += int(teacher_forced_correct(model, letters).sum())
                if greedy:
                    gr_ok += int(greedy_correct(model, letters).sum())
            res = LengthAccuracy(L, n, gr_ok / n if greedy else None, tf_ok / n)
            out.append(res)
            if on_length is not None:
                on_length(res)
    finally:
        model.train(was_training)
    return out


# ---------------------------------------------------------------- training
class torch_threads:
    """Context manager: run with ``n`` torch intra-op threads (0 or None: leave as is)."""

    def __init__(self, n):
        self.n = n

    def __enter__(self):
        self.old = torch.get_num_threads()
        if self.n:
            torch.set_num_threads(int(self.n))
        return self

    def __exit__(self, *exc):
        torch.set_num_threads(self.old)


def _stopped(stop) -> bool:
    if stop is None:
        return False
    if isinstance(stop, threading.Event):
        return stop.is_set()
    return bool(stop())


@dataclass
class CopyStep:
    """What ``on_step`` receives after every optimisation step."""

    step: int
    steps: int
    loss: float
    lr: float
    elapsed: float                    # wall seconds since train() started
    cpu_time: float                   # process CPU seconds since train() started
    check_acc: Optional[float] = None  # teacher-forced accuracy at max_len, on check steps


@dataclass
class TrainResult:
    """A finished (or stopped) training run."""

    model: object
    config: CopyConfig
    steps_done: int
    losses: list                      # one mean loss per step
    checks: list = field(default_factory=list)  # (step, teacher-forced acc at max_len, greedy acc)
    wall_time: float = 0.0
    cpu_time: float = 0.0
    threads: int = 1
    interrupted: bool = False
    reached_target: bool = False

    def summary(self) -> dict:
        return {"config": asdict(self.config), "steps_done": self.steps_done,
                "wall_time_s": round(self.wall_time, 2), "cpu_time_s": round(self.cpu_time, 2),
                "torch_threads": self.threads, "interrupted": self.interrupted,
                "reached_target": self.reached_target, "checks": self.checks}


def lr_at(step: int, config: CopyConfig, steps: int) -> float:
    """Linear warmup to ``lr`` over ``warmup`` steps, then cosine decay to lr/10 at ``steps``."""
    if config.warmup and step < config.warmup:
        return config.lr * (step + 1) / config.warmup
    span = max(1, steps - config.warmup)
    t = min(1.0, (step - config.warmup) / span)
    return config.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def train(config: Optional[CopyConfig] = None, steps: int = 3000, on_step: Optional[Callable] = None,
          stop=None, *, model=None) -> TrainResult:
    """Train a copy model (AdamW, warmup + cosine, loss only on the copied part).

    ``on_step(CopyStep)`` is called after every step (live loss plot, progress bar);
    ``stop`` (threading.Event or callable -> bool) is checked before every step and ends the
    run cooperatively (``interrupted=True``). Every ``eval_every`` steps the teacher-forced
    accuracy at ``max_len`` is measured on ``eval_n`` fresh strings; once it reaches
    ``target_acc`` the run is confirmed by greedy generation and, if that agrees, it stops.
    Pass ``model`` to fine-tune an existing LM (see :func:`adapt_pretrained`).
    """
    config = (config or CopyConfig()).validate()
    steps = check_int("steps", steps, 1)
    if model is None:
        model = build_model(config)
    torch.manual_seed(config.seed)
    gen = torch.Generator().manual_seed(config.seed)
    check_gen_seed = config.seed + 99991
    decay, no_decay = [], []
    for _name, p in model.named_parameters():
        (no_decay if p.ndim < 2 else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=config.lr,
                            betas=(0.9, 0.98))
    with torch_threads(config.threads):
        return _train_loop(model, opt, gen, config, steps, on_step, stop, check_gen_seed)


def _train_loop(model, opt, gen, config, steps, on_step, stop, check_gen_seed):
    res = TrainResult(model=model, config=config, steps_done=0, losses=[],
                      threads=torch.get_num_threads())
    t0, c0 = time.perf_counter(), time.process_time()
    model.train()
    try:
        for step in range(steps):
            if _stopped(stop):
                res.interrupted = True
                break
            lr = lr_at(step, config, steps)
            for gparam in opt.param_groups:
                gparam["lr"] = lr
            if config.same_length:
                lengths = torch.randint(config.min_len, config.max_len + 1, (1,), generator=gen)
                lengths = lengths.repeat(config.batch_size)
            else:
                lengths = torch.randint(config.min_len, config.max_len + 1, (config.batch_size,), generator=gen)
            ids, labels = make_batch(lengths.tolist(), gen)
            loss = model(input_ids=ids, labels=labels).loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if config.grad_clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            opt.step()
            lv = float(loss.detach())
            res.losses.append(lv)
            res.steps_done = step + 1
            acc = None
            if config.eval_every and (step + 1) % config.eval_every == 0:
                model.eval()
                letters = random_strings(config.eval_n, config.max_len,
                                         torch.Generator().manual_seed(check_gen_seed + step))
                acc = float(teacher_forced_correct(model, letters).float().mean())
                gacc = None
                if config.target_acc is not None and acc >= config.target_acc:
                    gacc = float(greedy_correct(model, letters).float().mean())
                res.checks.append((step + 1, acc, gacc))
                model.train()
                if gacc is not None and gacc >= config.target_acc:
                    res.reached_target = True
            if on_step is not None:
                on_step(CopyStep(step + 1, steps, lv, lr, time.perf_counter() - t0,
                                 time.process_time() - c0, acc))
            if res.reached_target:
                break
    finally:
        model.eval()
        res.wall_time = time.perf_counter() - t0
        res.cpu_time = time.process_time() - c0
    return res


# ---------------------------------------------------------------- weights
def save_weights(model, directory) -> int:
    """Save config.json + model.safetensors (fp32) to ``directory``; returns the weights' bytes."""
    from pathlib import Path

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory, safe_serialization=True)
    return (directory / "model.safetensors").stat().st_size


def load_weights(directory):
    """Load a copy model saved by :func:`save_weights` (eval mode, CPU)."""
    from transformers import GPTNeoXForCausalLM

    model = GPTNeoXForCausalLM.from_pretrained(directory)
    model.eval()
    return model
