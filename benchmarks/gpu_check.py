"""A prepared GPU check of the cramming engine and the geometry: one script, at most 8 minutes.

    python benchmarks/gpu_check.py                          # on the GPU, about 7 minutes
    python benchmarks/gpu_check.py --device cpu --quick     # tiny sizes, to test the script itself
    python benchmarks/gpu_check.py --out DIR --budget 420 --sections checks,embedded,throughput

Needs only torch and transformers (and what transformers itself installs: numpy, safetensors,
tokenizers, tqdm) plus a copy of this repository: it runs from the repository root with no
install, no network and no package registry (the repository is put on ``sys.path``, and the
hub is switched offline). scipy is optional: ``accesslib.engine.geometry`` imports the theory
modules, which use it, so without scipy the geometry checks are skipped and the JSON says why.

Three sections, each recorded with its status ("ok", "error" with the error, or "skipped" with
the reason), its results and its seconds:

1. ``checks``: the engine and geometry on the device against the CPU, on the embedded default
   model (``accesslib.models.embedded.DEFAULT``) in float32 - forward logits; the engine's lean
   forward against the transformers forward on the device; greedy decoding
   with and without the cache, and on the device against the CPU; cramming the same strings
   under the same settings on both (initial losses, solved counts, and whether every memory
   crammed on the device also decodes to its string on the CPU); the geometry's support
   samples and statistics, the decoder-cell census and the effective eps. Each check has a
   tolerance and a pass flag; rows that can differ only at near-ties of an argmax are judged
   by the share that agrees.
2. ``embedded``: cramming the embedded models in float32 and in bfloat16 weights (memory and
   optimiser stay float32 in the engine): strings solved, steps (median), wall time, strings
   per minute, the engine's own timings when it reports them (with ``profile=True`` where cram
   takes it, so the split into forward, backward, update and checks is exact on CUDA).
3. ``throughput``: models built from the published configs of pythia-160m, Llama-3.2-1B and
   Gemma-3-1B (random weights in bfloat16: speed needs no training) at 1k to 64k tokens per
   step (strings x length, two lengths): step time, tokens per second, strings per minute,
   share of the device's measured bfloat16 matmul peak, peak memory. FLOPs are estimated as in
   benchmarks/cramming_throughput.py: 4 x (P_body x L + P_head x k) per string and step (L the
   sequence length, k the predicted positions; backward w.r.t. the inputs only, the weights are
   frozen), attention scores not counted, so the share is a lower bound. Strings per minute
   assume every string runs the paper protocol's 3000 steps (its cap: what a failing string
   costs; solved strings stop sooner): B x 60 / (3000 x step time). These runs do not ask for
   profile syncs, so their timings split shows where the host waited, not exact kernel time.

A global time guard skips whatever would start after ``--budget`` seconds (default 420, 7
minutes) and records it as skipped. The JSON (``gpu_check.json``) and a markdown table
(``gpu_check.md``) go to ``--out`` (default: $OUT when set, else ./gpu_check_out); both are
rewritten after every section, so a run stopped from outside still leaves what it measured.
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import math
import os
import platform
import statistics
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)          # this copy of the repository, installed or not
os.environ.setdefault("HF_HUB_OFFLINE", "1")       # no network on the GPU machine
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

NEEDS = ("torch", "transformers", "numpy", "safetensors", "tokenizers", "tqdm")
OPTIONAL = {"scipy": "the geometry checks (accesslib.engine.geometry imports accesslib.theory, which uses scipy)"}
SECTIONS = ("checks", "embedded", "throughput")
PAPER_STEPS = 3000   # the paper protocol's cap on steps per string (accesslib.engine.cramming.PROTOCOLS)

# Published config.json values (random weights are drawn from them; only the shapes matter for speed).
CONFIGS = {
    # https://huggingface.co/EleutherAI/pythia-160m/resolve/main/config.json; the same numbers in the
    # Pythia training config (github.com/EleutherAI/pythia, models/160M/pythia-160m.yml: 12 layers,
    # width 768, 12 heads, rotary-pct 0.25, untied output layer, parallel residual) and |V| = 50304
    # in [A]'s table (accesslib/data/reference.json)
    "pythia-160m": dict(
        model_type="gpt_neox", architectures=["GPTNeoXForCausalLM"], hidden_size=768, num_hidden_layers=12,
        num_attention_heads=12, intermediate_size=3072, hidden_act="gelu", rotary_pct=0.25,
        rotary_emb_base=10000, use_parallel_residual=True, layer_norm_eps=1e-5, max_position_embeddings=2048,
        vocab_size=50304, tie_word_embeddings=False, bos_token_id=0, eos_token_id=0),
    # meta-llama/Llama-3.2-1B config.json, as copied in github.com/kevinstephano/thunder_model_blocks,
    # hf_llama/llama_config.py (LLAMA_3_2_1B_CFG)
    "Llama-3.2-1B": dict(
        model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=2048, intermediate_size=8192,
        num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8, head_dim=64, hidden_act="silu",
        max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=500000.0,
        rope_scaling={"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                      "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        attention_bias=False, mlp_bias=False, vocab_size=128256, tie_word_embeddings=True,
        bos_token_id=128000, eos_token_id=128001),
    # google/gemma-3-1b config.json, as copied in github.com/Liwink/gemma-jax, models/README.md
    "Gemma-3-1B": dict(
        model_type="gemma3_text", architectures=["Gemma3ForCausalLM"], hidden_size=1152, intermediate_size=6912,
        num_hidden_layers=26, num_attention_heads=4, num_key_value_heads=1, head_dim=256,
        hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=256, rms_norm_eps=1e-6,
        rope_theta=1000000.0, rope_local_base_freq=10000.0, rope_scaling=None, sliding_window=512,
        sliding_window_pattern=6, max_position_embeddings=32768, attn_logit_softcapping=None,
        final_logit_softcapping=None, vocab_size=262144, tie_word_embeddings=True, pad_token_id=0,
        bos_token_id=2, eos_token_id=1),
}
#: --quick: the same families, shrunk so a CPU runs them in seconds
QUICK_SHAPE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=1, vocab_size=512,
                   bos_token_id=0, eos_token_id=0)


# --------------------------------------------------------------------------- bookkeeping

class Clock:
    """Seconds used since the start, against the budget."""

    def __init__(self, budget: float):
        self.t0 = time.perf_counter()
        self.budget = float(budget)

    def used(self) -> float:
        return time.perf_counter() - self.t0

    def left(self) -> float:
        return self.budget - self.used()


def _num(x):
    """A JSON-safe number (None for NaN/inf), rounded to 6 significant digits."""
    if x is None:
        return None
    x = float(x)
    return float(f"{x:.6g}") if math.isfinite(x) else None


def _sync(dev):
    import torch
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _peak_reset(dev):
    import torch
    if dev.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)


def _peak_bytes(dev):
    import torch
    return int(torch.cuda.max_memory_allocated(dev)) if dev.type == "cuda" else None


def environment(dev) -> dict:
    import torch
    env = {"python": platform.python_version(), "platform": platform.platform(), "device": str(dev),
           "torch": torch.__version__, "cpu_threads": torch.get_num_threads(),
           "packages": {name: importlib.util.find_spec(name) is not None for name in NEEDS + tuple(OPTIONAL)}}
    try:
        import transformers
        env["transformers"] = transformers.__version__
    except ImportError:
        env["transformers"] = None
    import accesslib
    env["accesslib"] = os.path.dirname(os.path.abspath(accesslib.__file__))   # the copy in use
    if dev.type == "cuda":
        p = torch.cuda.get_device_properties(dev)
        env.update(gpu=p.name, gpu_memory_bytes=int(p.total_memory), capability=f"{p.major}.{p.minor}",
                   cuda=torch.version.cuda, tf32_matmul=bool(torch.backends.cuda.matmul.allow_tf32))
    return env


def _cram_kwargs(**extra):
    """Keyword arguments the installed cram() accepts, of those asked for (batch_size and profile
    are newer)."""
    import inspect

    from accesslib.engine.cramming import cram
    params = inspect.signature(cram).parameters
    return {k: v for k, v in extra.items() if k in params}


def _timings(res) -> dict:
    t = getattr(res, "timings", None) or {}
    return {k: _num(v) for k, v in t.items() if isinstance(v, (int, float))}


# --------------------------------------------------------------------------- 1. checks

def _check(results, name, passed, **values):
    results.append({"name": name, "pass": bool(passed), **{k: (_num(v) if isinstance(v, float) else v)
                                                          for k, v in values.items()}})


def _rel_diff(a, b) -> float:
    import torch
    a, b = torch.as_tensor(a).double().cpu(), torch.as_tensor(b).double().cpu()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def section_checks(dev, quick, clock) -> dict:
    import torch

    from accesslib.engine.cramming import cram, init_std_of, protocol_settings
    from accesslib.engine.decoding import greedy
    from accesslib.engine.targets import random_tokens
    from accesslib.models import embedded, facts
    from accesslib.models.loading import load_model

    name = embedded.DEFAULT
    on_cpu = load_model(name, "float32", "cpu").model
    on_dev = load_model(name, "float32", str(dev)).model
    V, d = facts.shared_vocab_size(on_cpu), on_cpu.get_input_embeddings().weight.shape[1]
    results = []
    g = torch.Generator().manual_seed(0)

    # forward logits
    ids = torch.randint(0, V, (8, 16), generator=g)
    with torch.no_grad():
        a = on_dev(ids.to(dev)).logits.float().cpu()
        b = on_cpu(ids).logits.float()
    _check(results, "forward logits, device vs cpu (max rel diff <= 1e-4)", _rel_diff(a, b) <= 1e-4,
           max_rel_diff=_rel_diff(a, b))

    # the engine's lean forward against the transformers forward on the device (bit-identical on
    # the CPU, tests/engine/test_lean.py; on CUDA the attention kernel may differ with strides)
    from accesslib.engine.lean import lean_forward
    fwd = lean_forward(on_dev)
    if fwd is None:
        _check(results, "lean forward on the device (not used for this model)", True, used=False)
    else:
        x = torch.randn(8, 16, d, generator=g).to(dev)
        with torch.no_grad():
            a = fwd(x, 12).float().cpu()
            b = on_dev(inputs_embeds=x, logits_to_keep=12).logits.float().cpu()
        _check(results, "lean forward vs transformers forward on the device (max rel diff <= 1e-5)",
               _rel_diff(a, b) <= 1e-5, max_rel_diff=_rel_diff(a, b), bit_identical=bool(torch.equal(a, b)))

    # greedy decoding: cache vs no cache on the device, device vs cpu
    rows, n_tok = (8, 4) if quick else (64, 8)
    mem = torch.randn(rows, 1, d, generator=g) * init_std_of(on_cpu)
    with_cache = greedy(on_dev, mem, n_tok, cache=True).cpu()
    no_cache = greedy(on_dev, mem, n_tok, cache=False).cpu()
    ref = greedy(on_cpu, mem, n_tok, cache=True)
    same_cache = float((with_cache == no_cache).all(1).double().mean())
    same_cpu = float((with_cache == ref).all(1).double().mean())
    _check(results, "greedy with vs without cache on the device (rows equal >= 95%)", same_cache >= 0.95,
           rows=rows, tokens=n_tok, share_equal=same_cache)
    _check(results, "greedy on the device vs cpu (rows equal >= 95%)", same_cpu >= 0.95,
           rows=rows, tokens=n_tok, share_equal=same_cpu)

    # cramming the same strings on both
    B, n, steps = (4, 2, 30) if quick else (16, 8, 500)
    targets = random_tokens(V, n, B, seed=0)
    settings = protocol_settings("paper", max_steps=steps)
    out = {}
    for label, model in (("device", on_dev), ("cpu", on_cpu)):
        first = []

        def on_step(info, first=first):
            if not first:
                first.append(list(info.losses))
        res = cram(model, targets, 1, seed=0, on_step=on_step, **settings, **_cram_kwargs(batch_size=B))
        out[label] = (res, first[0] if first else None)
    (rd, ld), (rc, lc) = out["device"], out["cpu"]
    if ld is not None and lc is not None and len(ld) == len(lc):
        diff = _rel_diff(ld, lc)
        _check(results, "cram: losses at the first step, device vs cpu (max rel diff <= 1e-4)", diff <= 1e-4,
               max_rel_diff=diff)
    solved_d, solved_c = sum(s.success for s in rd.strings), sum(s.success for s in rc.strings)
    same = sum(a.success == b.success for a, b in zip(rd.strings, rc.strings)) / max(1, B)
    _check(results, f"cram: solved on the device vs cpu ({B} strings of {n} tokens, <= {steps} steps; "
           "trajectories may part after rounding: |difference| <= max(1, B/8))",
           abs(solved_d - solved_c) <= max(1, B // 8), solved_device=solved_d, solved_cpu=solved_c,
           share_same_outcome=same, wall_device_s=_num(rd.wall_time), wall_cpu_s=_num(rc.wall_time))
    ok = checked = 0
    for s in rd.strings:
        if not s.success:
            continue
        given = s.target_ids[:1] if s.first_token_as_input else []
        want = s.target_ids[len(given):]
        got = greedy(on_cpu, s.memory[None].float(), len(want), prefix_ids=s.prefix_ids or None,
                     given_ids=given)[0].tolist()
        checked += 1
        ok += got == list(want)
    _check(results, "cram: memories solved on the device decode to their strings on the cpu (>= 90%)",
           checked == 0 or ok >= 0.9 * checked, checked=checked, decode_on_cpu=ok)

    if importlib.util.find_spec("scipy") is None:
        results.append({"name": "geometry", "pass": None, "skipped": "scipy is not installed: " + OPTIONAL["scipy"]})
        return {"model": name, "results": results, "passed": all(r["pass"] for r in results if r["pass"] is not None)}

    from accesslib.engine import geometry as geo
    lengths, per = ([4, 8], 8) if quick else ([4, 16, 64], 64)
    xs_d = geo.sample_support(on_dev, lengths, per, seed=0, progress=False)
    xs_c = geo.sample_support(on_cpu, lengths, per, seed=0, progress=False)
    st_d, st_c = geo.support_stats(xs_d.to(dev), seed=0), geo.support_stats(xs_c, seed=0)
    diff = _rel_diff(xs_d, xs_c)
    _check(results, "geometry: support samples, device vs cpu (max diff / r_inf <= 1e-4)", diff <= 1e-4,
           samples=int(xs_c.shape[0]), max_rel_diff=diff)
    _check(results, "geometry: r_inf, r_2 and min cosine, device vs cpu (rel diff <= 1e-4)",
           abs(st_d.r_inf / st_c.r_inf - 1) <= 1e-4 and abs(st_d.r_2 / st_c.r_2 - 1) <= 1e-4
           and abs(st_d.min_cos - st_c.min_cos) <= 1e-4,
           r_inf=st_c.r_inf, r_inf_device=st_d.r_inf, min_cos=st_c.min_cos, min_cos_device=st_d.min_cos)
    W_d, b_d = geo.decoder_weights(on_dev)
    W_c, b_c = geo.decoder_weights(on_cpu)
    n_cells = 5000 if quick else 200_000
    t = time.perf_counter()
    c_d = geo.cell_shares(W_d, b_d, n_samples=n_cells, lo=st_c.lo, hi=st_c.hi, seed=0, progress=False)
    t_d = time.perf_counter() - t
    t = time.perf_counter()
    c_c = geo.cell_shares(W_c, b_c, n_samples=n_cells, lo=st_c.lo, hi=st_c.hi, seed=0, progress=False)
    t_c = time.perf_counter() - t
    tv = float(abs(c_d.counts - c_c.counts).sum()) / 2 / n_cells
    _check(results, "geometry: cell census on the same draws, device vs cpu (total variation <= 1e-3)",
           tv <= 1e-3, samples=n_cells, total_variation=tv, seconds_device=t_d, seconds_cpu=t_c)
    k = 4 if quick else 16
    e_d = geo.effective_eps(on_dev, n_directions=k, steps=12 if quick else 24, seed=0)
    e_c = geo.effective_eps(on_cpu, n_directions=k, steps=12 if quick else 24, seed=0)
    import numpy as np
    close = np.isclose(e_d.rel, e_c.rel, rtol=0.1) | (np.isinf(e_d.rel) & np.isinf(e_c.rel))
    _check(results, "geometry: effective eps per direction, device vs cpu (within 10% for >= 75%)",
           close.mean() >= 0.75, directions=k, share_close=float(close.mean()),
           median_device=_num(np.median(e_d.rel)), median_cpu=_num(np.median(e_c.rel)))
    return {"model": name, "results": results, "passed": all(r["pass"] for r in results if r["pass"] is not None)}


# --------------------------------------------------------------------------- 2. embedded models

def section_embedded(dev, quick, clock, deadline) -> dict:
    from accesslib.engine.cramming import cram, protocol_settings
    from accesslib.engine.targets import random_tokens
    from accesslib.models import embedded, facts
    from accesslib.models.loading import load_model

    names = [embedded.DEFAULT] if quick else embedded.names()
    B, n = (4, 2) if quick else (32, 8)
    settings = protocol_settings("paper", **({"max_steps": 30} if quick else {}))
    runs, last = [], 0.0
    for name in names:
        for dtype in ("float32", "bfloat16"):
            row = {"model": name, "dtype": dtype, "strings": B, "n": n, "m": 1,
                   "max_steps": settings["max_steps"]}
            if clock.used() + last > deadline:
                row["skipped"] = f"time guard: this section stops starting runs after {deadline:.0f} s"
                runs.append(row)
                continue
            lm = load_model(name, dtype, str(dev))
            targets = random_tokens(facts.shared_vocab_size(lm.model), n, B, seed=0)
            _peak_reset(dev)
            res = cram(lm, targets, 1, seed=0, **settings, **_cram_kwargs(batch_size=B, profile=True))
            steps = [s.steps for s in res.strings]
            solved = sum(s.success for s in res.strings)
            row.update(solved=solved, steps_median=_num(statistics.median(steps)), steps_max=max(steps),
                       steps_run=getattr(res, "steps_run", None), row_steps=getattr(res, "row_steps", None),
                       wall_s=_num(res.wall_time), solved_per_min=_num(solved * 60 / res.wall_time),
                       peak_mem_bytes=_peak_bytes(dev), timings=_timings(res))
            last = res.wall_time
            runs.append(row)
    return {"runs": runs}


# --------------------------------------------------------------------------- 3. throughput

def build_model(name, dev, quick):
    """A random-weight bfloat16 model from CONFIGS[name] (shrunk with --quick), frozen, on dev."""
    import torch
    import transformers

    cfg = dict(CONFIGS[name])
    if quick:
        cfg.update(QUICK_SHAPE)
        if "head_dim" in cfg:
            cfg["head_dim"] = 32
        cfg["num_attention_heads"] = 2
        if "num_key_value_heads" in cfg:
            cfg["num_key_value_heads"] = 1
        if cfg["model_type"] == "gemma3_text":
            cfg["query_pre_attn_scalar"] = 32
    model_type = cfg.pop("model_type")
    config = transformers.AutoConfig.for_model(model_type, **cfg)
    with torch.device(dev):
        try:
            model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
        except TypeError:   # transformers before 4.56 calls it torch_dtype
            model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16)
    model = model.to(device=dev, dtype=torch.bfloat16).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def param_counts(model) -> dict:
    emb = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    total = sum(p.numel() for p in model.parameters())            # a tied matrix counts once
    tied = head.data_ptr() == emb.data_ptr()
    body = total - emb.numel() - (0 if tied else head.numel())
    return {"total": int(total), "body": int(body), "head": int(head.numel()), "tied": bool(tied)}


def _grid(quick):
    """(length n, strings B) pairs: tokens per step B x n from 1k to 64k at two lengths."""
    if quick:
        return [(16, 4), (16, 16), (64, 4)]
    return [(64, 16), (64, 64), (64, 256), (64, 1024), (1024, 1), (1024, 4), (1024, 16), (1024, 64)]


def section_throughput(dev, quick, clock) -> dict:
    import torch
    from matmul_peak import measure_matmul_flops

    from accesslib.engine.cramming import cram, protocol_settings

    OOM = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
    peak = measure_matmul_flops(256 if quick else 8192, 0.2 if quick else 3.0, str(dev), dtype=torch.bfloat16)
    steps = 4 if quick else 6
    settings = protocol_settings("paper", max_steps=steps)
    out = {"bf16_matmul_peak_flops": _num(peak), "steps_per_run": steps, "models": []}
    for name in CONFIGS:
        entry = {"model": name, "runs": []}
        out["models"].append(entry)
        if clock.left() <= 0:
            entry["skipped"] = "time guard"
            continue
        t = time.perf_counter()
        model = build_model(name, dev, quick)
        entry["build_s"] = _num(time.perf_counter() - t)
        pc = param_counts(model)
        entry["params"] = pc
        V = model.get_input_embeddings().weight.shape[0]
        last_rate = None        # tokens per second of the previous run: to predict the next one
        for n, B in _grid(quick):
            row = {"n": n, "strings": B, "tokens_per_step": n * B}
            need = 0.0 if last_rate is None else (steps + 2) * n * B / last_rate
            if clock.left() < need:
                row["skipped"] = f"time guard: about {need:.0f} s needed, {max(0.0, clock.left()):.0f} s left"
                entry["runs"].append(row)
                continue
            targets = torch.randint(0, V, (B, n), generator=torch.Generator().manual_seed(0))
            stamps = []
            _peak_reset(dev)
            try:
                res = cram(model, targets, 1, seed=0, verify=False,
                           on_step=lambda info, stamps=stamps: stamps.append((info.step, info.elapsed)),
                           **settings, **_cram_kwargs(batch_size=B))
            except OOM as err:
                row["error"] = f"out of memory: {str(err).splitlines()[0]}"
                entry["runs"].append(row)
                continue
            _sync(dev)
            if len(stamps) >= 3 and stamps[-1][0] > stamps[1][0]:
                step_s = (stamps[-1][1] - stamps[1][1]) / (stamps[-1][0] - stamps[1][0])   # after warm-up
            else:
                step_s = res.wall_time / max(1, getattr(res, "steps_run", steps) or steps)
            L, k = n, n - 1                     # paper protocol: [memory][t_1 .. t_{n-1}], t_2..t_n predicted
            flops = 4.0 * B * (pc["body"] * L + pc["head"] * k)
            last_rate = n * B / step_s
            row.update(step_s=_num(step_s), tokens_per_s=_num(last_rate),
                       strings_per_min=_num(B * 60 / (PAPER_STEPS * step_s)),
                       flops_per_step=_num(flops), flops_share_of_peak=_num(flops / step_s / peak),
                       peak_mem_bytes=_peak_bytes(dev), wall_s=_num(res.wall_time),
                       steps_run=getattr(res, "steps_run", None), oom_retries=getattr(res, "oom_retries", None),
                       timings=_timings(res))
            entry["runs"].append(row)
        del model
        _peak_reset(dev)
    return out


# --------------------------------------------------------------------------- output

def _mb(x):
    return "" if x is None else f"{x / 2**20:,.0f}"


def _cell(x, fmt="{:.3g}"):
    return "" if x is None else fmt.format(x)


def markdown(report) -> str:
    env = report["env"]
    lines = [f"# GPU check ({report['started']})", "",
             f"Device {env.get('gpu', env['device'])}, torch {env['torch']}, transformers {env.get('transformers')}, "
             f"budget {report['budget_s']:.0f} s, used {report['elapsed_s']:.0f} s"
             + (" (--quick)" if report["quick"] else "") + ".", ""]
    for name in SECTIONS:
        sec = report["sections"].get(name)
        if sec is None:
            continue
        lines += [f"## {name}", "", f"status: {sec['status']}, {sec.get('seconds', 0):.1f} s"
                  + (f" - {sec['reason']}" if sec.get("reason") else "")
                  + (f" - {sec['error']}" if sec.get("error") else ""), ""]
        if sec["status"] != "ok":
            continue
        if name == "checks":
            lines += [f"model {sec['model']}, all passed: {sec['passed']}", "",
                      "| check | pass | values |", "| --- | --- | --- |"]
            for r in sec["results"]:
                vals = ", ".join(f"{k}={v}" for k, v in r.items() if k not in ("name", "pass"))
                lines.append(f"| {r['name']} | {r['pass']} | {vals} |")
        elif name == "embedded":
            lines += ["| model | dtype | solved | steps (median) | wall s | solved / min | peak MiB |",
                      "| --- | --- | --- | --- | --- | --- | --- |"]
            for r in sec["runs"]:
                if "skipped" in r:
                    lines.append(f"| {r['model']} | {r['dtype']} | skipped: {r['skipped']} | | | | |")
                    continue
                lines.append(f"| {r['model']} | {r['dtype']} | {r['solved']}/{r['strings']} | {r['steps_median']} | "
                             f"{_cell(r['wall_s'])} | {_cell(r['solved_per_min'])} | {_mb(r['peak_mem_bytes'])} |")
        elif name == "throughput":
            lines += [f"bf16 matmul peak: {_cell(sec['bf16_matmul_peak_flops'] / 1e12, '{:.4g}')} TFLOP/s, "
                      f"{sec['steps_per_run']} steps per run", "",
                      "| model | n | strings | tokens/step | step s | tokens/s | strings/min at 3000 steps "
                      "| share of peak | peak MiB |",
                      "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
            for m in sec["models"]:
                if "skipped" in m:
                    lines.append(f"| {m['model']} | skipped: {m['skipped']} | | | | | | | |")
                for r in m["runs"]:
                    if "step_s" not in r:
                        why = r.get("skipped") or r.get("error")
                        lines.append(f"| {m['model']} | {r['n']} | {r['strings']} | {r['tokens_per_step']} | {why} "
                                     "| | | | |")
                        continue
                    lines.append(f"| {m['model']} | {r['n']} | {r['strings']} | {r['tokens_per_step']} | "
                                 f"{_cell(r['step_s'])} | {_cell(r['tokens_per_s'], '{:,.0f}')} | "
                                 f"{_cell(r['strings_per_min'])} | {_cell(r['flops_share_of_peak'], '{:.1%}')} | "
                                 f"{_mb(r['peak_mem_bytes'])} |")
        lines.append("")
    return "\n".join(lines)


def write(report, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "gpu_check.json"), "w") as f:
        json.dump(report, f, indent=1)
    with open(os.path.join(out_dir, "gpu_check.md"), "w") as f:
        f.write(markdown(report))


def run_section(report, name, clock, fn, out_dir):
    if clock.left() <= 0:
        report["sections"][name] = {"status": "skipped", "reason": f"time guard: {clock.budget:.0f} s used"}
    else:
        t = time.perf_counter()
        try:
            sec = {"status": "ok", **fn()}
        except Exception as err:   # noqa: BLE001 - record it and go on to the next section
            sec = {"status": "error", "error": f"{type(err).__name__}: {err}",
                   "traceback": traceback.format_exc(limit=8)}
        sec["seconds"] = _num(time.perf_counter() - t)
        report["sections"][name] = sec
    report["elapsed_s"] = _num(clock.used())
    write(report, out_dir)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="cuda (default when there is one) or cpu")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (to test the script, e.g. on a CPU)")
    ap.add_argument("--out", default=os.environ.get("OUT") or "gpu_check_out", help="output folder")
    ap.add_argument("--budget", type=float, default=420.0, help="seconds after which nothing new starts")
    ap.add_argument("--sections", default=",".join(SECTIONS), help="comma-separated: " + ", ".join(SECTIONS))
    args = ap.parse_args(argv)
    missing = [m for m in NEEDS if importlib.util.find_spec(m) is None]
    if missing:
        sys.exit(f"gpu_check needs {', '.join(NEEDS)}; missing here: {', '.join(missing)}")
    wanted = [s.strip() for s in args.sections.split(",") if s.strip()]
    bad = [s for s in wanted if s not in SECTIONS]
    if bad:
        ap.error(f"--sections must be among {', '.join(SECTIONS)}; got {', '.join(bad)}")

    clock = Clock(args.budget)
    import torch
    dev = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if dev.type == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda, but torch sees no CUDA device here; use --device cpu")
    report = {"script": "benchmarks/gpu_check.py", "started": datetime.datetime.now().isoformat(timespec="seconds"),
              "argv": list(sys.argv[1:] if argv is None else argv), "quick": bool(args.quick),
              "budget_s": args.budget, "elapsed_s": 0.0, "env": environment(dev), "sections": {}}
    jobs = {"checks": lambda: section_checks(dev, args.quick, clock),
            "embedded": lambda: section_embedded(dev, args.quick, clock, deadline=0.5 * args.budget),
            "throughput": lambda: section_throughput(dev, args.quick, clock)}
    for name in SECTIONS:
        if name in wanted:
            run_section(report, name, clock, jobs[name], args.out)
    for name, sec in report["sections"].items():
        extra = f" ({sec.get('reason') or sec.get('error')})" if sec["status"] != "ok" else ""
        print(f"{name}: {sec['status']}, {sec.get('seconds') or 0:.1f} s{extra}")
    print(f"wrote {os.path.join(args.out, 'gpu_check.json')} and gpu_check.md ({clock.used():.0f} s)")
    return report


if __name__ == "__main__":
    try:
        from transformers.utils import logging as hf_logging
        hf_logging.disable_progress_bar()     # no "Loading weights" bars in the log
    except (ImportError, AttributeError):
        pass
    main()
