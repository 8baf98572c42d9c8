"""Sweeps on Dask (accesslib.experiments.sweep): spec parsing, job split, exact resume, and a
2-worker LocalCluster run with a worker killed mid-way that ends with the same store contents
(every row once, the same per-string successes, the same n50) as a single-process run."""
from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from accesslib.experiments import sweep

torch = pytest.importorskip("torch")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sweep-tiny.yaml"
KEY = ("model", "m", "n", "source", "target_hash", "seed", "protocol_hash")


pytestmark = pytest.mark.usefixtures("one_thread")


def _spec(tmp_path, name="s.sqlite", **kw):
    return sweep.load_spec(EXAMPLE, store=str(tmp_path / name), **kw)


def _rows(path):
    from accesslib.results.store import ResultsStore
    with ResultsStore(path) as db:
        return db.rows()


def _by_key(rows):
    return {tuple(r[c] for c in KEY): (r["sample"], r["success"]) for r in rows}


# ---------------------------------------------------------------------------------------------
# The description and its split into jobs
# ---------------------------------------------------------------------------------------------
def test_example_parses_and_splits_one_job_per_length(tmp_path):
    spec = _spec(tmp_path)
    jobs = spec.jobs()
    assert len(jobs) == 1 * 2 * 5 * 1                      # models x m x lengths x seeds
    assert len({j.key for j in jobs}) == len(jobs)
    assert [j.n for j in jobs][:2] == [8, 8]               # longest first
    assert spec.model_labels == ["tiny-gpt2-random"]
    # an adaptive search is sequential per (model, m, seed): one job each
    s2 = spec.replace(lengths=None, search={"method": "bisect", "pilot": 2}, seeds=[0, 1])
    assert sorted((j.m, j.seed, j.n) for j in s2.jobs()) == [(1, 0, None), (1, 1, None),
                                                             (2, 0, None), (2, 1, None)]


@pytest.mark.parametrize("change, message", [
    (dict(m=[0, 1]), "m must be a non-empty list of whole numbers >= 1; got [0, 1]"),
    (dict(samples=0), "samples must be a whole number >= 1; got 0"),
    (dict(source="pg19"), "source must be one of 'natural', 'words', 'words100k', 'glove100k', 'tokens'; got 'pg19'"),
    (dict(search={"method": "bisect"}), "lengths and search must be exactly one given: 'lengths' (a fixed "
     "grid of n) or 'search' (an adaptive length search); got {'lengths': [2, 3, 4, 6, 8], "
     "'search': {'method': 'bisect'}}"),
    (dict(device="tpu"), "device must be one of 'cpu', 'cuda', 'cuda:N', 'auto'; got 'tpu'"),
    (dict(workers=0), "workers must be a whole number >= 1; got 0"),
    (dict(write="nfs"), "write must be one of 'auto', 'worker', 'client'; got 'nfs'"),
    (dict(lengths=[]), "lengths must be a non-empty list of whole numbers >= 1; got []"),
    (dict(seeds=[-1]), "seeds must be a non-empty list of whole numbers >= 0; got [-1]"),
    (dict(models=[{"tiny": {"d": 8}}]),
     "models tiny must be a mapping of tiny_model settings with at least 'family'; got {'d': 8}"),
    (dict(models=[]), "models must be a model or a non-empty list of models; got []"),
    (dict(models=["a", "a"]), "models must be entries with distinct store names; got ['a', 'a']"),
    (dict(colour="red"), "sweep keys must be among models, m, source, samples, seeds, lengths, search, "
     "engine, store, device, dtype, workers, torch_threads, retries, write, model_cache, name; got ['colour']"),
    (dict(lengths=None, search={"method": "grid"}),
     "search.method must be one of 'bisect', 'paper' (a fixed grid is 'lengths:'); got 'grid'"),
    (dict(lengths=None, search={"method": "bisect", "steps": 3}),
     "search options must be among method, pilot, precision, max_length, start; got ['steps']"),
    (dict(lengths=None, search={"method": "bisect", "pilot": 0}), "search.pilot must be a whole number >= 1; got 0"),
])
def test_bad_descriptions_name_the_parameter(tmp_path, change, message):
    # accesslib._checks' one style: "<name> must be <allowed>; got <value>"
    import yaml
    data = yaml.safe_load(EXAMPLE.read_text())
    data.update(change)
    with pytest.raises(ValueError) as e:
        sweep.load_spec(data)
    assert str(e.value) == message


