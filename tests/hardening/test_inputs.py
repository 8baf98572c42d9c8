"""Bad input everywhere a value enters: seeds, silent coercions, wrong error types, repeated
targets, unescaped HTML and a slow offline hub look-up. Every refusal is one ValueError in the
package's style ("<name> must be <allowed>; got <value>"), and nothing runs or changes before it.
"""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from accesslib import _checks, cli
from accesslib.engine import targets as T

HUGE = 1180591620717411303424          # 2**70: past every integer type a seed can take
SEED_MSG = "seed must be a whole number in 0..18446744073709551615 (2**64 - 1); got "


@pytest.fixture(scope="module")
def lm():
    from accesslib.models.loading import tiny_model
    return tiny_model("gpt_neox", d=16, vocab_size=32)


def _targets(B=2, n=2, vocab=32):
    return T.random_tokens(vocab, n, B, seed=0)


class WordTok:
    """A whitespace tokenizer: one id per distinct word, in order of first sight."""

    def __init__(self):
        self.vocab: dict[str, int] = {}

    def encode(self, text, add_special_tokens=False):
        return [self.vocab.setdefault(w, len(self.vocab)) for w in text.split()]

    def decode(self, ids):
        inv = {v: k for k, v in self.vocab.items()}
        return " ".join(inv[i] for i in ids)


# --- 1. seeds: whole numbers in 0..2**64 - 1, one line, nowhere a traceback ------------------
@pytest.mark.parametrize("bad", [HUGE, -1, 2**64, 1.7, 1.0, True, "3", None, np.float64(2.0)])
def test_check_seed_refuses_everything_but_whole_numbers_in_range(bad):
    with pytest.raises(ValueError) as e:
        _checks.check_seed("seed", bad)
    msg = str(e.value)
    assert msg.startswith(SEED_MSG) and "\n" not in msg and len(msg) < 200


def test_check_seed_accepts_the_whole_range_and_numpy_ints():
    assert _checks.check_seed("seed", 0) == 0
    assert _checks.check_seed("seed", np.uint64(2**64 - 1)) == 2**64 - 1
    assert _checks.check_seed("seed", np.int32(7)) == 7
    # a seed with more digits than Python prints is still one short line
    with pytest.raises(ValueError, match=r"got (<int>|\d+)"):
        _checks.check_seed("seed", 10 ** 5000)


def test_huge_seed_refused_by_the_target_sources():
    with pytest.raises(ValueError) as e:
        T.random_tokens(32, 2, 2, seed=HUGE)
    assert str(e.value) == SEED_MSG + str(HUGE)
    with pytest.raises(ValueError, match="seed must be a whole number"):
        T.make_targets("tokens", 2, 2, seed=1.7, vocab_size=32)
    # the largest seed works and is deterministic
    a = T.random_tokens(32, 2, 2, seed=2**64 - 1)
    assert torch.equal(a, T.random_tokens(32, 2, 2, seed=2**64 - 1))


@pytest.mark.parametrize("bad", [HUGE, 1.7, -1, True])
def test_huge_or_fractional_seed_refused_by_cram_before_a_step(lm, bad):
    from accesslib.engine.cramming import cram
    steps = []
    with pytest.raises(ValueError, match="^seed must be a whole number in 0..18446744073709551615"):
        cram(lm, _targets(), 1, seed=bad, max_steps=2, on_step=steps.append)
    assert steps == []


def test_top_seed_crams(lm):
    from accesslib.engine.cramming import cram
    res = cram(lm, _targets(B=1), 1, seed=2**64 - 1, max_steps=1, verify=False)
    assert res.settings["seed"] == 2**64 - 1


@pytest.mark.parametrize("bad", [HUGE, 1.7])
def test_huge_seed_refused_by_accessibility_curve_before_the_store_opens(lm, tmp_path, bad):
    from accesslib.experiments.curves import accessibility_curve
    path = tmp_path / "r.sqlite"
    with pytest.raises(ValueError, match="^seed must be a whole number"):
        accessibility_curve(lm, 1, lengths=[2], samples=1, source="tokens", seed=bad, store=str(path),
                            max_steps=1)
    assert not path.exists()


