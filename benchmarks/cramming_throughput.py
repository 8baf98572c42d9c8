"""Strings crammed per minute: the batched engine against a plain one-string-at-a-time loop.

Same model, same strings, same initial memory (accesslib.engine.cramming.string_seed), same AdamW
settings (the published protocol, docs/paper.md, section 5, unless --quick):

- engine:  accesslib.engine.cramming.cram on all strings at once (one forward/backward per step over the
           active batch; solved strings leave the batch; successes confirmed by greedy decoding).
- naive:   the published way, written out below: one string at a time, a fresh torch AdamW per
           string, every step a forward, a teacher-forced argmax check and a backward; the string
           runs its full course (until `patience` steps without a better loss, or max_steps).
           It does NOT reload the model per string as [A] did, which favours the baseline.
           From the same run we also time "naive+stop": the same loop stopped at the first
           teacher-forced success (what a careful one-at-a-time loop would do).

Rate = successes / wall minutes. By default the naive loop runs on all the strings (the mix of
easy and failing strings sets both rates); --naive-strings K limits it to the first K.

FLOPs are estimated, not counted: per row and step, forward 2 * P_body * L + 2 * P_head * k
(P_body: parameters other than the input-embedding table and the LM head, L: sequence length,
k: predicted positions, the only ones the LM head is applied to), and backward w.r.t. the inputs
only (the weights are frozen, so no weight gradients): about the same again, so 4 * (...) in all.
Attention-score FLOPs (O(L^2 d), small at these L) and the greedy checks are not counted.

    python benchmarks/cramming_throughput.py --quick          # about two minutes
    python benchmarks/cramming_throughput.py                  # about ten minutes
    python benchmarks/cramming_throughput.py --protocols      # paper vs fast settings, engine only
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from matmul_peak import measure_matmul_flops  # noqa: E402

from accesslib.engine.cramming import PROTOCOLS, cram, init_std_of, string_seed  # noqa: E402
from accesslib.models.loading import tiny_model  # noqa: E402


def naive_cram_one(model, target, m, *, lr, betas, weight_decay, max_steps, patience, seed, std):
    """One string, the published protocol: fresh AdamW, TF check each step, full course.

    Returns (tf_success_ever, first_success_step or None, wall at first success or None,
    steps run, wall)."""
    t0 = time.perf_counter()
    emb = model.get_input_embeddings()
    g = torch.Generator().manual_seed(string_seed(seed, target.tolist()))
    mem = (torch.randn(m, emb.weight.shape[1], generator=g) * std).requires_grad_(True)
    opt = torch.optim.AdamW([mem], lr=lr, betas=betas, weight_decay=weight_decay, eps=1e-8)
    with torch.no_grad():
        tin = emb(target[None, :-1])[0]
    n = target.numel()
    best, since, first, first_t = float("inf"), 0, None, None
    step = 0
    for step in range(max_steps + 1):
        x = torch.cat([mem, tin], 0)[None]
        logits = model(inputs_embeds=x).logits[0, -n:]
        loss = F.cross_entropy(logits, target)
        with torch.no_grad():
            if first is None and bool((logits.argmax(-1) == target).all()):
                first, first_t = step, time.perf_counter() - t0
        lv = float(loss.detach())
        if lv < best:
            best, since = lv, 0
        else:
            since += 1
        if since >= patience or step == max_steps:
            break
        opt.zero_grad()
        loss.backward()
        opt.step()
    return first is not None, first, first_t, step, time.perf_counter() - t0


def flops_per_row_step(model, L, k):
    emb_in = model.get_input_embeddings().weight.numel()
    head = model.get_output_embeddings().weight.numel()
    body = sum(p.numel() for p in model.parameters()) - emb_in - head
    return 4 * (body * L + head * k)


def build(args):
    lm = tiny_model("gpt_neox", d=args.d, vocab_size=args.vocab, layers=args.layers, seed=0,
                    initializer_range=0.3)
    T = torch.randint(0, args.vocab, (args.strings, args.n), generator=torch.Generator().manual_seed(1))
    return lm, T


def run_throughput(args):
    lm, T = build(args)
    model = lm.model
    proto = dict(PROTOCOLS["paper"], first_token_as_input=False)
    if args.quick:
        proto.update(max_steps=600, patience=200)
    print(f"model: tiny gpt_neox d={args.d} |V|={args.vocab} layers={args.layers} "
          f"(initializer_range 0.3), {lm.facts.n_params} params; strings: {args.strings} x n={args.n} "
          f"uniform random tokens; m={args.m}; torch threads {torch.get_num_threads()}")
    print(f"protocol: {proto}")

    # engine
    r = cram(model, T, args.m, seed=0, **proto)
    eng_rate = r.n_success / (r.wall_time / 60)
    L = args.m + args.n - 1
    fl = flops_per_row_step(model, L, args.n) * r.row_steps
    print(f"engine : {r.n_success}/{len(r.strings)} crammed (greedy-confirmed; teacher-forced "
          f"{r.n_tf_success}) in {r.wall_time:.1f} s -> {eng_rate:.1f} strings/min; "
          f"{r.steps_run} steps, {r.row_steps} row-steps")

    # naive
    k = min(args.naive_strings, args.strings)
    std = init_std_of(model)
    ok_full = ok_stop = 0
    t_full = t_stop = 0.0
    steps_full = []
    for i in range(k):
        succ, first, first_t, steps, wall = naive_cram_one(
            model, T[i], args.m, lr=proto["lr"], betas=proto["betas"],
            weight_decay=proto["weight_decay"], max_steps=proto["max_steps"],
            patience=proto["patience"], seed=0, std=std)
        ok_full += succ
        ok_stop += succ
        t_full += wall
        t_stop += first_t if succ else wall
        steps_full.append(steps)
    nai_rate = ok_full / (t_full / 60)
    stop_rate = ok_stop / (t_stop / 60)
    eng_first = sum(s.success for s in r.strings[:k])
    print(f"naive  : {ok_full}/{k} crammed (teacher-forced, as published; engine on the same {k}: "
          f"{eng_first}) in {t_full:.1f} s -> {nai_rate:.1f} strings/min; median {statistics.median(steps_full):.0f} steps/string")
    print(f"naive+stop at first success: {t_stop:.1f} s -> {stop_rate:.1f} strings/min")
    print(f"ratio engine/naive = {eng_rate / nai_rate:.1f}x ; engine/(naive+stop) = {eng_rate / stop_rate:.1f}x")

    peak = measure_matmul_flops(1024, 2.0)
    achieved = fl / r.wall_time
    print(f"engine achieved ~{achieved / 1e9:.3f} GFLOP/s (4 * params * tokens, inputs-only backward) "
          f"vs measured fp32 matmul peak {peak / 1e9:.1f} GFLOP/s ({100 * achieved / peak:.2f}%)")
    return dict(engine_rate=eng_rate, naive_rate=nai_rate, naive_stop_rate=stop_rate,
                ratio=eng_rate / nai_rate, ratio_stop=eng_rate / stop_rate,
                gflops=achieved / 1e9, peak_gflops=peak / 1e9)


def run_protocols(args):
    """Engine only: success and steps of the paper protocol against faster candidates."""
    lm, T = build(args)
    cands = {
        "paper (lr 1e-2 const, 3000/500)": PROTOCOLS["paper"],
        "lr 3e-2 const, 3000/500": dict(PROTOCOLS["paper"], lr=3e-2),
        "lr 1e-1 const, 3000/500": dict(PROTOCOLS["paper"], lr=1e-1),
        "lr 5e-2 warmup_cosine, 3000/500": dict(PROTOCOLS["paper"], lr=5e-2, schedule="warmup_cosine"),
        "lr 1e-1 warmup_cosine, 3000/500": dict(PROTOCOLS["paper"], lr=1e-1, schedule="warmup_cosine"),
        "fast " + str(PROTOCOLS["fast"]): PROTOCOLS["fast"],
    }
    print(f"tiny gpt_neox d={args.d} |V|={args.vocab}, {args.strings} strings n={args.n}, m={args.m}")
    for name, kw in cands.items():
        r = cram(lm.model, T, args.m, seed=0, **kw)
        st = sorted(s.steps for s in r.strings if s.success)
        med = st[len(st) // 2] if st else float("nan")
        print(f"{name:60s} success {r.n_success:2d}/{len(r.strings)}  median steps {med:5}  "
              f"row-steps {r.row_steps:6d}  wall {r.wall_time:6.1f} s", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description="cramming throughput: batched engine vs one-at-a-time")
    ap.add_argument("--quick", action="store_true", help="small run (about a minute)")
    ap.add_argument("--protocols", action="store_true", help="compare paper vs faster settings")
    ap.add_argument("--threads", type=int, default=1, help="torch threads for both (default 1)")
    ap.add_argument("--strings", type=int, default=None)
    ap.add_argument("--naive-strings", type=int, default=None)
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--m", type=int, default=1)
    ap.add_argument("--d", type=int, default=None)
    ap.add_argument("--vocab", type=int, default=None)
    ap.add_argument("--layers", type=int, default=2)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    q = args.quick
    args.strings = args.strings or (12 if q else 16)
    args.naive_strings = args.naive_strings or args.strings
    args.n = args.n or (2 if q else 3)
    args.d = args.d or (32 if q else 64)
    args.vocab = args.vocab or (64 if q else 256)
    if args.protocols:
        run_protocols(args)
    else:
        run_throughput(args)


if __name__ == "__main__":
    main()
