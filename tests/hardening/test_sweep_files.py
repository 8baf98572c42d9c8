"""Sweep files under bad input (accesslib.experiments.sweep.spec): every refusal is one line in
the package's style, comes before anything starts (no store file, no Dask cluster), costs no
memory (aliases refused, sizes counted, values cut to 80 characters in messages), and happens
in ``--dry-run`` exactly as in a real run. Also: the LocalCluster dashboard is local by default,
and a callable schedule, whose hash differs between processes, is refused."""
from __future__ import annotations

from pathlib import Path

import pytest

from accesslib.experiments import sweep
from accesslib.experiments.sweep import spec as spec_mod

pytest.importorskip("torch")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE = EXAMPLES / "sweep-tiny.yaml"

BASE = """\
name: bad
models: [tiny-d32-v257]
samples: 2
"""
OK = BASE + "m: [1]\nlengths: [2]\n"


def _bomb() -> str:
    """The tester's shape: nested anchors under m:, 10 copies per level, 10**9 values."""
    lines = [BASE.rstrip(), "lengths: [2]", "m:", "  a: &a [" + ", ".join(["1"] * 10) + "]"]
    for prev, cur in zip("abcdefgh", "bcdefghi"):
        lines.append(f"  {cur}: &{cur} [" + ", ".join([f"*{prev}"] * 10) + "]")
    return "\n".join(lines) + "\n"


def _engine(body: str) -> str:
    return OK + f"engine: {body}\n"


