"""What a string's steps ran on (StringResult.ran_on, the store's ran_on column): the processor,
torch's thread count, torch and the device, with a new stretch wherever a resume or a change of
thread count sums its steps otherwise (docs/engine.md, "Float rounding")."""
import hashlib
import io
from pathlib import Path

import pytest
import torch
import transformers

from accesslib.cli import main
from accesslib.config import cpu_id, cpu_kernels, cpu_name
from accesslib.engine.copying import torch_threads
from accesslib.engine.cramming import cram, engine_code
from accesslib.experiments.curves import accessibility_curves
from accesslib.models import embedded
from accesslib.models.loading import load_model
from accesslib.results.store import ResultsStore, describe_ran_on

V = 64
KW = dict(max_steps=40, patience=40, seed=5, lr=5e-2, prefix_ids=[0])


def targets(lens=(3, 4)):
    g = torch.Generator().manual_seed(3)
    return [torch.randint(0, V, (n,), generator=g).tolist() for n in lens]


def here(threads, step=0):
    return {"from": step, "cpu": cpu_name(), "cpu_id": cpu_id(), "kernels": cpu_kernels(), "threads": threads,
            "torch": str(torch.__version__), "device": "cpu", "transformers": transformers.__version__,
            "engine": engine_code()}


def words(threads):
    which = ", ".join(x for x in (cpu_id(), cpu_kernels()) if x)
    return (f"{cpu_name()}" + (f" ({which})" if which else "") + f", {threads} thread{'s' if threads > 1 else ''}, "
            f"torch {torch.__version__}, cpu, transformers {transformers.__version__}, engine {engine_code()}")


def stopped_after(k):
    seen = []
    return dict(on_step=seen.append, stop=lambda: len(seen) >= k)


def test_every_string_records_what_its_steps_ran_on(neox):
    res = cram(neox, targets(), 1, **KW)
    assert [s.ran_on for s in res.strings] == [[here(1)], [here(1)]]
    assert cpu_name() and cpu_name() == cpu_name()   # read once, the same name every time
    assert cpu_kernels() == torch.backends.cpu.get_cpu_capability()
    with open("/proc/cpuinfo") as f:   # the first processor's family, model and stepping
        first = dict((k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in f.read().split("\n\n")[0]
                                                          .splitlines()))
    assert cpu_id() == f"family {first['cpu family']} model {first['model']} stepping {first['stepping']}"
    assert describe_ran_on([here(2)]) == (f"{cpu_name()} ({cpu_id()}, {cpu_kernels()}), 2 threads, torch "
                                          f"{torch.__version__}, cpu, transformers {transformers.__version__}, "
                                          f"engine {engine_code()}")
    engine = Path(cram.__code__.co_filename).parent   # the engine's code: its three sources, hashed
    want = hashlib.sha256(b"".join((engine / f).read_bytes() for f in ("cramming.py", "lean.py", "decoding.py")))
    assert engine_code() == want.hexdigest()[:12]


def test_a_resume_on_another_thread_count_starts_a_new_stretch(neox, tmp_path):
    """Same thread count: one stretch (the resume is bit-exact). Two threads: a second stretch from
    the step it went on from. A state kept before ran_on was recorded: known from there on only."""
    T = targets()
    for threads, want in ((1, [here(1)]), (2, [here(1), here(2, 7)])):
        store = ResultsStore(tmp_path / f"t{threads}.sqlite")
        cram(neox, T, 1, checkpoint=store, **stopped_after(7), **KW)
        assert {k["steps"] for k in store.inflight()} == {7}
        with torch_threads(threads):
            again = cram(neox, T, 1, checkpoint=store, **KW)
        assert again.resumed == 2 and [s.ran_on for s in again.strings] == [want, want]
    store = ResultsStore(tmp_path / "old.sqlite")
    cram(neox, T, 1, checkpoint=store, **stopped_after(7), **KW)
    for k in store.inflight():
        state = torch.load(io.BytesIO(store.load_inflight(k["key"])), weights_only=True)
        assert state["ran_on"] == [here(1)]
        del state["ran_on"]
        buf = io.BytesIO()
        torch.save(state, buf)
        store.save_inflight({k["key"]: (buf.getvalue(), k["steps"])})
    again = cram(neox, T, 1, checkpoint=store, **KW)
    assert [s.ran_on for s in again.strings] == [[here(1, 7)]] * 2
    assert describe_ran_on(again.strings[0].ran_on) == f"not recorded at first; then {words(1)}"


