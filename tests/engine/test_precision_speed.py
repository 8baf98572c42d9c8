"""benchmarks/precision_speed.py runs on an embedded model and prints one line per precision."""
import pytest

pytest.importorskip("torch")


def test_the_precision_benchmark_prints_each_precision_against_float32(load_script, capsys):
    import torch

    threads = torch.get_num_threads()
    try:
        assert load_script("benchmarks/precision_speed.py").main(
            ["--model", "tiny-d32-v257", "--lengths", "5", "9", "--strings", "2", "--steps", "2", "--warmup", "1"]) == 0
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("tiny-d32-v257: 4 random-token strings (n = 5, 9), m = 1, 2 steps after 1 of warm-up, "
                      "1 thread(s)")
    labels = [line.split("  ")[1].strip() for line in out[1:]]
    assert labels == ["float32", "bfloat16 autocast", "bfloat16 weights"]
    assert out[1].endswith("1.00x float32's speed")
    ms = [float(line.split()[-7]) for line in out[1:]]
    ratios = [float(line.split()[-3].rstrip("x")) for line in out[1:]]
    assert all(t > 0 for t in ms)
    # the ratio is float32's time over each one's (the printed times are rounded to 0.1 ms)
    assert ratios[0] == 1.0 and ratios == [pytest.approx(ms[0] / t, rel=0.25) for t in ms]
    with pytest.raises(SystemExit):       # one step without a warm-up has no time between step ends
        load_script("benchmarks/precision_speed.py").main(["--model", "tiny-d32-v257", "--steps", "1", "--warmup", "0"])
    assert "--steps must be at least 1 after a warm-up, 2 without one" in capsys.readouterr().err
