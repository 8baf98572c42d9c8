"""Beyond transformers: a state-space model and a transformer of the same width, side by side.

The twins (:data:`TWINS`) were trained by ``scripts/train_tiny.py`` on the same corpus, tokenizer
(bytes), context (64), batch, step budget and seed: ``tiny-d64-v257`` (GPT-NeoX, 2 layers) and
``tiny-mamba-d64-v257`` (Mamba, 3 mixer blocks: 131,072 parameters against 132,992). This
module holds what notebook 09 and ``scripts/make_bundles.py`` need beyond the shared engine:

* :func:`radius_bundle` - the radius of the hidden states against context length
  (:func:`accesslib.engine.radius.radius_curve`) for each twin, as a results bundle of kind
  ``radius`` (``radius-<model>.json``), so the page opens without computing;
* :func:`twin_rows` - the twins' slope, R^2 and C/a from their cramming bundles, with the
  radius growth exponents;
* :func:`divergence_verdict` - the paper's caveat ("their hidden states can diverge, and then
  the support is not bounded") tested against a radius bundle;
* :func:`fast_mamba_scan` - transformers' pure-torch Mamba scan with the same arithmetic and an
  O(L) backward (training and cramming a Mamba on a CPU).
"""
from __future__ import annotations

import time
from datetime import datetime, timezone

from accesslib.config import hardware
from accesslib.results import bundles

TWINS = {"transformer": "tiny-d64-v257", "mamba": "tiny-mamba-d64-v257"}
"""The two twins of notebook 09: architecture -> embedded model name."""