# (id, file text, the one-line message, or a regex when the message carries a big value)
CASES = [
    ("alias-bomb", _bomb(),
     "sweep description must be YAML without anchors or aliases (&name, *name); got an anchor &a at "
     "line 6, column 6"),
    ("plain-alias", BASE + "lengths: [2]\nseeds: &s [0]\nm: *s\n",
     "sweep description must be YAML without anchors or aliases (&name, *name); got an anchor &s at "
     "line 5, column 8"),
    ("merge-key", OK + "search: &s {method: bisect}\nengine: {<<: *s}\n",
     "sweep description must be YAML without anchors or aliases (&name, *name); got an anchor &s at "
     "line 6, column 9"),
    ("huge-range", BASE + "m: [1]\nlengths: {start: 1, stop: 2000000000}\n",
     "lengths must be a range of at most 10,000 values; got {'start': 1, 'stop': 2000000000}"),
    ("huge-range-seeds", BASE + "m: [1]\nlengths: [2]\nseeds: {start: 0, stop: 99999999999, step: 1}\n",
     "seeds must be a range of at most 10,000 values; got {'start': 0, 'stop': 99999999999, 'step': 1}"),
    ("huge-list", BASE + "lengths: [2]\nm: [" + ", ".join(["1"] * 20_000) + "]\n",
     "m must be a list of at most 10,000 values; got [" + "1, " * 25 + "1..."),
    ("too-many-jobs", BASE + "m: {start: 1, stop: 100}\nseeds: {start: 0, stop: 99}\nlengths: [2, 3]\n",
     "jobs must be at most 10,000 (models x m x seeds x lengths); got 20000"),
    ("too-many-strings", "models: [tiny-d32-v257]\nm: [1, 2]\nlengths: [2]\nsamples: 999999\n",
     "strings must be at most 1,000,000 (jobs x samples); got 1999998"),
    ("too-many-yaml-values", BASE + "lengths: [2]\nm: [1]\nname2: [" + ",".join(["0"] * 100_001) + "]\n",
     "sweep description must have at most 100,000 YAML values; got more (line 6)"),
    ("huge-samples", BASE.replace("samples: 2", "samples: 2000000") + "m: [1]\nlengths: [2]\n",
     "samples must be a whole number in 1..1000000; got 2000000"),
    ("huge-length", BASE + "m: [1]\nlengths: [1000000000]\n",
     "lengths must be a non-empty list of whole numbers in 1..100000; got [1000000000]"),
    ("long-name", OK.replace("name: bad", "name: " + "x" * 5000),
     "name must be a non-empty text of at most 1,000 characters; got '" + "x" * 76 + "..."),
    # unknown keys, at every level, named with their path
    ("unknown-top", OK + "colour: red\n",
     "sweep keys must be among models, m, source, samples, seeds, lengths, search, engine, store, "
     "device, dtype, workers, torch_threads, retries, write, model_cache, name; got ['colour']"),
    ("unknown-models-entry", OK.replace("models: [tiny-d32-v257]", "models: [{load: tiny-d32-v257, size: 3}]"),
     "models[0] keys must be among name, load, path, tiny; got ['size']"),
    ("unknown-tiny", OK.replace("models: [tiny-d32-v257]", "models: [{tiny: {family: gpt2, dd: 8}}]"),
     "models[0].tiny keys must be among family, d, vocab_size, layers, seed, max_context, "
     "initializer_range; got ['dd']"),
    ("unknown-engine", _engine("{protocol: fast, max_stpes: 3}"),
     "engine keys must be among protocol, prefix_ids, first_token_as_input, lr, betas, weight_decay, "
     "max_steps, patience, schedule, autocast_dtype, init_std, verify, eps, batch_size, rows_per_pass, profile, "
     "patience_on, checkpoint_every, init_scale, add_special_tokens; got ['max_stpes']"),
    ("engine-seed-is-the-sweeps", _engine("{seed: 3}"),
     "engine keys must be among protocol, prefix_ids, first_token_as_input, lr, betas, weight_decay, "
     "max_steps, patience, schedule, autocast_dtype, init_std, verify, eps, batch_size, rows_per_pass, profile, "
     "patience_on, checkpoint_every, init_scale, add_special_tokens; got ['seed']"),
    ("unknown-engine-protocol-mapping", _engine("{protocol: {lr: 0.1, step: 3}}"),
     "engine.protocol keys must be among prefix_ids, first_token_as_input, lr, betas, weight_decay, "
     "max_steps, patience, schedule, autocast_dtype, init_std, verify, eps, batch_size, rows_per_pass, profile, "
     "patience_on, checkpoint_every, init_scale, add_special_tokens; got ['step']"),
    ("unknown-search", BASE + "m: [1]\nsearch: {method: bisect, steps: 3}\n",
     "search options must be among method, pilot, precision, max_length, start; got ['steps']"),
    ("unknown-range-key", BASE + "m: [1]\nlengths: {start: 1, stop: 4, every: 2}\n",
     "lengths must be a non-empty list of whole numbers >= 1 or a range {start, stop, step}; got "
     "{'start': 1, 'stop': 4, 'every': 2}"),
    # wrong types
    ("m-text", BASE + "m: two\nlengths: [2]\n", "m must be a non-empty list of whole numbers >= 1; got 'two'"),
    ("samples-float", OK.replace("samples: 2", "samples: 1.5"), "samples must be a whole number >= 1; got 1.5"),
    ("seeds-bool", OK + "seeds: [true]\n", "seeds must be a non-empty list of whole numbers >= 0; got [True]"),
    ("lengths-float", BASE + "m: [1]\nlengths: [2.5]\n",
     "lengths must be a non-empty list of whole numbers >= 1; got [2.5]"),
    ("models-number", OK.replace("models: [tiny-d32-v257]", "models: [3]"),
     "models entry must be a model name or a mapping (name, load or tiny); got 3"),
    ("engine-list", _engine("[lr, 0.1]"), "engine must be a mapping of cram() settings; got ['lr', 0.1]"),
    ("engine-lr-text", _engine("{lr: fast}"), "engine.lr must be a finite number > 0; got 'fast'"),
    ("engine-betas", _engine("{betas: [0.9]}"), "engine.betas must be two numbers in [0, 1); got [0.9]"),
    ("engine-max-steps-float", _engine("{max_steps: 1.5}"), "engine.max_steps must be a whole number >= 0; got 1.5"),
    ("engine-schedule-name", _engine("{schedule: linear}"),
     "engine.schedule must be one of 'constant', 'cosine', 'warmup_cosine' or None to be stored; got 'linear'"),
    ("engine-protocol", _engine("{protocol: slow}"),
     "engine.protocol must be one of 'paper', 'fast' or a mapping of cram settings; got 'slow'"),
    ("engine-verify-text", _engine("{verify: maybe}"), "engine.verify must be true or false; got 'maybe'"),
    ("engine-autocast", _engine("{autocast_dtype: int8}"),
     "engine.autocast_dtype must be one of 'bfloat16', 'float16', 'float32'; got 'int8'"),
    ("tiny-family", OK.replace("models: [tiny-d32-v257]", "models: [{tiny: {family: bert}}]"),
     "models[0].tiny.family must be one of 'gpt_neox', 'gpt2', 'llama', 'qwen2', 'gemma3', 'mamba'; got 'bert'"),
    ("tiny-d-text", OK.replace("models: [tiny-d32-v257]", "models: [{tiny: {family: gpt2, d: big}}]"),
     "models[0].tiny.d must be a whole number >= 4; got 'big'"),
    ("device-number", OK + "device: 3\n", "device must be one of 'cpu', 'cuda', 'cuda:N', 'auto'; got 3"),
    ("device-cuda-x", OK + "device: 'cuda:x'\n", "device must be one of 'cpu', 'cuda', 'cuda:N', 'auto'; got 'cuda:x'"),
    ("dtype", OK + "dtype: int8\n", "dtype must be one of 'float32', 'bfloat16', 'float16'; got 'int8'"),
    ("store-number", OK + "store: 5\n", "store must be a non-empty text of at most 1,000 characters; got 5"),
    ("source", OK + "source: pg19\n", "source must be one of 'natural', 'words', 'words100k', 'glove100k', 'tokens'; got 'pg19'"),
    ("write", OK + "write: nfs\n", "write must be one of 'auto', 'worker', 'client'; got 'nfs'"),
    ("search-method", BASE + "m: [1]\nsearch: {method: grid}\n",
     "search.method must be one of 'bisect', 'paper' (a fixed grid is 'lengths:'); got 'grid'"),
    ("search-precision-text", BASE + "m: [1]\nsearch: {precision: high}\n",
     "search.precision must be a finite number > 0; got 'high'"),
    ("not-a-mapping", "- just\n- a list\n",
     "sweep description must be a YAML mapping (models:, m:, ...); got ['just', 'a list']"),
    # negative and zero values
    ("m-zero", BASE + "m: [0, 1]\nlengths: [2]\n", "m must be a non-empty list of whole numbers >= 1; got [0, 1]"),
    ("samples-zero", OK.replace("samples: 2", "samples: 0"), "samples must be a whole number >= 1; got 0"),
    ("samples-negative", OK.replace("samples: 2", "samples: -3"), "samples must be a whole number >= 1; got -3"),
    ("seeds-negative", OK + "seeds: [-1]\n", "seeds must be a non-empty list of whole numbers >= 0; got [-1]"),
    ("lengths-zero", BASE + "m: [1]\nlengths: [0]\n", "lengths must be a non-empty list of whole numbers >= 1; got [0]"),
    ("lengths-empty", BASE + "m: [1]\nlengths: []\n", "lengths must be a non-empty list of whole numbers >= 1; got []"),
    ("range-empty", BASE + "m: [1]\nlengths: {start: 5, stop: 1}\n",
     "lengths must be a non-empty list of whole numbers >= 1; got []"),
    ("range-step-zero", BASE + "m: [1]\nlengths: {start: 1, stop: 5, step: 0}\n",
     "lengths.step must be a whole number >= 1; got 0"),
    ("engine-lr-zero", _engine("{lr: 0}"), "engine.lr must be a number > 0; got 0"),
    ("engine-max-steps-negative", _engine("{max_steps: -1}"), "engine.max_steps must be a whole number >= 0; got -1"),
    ("engine-patience-zero", _engine("{patience: 0}"), "engine.patience must be a whole number >= 1; got 0"),
    ("engine-weight-decay-negative", _engine("{weight_decay: -0.1}"), "engine.weight_decay must be a number >= 0; got -0.1"),
    ("engine-lr-nan", _engine("{lr: .nan}"), "engine.lr must be a finite number > 0; got nan"),
    ("search-pilot-zero", BASE + "m: [1]\nsearch: {method: bisect, pilot: 0}\n",
     "search.pilot must be a whole number >= 1; got 0"),
    ("search-max-length-zero", BASE + "m: [1]\nsearch: {max_length: 0}\n",
     "search.max_length must be a whole number >= 1; got 0"),
    ("torch-threads-zero", OK + "torch_threads: 0\n", "torch_threads must be a whole number >= 1; got 0"),
    ("workers-zero", OK + "workers: 0\n", "workers must be a whole number >= 1; got 0"),
    ("retries-negative", OK + "retries: -1\n", "retries must be a whole number >= 0; got -1"),
    ("model-cache-zero", OK + "model_cache: 0\n", "model_cache must be a whole number >= 1; got 0"),
    ("tiny-d-zero", OK.replace("models: [tiny-d32-v257]", "models: [{tiny: {family: gpt2, d: 0}}]"),
     "models[0].tiny.d must be a whole number >= 4; got 0"),
    # missing and broken
    ("missing-m", BASE + "lengths: [2]\n", "m must be given (a sweep needs models and m); got None"),
    ("both-lengths-and-search", OK + "search: bisect\n",
     "lengths and search must be exactly one given: 'lengths' (a fixed grid of n) or 'search' (an adaptive "
     "length search); got {'lengths': [2], 'search': 'bisect'}"),
    ("bad-yaml", OK + "x: [1, 2\n",
     "sweep description is not valid YAML: while parsing a flow sequence at line 6, column 4: x: [1, 2 ^ "
     "expected ',' or ']', but got '<stream end>' at line 7, column 1: ^"),
    ("deep-nesting", OK + "x: " + "[" * 3000 + "]" * 3000 + "\n",
     "sweep description is not valid YAML: nested too deeply"),
]


