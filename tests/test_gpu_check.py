"""benchmarks/gpu_check.py, the prepared GPU check, run here in --quick mode on the CPU.

The script must run from a bare copy of the repository (no install): the test copies accesslib/
and benchmarks/ to a temporary folder and runs the copy in a subprocess, which must import the
copied package. On the CPU the "device" is the CPU too, so every device-vs-CPU comparison must
agree exactly.
"""
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo")
    for part in ("accesslib", "benchmarks"):
        shutil.copytree(ROOT / part, repo / part, ignore=shutil.ignore_patterns("__pycache__"))
    out = repo / "out"
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    env.pop("OUT", None)
    proc = subprocess.run([sys.executable, "benchmarks/gpu_check.py", "--device", "cpu", "--quick",
                           "--out", str(out)], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((out / "gpu_check.json").read_text())
    return repo, report, (out / "gpu_check.md").read_text(), proc.stdout


def test_runs_from_a_bare_copy(quick_run):
    repo, report, _, stdout = quick_run
    assert report["env"]["accesslib"] == str(repo / "accesslib")
    assert report["env"]["device"] == "cpu" and report["quick"] is True
    assert report["env"]["packages"]["torch"] and report["env"]["packages"]["transformers"]
    assert set(report["sections"]) == {"checks", "embedded", "throughput"}
    assert all(sec["status"] == "ok" and _is_number(sec["seconds"]) for sec in report["sections"].values())
    assert "checks: ok" in stdout and "throughput: ok" in stdout


def test_checks_agree_exactly_on_the_cpu(quick_run):
    sec = quick_run[1]["sections"]["checks"]
    assert sec["model"] == "tiny-d32-v257" and sec["passed"] is True
    rows = {r["name"].split(" (")[0]: r for r in sec["results"]}
    assert rows["forward logits, device vs cpu"]["max_rel_diff"] == 0.0
    assert rows["greedy with vs without cache on the device"]["share_equal"] == 1.0
    assert rows["greedy on the device vs cpu"]["share_equal"] == 1.0
    assert rows["cram: losses at the first step, device vs cpu"]["max_rel_diff"] == 0.0
    solved = rows["cram: solved on the device vs cpu"]
    assert solved["solved_device"] == solved["solved_cpu"] >= 1 and solved["share_same_outcome"] == 1.0
    decoded = rows["cram: memories solved on the device decode to their strings on the cpu"]
    assert decoded["checked"] == solved["solved_device"] == decoded["decode_on_cpu"]
    if importlib.util.find_spec("scipy") is not None:
        assert rows["geometry: support samples, device vs cpu"]["max_rel_diff"] == 0.0
        assert rows["geometry: cell census on the same draws, device vs cpu"]["total_variation"] == 0.0
        assert rows["geometry: effective eps per direction, device vs cpu"]["share_close"] == 1.0
        r = rows["geometry: r_inf, r_2 and min cosine, device vs cpu"]
        assert r["r_inf"] == r["r_inf_device"] > 0
    assert all(r["pass"] is True for r in sec["results"])


def test_embedded_runs_report_numbers(quick_run):
    runs = quick_run[1]["sections"]["embedded"]["runs"]
    assert [(r["model"], r["dtype"]) for r in runs] == [("tiny-d32-v257", "float32"), ("tiny-d32-v257", "bfloat16")]
    for r in runs:
        assert 0 <= r["solved"] <= r["strings"] == 4
        assert 0 <= r["steps_median"] <= r["steps_max"] <= r["max_steps"] == 30
        for k in ("wall_s", "solved_per_min"):
            assert _is_number(r[k])
        assert r["solved_per_min"] == pytest.approx(r["solved"] * 60 / r["wall_s"], rel=1e-4)
        assert r["peak_mem_bytes"] is None          # CUDA only


def test_throughput_rows_are_consistent(quick_run):
    sec = quick_run[1]["sections"]["throughput"]
    assert _is_number(sec["bf16_matmul_peak_flops"]) and sec["bf16_matmul_peak_flops"] > 0
    assert [m["model"] for m in sec["models"]] == ["pythia-160m", "Llama-3.2-1B", "Gemma-3-1B"]
    for m in sec["models"]:
        pc = m["params"]
        assert pc["total"] >= pc["body"] > 0 and pc["head"] == 512 * 64     # the --quick shapes
        assert pc["tied"] is (m["model"] != "pythia-160m")                  # as in the published configs
        assert len(m["runs"]) == 3
        for r in m["runs"]:
            for k in ("step_s", "tokens_per_s", "strings_per_min", "flops_per_step", "flops_share_of_peak", "wall_s"):
                assert _is_number(r[k]) and r[k] > 0, (m["model"], k)
            B, n = r["strings"], r["n"]
            assert r["tokens_per_step"] == B * n
            assert r["tokens_per_s"] == pytest.approx(B * n / r["step_s"], rel=1e-4)
            assert r["strings_per_min"] == pytest.approx(B * 60 / (3000 * r["step_s"]), rel=1e-4)
            assert r["flops_per_step"] == pytest.approx(4 * B * (pc["body"] * n + pc["head"] * (n - 1)), rel=1e-5)
            assert r["flops_share_of_peak"] == pytest.approx(
                r["flops_per_step"] / r["step_s"] / sec["bf16_matmul_peak_flops"], rel=1e-3)
            assert r["steps_run"] >= sec["steps_per_run"]


def test_markdown_table(quick_run):
    md = quick_run[2]
    assert md.startswith("# GPU check") and "(--quick)" in md
    for head in ("## checks", "## embedded", "## throughput", "| model | n | strings | tokens/step |"):
        assert head in md
    assert md.count("| Gemma-3-1B |") == 3 and "all passed: True" in md


def test_time_guard_skips_and_says_so(tmp_path, load_script):
    gc = load_script("benchmarks/gpu_check.py")
    report = gc.main(["--device", "cpu", "--quick", "--budget", "0", "--out", str(tmp_path)])
    assert set(report["sections"]) == {"checks", "embedded", "throughput"}
    for sec in report["sections"].values():
        assert sec["status"] == "skipped" and sec["reason"] == "time guard: 0 s used"
    saved = json.loads((tmp_path / "gpu_check.json").read_text())
    assert saved["sections"] == report["sections"]
    with pytest.raises(SystemExit):
        gc.main(["--sections", "checks,nonsense", "--out", str(tmp_path)])
