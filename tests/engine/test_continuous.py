"""The continuous-batching engine: ragged strings, a queue wider than the batch, row passes,
out-of-memory back-off, the greedy re-check back-off, and the per-phase timings.

A string's result must not depend on its batch-mates: the same successes, steps and memories
as when it is crammed alone (up to floating-point summation order)."""
import pytest
import torch

import accesslib.engine.cramming as cramming
from accesslib.engine.cramming import CramSession, cram

V = 64


def ragged(seed=3):
    g = torch.Generator().manual_seed(seed)
    lens = [1, 3, 2, 1, 2, 3, 1]
    return [torch.randint(0, V, (n,), generator=g).tolist() for n in lens]


KW = dict(max_steps=80, patience=40, seed=5, lr=5e-2, prefix_ids=[0])


def test_ragged_queue_equals_one_at_a_time(neox):
    T, ms = ragged(), [1, 2, 1, 1, 2, 1, 2]
    sizes = []
    batched = cram(neox, T, ms, batch_size=3, on_step=lambda i: sizes.append(len(i.active)), **KW)
    single = [cram(neox, [t], m, **KW).strings[0] for t, m in zip(T, ms)]
    assert [s.index for s in batched.strings] == list(range(len(T)))
    assert [s.success for s in batched.strings] == [s.success for s in single]
    assert [s.steps for s in batched.strings] == [s.steps for s in single]
    assert [s.reason for s in batched.strings] == [s.reason for s in single]
    assert any(s.success for s in single) and not all(s.success for s in single)
    for a, b, t, m in zip(batched.strings, single, T, ms):
        assert a.target_ids == t and a.memory.shape == (m, 32)
        assert torch.allclose(a.memory, b.memory, atol=1e-4)
    # the batch stays full while the queue has strings: never more than 3, 3 until the queue ran dry
    assert max(sizes) == 3 and sizes[:3] == [3, 3, 3]
    assert batched.row_steps == sum(sizes) == sum(s.steps + 1 for s in batched.strings)
    assert batched.settings["n"] == [1, 2, 3] and batched.settings["B"] == 7


def first_losses(model, T, ms, **kw):
    got = {}

    def on_step(info):
        for i, loss in zip(info.active, info.losses):
            got.setdefault(i, loss)
    cram(model, T, ms, max_steps=0, on_step=on_step, **kw)
    return [got[i] for i in range(len(T))]


def test_padding_does_not_change_a_rows_loss(neox):
    T, ms = ragged(), [1, 2, 1, 1, 2, 1, 2]
    together = first_losses(neox, T, ms, prefix_ids=[0])
    alone = [first_losses(neox, [t], m, prefix_ids=[0])[0] for t, m in zip(T, ms)]
    assert together == pytest.approx(alone, rel=1e-5, abs=1e-6)
    # and with the first token given as input ([A]'s layout)
    T2 = [t + [7] for t in T]
    together = first_losses(neox, T2, ms, first_token_as_input=True)
    alone = [first_losses(neox, [t], m, first_token_as_input=True)[0] for t, m in zip(T2, ms)]
    assert together == pytest.approx(alone, rel=1e-5, abs=1e-6)


def test_row_passes_agree_with_one_pass(neox):
    T = ragged(4)
    one = cram(neox, T, 1, rows_per_pass=None, **KW)
    many = cram(neox, T, 1, rows_per_pass=2, **KW)
    assert [s.steps for s in one.strings] == [s.steps for s in many.strings]
    assert [s.success for s in one.strings] == [s.success for s in many.strings]
    for a, b in zip(one.strings, many.strings):
        assert torch.allclose(a.memory, b.memory, atol=1e-4)
        assert a.final_loss == pytest.approx(b.final_loss, rel=1e-4, abs=1e-6)
    # the budget decides the passes: a budget of one row's logits gives one row per pass
    s = CramSession(neox)
    assert s._passes(10, 5) == 10
    old = cramming.LOGITS_BUDGET
    cramming.LOGITS_BUDGET = 5 * V
    try:
        assert s._passes(10, 5) == 1
    finally:
        cramming.LOGITS_BUDGET = old


@pytest.mark.parametrize("lean", [False, True])
def test_out_of_memory_halves_rows_and_completes(neox, monkeypatch, lean):
    """Injected into the transformers forward (lean=False) or into the lean forward."""
    T = ragged(6)
    clean = cram(neox, T, 1, lean=lean, **KW)
    calls = {"raised": 0}

    def picky_of(forward):     # "out of memory" for a pass of more than 2 rows
        def picky(*a, **kw):
            x = kw.get("inputs_embeds", a[0] if a else None)
            if x is not None and x.shape[0] > 2:
                calls["raised"] += 1
                raise torch.OutOfMemoryError("CUDA out of memory (injected)")
            return forward(*a, **kw)
        return picky

    def run(wrap, *a, **kw):
        if lean:
            real = cramming.lean_forward
            monkeypatch.setattr(cramming, "lean_forward", lambda model: wrap(real(model)))
            try:
                return cram(neox, *a, lean=True, **kw)
            finally:
                monkeypatch.setattr(cramming, "lean_forward", real)
        forward = neox.forward
        neox.forward = wrap(forward)
        try:
            return cram(neox, *a, lean=False, **kw)
        finally:
            del neox.forward

    r = run(picky_of, T, 1, **KW)
    assert r.settings["forward"] == ("lean gpt_neox" if lean else "transformers")
    assert calls["raised"] >= 1 and r.oom_retries >= 1
    assert [s.success for s in r.strings] == [s.success for s in clean.strings]
    assert [s.steps for s in r.strings] == [s.steps for s in clean.strings]
    # never swallowed: when even one row does not fit, the error reaches the caller
    always = lambda forward: lambda *a, **kw: (_ for _ in ()).throw(torch.OutOfMemoryError("injected"))  # noqa: E731
    with pytest.raises(torch.OutOfMemoryError, match="one string per forward pass"):
        run(always, T[:2], 1, max_steps=3)


