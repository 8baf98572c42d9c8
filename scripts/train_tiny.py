"""Train one tiny GPT-NeoX (Pythia-architecture) or Mamba causal LM on the shipped corpus, on CPU.

What it does, in order (all seeded, so one command gives one model):
1. trains its own byte-level BPE tokenizer with |V| = --vocab entries (256 byte tokens,
   "<|endoftext|>" as id 0, the rest merges) on the *train* split of the King James Bible
   (``accesslib.models.embedded.corpus_split("train")``; the held-out split is never seen);
2. builds ``GPTNeoXForCausalLM`` from a ``GPTNeoXConfig`` (width --d, --layers, --heads,
   intermediate 4d, partial rotary as in Pythia, parallel residual, untied embeddings), or with
   ``--arch mamba`` a ``MambaForCausalLM`` from a ``MambaConfig`` (width --d, --layers mixer
   blocks, SSM state --state, inner width --expand * d, causal conv of --conv-kernel taps,
   untied embeddings; transformers' pure-torch path, no custom kernels);
3. trains it on batches of random windows of --context tokens (chapters joined by
   <|endoftext|>) with AdamW and a linear-warmup + cosine learning-rate schedule;
4. saves config.json, model.safetensors (fp16), tokenizer.json/tokenizer_config.json and
   training.json, whose losses are measured on the *saved* fp16 weights cast back to fp32,
   on fixed random windows of each split: mean cross-entropy (nats/token) and bits per byte
   bpb = loss * (tokens / bytes of the split) / ln 2.

Example (the default embedded model):

    python scripts/train_tiny.py --d 32 --vocab 257 --layers 2 --context 64 --batch 32 \\
        --steps 1500 --lr 6e-3 --warmup 100 --weight-decay 0 --out accesslib/data/models/tiny-d32-v257

and the state-space twin of tiny-d64-v257 (same corpus, tokenizer, context, batch, steps, seed):

    python scripts/train_tiny.py --arch mamba --d 64 --vocab 257 --layers 3 --context 64 \\
        --batch 32 --steps 1500 --lr 6e-3 --warmup 100 --weight-decay 0 \\
        --out accesslib/data/models/tiny-mamba-d64-v257
"""
from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import math
import platform
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

from accesslib.config import hardware  # noqa: E402
from accesslib.experiments.beyond import fast_mamba_scan  # noqa: E402  (no torch at import)
from accesslib.models import embedded  # noqa: E402  (no torch at import)

EOS = "<|endoftext|>"
ARCHS = {"gpt_neox": "GPTNeoXForCausalLM", "mamba": "MambaForCausalLM"}


# ----------------------------------------------------------------------------- tokenizer
def train_tokenizer(texts, vocab_size: int):
    """Byte-level BPE (GPT-2 pre-tokenisation) with exactly ``vocab_size`` entries:
    id 0 = <|endoftext|>, then the 256 byte symbols, then merges learnt from ``texts``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if vocab_size < 257:
        raise ValueError(f"vocab must be >= 257 (256 bytes + <|endoftext|>), got {vocab_size}")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS], min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    if tok.token_to_id(EOS) != 0:
        raise RuntimeError("<|endoftext|> did not get id 0")
    return tok


def hf_tokenizer(tok, context: int):
    """Wrap a ``tokenizers.Tokenizer`` as a transformers fast tokenizer (bos = eos = pad = id 0)."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=EOS, eos_token=EOS, pad_token=EOS,
                                   unk_token=None, model_max_length=context,
                                   clean_up_tokenization_spaces=False)


def encode_stream(tok, chapters):
    """Token ids of all chapters, each followed by <|endoftext|> (id 0), as one int64 tensor."""
    import torch

    ids = []
    for enc in tok.encode_batch(chapters):
        ids.extend(enc.ids)
        ids.append(0)
    return torch.tensor(ids, dtype=torch.long)