RADIUS_LENGTHS = (4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
RADIUS_SOURCES = ("tokens", "natural")
#: a radius whose growth exponent k (r ~ L^k over the measured lengths) stays below this counts
#: as bounded over the measured range (k = 1 is linear growth; 0.1 is a factor 2 over 2^10)
BOUNDED_EXPONENT = 0.1


def radius_bundle(model_name: str, lengths=RADIUS_LENGTHS, per_length: int = 16, *,
                  sources=RADIUS_SOURCES, seed: int = 0, progress: bool = False, command: str = "") -> dict:
    """Measure the radius curves of one embedded model for every source (a ``radius`` bundle).

    A transformer runs past its position limit here (rotary positions extrapolate): the bundle
    records its trained context, so the page can mark the lengths beyond it."""
    from accesslib.engine.radius import radius_curve
    from accesslib.models import embedded
    from accesslib.models.loading import load_model

    lm = load_model(model_name)
    try:
        trained = embedded.info(model_name).get("context")
    except ValueError:
        trained = None
    t0 = time.perf_counter()
    curves = []
    for src in sources:
        c = radius_curve(lm, lengths, per_length, source=src, seed=seed, name=model_name,
                         allow_beyond_context=True, trained_context=trained, progress=progress)
        curves.append(c.to_dict())
    f = lm.facts
    return dict(kind="radius", version=bundles.BUNDLE_VERSION, model=model_name,
                facts=dict(d=f.d, vocab_size=f.vocab_size, dtype=f.dtype, family=f.family,
                           max_context=f.max_context),
                trained_context=trained, curves=curves,
                created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                hardware=hardware(), wall_time=round(time.perf_counter() - t0, 1), command=command)


def twin_rows(names=None, *, bound: str = "ball", dtype: str = "paper") -> list[dict]:
    """One row per twin that has a cramming bundle: d, |V|, slope a ± stderr, R^2, C and C/a
    (:func:`accesslib.results.bundles.family_table`), n50 per m, the architecture, and the
    bundle's budget check (:func:`accesslib.experiments.bundling.budget_check`) or None."""
    names = list(TWINS.values()) if names is None else list(names)
    have = set(bundles.available("cram"))
    rows = []
    for r in bundles.family_table([n for n in names if n in have], bound=bound, dtype=dtype):
        b = bundles.load("cram", r["model"])
        r = dict(r, family=b["facts"].get("family"),
                 n50={c["m"]: c["n50"] for c in b["curves"]},
                 n50_stderr={c["m"]: c["n50_stderr"] for c in b["curves"]},
                 budget_check=b.get("budget_check"))
        rows.append(r)
    return rows


def divergence_verdict(bundle: dict, source: str = "tokens") -> dict:
    """The caveat of [A] tested on one radius bundle (one source).

    For the final hidden state (what the bound counts) and for the state before the final
    norm (and the recurrent state of a state-space model): the growth exponent k of the
    maximum radius over the lengths, whether it counts as bounded (k < BOUNDED_EXPONENT), the
    ratio of the largest to the smallest radius measured, and whether the final radius stays
    under the cap the final norm allows (:func:`accesslib.engine.radius.norm_cap`)."""
    curve = next((c for c in bundle["curves"] if c["source"] == source), None)
    if curve is None:
        raise ValueError(f"source must be one of {[c['source'] for c in bundle['curves']]}; got {source!r}")
    out = dict(model=bundle["model"], family=bundle["facts"].get("family"), source=source,
               lengths=curve["lengths"], trained_context=curve.get("trained_context"), cap=curve["cap"])
    for key in ("final_inf", "final_2", "residual_inf", "residual_2", "ssm_inf"):
        vals = curve["max"].get(key)
        if not vals:
            continue
        k = curve["growth"].get(key)
        out[key] = dict(first=vals[0], last=vals[-1], max=max(vals), spread=max(vals) / min(vals),
                        exponent=k, bounded=k is not None and k < BOUNDED_EXPONENT)
    cap = curve["cap"]
    out["final_under_cap"] = (max(curve["max"]["final_inf"]) <= cap["r_inf"] * (1 + 1e-4)
                              and max(curve["max"]["final_2"]) <= cap["r_2"] * (1 + 1e-4))
    return out


def conclusion(rows, verdicts) -> str:
    """One sentence on what the comparison shows, from the twins' rows (:func:`twin_rows`) and
    radius verdicts ({model: :func:`divergence_verdict`}); every number in it is computed."""
    by = {r["family"]: r for r in rows if r.get("slope")}
    parts = []
    if "gpt_neox" in by and "mamba" in by:
        t, m = by["gpt_neox"], by["mamba"]
        more = "more" if m["slope"] > t["slope"] else "fewer"
        parts.append(f"at the same width and on the same text the Mamba holds {more} tokens per vector than the "
                     f"transformer (a = {m['slope']:.2f} against {t['slope']:.2f}, R^2 {m['r2']:.3f} and "
                     f"{t['r2']:.3f}), so with the same C_ball the ratio C/a differs "
                     f"({m['ratio']:.1f} against {t['ratio']:.1f})"
                     if m.get("ratio") and t.get("ratio") else "")
    if verdicts:
        fam = {v["family"]: v for v in verdicts.values()}
        bounded = all(v["final_2"]["bounded"] and v["final_under_cap"] for v in verdicts.values())
        L = max(v["lengths"][-1] for v in verdicts.values())
        ks = ", ".join(f"k = {v['final_2']['exponent']:+.2f} ({'Mamba' if f == 'mamba' else 'transformer'})"
                       for f, v in sorted(fam.items()))
        s = (f"the final hidden state stays bounded up to L = {L} for "
             f"{'both twins' if len(fam) > 1 else 'the twin measured'} ({ks}, always under the cap of the "
             f"final norm)" if bounded else f"the final hidden state is not bounded over L <= {L} ({ks})")
        mam = fam.get("mamba")
        if mam is not None:
            grow = [k for k in ("residual_2", "ssm_inf") if k in mam and not mam[k]["bounded"]]
            s += (", and the Mamba's states before the norm do not diverge either ("
                  + ", ".join(f"{k}: k = {mam[k]['exponent']:+.2f}" for k in ("residual_2", "ssm_inf") if k in mam)
                  + ")" if not grow else
                  ", while the Mamba's states before the norm grow ("
                  + ", ".join(f"{k}: k = {mam[k]['exponent']:+.2f}" for k in grow)
                  + "), which its final norm hides from the bound")
        parts.append(s)
    parts = [p for p in parts if p]
    if not parts:
        return ""
    text = "; ".join(parts)
    return text[0].upper() + text[1:] + "."


def fast_mamba_scan() -> None:
    """Make transformers' pure-torch Mamba scan train in O(L) memory traffic, with the same arithmetic.

    Its sequential scan reads step t as ``discrete_A[:, :, t]`` (a select): each select's backward
    writes a zero tensor the size of the whole sequence, so one backward pass costs O(L^2) and
    takes about 90% of a training step on a CPU. This replacement reads the steps with
    ``unbind`` instead, and is otherwise the same code: the forward runs the same operations in
    the same order, and every gradient gets the same single non-zero term, so weights come out
    the same (``tests/models/test_mamba_training.py`` checks both outputs and gradients).

    Called explicitly (never at import) by ``scripts/train_tiny.py --arch mamba`` and by
    ``scripts/make_bundles.py`` for Mamba models; idempotent."""
    import torch
    import torch.nn.functional as F
    from transformers.models.mamba import modeling_mamba as mm

    if getattr(mm.mamba_selective_scan, "accesslib_unbind", False):
        return
    reference = mm.mamba_selective_scan

    def mamba_selective_scan(hidden_states, dt, A, B, C, D=None, z=None, delta_bias=None,
                             delta_softplus=False, return_last_state=False, use_mambapy=False,
                             use_associative_scan=False, **kwargs):
        if use_mambapy and mm.is_mambapy_available():   # not the path we replace
            return reference(hidden_states, dt, A, B, C, D, z, delta_bias, delta_softplus,
                             return_last_state, use_mambapy, use_associative_scan, **kwargs)
        batch_size, intermediate_size, seq_len = hidden_states.shape
        input_dtype = hidden_states.dtype
        if delta_bias is not None:
            dt = dt + delta_bias.to(dt.dtype)[..., None]
        if delta_softplus:
            dt = F.softplus(dt)
        B = B.transpose(1, 2)
        C = C.transpose(1, 2)
        discrete_A = torch.exp(A[None, :, None, :] * dt[:, :, :, None])
        discrete_B = dt[:, :, :, None] * B[:, None, :, :].float()
        deltaB_u = discrete_B * hidden_states[:, :, :, None].float()
        ssm_state = torch.zeros(batch_size, intermediate_size, A.shape[-1], dtype=input_dtype,
                                device=hidden_states.device)
        scan_outputs = []
        for a_t, bu_t, c_t in zip(discrete_A.unbind(2), deltaB_u.unbind(2), C.unbind(1)):
            ssm_state = a_t * ssm_state + bu_t
            scan_outputs.append(torch.matmul(ssm_state.to(input_dtype), c_t.unsqueeze(-1))[:, :, 0])
        scan_output = torch.stack(scan_outputs, dim=-1)
        if D is not None:
            scan_output = scan_output + hidden_states * D[None, :, None]
        if z is not None:
            scan_output = scan_output * F.silu(z)
        if return_last_state:
            return scan_output, ssm_state
        return scan_output

    mamba_selective_scan.accesslib_unbind = True
    mamba_selective_scan.reference = reference
    mm.mamba_selective_scan = mamba_selective_scan
