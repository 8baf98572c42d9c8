"""Making results bundles (accesslib.experiments.bundling, scripts/make_bundles.py) in fast mode."""
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from accesslib.experiments import bundling  # noqa: E402
from accesslib.models import embedded  # noqa: E402
from accesslib.results import bundles  # noqa: E402
from accesslib.results.bundles import predicted_slopes  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_regenerated_bundle_has_recorded_shape(fast_bundle):
    b = fast_bundle
    assert b["model"] == embedded.DEFAULT and b["kind"] == "cram"
    assert [c["m"] for c in b["curves"]] == [1, 2]
    for c in b["curves"]:
        assert len(c["lengths"]) == len(c["successes"]) == len(c["totals"]) >= 1
        assert all(0 <= s <= t for s, t in zip(c["successes"], c["totals"]))
    assert b["settings"]["max_steps"] == 40 and b["samples"] == 2
    assert b["hardware"]["cores"] >= 1 and b["wall_time"] > 0 and b["created"]
    geo = b["geometry"]
    assert len(geo["widths"]) == b["facts"]["d"] and geo["r_inf"] > 0
    shipped = bundles.available("cram")
    if embedded.DEFAULT in shipped:   # the shipped bundle has the same keys
        ref = bundles.load("cram", embedded.DEFAULT)
        added_later = {"budget_maps", "remeasured"}   # make_bundles.py --add-budget-map, --add-remeasure
        assert set(ref) - added_later == set(b) - added_later
        assert set(ref["curves"][0]) == set(b["curves"][0])
        # "command" is recorded only when the geometry is re-measured on its own (--geometry-only)
        assert set(ref["geometry"]) <= set(b["geometry"]) | {"semi_axes", "command"}
        assert set(b["geometry"]) <= set(ref["geometry"]) | {"semi_axes"}


