import pytest

from accesslib.apps.policy import Policy, current_policy, public_policy


def test_open_policy_accepts_any_model_and_size():
    p = Policy()
    p.check_request(model="/some/local/path", m=[1, 2, 8], lengths=[10, 5000], samples=100, max_steps=3000)
    assert "Local mode" in p.describe()


def test_public_refuses_unlisted_model_and_paths():
    p = public_policy(["tiny-a", "tiny-b"])
    p.check_request(model="tiny-a", m=2, lengths=[8, 16], samples=8, max_steps=100)
    for bad in ["EleutherAI/pythia-160m", "/tmp/model", "../x"]:
        with pytest.raises(ValueError, match="not available on this public server"):
            p.check_request(model=bad, m=1, lengths=[8], samples=4, max_steps=10)


@pytest.mark.parametrize("kw,what", [
    (dict(lengths=[8, 65]), "length = 65 is over this server's cap of 64"),
    (dict(samples=17), "samples = 17 is over"),
    (dict(max_steps=501), "max_steps = 501 is over"),
    (dict(m=[1, 5]), "m = 5 is over"),
])
def test_public_caps_name_the_value(kw, what):
    p = public_policy(["tiny-a"])
    args = dict(model="tiny-a", m=1, lengths=[8], samples=4, max_steps=10) | kw
    with pytest.raises(ValueError, match=what):
        p.check_request(**args)


def test_bad_values_named():
    p = Policy()
    with pytest.raises(ValueError, match="samples"):
        p.check_request(model="x", m=1, lengths=[8], samples=0, max_steps=10)
    with pytest.raises(ValueError, match="lengths"):
        p.check_request(model="x", m=1, lengths=[], samples=1, max_steps=10)


def test_concurrent_run_slots():
    p = public_policy(["a"])
    with p.run_slot():
        with pytest.raises(ValueError, match="already going"):
            with p.run_slot():
                pass
    with p.run_slot():  # released after the first run ended
        pass


def test_current_policy_reads_environment(monkeypatch):
    monkeypatch.setenv("ACCESSLIB_PUBLIC", "1")
    p = current_policy(["a"])
    assert p.public and p.allowed_models == ("a",)
    monkeypatch.setenv("ACCESSLIB_PUBLIC", "0")
    assert not current_policy().public