def test_bad_yaml_and_missing_file():
    with pytest.raises(ValueError, match=r"^sweep file must be an existing file; got 'no/such/sweep.yaml'$"):
        sweep.load_spec("no/such/sweep.yaml")
    with pytest.raises(ValueError, match=r"^sweep description must be a YAML mapping \(models:, m:, \.\.\.\); "
                                         r"got \['just', 'a list'\]$"):
        sweep.load_spec("- just\n- a list\n")


def test_protocol_hash_of_the_example_is_pinned(tmp_path):
    # the hash the example's rows are stored under (computed before the hash had one function):
    # a changed hash would orphan every stored string of a sweep
    spec = _spec(tmp_path)
    assert sweep.protocol_hash_of(spec) == "e387f94408b490fe"
    from accesslib.experiments.curves import protocol_hash_for
    assert protocol_hash_for("fast", {"lr": 0.1, "max_steps": 80, "patience": 40}) == "e387f94408b490fe"


def test_the_package_pickles_by_module_path():
    # Dask workers unpickle run_job and the spec classes by module path: these must be importable
    import pickle

    from accesslib.experiments.sweep import jobs
    from accesslib.experiments.sweep import spec as spec_mod
    assert sweep.run_job is jobs.run_job and sweep.run_job.__module__ == "accesslib.experiments.sweep.jobs"
    assert sweep.SweepSpec.__module__ == "accesslib.experiments.sweep.spec" and sweep.SweepSpec is spec_mod.SweepSpec
    job = sweep.Job("tiny", 1, 2, 0)
    assert pickle.loads(pickle.dumps(job)) == job
    assert pickle.loads(pickle.dumps(sweep.run_job)) is jobs.run_job


# ---------------------------------------------------------------------------------------------
# Resume: a job stopped after k strings redoes only the rest; a finished sweep redoes nothing
# ---------------------------------------------------------------------------------------------
def test_stopped_job_resumes_exactly_and_client_write_mode(tmp_path):
    spec = _spec(tmp_path, m=[2], lengths=[4])
    job = spec.jobs()[0]
    path = str(spec.store_path())
    full = sweep.run_job(spec, job, store_path=str(tmp_path / "ref.sqlite"))
    assert full.crammed == spec.samples and full.from_store == 0

    stop = threading.Event()
    first = sweep.run_job(spec, job, store_path=path, stop=stop, on_string=lambda row: stop.set())
    assert first.interrupted and 1 <= first.crammed < spec.samples
    again = sweep.run_job(spec, job, store_path=path)
    assert again.from_store == first.crammed and again.crammed == spec.samples - first.crammed
    assert _by_key(_rows(path)) == _by_key(_rows(tmp_path / "ref.sqlite"))

    # write="client": the job runs on a private store seeded with the finished keys and returns
    # only the new rows (memory vectors included); the caller writes them
    from accesslib.results.store import ResultsStore
    known = sweep.known_rows(ResultsStore(path), spec, job, sweep.protocol_hash_of(spec))
    res = sweep.run_job(spec, job, store_path=None, known_rows=known[:2])
    assert res.from_store == 2 and len(res.rows) == spec.samples - 2
    assert all(r["memory"].shape == (2, 32) for r in res.rows)
    assert {tuple(r[c] for c in KEY) for r in res.rows} <= set(_by_key(_rows(path)))