def test_make_bundles_grid_per_m_geometry_file_and_geometry_only(fast_bundle, tmp_path):
    geo = dict(fast_bundle["geometry"], note="measured before")
    gfile = tmp_path / "g.json"
    gfile.write_text(json.dumps(geo))
    script = str(ROOT / "scripts" / "make_bundles.py")
    cmd = [sys.executable, script, "--models", embedded.DEFAULT, "--m", "1", "2", "--samples", "2",
           "--source", "tokens", "--search", "grid", "--lengths", "1:2,3", "2:4", "--max-steps", "20",
           "--patience", "10", "--bos", "--geometry-file", str(gfile), "--out", str(tmp_path),
           "--store", str(tmp_path / "s.sqlite")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    b = bundles.load("cram", embedded.DEFAULT, tmp_path)
    assert [c["lengths"] for c in b["curves"]] == [[2, 3], [4]]          # the grid, per m
    assert [sum(c["totals"]) for c in b["curves"]] == [4, 2]
    assert b["source"] == "tokens" and b["settings"]["patience"] == 10
    from accesslib.engine.cramming import default_prefix
    from accesslib.models.loading import load_model
    assert b["settings"]["prefix_ids"] == (default_prefix(load_model(embedded.DEFAULT)) or None)
    assert b["geometry"] == geo                                          # taken, not measured
    # --geometry-only keeps the curves and replaces the geometry with a fresh measurement
    proc = subprocess.run([sys.executable, script, "--geometry-only", "--models", embedded.DEFAULT,
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    b2 = bundles.load("cram", embedded.DEFAULT, tmp_path)
    assert b2["curves"] == b["curves"] and "note" not in b2["geometry"]
    g = b2["geometry"]
    assert g["s_conv_zero_hit"] == "bound" and g["s_conv"] < 0 and "--geometry-only" in g["command"]
    assert sum(g["cell_hits"]["counts"]) == g["cells_n_samples"]
    assert len(g["effective_eps"]["rel"]) == 16
    # a record from a file, with the effective eps re-measured the way the strings were crammed
    proc = subprocess.run([sys.executable, script, "--geometry-only", "--models", embedded.DEFAULT,
                           "--geometry-file", str(gfile), "--effective-eps", "2", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    g3 = bundles.load("cram", embedded.DEFAULT, tmp_path)["geometry"]
    assert {k: v for k, v in g3.items() if k != "effective_eps"} == \
        {k: v for k, v in geo.items() if k != "effective_eps"}
    assert len(g3["effective_eps"]["rel"]) == 2
    assert g3["effective_eps"]["prefix_ids"] == (b["settings"]["prefix_ids"] or [])
    # a record without an effective eps (the CLI with --effective-eps 0) keeps the bundle's
    gfile.write_text(json.dumps({k: v for k, v in geo.items() if k != "effective_eps"}))
    proc = subprocess.run([sys.executable, script, "--geometry-only", "--models", embedded.DEFAULT,
                           "--geometry-file", str(gfile), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    g4 = bundles.load("cram", embedded.DEFAULT, tmp_path)["geometry"]
    assert g4["effective_eps"] == g3["effective_eps"] and g4["s_conv"] == geo["s_conv"]
    bad = subprocess.run([sys.executable, script, "--models", embedded.DEFAULT, "--search", "grid",
                          "--lengths", "1:2", "--m", "1", "2", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "missing m = [2]" in bad.stderr


def test_predicted_slopes_match_bounds(fast_bundle):
    from accesslib.theory import bounds, refined

    b = fast_bundle
    d, V = b["facts"]["d"], b["facts"]["vocab_size"]
    s = predicted_slopes(b, 0.01, 2.0)
    assert s["ball"] == pytest.approx(d * math.log(1 + 400) / math.log(V))
    assert s["box"] == pytest.approx(refined.box_slope(b["geometry"]["widths"], V, 0.01).C)
    # the box lies inside the ball of radius r_inf: never a larger count at r = r_inf
    r = b["geometry"]["r_inf"]
    eps = bounds.eps_for_dtype("paper", r)
    s2 = predicted_slopes(b, eps, r)
    assert s2["box"] <= s2["ball"] + 1e-9
    assert s2["cone"] <= s2["ball"] + 1e-9


def test_effective_eps_around_a_crammed_memory():
    from accesslib.engine.decoding import greedy
    from accesslib.models.loading import load_model
    lm = load_model(embedded.DEFAULT)
    mem, ids = bundling.crammed_memory(lm, 3, source="natural")
    assert mem.shape == (1, lm.facts.d) and len(ids) == 3
    # the memory reproduces its 3-token target greedily, i.e. it is a real crammed memory
    assert greedy(lm, mem[None], 3, cache=False)[0].tolist() == ids
    rec = bundling.measure_geometry(lm, embedded.DEFAULT, progress=False, effective_eps=4, memory_n=3,
                                   memory_source="natural", lengths=[4, 16], per_length=8, n_cells=2000)
    eff = rec["effective_eps"]
    assert eff["n_tokens"] == 3 and len(eff["rel"]) == 4
    assert eff["around"] == "a memory crammed with 3 tokens (natural)"
    rec0 = bundling.measure_geometry(lm, embedded.DEFAULT, progress=False, effective_eps=2,
                                    lengths=[4], per_length=8, n_cells=1000)
    assert rec0["effective_eps"]["around"].startswith("a random memory vector")


def test_effective_eps_follows_the_bundles_protocol_and_layout():
    # [A]'s protocol gives the first target token after the memory: the crammed memory is made
    # that way, and the effective eps watches the tokens after it, with it given
    from accesslib.engine import cramming
    from accesslib.engine.decoding import greedy
    from accesslib.engine.geometry import effective_eps
    from accesslib.models.loading import load_model
    lm = load_model(embedded.DEFAULT)
    settings = dict(cramming.PROTOCOLS["paper"], max_steps=400, betas=[0.9, 0.9])   # as a bundle keeps them
    mem, ids = bundling.crammed_memory(lm, 4, source="natural", settings=settings)
    assert len(ids) == 4
    assert greedy(lm, mem[None], 3, given_ids=ids[:1], cache=False)[0].tolist() == ids[1:]
    rec = bundling.measure_effective_eps(lm, 3, memory_n=4, source="natural", settings=settings)
    assert rec["n_tokens"] == 3 and rec["given_ids"] == ids[:1] and len(rec["rel"]) == 3
    assert rec["around"] == "a memory crammed with 4 tokens (natural), the first given after it"
    assert rec["median"] is not None and 0 < rec["median"] <= 1
    # the thresholds are those of that memory with its first token given, not without it
    with_given = effective_eps(lm, mem, n_directions=3, n_tokens=3, given_ids=ids[:1])
    without = effective_eps(lm, mem, n_directions=3, n_tokens=3)
    assert rec["rel"] == [float(x) if math.isfinite(x) else None for x in with_given.rel]
    assert list(with_given.rel) != list(without.rel)


def test_effective_eps_around_one_of_the_bundles_own_memories(tmp_path):
    """With the results store of the bundle's run, no memory is crammed again: the effective eps
    is measured around one the run crammed (the crammed string whose n is closest to the asked
    length), with the bundle's layout (the first target token given after it)."""
    from accesslib.engine.decoding import greedy
    from accesslib.models.loading import load_model
    from accesslib.results.store import ResultsStore
    store = tmp_path / "s.sqlite"
    b = bundling.make_cramming_bundle(embedded.DEFAULT, [1], samples=2, source="natural", protocol="paper",
                                      search="grid", lengths={1: [3, 5]}, max_steps=300, store=store,
                                      progress=False, geometry=False)
    rows = [r for r in ResultsStore(store).rows(memory=True) if r["success"]]
    assert rows, "the tiny model crams 3 natural tokens"
    got = bundling.stored_memory(store, b, 3.4)
    mem, ids, n, sample = got
    want = min(rows, key=lambda r: (abs(r["n"] - 3.4), -r["n"], r["sample"]))
    assert (n, sample, ids) == (want["n"], want["sample"], want["target_ids"]) and len(ids) == n
    assert mem.tolist() == want["memory"].reshape(1, -1).tolist()
    lm = load_model(embedded.DEFAULT)
    # it is the run's memory, in the run's layout: the first token given, the rest greedy
    assert greedy(lm, torch.as_tensor(mem)[None], n - 1, given_ids=ids[:1], cache=False)[0].tolist() == ids[1:]
    rec = bundling.measure_effective_eps(lm, 2, source="natural", settings=b["settings"], crammed=got)
    assert rec["n_tokens"] == n - 1 and rec["given_ids"] == ids[:1]
    assert rec["around"] == (f"a memory crammed with {n} tokens (natural), string {sample} of n = {n} of the "
                             "bundle's own run, the first given after it")
    # another protocol's rows are not this bundle's
    other = dict(b, settings=dict(b["settings"], lr=0.5))
    assert bundling.stored_memory(store, other, 3) is None
