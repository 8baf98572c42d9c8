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
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sweep-tiny.yaml"
KEY = ("model", "m", "n", "source", "target_hash", "seed", "protocol_hash")


@pytest.fixture(autouse=True)
def _one_thread():
    # an oversubscribed 2-core machine: OpenMP spinning threads would slow torch 10x
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


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


@pytest.mark.parametrize("change, word", [
    (dict(m=[0, 1]), "m must"), (dict(samples=0), "samples must"), (dict(source="pg19"), "source must"),
    (dict(search={"method": "bisect"}), "exactly one of 'lengths'"), (dict(device="tpu"), "device must"),
    (dict(workers=0), "workers must"), (dict(write="nfs"), "write must"), (dict(lengths=[]), "lengths must"),
    (dict(models=[{"tiny": {"d": 8}}]), "family"), (dict(models=[]), "models"),
    (dict(colour="red"), "unknown sweep keys"),
    (dict(lengths=None, search={"method": "grid"}), "search method"),
    (dict(lengths=None, search={"method": "bisect", "steps": 3}), "unknown options"),
])
def test_bad_descriptions_name_the_parameter(tmp_path, change, word):
    import yaml
    data = yaml.safe_load(EXAMPLE.read_text())
    data.update(change)
    with pytest.raises(ValueError, match=word):
        sweep.load_spec(data)


def test_bad_yaml_and_missing_file():
    with pytest.raises(ValueError, match="not found"):
        sweep.load_spec("no/such/sweep.yaml")
    with pytest.raises(ValueError, match="YAML mapping"):
        sweep.load_spec("- just\n- a list\n")


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
    known = sweep._known_rows(ResultsStore(path), spec, job, sweep.protocol_hash_of(spec))
    res = sweep.run_job(spec, job, store_path=None, known_rows=known[:2])
    assert res.from_store == 2 and len(res.rows) == spec.samples - 2
    assert all(r["memory"].shape == (2, 32) for r in res.rows)
    assert {tuple(r[c] for c in KEY) for r in res.rows} <= set(_by_key(_rows(path)))


# ---------------------------------------------------------------------------------------------
# The fault-tolerance test: 2 worker processes, one killed mid-way, same store as one process
# ---------------------------------------------------------------------------------------------
def test_localcluster_with_a_killed_worker_matches_single_process(tmp_path):
    from distributed import Client, LocalCluster
    import logging

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
    import argparse
    parser = argparse.ArgumentParser()
    sweep.add_sweep_parser(parser.add_subparsers(dest="cmd"))
    args = parser.parse_args(["sweep", str(EXAMPLE), "--dry-run", "--store", str(tmp_path / "x.sqlite")])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("10 jobs") and "cram-tiny-gpt2-random-m2-n8-s0" in out


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
