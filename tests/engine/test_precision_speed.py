"""benchmarks/precision_speed.py runs on an embedded model and prints one line per precision."""
import pytest

pytest.importorskip("torch")


def test_the_precision_benchmark_prints_each_precision_against_float32(load_script, capsys):
    import torch

    threads = torch.get_num_threads()
    try:
        assert load_script("benchmarks/precision_speed.py").main(
            ["--model", "tiny-d32-v257", "--lengths", "5", "9", "--strings", "2", "--steps", "2", "--warmup", "0"]) == 0
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("tiny-d32-v257: 4 random-token strings (n = 5, 9), m = 1, 2 steps after 0 of warm-up, "
                      "1 thread(s)")
    labels = [line.split("  ")[1].strip() for line in out[1:]]
    assert labels == ["float32", "bfloat16 autocast", "bfloat16 weights"]
    assert out[1].endswith("1.00x float32's speed")
    seconds = [float(line.split()[-7]) for line in out[1:]]
    ratios = [float(line.split()[-3].rstrip("x")) for line in out[1:]]
    assert all(s > 0 for s in seconds)
    # the ratio is float32's seconds over each one's (the printed seconds are rounded to 4 decimals)
    assert ratios[0] == 1.0 and ratios == [pytest.approx(seconds[0] / s, rel=0.25) for s in seconds]