@pytest.mark.parametrize("lean", [False, True])
def test_greedy_recheck_backs_off(neox, monkeypatch, lean):
    """A row that passes teacher-forced but fails greedy is re-checked at steps 0, 1, 3, 7, ...
    (a doubling back-off, at most every 64 steps), not at every step (both greedy paths: the
    transformers one and the lean one)."""
    checks = []
    name = "lean_greedy" if lean else "greedy"
    real = getattr(cramming, name)

    def never(*a, **kw):          # greedy always disagrees with the target
        out = real(*a, **kw)
        checks.append(out.shape[0])
        return (out + 1) % V

    monkeypatch.setattr(cramming, name, never)
    r = cram(neox, [[5]], 1, max_steps=200, patience=1000, lr=5e-2, lean=lean)
    s = r.strings[0]
    assert s.tf_success and not s.success and s.reason == "max_steps" and s.steps == 200
    # tf passes at (nearly) every one of 201 steps; checks: <= log2 steps + every 64 after + final report
    assert 3 <= len(checks) <= 12


def test_timings_and_syncs(neox):
    r = cram(neox, ragged(), 1, **KW)
    assert set(r.timings) >= {"forward", "backward", "update", "checks", "greedy", "syncs"}
    assert r.timings["forward"] > 0 and r.timings["backward"] > 0 and r.timings["update"] > 0
    assert r.timings["syncs"] == r.steps_run      # one host-device synchronisation per step


def test_patience_on_accuracy_stops_a_plateau(neox):
    """patience_on="accuracy" (the published rule): a string whose teacher-forced accuracy stops
    improving stops `patience` steps after its last improvement, even while its loss still falls."""
    T = [[3, 9, 27, 40, 51, 60]]
    seen = []
    r = cram(neox, T, 1, max_steps=400, patience=30, lr=1e-2, patience_on="accuracy",
             on_step=lambda i: seen.append(i.losses[0]))
    s = r.strings[0]
    assert not s.success and s.reason == "patience" and s.steps < 100 and s.token_accuracy == 0.5
    by_loss = cram(neox, T, 1, max_steps=400, patience=30, lr=1e-2).strings[0]
    # the loss keeps improving long after the accuracy plateaus: only max_steps stops it
    assert (by_loss.reason, by_loss.steps) == ("max_steps", 400)
    assert min(seen[s.steps - 30:]) < seen[s.steps - 30]
    assert r.settings["patience_on"] == "accuracy"
    with pytest.raises(ValueError, match="patience_on must be one of 'loss', 'accuracy'; got 'acc'"):
        cram(neox, T, 1, patience_on="acc")


@pytest.mark.parametrize("lean", [True, False])
def test_length_bucketed_passes_equal_one_at_a_time(neox, monkeypatch, lean):
    """A large model runs each input length in a pass of its own, cut to that length
    (BUCKET_MIN_PARAMS lowered so the tiny model does): the same steps, successes and, up to
    summation order, memories and losses as each string crammed alone; the mixed m and the
    first-token layout included."""
    monkeypatch.setattr(cramming, "BUCKET_MIN_PARAMS", 0)
    passes = []
    real = cramming.CramSession._pass_rows

    def spy(self, b, chunk):
        out = real(self, b, chunk)
        passes.append(out)
        return out

    monkeypatch.setattr(cramming.CramSession, "_pass_rows", spy)
    T, ms = ragged(), [1, 2, 1, 1, 2, 1, 2]
    batched = cram(neox, T, ms, batch_size=4, lean=lean, **KW)
    assert any(len(p) > 1 and not isinstance(p[0], slice) for p in passes)   # it did split by length
    for p in passes:
        if not isinstance(p[0], slice):
            assert sorted(j for g in p for j in g) == list(range(sum(len(g) for g in p)))
    single = [cram(neox, [t], m, lean=lean, **KW).strings[0] for t, m in zip(T, ms)]
    assert [s.steps for s in batched.strings] == [s.steps for s in single]
    assert [s.success for s in batched.strings] == [s.success for s in single]
    for a, b in zip(batched.strings, single):
        assert torch.allclose(a.memory, b.memory, atol=1e-4)
        assert a.final_loss == pytest.approx(b.final_loss, rel=1e-4, abs=1e-6)
    T2 = [t + [7] for t in T]
    together = first_losses(neox, T2, ms, first_token_as_input=True, lean=lean)
    alone = [first_losses(neox, [t], m, first_token_as_input=True, lean=lean)[0] for t, m in zip(T2, ms)]
    assert together == pytest.approx(alone, rel=1e-5, abs=1e-6)
    # one row per pass (rows_per_pass=1) and the bucketed passes agree
    one = cram(neox, T, ms, rows_per_pass=1, lean=lean, **KW)
    assert [s.steps for s in one.strings] == [s.steps for s in batched.strings]
