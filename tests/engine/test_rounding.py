"""benchmarks/rounding.py: the same string crammed again matches bit for bit; runs that differ only
in float rounding are compared step by step."""
import json

import pytest

pytest.importorskip("torch")


def test_compare_finds_the_first_differing_step_and_the_memory_difference(load_script):
    import torch

    rounding = load_script("benchmarks/rounding.py")
    ref = dict(losses=[3.0, 2.0, 1.0, 0.5], success=True, steps=4, memory=torch.tensor([[3.0, 4.0]]))
    same = rounding.compare(ref, dict(ref))
    assert same["first_differing_step"] is None and same["relative_memory_difference"] == 0.0
    assert same["end"] == same["reference_end"] == "crammed at step 4"
    other = dict(losses=[3.0, 2.0, 1.5, 0.75, 0.7], success=False, steps=5, memory=torch.tensor([[3.0, 4.5]]))
    got = rounding.compare(ref, other, at=(1, 3, 4, 5))
    assert got["first_differing_step"] == 3
    assert got["relative_loss_difference"] == {1: 0.0, 3: 0.5, 4: 0.5}     # step 5: the reference ended at 4
    assert got["relative_memory_difference"] == pytest.approx(0.1)         # |(0, 0.5)| / |(3, 4)|
    assert got["end"] == "not crammed in 5 steps"


def test_a_repeated_run_and_batch_mates_match_the_reference_bit_for_bit(load_script, tmp_path, capsys):
    import torch

    threads = torch.get_num_threads()
    out = tmp_path / "r.json"
    try:
        assert load_script("benchmarks/rounding.py").main(
            ["--model", "tiny-d32-v257", "--n", "6", "--steps", "30", "--batch", "3", "--mates-n", "9",
             "--json", str(out)]) == 0
    finally:
        torch.set_num_threads(threads)
    assert torch.get_num_threads() == threads                    # the runs' thread counts are undone
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("tiny-d32-v257: string 0 of 3 tokens strings of n = 6, [A]'s protocol, at most 30 "
                               "steps, no stop by patience")
    got = json.loads(out.read_text())
    from accesslib.config import cpu_kernels
    from accesslib.engine.cramming import engine_code
    assert f"{cpu_kernels()} kernels), engine {engine_code()}" in lines[0]   # what the figures ran on
    assert got["engine"] == engine_code() and got["hardware"]["kernels"] == cpu_kernels()
    assert list(got["runs"]) == ["again", "stopped and resumed", "2 threads", "batch-mates", "batch-mates of n = 9"]
    # a repeat, a resume from the state kept at step 15, batch-mates of the same length: the same sums
    for label in ("again", "stopped and resumed", "batch-mates"):
        run = got["runs"][label]
        assert run["first_differing_step"] is None and run["relative_memory_difference"] == 0.0, label
        assert run["end"] == got["reference_end"]
        assert any(line.startswith(f"  {label} (") and "loss identical at every step" in line for line in lines)
    # another thread count, or padding to longer batch-mates (the tiny models' lean forward), only
    # reorders sums: on a tiny model the trajectory stays within float rounding of the reference
    for label in ("2 threads", "batch-mates of n = 9"):
        assert got["runs"][label]["relative_memory_difference"] < 1e-3, label
    with pytest.raises(SystemExit):
        load_script("benchmarks/rounding.py").main(["--model", "tiny-d32-v257", "--batch", "1"])
    assert "--batch must be a whole number >= 2; got 1" in capsys.readouterr().err