# ----------------------------------------------------------------------------- model
def make_config(d: int, vocab: int, layers: int, heads: int, context: int, rotary_pct: float):
    from transformers import GPTNeoXConfig

    return GPTNeoXConfig(vocab_size=vocab, hidden_size=d, num_hidden_layers=layers,
                         num_attention_heads=heads, intermediate_size=4 * d,
                         max_position_embeddings=context, rotary_pct=rotary_pct,
                         rotary_emb_base=10000, hidden_act="gelu", hidden_dropout=0.0,
                         attention_dropout=0.0, use_parallel_residual=True,
                         tie_word_embeddings=False, layer_norm_eps=1e-5, initializer_range=0.02,
                         bos_token_id=0, eos_token_id=0, use_cache=True)


def make_mamba_config(d: int, vocab: int, layers: int, state: int, expand: int, conv_kernel: int):
    """``MambaConfig`` of the state-space twin: untied embeddings like the transformers, no
    biases in the projections (Mamba's default), dt rank ceil(d / 16)."""
    from transformers import MambaConfig

    return MambaConfig(vocab_size=vocab, hidden_size=d, num_hidden_layers=layers, state_size=state,
                       expand=expand, conv_kernel=conv_kernel, time_step_rank="auto",
                       use_bias=False, use_conv_bias=True, residual_in_fp32=True,
                       layer_norm_epsilon=1e-5, initializer_range=0.02, tie_word_embeddings=False,
                       bos_token_id=0, eos_token_id=0, pad_token_id=0, use_cache=True,
                       use_mambapy=False)


def build_model(args, vocab: int):
    """The freshly initialised model of ``args.arch`` (call after seeding torch)."""
    import transformers

    if args.arch == "mamba":
        cfg = make_mamba_config(args.d, vocab, args.layers, args.state, args.expand, args.conv_kernel)
    else:
        cfg = make_config(args.d, vocab, args.layers, args.heads, args.context, args.rotary_pct)
    return getattr(transformers, ARCHS[args.arch])(cfg)


def lr_at(step: int, total: int, lr: float, warmup: int, floor: float = 0.1) -> float:
    """Linear warmup to ``lr`` over ``warmup`` steps, then cosine decay to ``floor * lr``."""
    if step < warmup:
        return lr * (step + 1) / warmup
    t = min(1.0, (step - warmup) / max(1, total - warmup))
    return lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * t)))


def sample_windows(stream, n: int, length: int, gen):
    import torch

    starts = torch.randint(0, len(stream) - length, (n,), generator=gen)
    return torch.stack([stream[s:s + length] for s in starts.tolist()])


def eval_loss(model, windows, batch: int = 32) -> float:
    """Mean next-token cross-entropy (nats/token) over all positions of ``windows`` [N, T+1]."""
    import torch
    import torch.nn.functional as F

    model.eval()
    tot, cnt = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(windows), batch):
            x = windows[i:i + batch]
            logits = model(input_ids=x[:, :-1]).logits.float()
            tot += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1),
                                   reduction="sum").item()
            cnt += x[:, 1:].numel()
    return tot / cnt