class _Recorded(Exception):
    """Raised in place of starting a Dask cluster."""


@pytest.fixture
def cluster_calls(monkeypatch):
    """Dask's LocalCluster and Client replaced by a recorder of their keyword arguments that
    raises :class:`_Recorded`: an empty list means no cluster was started."""
    distributed = pytest.importorskip("distributed")
    seen = []

    def record(*args, **kwargs):
        seen.append(kwargs)
        raise _Recorded

    monkeypatch.setattr(distributed, "LocalCluster", record)
    monkeypatch.setattr(distributed, "Client", record)
    return seen


def _write(tmp_path, text, name="bad.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def _cli(argv, capsys):
    from accesslib.cli import main
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err.strip().splitlines()


@pytest.mark.parametrize("text, message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_bad_file_is_refused_in_one_line_before_anything_starts(tmp_path, capsys, cluster_calls, text, message):
    path = _write(tmp_path, text)
    store = tmp_path / "store.sqlite"
    if "\nstore:" in text:   # the file's own store is the fault: no --store over it
        store = None
    with pytest.raises(ValueError) as e:
        sweep.load_spec(path, store=None if store is None else str(store))
    assert str(e.value) == message
    assert "\n" not in str(e.value) and len(str(e.value)) < 400
    # the same through run_sweep and the command line, with and without --dry-run
    with pytest.raises(ValueError, match="^" + __import__("re").escape(message) + "$"):
        sweep.run_sweep(path, store=store, progress=False)
    store_args = [] if store is None else ["--store", str(store)]
    for extra in (["--dry-run"], []):
        code, out, err = _cli(["sweep", str(path), *store_args, "--no-progress", *extra], capsys)
        assert (code, out, err) == (2, "", [f"accesslib sweep: error: {message}"]), extra
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"] and not cluster_calls


def test_the_alias_bomb_is_small_and_costs_nothing(tmp_path):
    text = _bomb()
    assert len(text.encode()) < 600 and text.count("*") == 80
    import tracemalloc
    tracemalloc.start()
    with pytest.raises(ValueError, match="without anchors or aliases"):
        sweep.load_spec(_write(tmp_path, text))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 20_000_000   # nothing was expanded (10^9 values would need gigabytes)


def test_a_file_over_the_size_limit_is_not_read(tmp_path):
    path = _write(tmp_path, OK + "#" * (spec_mod.MAX_FILE_BYTES + 10) + "\n")
    with pytest.raises(ValueError) as e:
        sweep.load_spec(path)
    assert str(e.value).startswith("sweep file must be at most 1,000,000 bytes; got 1,000,")
    with pytest.raises(ValueError, match="^sweep description must be at most 1,000,000 bytes"):
        sweep.load_spec(OK + "#" * (spec_mod.MAX_FILE_BYTES + 10) + "\n")


def test_huge_values_are_cut_in_messages(tmp_path):
    # a 20,000-entry list of texts, and a nest of lists: the message stays short
    text = BASE + "lengths: [2]\nm: [" + ", ".join(["abc"] * 9_000) + "]\n"
    with pytest.raises(ValueError) as e:
        sweep.load_spec(_write(tmp_path, text))
    assert str(e.value).startswith("m must be a non-empty list of whole numbers >= 1; got ['abc', 'abc'")
    assert str(e.value).endswith("...") and len(str(e.value)) < 150
    nest = [1] * 10
    for _ in range(8):
        nest = [nest] * 10          # 10**9 values, shared (what YAML aliases built)
    with pytest.raises(ValueError) as e:
        sweep.load_spec({"models": ["tiny-d32-v257"], "lengths": [2], "m": {"a": nest}})
    assert len(str(e.value)) < 200 and str(e.value).endswith("...")
    from accesslib._checks import short_repr
    assert short_repr([0, 1]) == "[0, 1]" and short_repr({"a": (1,)}) == "{'a': (1,)}"
    assert len(short_repr(nest)) == 80 and len(short_repr("x" * 10**6)) == 80


def test_limits_are_counted_not_built(tmp_path, monkeypatch):
    # a range of 2e9 values is refused without building it: range() is never called with it
    calls = []
    real_range = range

    def spy(*args):
        calls.append(args)
        return real_range(*args)

    import builtins
    monkeypatch.setattr(builtins, "range", spy)
    with pytest.raises(ValueError, match="at most 10,000 values"):
        sweep.load_spec({"models": ["x"], "m": [1], "lengths": {"start": 1, "stop": 2_000_000_000}})
    monkeypatch.undo()
    assert not any(len(a) > 1 and a[1] > 10**6 for a in calls)
    # exactly at the limits is fine
    spec = sweep.load_spec({"models": ["x"], "m": {"start": 1, "stop": 100}, "seeds": {"start": 0, "stop": 99},
                            "lengths": [2], "samples": 100})
    assert len(spec.jobs()) == spec_mod.MAX_JOBS


@pytest.mark.parametrize("extra, message", [
    (["--scheduler", "somewhere"],
     "scheduler must be None, 'local', 'inprocess' or an address like tcp://host:8786; got 'somewhere'"),
    (["--dashboard-address", "localhost"],
     "dashboard_address must be HOST:PORT with a port in 0..65535 (e.g. 127.0.0.1:8787; 0.0.0.0:8787 "
     "listens on every interface); got 'localhost'"),
    (["--dashboard-address", "127.0.0.1:99999"],
     "dashboard_address must be HOST:PORT with a port in 0..65535 (e.g. 127.0.0.1:8787; 0.0.0.0:8787 "
     "listens on every interface); got '127.0.0.1:99999'"),
])
def test_run_options_are_checked_in_dry_run_too(tmp_path, capsys, cluster_calls, extra, message):
    store = tmp_path / "s.sqlite"
    for dry in (["--dry-run"], []):
        code, out, err = _cli(["sweep", str(EXAMPLE), "--store", str(store), "--no-progress", *extra, *dry], capsys)
        assert (code, out, err) == (2, "", [f"accesslib sweep: error: {message}"])
    assert not store.exists() and not cluster_calls


def test_the_examples_still_validate_and_dry_run(tmp_path, capsys, cluster_calls):
    store = tmp_path / "x.sqlite"
    code, out, err = _cli(["sweep", str(EXAMPLE), "--dry-run", "--store", str(store)], capsys)
    assert code == 0 and err == [] and out.startswith("10 jobs") and "cram-tiny-gpt2-random-m2-n8-s0" in out
    assert not store.exists() and not cluster_calls
    paper = sweep.load_spec(EXAMPLES / "sweep-paper.yaml", store=str(tmp_path / "p.sqlite"))
    assert len(paper.jobs()) == 40 and paper.engine == {"protocol": "paper", "autocast_dtype": "bfloat16",
                                                        "add_special_tokens": True}
    code, out, _ = _cli(["sweep", str(EXAMPLES / "sweep-paper.yaml"), "--dry-run", "--store",
                         str(tmp_path / "p.sqlite")], capsys)
    assert code == 0 and out.startswith("40 jobs")
    # the example's hash is unchanged by the checks (stored rows stay findable)
    assert sweep.protocol_hash_of(sweep.load_spec(EXAMPLE)) == "e387f94408b490fe"


def test_every_engine_setting_of_cram_is_allowed_and_nothing_else():
    import inspect

    from accesslib.engine.cramming import cram
    params = set(inspect.signature(cram).parameters)
    keys = set(spec_mod.engine_keys())
    assert keys - {"protocol", "add_special_tokens"} <= params   # the one target setting
    # lean: which forward runs (bit-identical results), not a setting of the measurement;
    # checkpoint: the job's own store; extend, keep_final: going on from a smaller budget, a choice
    # of one run
    assert params - keys == {"model", "targets", "m", "seed", "on_step", "on_string", "stop", "lean", "checkpoint",
                             "extend", "keep_final"}
    good = {"protocol": "paper", "lr": 0.01, "betas": [0.9, 0.99], "weight_decay": 0.0, "max_steps": 10,
            "patience": 5, "schedule": "cosine", "first_token_as_input": True, "autocast_dtype": None,
            "init_std": 0.1, "verify": True, "eps": 1e-8, "prefix_ids": [0, 1]}
    spec = sweep.load_spec({"models": ["x"], "m": [1], "lengths": [2], "engine": good})
    assert spec.engine == good


# ---------------------------------------------------------------------------------------------
# The dashboard: local unless asked
# ---------------------------------------------------------------------------------------------
def test_the_dashboard_listens_on_localhost_by_default(tmp_path, cluster_calls):
    spec = sweep.load_spec(EXAMPLE, store=str(tmp_path / "d.sqlite"))
    with pytest.raises(_Recorded):
        sweep.run_sweep(spec, progress=False, workers=1)
    assert cluster_calls[-1]["dashboard_address"] == "127.0.0.1:0" == sweep.DEFAULT_DASHBOARD
    with pytest.raises(_Recorded):
        sweep.run_sweep(spec, progress=False, workers=1, dashboard_address="0.0.0.0:8787")
    assert cluster_calls[-1]["dashboard_address"] == "0.0.0.0:8787"


def test_the_cli_flag_sets_the_dashboard_address(tmp_path, cluster_calls, capsys):
    from accesslib.cli import main
    store = str(tmp_path / "d.sqlite")
    with pytest.raises(_Recorded):
        main(["sweep", str(EXAMPLE), "--store", store, "--no-progress", "--workers", "1"])
    assert cluster_calls[-1]["dashboard_address"] == "127.0.0.1:0"
    with pytest.raises(_Recorded):
        main(["sweep", str(EXAMPLE), "--store", store, "--no-progress", "--workers", "1",
              "--dashboard-address", "0.0.0.0:8787"])
    assert cluster_calls[-1]["dashboard_address"] == "0.0.0.0:8787"


def test_start_sweep_refuses_a_bad_dashboard_in_the_callers_thread(tmp_path):
    with pytest.raises(ValueError, match="^dashboard_address must be HOST:PORT"):
        sweep.start_sweep(EXAMPLE, store=str(tmp_path / "s.sqlite"), dashboard_address="everywhere")
    assert not (tmp_path / "s.sqlite").exists()


# ---------------------------------------------------------------------------------------------
# A callable schedule: its hash would differ between processes
# ---------------------------------------------------------------------------------------------
def _ramp(step, max_steps):
    return 1.0


SCHEDULE_MESSAGE = ("schedule must be one of 'constant', 'cosine', 'warmup_cosine' or None to be stored; "
                    "got <function _ramp at ")


def test_a_callable_schedule_is_refused_by_the_settings_hash():
    from accesslib.experiments.curves import hashed_settings, protocol_hash_for
    for call in (lambda: hashed_settings("fast", {"schedule": _ramp}),
                 lambda: protocol_hash_for("paper", {"schedule": _ramp}),
                 lambda: protocol_hash_for({"lr": 0.1, "schedule": _ramp}),
                 lambda: protocol_hash_for("fast", {"schedule": "linear"})):
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value).startswith(SCHEDULE_MESSAGE) or str(e.value).endswith("got 'linear'")
    # declared names (and None) hash as before: the pinned values do not move
    assert protocol_hash_for("paper") == "6ce59ba67f70ba50"   # init_scale="weights" since 0.3
    assert protocol_hash_for("fast") == "72513ca5cda23e34"
    assert protocol_hash_for("fast", {"max_steps": 30}) == "b3f5c7402d754e2b"
    assert protocol_hash_for("fast", {"schedule": "warmup_cosine"}) == protocol_hash_for("fast")
    assert protocol_hash_for("fast", {"schedule": None}) == protocol_hash_for("fast")


def test_a_callable_schedule_is_refused_in_a_sweep_spec(tmp_path, cluster_calls):
    data = {"models": ["x"], "m": [1], "lengths": [2], "store": str(tmp_path / "s.sqlite")}
    with pytest.raises(ValueError) as e:
        sweep.load_spec({**data, "engine": {"schedule": _ramp}})
    assert str(e.value).startswith("engine." + SCHEDULE_MESSAGE)
    with pytest.raises(ValueError) as e:
        sweep.run_sweep({**data, "engine": {"protocol": {"lr": 0.1, "schedule": _ramp}}}, progress=False)
    assert str(e.value).startswith("engine.protocol." + SCHEDULE_MESSAGE)
    assert not (tmp_path / "s.sqlite").exists() and not cluster_calls