@pytest.mark.parametrize("command", [["cram", "--model", "tiny-d32-v257"], ["geometry", "--model", "tiny-d32-v257"]])
@pytest.mark.parametrize("seed, shown", [(str(HUGE), str(HUGE)), ("1.7", "'1.7'"), ("-1", "-1")])
def test_cli_seed_is_one_line_exit_2(command, seed, shown, capsys, tmp_path):
    store = tmp_path / "r.sqlite"
    with pytest.raises(SystemExit) as e:
        cli.main([*command, "--seed", seed, "--store", str(store)] if command[0] == "cram"
                 else [*command, "--seed", seed])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].endswith("argument --seed: must be a whole number in 0..18446744073709551615 (2**64 - 1); "
                           f"got {shown}")
    assert "Traceback" not in err[0] and not store.exists()


# --- 2. silent coercions ----------------------------------------------------------------------
@pytest.mark.parametrize("d", [[True, False], np.array([True]), [4, True], [[4, 8], [True, 16]],
                               np.array([4, True], dtype=object), np.bool_(True), True,
                               torch.tensor([True])])
def test_bool_d_refused_by_the_bounds(d):
    from accesslib.theory import bounds
    with pytest.raises(ValueError) as e:
        bounds.log10_accessible(d, 1e-3, 1.0, 1)
    assert str(e.value).startswith("d must be a whole number >= 1; got ")


def test_numbers_still_pass_the_bounds():
    from accesslib.theory import bounds
    a = bounds.log10_accessible([4, 8], 1e-3, 1.0, 1)
    assert np.shape(a) == (2,) and np.all(np.isfinite(a))
    assert np.isfinite(bounds.log10_accessible(np.int64(4), 1e-3, 1.0, 1))


@pytest.mark.parametrize("prefix", ["12", b"12", [1.7], [True], [-1], torch.zeros(1, 2, dtype=torch.long),
                                    {"a": 1}])
def test_prefix_ids_not_a_list_of_ids_refused_before_a_step(lm, prefix):
    from accesslib.engine.cramming import cram
    steps = []
    with pytest.raises(ValueError) as e:
        cram(lm, _targets(), 1, prefix_ids=prefix, max_steps=2, on_step=steps.append)
    assert str(e.value).startswith("prefix_ids must be None or a list of token ids (whole numbers >= 0)")
    assert steps == []


def test_prefix_ids_lists_tensors_and_arrays_still_work(lm):
    from accesslib.engine.cramming import cram
    for prefix in ([1, 2], (1, 2), torch.tensor([1, 2]), np.array([1, 2])):
        res = cram(lm, _targets(B=1), 1, prefix_ids=prefix, max_steps=0, verify=False)
        assert res.strings[0].prefix_ids == [1, 2]


@pytest.mark.parametrize("value", ["public", "2", "enabled", "y e s", "1 "  "x"])
def test_accesslib_public_other_values_are_an_error(monkeypatch, value):
    from accesslib.apps.policy import current_policy
    monkeypatch.setenv("ACCESSLIB_PUBLIC", value)
    with pytest.raises(ValueError) as e:
        current_policy(["a"])
    assert str(e.value) == ("ACCESSLIB_PUBLIC must be unset, '', 0, false, no or off (open mode) or 1, true, "
                            f"yes or on (public mode); got {value!r}")


@pytest.mark.parametrize("value, public", [("", False), ("0", False), ("false", False), ("No", False),
                                           ("OFF", False), ("1", True), ("TRUE", True), (" yes ", True),
                                           ("on", True)])
def test_accesslib_public_documented_values(monkeypatch, value, public):
    from accesslib.apps.policy import current_policy
    monkeypatch.setenv("ACCESSLIB_PUBLIC", value)
    assert current_policy(["a"]).public is public
    monkeypatch.delenv("ACCESSLIB_PUBLIC")
    assert current_policy(["a"]).public is False


def test_app_shows_a_bad_accesslib_public_and_runs_nothing(monkeypatch, tmp_path):
    from accesslib.apps.nb02_cramming import CrammingApp
    monkeypatch.setenv("ACCESSLIB_PUBLIC", "public")
    store = tmp_path / "r.sqlite"
    app = CrammingApp(store=str(store), canvas="image", fast=True)
    assert app.last_error is not None and app.last_error.startswith("ACCESSLIB_PUBLIC must be unset")
    assert "ACCESSLIB_PUBLIC must be unset" in app.error.value
    assert not app.guard(app.start)            # Run: refused with the same message
    assert app.last_error.startswith("ACCESSLIB_PUBLIC must be unset")
    assert not app.is_running and app.rows == []