# ---------------------------------------------------------------------------------------------
# The fault-tolerance test: 2 worker processes, one killed mid-way, same store as one process
# ---------------------------------------------------------------------------------------------
def test_localcluster_with_a_killed_worker_matches_single_process(tmp_path):
    import logging

    from distributed import Client, LocalCluster

    ref_spec = _spec(tmp_path, "ref.sqlite")
    ref = sweep.run_sweep(ref_spec, scheduler="inprocess", progress=False)
    assert ref.complete and ref.crammed == 60
    ref_rows = _rows(ref_spec.store_path())
    ref_table = {(r["model"], r["m"]): r for r in sweep.sweep_table(ref_spec)}
    # the example must measure a real curve (a partial success somewhere), else n50 tests nothing
    assert any(0 < s < t for c in sweep.sweep_curves(ref_spec).values() for s, t in c.values())

    spec = _spec(tmp_path, "dask.sqlite")
    path = spec.store_path()
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                           silence_logs=logging.CRITICAL,
                           env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    client = Client(cluster)
    box, done_jobs = {}, []
    try:
        pids_before = set(client.run(os.getpid).values())
        thread = threading.Thread(target=lambda: box.setdefault("report", sweep.run_sweep(
    spec, client=client, write="worker", progress=False, on_job_done=done_jobs.append)))
        thread.start()
        killed, rows_at_kill = None, None
        deadline = time.monotonic() + 90
        while killed is None and time.monotonic() < deadline and thread.is_alive():
            busy = [addr for addr, keys in client.processing().items() if keys]
            n_rows = len(_rows(path)) if path.exists() else 0
            if busy and n_rows >= 1 and len(done_jobs) < 8:
                pid = client.run(os.getpid, workers=[busy[0]])[busy[0]]
                os.kill(pid, signal.SIGKILL)   # no clean-up: as a crashed or pre-empted worker
                killed, rows_at_kill = pid, n_rows
            time.sleep(0.05)
        thread.join(120)
        assert killed is not None, "the sweep ended before a worker could be killed"
        assert rows_at_kill < 60
        report = box["report"]
        assert report.complete, report.failed
        # the nanny replaced the dead worker process
        assert killed not in set(client.run(os.getpid).values()) and killed in pids_before
    finally:
        client.close()
        cluster.close()

    rows = _rows(path)
    assert len(rows) == 60                                   # every expected row ...
    assert len({tuple(r[c] for c in KEY) for r in rows}) == 60  # ... exactly once
    assert sorted((r["m"], r["n"], r["sample"]) for r in rows) == \
        sorted((r["m"], r["n"], r["sample"]) for r in ref_rows)
    assert _by_key(rows) == _by_key(ref_rows)               # same strings, same successes
    for r in sweep.sweep_table(spec):
        expect = ref_table[(r["model"], r["m"])]
        assert r["status"] == expect["status"]
        assert r["n50"] == pytest.approx(expect["n50"], nan_ok=True)

    # a rerun of the finished sweep does nothing (no cluster is even started)
    again = sweep.run_sweep(spec, progress=False)
    assert again.skipped == 10 and again.done == 0 and again.crammed == 0
    assert len(_rows(path)) == 60


def test_cli_dry_run_and_parser(tmp_path, capsys):
    from accesslib.cli import main
    assert main(["sweep", str(EXAMPLE), "--dry-run", "--store", str(tmp_path / "x.sqlite")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("10 jobs") and "cram-tiny-gpt2-random-m2-n8-s0" in out
    # a bad description: one line, exit code 2
    assert main(["sweep", str(tmp_path / "missing.yaml"), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"accesslib sweep: error: sweep file must be an existing file; got '{tmp_path / 'missing.yaml'}'"]
    with pytest.raises(SystemExit) as e:
        main(["sweep", str(EXAMPLE), "--workers", "0"])
    assert e.value.code == 2
    assert "argument --workers: must be a whole number >= 1; got 0" in capsys.readouterr().err


def test_adaptive_search_job_replays_from_the_store(tmp_path):
    spec = _spec(tmp_path).replace(m=[2], lengths=None, samples=4, search={
        "method": "bisect", "pilot": 2, "precision": 0.5, "max_length": 12})
    (job,) = spec.jobs()
    assert job.n is None
    first = sweep.run_job(spec, job, store_path=str(spec.store_path()))
    assert first.crammed >= 4 and len(first.curve) >= 2 and not first.interrupted
    again = sweep.run_job(spec, job, store_path=str(spec.store_path()))
    assert again.crammed == 0 and again.from_store == first.crammed and again.curve == first.curve


def test_start_sweep_in_background_reports_each_job(tmp_path):
    spec = _spec(tmp_path, m=[1], lengths=[2, 3])
    seen = []
    run = sweep.start_sweep(spec, scheduler="inprocess", progress=False, on_job_done=seen.append)
    report = run.wait(60)
    assert run.progress == (2, 2) and not run.running and report.complete
    assert sorted(r.job.n for r in seen) == [2, 3]
    curves = run.curves()
    assert set(curves) == {("tiny-gpt2-random", 1)} and curves[("tiny-gpt2-random", 1)][2][1] == 6
    # a stopped run ends early and says so; nothing is written twice when it is run again
    stopped = sweep.start_sweep(spec.replace(lengths=[4, 6]), scheduler="inprocess", progress=False)
    stopped.stop()
    assert stopped.wait(60).interrupted
    assert sweep.run_sweep(spec, scheduler="inprocess", progress=False).skipped == 2


def test_sweep_package_imports_without_dask_or_torch():
    # the package and the CLI's parser load without Dask (imported when a sweep runs) or torch
    # (imported by a job, and by the engine's list of target sources when a spec is checked)
    import subprocess
    import sys
    code = ("import sys, accesslib.experiments.sweep as s, accesslib.cli as c; c.build_parser(); "
            "print(sorted(m for m in ('torch', 'transformers', 'distributed', 'dask') if m in sys.modules)); "
            f"s.load_spec({str(EXAMPLE)!r}).jobs(); "
            "print(sorted(m for m in ('transformers', 'distributed', 'dask') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["[]", "[]"]