def test_a_thread_count_changed_between_steps_is_noted_at_that_step(neox):
    def on_step(info):
        if info.step == 4:
            torch.set_num_threads(2)

    with torch_threads(1):
        res = cram(neox, targets(), 1, on_step=on_step, **KW)
    # on_step sees the step count before the update: the row's step 5 is the first summed on two threads
    assert [s.ran_on for s in res.strings] == [[here(1), here(2, 5)]] * 2


def test_the_store_keeps_it_and_summary_counts_it(tmp_path, capsys):
    lm = load_model(embedded.DEFAULT)
    path = tmp_path / "r.sqlite"
    accessibility_curves(lm, [1], {1: [3]}, samples=2, source="natural", protocol="fast", max_steps=10,
                         patience=10, seed=0, store=path)
    rows = ResultsStore(path).rows()
    assert [r["ran_on"] for r in rows] == [[here(1)]] * 2
    st = ResultsStore(path)
    st.add(dict(model=rows[0]["model"], m=1, n=3, source="natural", target_ids=[1, 2, 3], seed=0,
                protocol_hash=rows[0]["protocol_hash"], success=False))      # stored by hand: not recorded
    st.add(dict(model=rows[0]["model"], m=1, n=3, source="natural", target_ids=[1, 2, 4], seed=0,
                protocol_hash=rows[0]["protocol_hash"], success=False, ran_on=[here(1), here(2, 9)]))
    one, two = words(1), words(2)
    envs = st.environments()
    assert [(e["ran_on"], e["strings"]) for e in envs] == sorted([(one, 2), (f"{one}; then {two}", 1),
                                                                   ("not recorded", 1)])
    assert main(["store", "summary", "--ran-on", "--store", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    at = out.index("what the strings ran on:")
    assert out[at + 1].split()[-3:] == ["strings", "ran", "on"]
    lines = {line.split("  ")[-1].strip(): line for line in out[at + 2:at + 5]}
    assert set(lines) == {one, f"{one}; then {two}", "not recorded"}
    assert lines[one].split()[:3] == [rows[0]["model"], "1", "natural"]
    assert main(["store", "summary", "--store", str(path)]) == 0
    assert "ran on" not in capsys.readouterr().out


def test_a_bad_ran_on_is_named(tmp_path):
    st = ResultsStore(tmp_path / "r.sqlite")
    with pytest.raises(ValueError, match=r'^ran_on must be a list of \{"from": step, \.\.\.\} dicts'):
        st.add(dict(model="t", m=1, n=2, source="tokens", target_ids=[1, 2], seed=0, protocol_hash="p",
                    success=True, ran_on=["2 threads"]))


def test_a_store_written_before_ran_on_gains_the_column(tmp_path):
    import sqlite3

    path = tmp_path / "old.sqlite"
    st = ResultsStore(path)
    st.add(dict(model="t", m=1, n=2, source="tokens", target_ids=[1, 2], seed=0, protocol_hash="p", success=True))
    st.close()
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE strings DROP COLUMN ran_on")
    conn.close()
    again = ResultsStore(path)
    assert again.rows()[0]["ran_on"] is None
    again.add(dict(model="t", m=1, n=3, source="tokens", target_ids=[1, 2, 3], seed=0, protocol_hash="p",
                   success=False, ran_on=[here(2)]))
    assert [r["ran_on"] for r in again.rows()] == [None, [here(2)]]
    assert [e["ran_on"] for e in again.environments()] == sorted(["not recorded", describe_ran_on([here(2)])])


def test_summary_says_what_the_strings_kept_mid_way_ran_on(neox, tmp_path, capsys):
    from accesslib.engine.cramming import kept_states

    store = ResultsStore(tmp_path / "r.sqlite")
    cram(neox, targets(), 1, checkpoint=store, **stopped_after(7), **KW)
    assert [k["ran_on"] for k in kept_states(store)["states"]] == [[here(1)]] * 2
    assert main(["store", "summary", "--ran-on", "--store", str(store.path)]) == 0
    out = capsys.readouterr().out.splitlines()
    at = out.index("what the strings kept mid-way ran on so far:")
    assert out[at + 1].split() == ["kept", "ran", "on"]
    assert out[at + 2].strip() == f"2  {words(1)}"