# --- 2b. wrong error types: ValueError in the one style ---------------------------------------
@pytest.mark.parametrize("kwargs, start", [
    (dict(targets=torch.zeros(2, 2)), "targets must be a LongTensor"),
    (dict(targets=torch.zeros(4, dtype=torch.long)), "targets must be 2-D [B, n]"),
    (dict(targets="12"), "targets must be a torch.LongTensor"),
    (dict(m="2"), "m must be a whole number >= 1; got '2'"),
    (dict(m=1.0), "m must be a whole number >= 1; got 1.0"),
    (dict(lr="0.1"), "lr must be a finite number > 0; got '0.1'"),
    (dict(init_std="big"), "init_std must be a finite number > 0; got 'big'"),
    (dict(eps=0), "eps must be a number > 0; got 0"),
    (dict(on_string=3), "on_string must be a callable or None; got 3"),
    (dict(model="not a model"), "model must be a transformers causal LM or a LoadedModel"),
    (dict(model=object()), "model must be a transformers causal LM or a LoadedModel"),
    (dict(model=torch.nn.Linear(2, 2)), "model must be a transformers causal LM or a LoadedModel"),
])
def test_cram_bad_arguments_are_value_errors_before_a_step(lm, kwargs, start):
    from accesslib.engine.cramming import cram
    args = dict(model=lm, targets=_targets(), m=1)
    args.update(kwargs)
    steps = []
    before = [p.detach().clone() for p in lm.model.parameters()]
    with pytest.raises(ValueError) as e:
        cram(args.pop("model"), args.pop("targets"), args.pop("m"), max_steps=2, on_step=steps.append, **args)
    assert str(e.value).startswith(start), str(e.value)
    assert steps == []
    assert all(torch.equal(a, b) for a, b in zip(before, lm.model.parameters()))


@pytest.mark.parametrize("kwargs, start", [
    (dict(store=123), "store must be None, a results store file path or a ResultsStore; got 123"),
    (dict(store=["r.sqlite"]), "store must be None, a results store file path or a ResultsStore"),
    (dict(text=5), "text must be None or a non-empty string; got 5"),
    (dict(on_string="print"), "on_string must be a callable or None; got 'print'"),
    (dict(model_name=7), "model_name must be None or a non-empty string; got 7"),
    (dict(m="1"), "m must be a whole number >= 1; got '1'"),
])
def test_accessibility_curve_bad_arguments_before_anything_loads(monkeypatch, kwargs, start):
    from accesslib.experiments import curves
    from accesslib.models import loading
    loaded = []
    monkeypatch.setattr(loading, "load_model", lambda *a, **k: loaded.append(a))
    args = dict(model="tiny-d32-v257", m=1, lengths=[2], samples=1, source="tokens")
    args.update(kwargs)
    with pytest.raises(ValueError) as e:
        curves.accessibility_curve(args.pop("model"), args.pop("m"), **args)
    assert str(e.value).startswith(start), str(e.value)
    assert loaded == []


# --- 3. targets are distinct within a call ------------------------------------------------------
def _distinct(ids):
    return len({tuple(r) for r in ids.tolist()}) == len(ids)


def test_1000_random_tokens_at_small_n_have_no_repeats():
    ids = T.random_tokens(40, 2, 1000, seed=3)          # 1600 possible strings: many repeats drawn
    assert ids.shape == (1000, 2) and _distinct(ids)
    assert torch.equal(ids, T.random_tokens(40, 2, 1000, seed=3))          # deterministic
    assert torch.equal(ids[:10], T.random_tokens(40, 2, 10, seed=3))      # sample i does not depend on B
    full = T.random_tokens(40, 1, 40, seed=1)                             # every string once
    assert sorted(full[:, 0].tolist()) == list(range(40))


def test_first_strings_are_the_same_as_before():
    # without a repeat a string is the first candidate of its sample's stream, as before
    ids = T.random_tokens(1000, 4, 8, seed=5)
    old = [np.arange(1000)[T._rng("tokens", 5, i).integers(0, 1000, size=4)].tolist() for i in range(8)]
    assert ids.tolist() == old


def test_1000_random_words_have_no_repeats():
    tok = WordTok()
    ids = T.random_words(tok, 1, 1000, seed=0)
    assert _distinct(ids)
    assert torch.equal(ids, T.random_words(tok, 1, 1000, seed=0))


def test_natural_text_replaces_a_repeated_chunk_by_the_next_distinct_one():
    text = "And the one\nAnd the two\nAnd the three\nBut four\nFor five\n"
    tok = WordTok()
    ids, texts = T.natural_text(tok, 1, 3, seed=0, text=text, return_texts=True)
    assert sorted(texts) == ["And", "But", "For"] and _distinct(ids)
    ids2, texts2 = T.natural_text(tok, 3, 5, seed=0, text=text, return_texts=True)
    assert _distinct(ids2) and len(set(texts2)) == 5


