"""Strings crammed per minute: the continuous-batching engine against the published protocol.

Workload: ``--strings`` natural-text strings (held-out KJV text, accesslib.engine.targets)
at each of 4 lengths around the model's shipped n50 at m = 1, m = 1, on the default embedded model
and on a second one; the model's BOS token before the memory on both sides.

- reference: a lean one-string-at-a-time loop that follows the published protocol ([A], following
  [K]; docs/paper.md, section 5) exactly: their layout (the first target token is given as input,
  t_2..t_n are predicted), a fresh torch AdamW per string (lr 1e-2, betas (0.9, 0.9), weight decay
  0.01), at most 3000 steps, stop at 100% teacher-forced accuracy or after 500 steps without a
  better teacher-forced accuracy. No model reloads (they cost little there). Its teacher-forced
  successes are then confirmed by greedy decoding, as the engine's are.
- engine: ``accesslib.engine.cramming.cram`` on all the strings in one call (a list of ragged
  targets, at most ``batch_size`` active, finished strings replaced from the queue), protocol
  "paper": the same layout, optimiser, step limit and patience (on the loss).

Both single-threaded, same initial memory per string (string_seed), both after a warm-up on the
same model. Strings per minute = strings finished (solved or not) / wall minutes; "solved" =
greedy-confirmed on both sides. The engine's wall time is the median of ``--engine-runs`` (3)
identical runs (a run of a few seconds moves by 10-15% with what else the machine does; the
reference's minute averages that out); every run's time is printed and stored.

FLOPs are estimated, not counted: per row and step, forward 2 * P_body * L + 2 * P_head * k
(P_body: parameters other than the input-embedding table and the LM head, L: sequence length,
k: predicted positions, the only ones the LM head is applied to), and backward w.r.t. the inputs
only (the weights are frozen, so no weight gradients): about the same again, so 4 * (...) in all,
counted over each string's own steps (padding and greedy checks are not useful work and not
counted). Peak = this machine's measured fp32 matmul rate on one thread (benchmarks/matmul_peak.py).

    python benchmarks/cramming_throughput.py                       # both models, ~15-30 min
    python benchmarks/cramming_throughput.py --quick               # small: 4 strings per length
    python benchmarks/cramming_throughput.py --batch-sizes 4 8 16 32 64   # engine only
    python benchmarks/cramming_throughput.py --protocols           # paper vs fast settings, engine only
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from matmul_peak import measure_matmul_flops  # noqa: E402

from accesslib.engine.cramming import PROTOCOLS, cram, default_prefix, init_std_of, string_seed  # noqa: E402
from accesslib.engine.decoding import greedy  # noqa: E402
from accesslib.models.loading import tiny_model  # noqa: E402


def reference_cram_one(model, target, m, *, prefix, lr, betas, weight_decay, max_steps, patience, seed, std):
    """One string, the published protocol and layout. Returns (solved, tf_solved, steps, wall)."""
    t0 = time.perf_counter()
    emb = model.get_input_embeddings()
    g = torch.Generator().manual_seed(string_seed(seed, target.tolist()))
    mem = (torch.randn(m, emb.weight.shape[1], generator=g) * std).requires_grad_(True)
    opt = torch.optim.AdamW([mem], lr=lr, betas=betas, weight_decay=weight_decay, eps=1e-8)
    with torch.no_grad():
        pre = emb(torch.tensor(prefix, dtype=torch.long))
        tin = emb(target[:-1])            # t_1 .. t_{n-1}: t_1 is given, each predicts the next
    labels = target[1:]
    k = labels.numel()
    best_acc, since, tf_ok, step = -1.0, 0, False, 0
    for step in range(max_steps + 1):
        x = torch.cat([pre, mem, tin], 0)[None]
        logits = model(inputs_embeds=x).logits[0, -k:]
        loss = F.cross_entropy(logits, labels)
        acc = float((logits.argmax(-1) == labels).float().mean())
        if acc == 1.0:
            tf_ok = True
            break
        if acc > best_acc:
            best_acc, since = acc, 0
        else:
            since += 1
        if since >= patience or step == max_steps:
            break
        opt.zero_grad()
        loss.backward()
        opt.step()
    solved = False
    if tf_ok:
        out = greedy(model, mem.detach()[None], k, prefix_ids=prefix, given_ids=target[None, :1])
        solved = bool(torch.equal(out[0], labels))
    return solved, tf_ok, step, time.perf_counter() - t0


def flops_per_row_step(model, L, k):
    emb_in = model.get_input_embeddings().weight.numel()
    head = model.get_output_embeddings().weight.numel()
    body = sum(p.numel() for p in model.parameters()) - emb_in - head
    return 4 * (body * L + head * k)


def workload(name, strings, quick):
    """(LoadedModel, prefix, list of targets, lengths): ``strings`` held-out natural-text strings at
    each of 4 lengths around the shipped n50 at m = 1."""
    from accesslib.engine import targets
    from accesslib.models.loading import load_model
    from accesslib.results import bundles

    lm = load_model(name)
    try:
        n50 = next(c["n50"] for c in bundles.load("cram", name)["curves"] if c["m"] == 1)
    except (ValueError, StopIteration, KeyError, OSError):
        n50 = 8.0
    # [A]'s layout predicts n - 1 tokens from the memory: centre the lengths one token later
    centre = n50 + 1
    lengths = sorted({max(2, int(round(centre * f))) for f in (0.7, 0.9, 1.1, 1.3)})
    T = []
    for n in lengths:
        ids, _ = targets.make_targets("natural", n, strings, 1000 + n, tokenizer=lm.tokenizer,
                                      vocab_size=lm.facts.vocab_size,
                                      exclude=list(lm.tokenizer.all_special_ids))
        T += [row for row in ids]
    return lm, default_prefix(lm), T, lengths, n50


def run_curve_workload(name, args):
    lm, prefix, T, lengths, n50 = workload(name, args.strings, args.quick)
    model = lm.model
    proto = dict(PROTOCOLS["paper"])
    if args.quick:
        proto.update(max_steps=300, patience=100)
    print(f"\n== {name}: d={lm.facts.d} |V|={lm.facts.vocab_size}, {lm.facts.n_params:,} params; "
          f"shipped n50(m=1) {n50:.1f}; {args.strings} natural-text strings at n = {lengths} "
          f"({len(T)} strings), m = 1, prefix {prefix}; torch threads {torch.get_num_threads()}", flush=True)
    print(f"protocol: {proto}", flush=True)

    # warm-up (first-call allocations and kernel choices; the reference, run afterwards, gets a
    # warm model too), then the engine timed `--engine-runs` times on the same work: the runs are
    # deterministic (same successes and steps, checked) and the median wall time is reported
    cram(model, T[:2], 1, prefix_ids=prefix, seed=0, **dict(proto, max_steps=20))
    runs = []
    for _ in range(max(1, args.engine_runs)):
        runs.append(cram(model, T, 1, prefix_ids=prefix, seed=0, batch_size=args.batch_size, **proto))
    sig = [[(s.success, s.steps) for s in x.strings] for x in runs]
    if any(x != sig[0] for x in sig):
        raise RuntimeError("engine runs on the same work differ: the engine is not deterministic here")
    walls = [x.wall_time for x in runs]
    r = sorted(runs, key=lambda x: x.wall_time)[len(runs) // 2]
    eng_rate = len(r.strings) / (r.wall_time / 60)
    p = len(prefix)
    fl = sum((s.steps + 1) * flops_per_row_step(model, p + 1 + len(s.target_ids) - 1, len(s.target_ids) - 1)
             for s in r.strings)
    t = r.timings
    print(f"engine   : {r.n_success}/{len(r.strings)} solved (greedy; teacher-forced {r.n_tf_success}) in "
          f"{r.wall_time:.1f} s -> {eng_rate:.1f} strings/min; {r.steps_run} steps, {r.row_steps} row-steps "
          f"({r.row_steps / max(1, r.steps_run):.1f} per step); forward {t['forward']:.1f} s, backward "
          f"{t['backward']:.1f} s, update {t['update']:.1f} s, checks {t['checks']:.1f} s "
          f"(greedy {t['greedy']:.1f} s); median of {len(walls)} runs: "
          f"{', '.join(f'{w:.2f}' for w in walls)} s", flush=True)

    k = min(args.reference_strings or len(T), len(T))
    # the same share of every length when only some strings are run by the reference
    idx = list(range(len(T))) if k == len(T) else [i for i in range(len(T)) if i % args.strings < k // len(lengths)]
    std = init_std_of(model)
    reference_cram_one(model, torch.as_tensor(T[0]), 1, prefix=prefix, lr=proto["lr"], betas=proto["betas"],
                       weight_decay=proto["weight_decay"], max_steps=20, patience=20, seed=0, std=std)  # warm-up
    ref_solved = ref_tf = 0
    ref_wall = 0.0
    for j, i in enumerate(idx):
        solved, tf_ok, steps, wall = reference_cram_one(
            model, torch.as_tensor(T[i]), 1, prefix=prefix, lr=proto["lr"], betas=proto["betas"],
            weight_decay=proto["weight_decay"], max_steps=proto["max_steps"], patience=proto["patience"],
            seed=0, std=std)
        ref_solved += solved
        ref_tf += tf_ok
        ref_wall += wall
        if (j + 1) % 8 == 0:
            print(f"  reference {j + 1}/{len(idx)}: {ref_solved} solved, {ref_wall:.0f} s", flush=True)
    ref_rate = len(idx) / (ref_wall / 60)
    eng_same = sum(r.strings[i].success for i in idx)
    print(f"reference: {ref_solved}/{len(idx)} solved (teacher-forced {ref_tf}; engine on the same strings: "
          f"{eng_same}) in {ref_wall:.1f} s -> {ref_rate:.1f} strings/min", flush=True)
    peak = measure_matmul_flops(1024, 2.0)
    achieved = fl / r.wall_time
    ratio = eng_rate / ref_rate
    print(f"ratio engine/reference = {ratio:.1f}x strings per minute; solved {eng_same} vs {ref_solved}")
    print(f"engine useful FLOP/s ~{achieved / 1e9:.3f} GFLOP/s vs measured fp32 matmul peak "
          f"{peak / 1e9:.1f} GFLOP/s ({100 * achieved / peak:.2f}%)", flush=True)
    return dict(model=name, lengths=lengths, strings=len(T), n50_shipped=n50, protocol=proto,
                engine=dict(solved=r.n_success, tf_solved=r.n_tf_success, wall_s=round(r.wall_time, 2),
                            strings_per_min=round(eng_rate, 2), steps=r.steps_run, row_steps=r.row_steps,
                            timings={k: round(v, 2) for k, v in t.items()}, batch_size=args.batch_size,
                            runs_wall_s=[round(w, 2) for w in walls], forward=r.settings.get("forward")),
                reference=dict(strings=len(idx), solved=ref_solved, tf_solved=ref_tf, wall_s=round(ref_wall, 2),
                               strings_per_min=round(ref_rate, 2), engine_solved_same=eng_same),
                ratio=round(ratio, 2), gflops=round(achieved / 1e9, 4), peak_gflops=round(peak / 1e9, 2),
                peak_share=round(achieved / peak, 5), threads=torch.get_num_threads())


def run_batch_sizes(name, args):
    """Engine only: strings per minute against batch_size on the curve workload (the CPU default)."""
    lm, prefix, T, lengths, n50 = workload(name, args.strings, args.quick)
    proto = dict(PROTOCOLS["paper"])
    if args.quick:
        proto.update(max_steps=300, patience=100)
    print(f"{name}: {len(T)} strings at n = {lengths}, m = 1, paper protocol; torch threads "
          f"{torch.get_num_threads()}", flush=True)
    out = []
    for bs in args.batch_sizes:
        r = cram(lm.model, T, 1, prefix_ids=prefix, seed=0, batch_size=bs, **proto)
        rate = len(r.strings) / (r.wall_time / 60)
        print(f"batch_size {bs:4d}: {rate:7.1f} strings/min, {r.n_success}/{len(r.strings)} solved, "
              f"{r.wall_time:.1f} s, {r.row_steps / max(1, r.steps_run):.1f} rows per step", flush=True)
        out.append(dict(batch_size=bs, strings_per_min=round(rate, 2), solved=r.n_success,
                        wall_s=round(r.wall_time, 2)))
    return out


def build(args):
    lm = tiny_model("gpt_neox", d=args.d, vocab_size=args.vocab, layers=args.layers, seed=0,
                    initializer_range=0.3)
    T = torch.randint(0, args.vocab, (args.strings, args.n), generator=torch.Generator().manual_seed(1))
    return lm, T


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
    ap = argparse.ArgumentParser(description="cramming throughput: continuous-batching engine vs the "
                                             "published one-string-at-a-time protocol")
    ap.add_argument("--models", nargs="+", default=["tiny-d32-v257", "tiny-d64-v257"])
    ap.add_argument("--quick", action="store_true", help="small run: 300 steps, patience 100")
    ap.add_argument("--protocols", action="store_true", help="compare paper vs faster settings (engine only)")
    ap.add_argument("--batch-sizes", type=int, nargs="+", help="engine only: strings/min per batch size")
    ap.add_argument("--batch-size", type=int, default=None, help="engine batch size (default: the engine's)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads for both (default 1)")
    ap.add_argument("--strings", type=int, default=None, help="strings per length (default 16; quick 4)")
    ap.add_argument("--reference-strings", type=int, default=None,
                    help="run the reference on this many of the strings (default all)")
    ap.add_argument("--engine-runs", type=int, default=3,
                    help="time the engine this many times on the same work; report the median (default 3)")
    ap.add_argument("--json", default=None, help="write the figures to this JSON file")
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--m", type=int, default=1)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--layers", type=int, default=2)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    args.strings = args.strings or (4 if args.quick else 16)
    if args.protocols:
        run_protocols(args)
        return
    if args.batch_sizes:
        out = {name: run_batch_sizes(name, args) for name in args.models}
    else:
        out = [run_curve_workload(name, args) for name in args.models]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(results=out, argv=sys.argv[1:], created=time.strftime("%Y-%m-%d %H:%M:%S")), f, indent=1)


if __name__ == "__main__":
    main()