# ----------------------------------------------------------------------------- main
def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="Train a tiny GPT-NeoX or Mamba LM on the shipped KJV corpus.")
    ap.add_argument("--arch", choices=sorted(ARCHS), default="gpt_neox",
                    help="gpt_neox (Pythia architecture, default) or mamba (state-space model)")
    ap.add_argument("--d", type=int, required=True, help="model width (hidden size)")
    ap.add_argument("--vocab", type=int, default=1024, help="BPE vocabulary size |V| (>= 257)")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=None, help="attention heads (default max(2, d // 16))")
    ap.add_argument("--context", type=int, default=128, help="training window length (tokens)")
    ap.add_argument("--batch", type=int, default=16, help="windows per step")
    ap.add_argument("--steps", type=int, default=3000, help="optimisation steps (sets the schedule)")
    ap.add_argument("--minutes", type=float, default=None,
                    help="optional wall-clock cap; training stops early (recorded) if reached")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--state", type=int, default=16, help="mamba: SSM state size per channel")
    ap.add_argument("--expand", type=int, default=2, help="mamba: inner width = expand * d")
    ap.add_argument("--conv-kernel", type=int, default=4, help="mamba: causal convolution taps")
    ap.add_argument("--rotary-pct", type=float, default=0.25, help="fraction of head dims rotated (Pythia: 0.25)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads (default 1: on a shared 2-core CPU, 2 threads spin-wait and run 5-8x slower)")
    ap.add_argument("--eval-windows", type=int, default=128, help="windows per split for the final losses")
    ap.add_argument("--corpus-chars", type=int, default=None,
                    help="use only the first N characters of each split (smoke tests)")
    ap.add_argument("--name", default=None, help="model name (default tiny-d{d}-v{vocab})")
    ap.add_argument("--out", type=Path, required=True, help="output directory")
    args = ap.parse_args(argv)
    if args.d < 8 or args.d > 4096:
        ap.error(f"--d must be in [8, 4096], got {args.d}")
    if args.heads is None:
        args.heads = max(2, args.d // 16)
    if args.heads < 1 or args.d % args.heads:
        ap.error(f"--heads must divide --d={args.d}, got {args.heads}")
    if args.vocab < 257 or args.vocab > 65536:
        ap.error(f"--vocab must be in [257, 65536], got {args.vocab}")
    for k in ("layers", "context", "batch", "steps", "eval_windows", "state", "expand", "conv_kernel"):
        if getattr(args, k) < 1:
            ap.error(f"--{k.replace('_', '-')} must be >= 1, got {getattr(args, k)}")
    if not 0.0 < args.rotary_pct <= 1.0:
        ap.error(f"--rotary-pct must be in (0, 1], got {args.rotary_pct}")
    prefix = "tiny-mamba" if args.arch == "mamba" else "tiny"
    args.name = args.name or f"{prefix}-d{args.d}-v{args.vocab}"
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    raw_argv = list(sys.argv[1:] if argv is None else argv)
    import tokenizers
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(args.threads)
    t0 = time.time()

    # --- data and tokenizer (train split only)
    train_text = embedded.corpus_split("train")
    held_text = embedded.corpus_split("heldout")
    if args.corpus_chars:
        train_text, held_text = train_text[:args.corpus_chars], held_text[:args.corpus_chars]
    train_ch = [c.strip("\n") for c in train_text.split("\n\n") if c.strip()]
    held_ch = [c.strip("\n") for c in held_text.split("\n\n") if c.strip()]
    tok = train_tokenizer(train_ch, args.vocab)
    V = tok.get_vocab_size()
    train_ids, held_ids = encode_stream(tok, train_ch), encode_stream(tok, held_ch)
    # bytes per token of each split, for bits per byte (the <|endoftext|> separators count as
    # the blank lines between chapters they replace: "\n\n" = 2 bytes each)
    train_bytes = sum(len(c.encode()) for c in train_ch) + 2 * len(train_ch)
    held_bytes = sum(len(c.encode()) for c in held_ch) + 2 * len(held_ch)
    t_tok = time.time() - t0
    T = args.context + 1
    if len(train_ids) <= T or len(held_ids) <= T:
        raise ValueError("--corpus-chars leaves fewer tokens than one window")

    # --- model
    torch.manual_seed(args.seed)
    if args.arch == "mamba":
        transformers.logging.set_verbosity_error()   # silence "falling back to PyTorch" notes
        fast_mamba_scan()
    model = build_model(args, V)
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    gen = torch.Generator().manual_seed(args.seed)

    # --- train
    model.train()
    curve, running, t_start, stopped_early, step = [], [], time.time(), False, 0
    log_every = max(1, min(100, args.steps // 50))
    for step in range(args.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args.steps, args.lr, args.warmup)
        x = sample_windows(train_ids, args.batch, T, gen)
        logits = model(input_ids=x[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        running.append(loss.item())
        if (step + 1) % log_every == 0 or step + 1 == args.steps:
            avg = sum(running[-log_every:]) / len(running[-log_every:])
            curve.append([step + 1, round(avg, 4)])
            el = time.time() - t_start
            print(f"step {step + 1}/{args.steps}  loss {avg:.4f}  lr {opt.param_groups[0]['lr']:.2e}  "
                  f"{el:.0f}s", flush=True)
        if args.minutes is not None and time.time() - t_start > 60 * args.minutes:
            stopped_early = step + 1 < args.steps
            break
    steps_done = step + 1
    train_time = time.time() - t_start

    # --- save (fp16 weights) and evaluate what was saved
    args.out.mkdir(parents=True, exist_ok=True)
    model.half().save_pretrained(args.out, safe_serialization=True)
    hf_tokenizer(tok, args.context).save_pretrained(args.out)
    shipped = AutoModelForCausalLM.from_pretrained(args.out, torch_dtype=torch.float32)
    eg = torch.Generator().manual_seed(1234)
    tr_w = sample_windows(train_ids, args.eval_windows, T, eg)
    he_w = sample_windows(held_ids, args.eval_windows, T, eg)
    train_loss, held_loss = eval_loss(shipped, tr_w), eval_loss(shipped, he_w)
    ln2 = math.log(2)
    tail = running[-min(len(running), 100):]
    record = {
        "name": args.name,
        "architecture": ARCHS[args.arch],
        "d": args.d, "vocab_size": V, "layers": args.layers,
        "heads": args.heads if args.arch == "gpt_neox" else None,
        "context": args.context,
        "rotary_pct": args.rotary_pct if args.arch == "gpt_neox" else None,
        **({"state_size": args.state, "expand": args.expand, "conv_kernel": args.conv_kernel}
           if args.arch == "mamba" else {}),
        "n_params": n_params,
        "weights_dtype": "float16",
        "train_loss": round(train_loss, 4),
        "heldout_loss": round(held_loss, 4),
        "ln_vocab": round(math.log(V), 4),
        "train_bpb": round(train_loss * len(train_ids) / train_bytes / ln2, 4),
        "heldout_bpb": round(held_loss * len(held_ids) / held_bytes / ln2, 4),
        "final_running_train_loss": round(sum(tail) / len(tail), 4),
        "loss_note": "train_loss/heldout_loss: mean next-token cross-entropy (nats/token) of the saved "
                     "fp16 weights on eval_windows random windows of each split (seed 1234); "
                     "final_running_train_loss: mean minibatch loss of the last 100 steps",
        "steps": steps_done, "steps_planned": args.steps, "stopped_early": stopped_early,
        "batch": args.batch, "tokens_seen": steps_done * args.batch * args.context,
        "lr": args.lr, "warmup": args.warmup, "weight_decay": args.weight_decay,
        "schedule": "linear warmup, cosine decay to 0.1*lr", "optimizer": "AdamW(betas=(0.9, 0.95))",
        "seed": args.seed, "eval_windows": args.eval_windows,
        "train_time_s": round(train_time, 1),
        "tokenizer_time_s": round(t_tok, 1),
        "wall_time_s": round(time.time() - t0, 1),
        "hardware": hardware(),
        "command": "python scripts/train_tiny.py " + shlex.join(raw_argv),
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "tokenizers_version": tokenizers.__version__,
        "python_version": platform.python_version(),
        "corpus": {
            "file": "accesslib/data/corpus/kjv.txt.gz",
            "source": "King James Bible (public domain), Debian bible-kjv-text 4.38",
            "sha256_text": hashlib.sha256(embedded.corpus_text().encode()).hexdigest(),
            "split": f"train = chapters k with k % {embedded.HELDOUT_EVERY} != {embedded.HELDOUT_EVERY - 1}",
            "corpus_chars": args.corpus_chars,
            "train_bytes": train_bytes, "heldout_bytes": held_bytes,
            "train_tokens": len(train_ids), "heldout_tokens": len(held_ids),
        },
        "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "loss_curve": curve,
    }
    (args.out / "training.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"{args.name}: {n_params} params, {steps_done} steps in {train_time:.0f}s; "
          f"train {train_loss:.3f} heldout {held_loss:.3f} nats/token (ln|V| = {math.log(V):.3f}), "
          f"heldout {record['heldout_bpb']:.3f} bits/byte -> {args.out}", flush=True)
    return record


if __name__ == "__main__":
    main()