@pytest.mark.parametrize("call, msg", [
    (lambda: T.random_tokens(4, 1, 5), "B must be at most the number of distinct strings of n=1 tokens that "
                                       "source 'tokens' can supply (4 = 4^1 from 4 allowed token ids); got 5"),
    (lambda: T.random_tokens(6, 2, 40, exclude=[0, 1]), "(16 = 4^2 from 4 allowed token ids); got 40"),
    (lambda: T.make_targets("tokens", 1, 9, vocab_size=8), "source 'tokens' can supply (8 = 8^1"),
    (lambda: T.natural_text(WordTok(), 1, 4, text="And a\nAnd b\nBut c\n"),
     "B must be at most the number of distinct strings of n=1 tokens that source 'natural' can supply "
     "(2 distinct chunks from the text's 3 line starts); got 4"),
    (lambda: T.random_words(WordTok(), 1, 3, words=["red", "blue"]),
     "B must be at most the number of distinct strings of n=1 tokens that source 'words' can supply "
     "(it gave 2 distinct strings, then none new in 2000 further draws); got 3"),
])
def test_a_source_that_cannot_supply_b_distinct_strings_says_so(call, msg):
    with pytest.raises(ValueError) as e:
        call()
    assert msg in str(e.value) and "\n" not in str(e.value)


# --- 4. data from bundles is escaped in the apps' HTML -----------------------------------------
EVIL = "<img src=x onerror=alert(1)>"


def test_bundle_model_name_is_escaped_in_the_geometry_app(monkeypatch):
    from accesslib.apps import nb05_geometry as nb05
    from accesslib.results import bundles
    real = next(n for n in bundles.available("cram") if nb05.shipped_bundle(n) is not None)
    evil = copy.deepcopy(bundles.load("cram", real))
    evil["model"] = EVIL
    evil["created"] = EVIL
    evil["geometry"]["dtype"] = EVIL
    monkeypatch.setattr(nb05, "shipped_bundle", lambda name: evil)
    app = nb05.ModelGeometryApp(canvas="image", model=nb05.TINY_RANDOM)
    assert app.guard(app.show_shipped)
    page = app.readout.value + app.status.value + app.error.value
    assert EVIL not in page and "<img" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in app.readout.value
    assert "&lt;img src=x onerror=alert(1)&gt;" in app.status.value


# --- 5. a hub name not on disk fails at once without a network ---------------------------------
def test_offline_hub_lookup_fails_fast_naming_how_to_get_the_weights(monkeypatch):
    from accesslib.models import loading
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    probes, network = [], []

    def fake_from_pretrained(target, dt, trust, local_only):
        if not local_only:
            network.append(target)
        raise OSError(f"{target} is not in the local cache")

    monkeypatch.setattr(loading, "_from_pretrained", fake_from_pretrained)
    monkeypatch.setattr(loading, "_hub_reachable", lambda timeout=2.0: probes.append(timeout) or False)
    with pytest.raises(ValueError) as e:
        loading.load_model("some-org/some-hub-name")
    assert probes == [2.0] and network == []   # one 2 s probe, the slow network path never taken
    msg = str(e.value)
    assert msg.startswith("model 'some-org/some-hub-name' is not on disk and the hub cannot be reached")
    assert "huggingface-cli download some-org/some-hub-name" in msg and "\n" not in msg


def test_offline_variables_skip_the_probe(monkeypatch):
    from accesslib.models import loading
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setattr(loading, "_from_pretrained", lambda *a: (_ for _ in ()).throw(OSError("not cached")))
    monkeypatch.setattr(loading, "_hub_reachable", lambda timeout=2.0: pytest.fail("probed while offline"))
    with pytest.raises(ValueError, match="is not on disk"):
        loading.load_model("some-org/some-hub-name")


def test_hub_probe_is_one_short_connection(monkeypatch):
    import socket

    from accesslib.models import loading
    calls = []

    def refuse(address, timeout=None):
        calls.append((address, timeout))
        raise OSError("network unreachable")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    assert loading._hub_reachable() is False
    assert calls == [(("huggingface.co", 443), 2.0)]
    monkeypatch.setenv("HF_ENDPOINT", "http://mirror.local:8080")
    assert loading._hub_reachable(0.5) is False
    assert calls[-1] == (("mirror.local", 8080), 0.5)
