"""Published reference numbers (docs/paper.md, section 6) load as plain records with sources."""
import pytest

from accesslib.results import reference
from accesslib.theory import bounds


def test_model_table_matches_paper_md():
    rows = {r["name"]: r for r in reference.models()}
    assert len(rows) == 8
    p = rows["EleutherAI/pythia-160m"]
    assert (p["d"], p["vocab_size"], p["r_inf"], p["min_cos"]) == (768, 50304, 22.45, 0.89)
    assert (p["slope_pg19"], p["slope_random"], p["s_conv"]) == (90.37, 44.13, -12.87)
    q = rows["Qwen/Qwen2.5-0.5B"]
    assert (q["d"], q["vocab_size"], q["r_inf"]) == (896, 151936, 226.75)
    g = rows["google/gemma-3-270m"]
    assert (g["d"], g["vocab_size"], g["r_inf"], g["slope_random"]) == (640, 262144, 9.95, 22.97)
    assert rows["meta-llama/Llama-3.2-1B"]["slope_random"] == 71.3
    assert rows["google/gemma-3-1b-pt"]["r_inf"] is None   # "n/a" in [A]


def test_every_record_has_a_source():
    for rec in reference.models() + reference.n50_points() + reference.kuratov_capacity():
        assert rec["source"].startswith("[A]") or rec["source"].startswith("[K]")
    assert set(reference.sources()) == {"A", "K"}


def test_records_are_copies():
    a = reference.models()
    a[0]["d"] = -1
    assert reference.models()[0]["d"] != -1


def test_model_lookup_by_short_name_and_unknown():
    assert reference.model("pythia-1b")["d"] == 2048
    assert reference.model("META-LLAMA/LLAMA-3.2-1B")["vocab_size"] == 128256
    with pytest.raises(ValueError, match=r"^model must be a model of the published table \(EleutherAI/pythia-160m, "
                                         r".*\); got 'gpt-5'$"):
        reference.model("gpt-5")


def test_n50_points():
    pts = reference.n50_points("EleutherAI/pythia-160m")
    by = {p["dataset"]: p for p in pts}
    assert by["PG19"]["m"] == [1, 2, 3, 4, 5]
    assert by["PG19"]["n50"] == [90, 183, 278, 367, 450]
    assert by["Random"]["n50"] == [53, 102, 150, 195, 228]
    qwen = {p["dataset"]: p["n50"] for p in reference.n50_points("Qwen/Qwen2.5-0.5B")}
    assert qwen == {"PG19": [56, 126, 208, 270, 340], "Random": [33, 73, 110, 149, 178]}
    assert len(reference.n50_points()) == 4


def test_kuratov_capacity():
    caps = {(c["model"], c["m"]): c["max_length"] for c in reference.kuratov_capacity()}
    assert caps[("EleutherAI/pythia-160m", 1)] == 80
    assert max(caps.values()) == 7168   # Llama-3.2-1B with 16 vectors


def test_ratios_in_published_range():
    # docs/paper.md, section 6: C_ball / measured slope is 5.5-13.5 (PG19) and 11-29 (Random)
    for r in reference.models():
        if r["r_inf"] is None:
            continue
        C = bounds.slope(r["d"], r["vocab_size"], bounds.eps_for_dtype("paper", r["r_inf"]), r["r_inf"])
        assert 5.0 < C / r["slope_pg19"] < 14.0
        assert 10.5 < C / r["slope_random"] < 29.5


def test_published_match_pairs_a_model_and_a_source_with_their_measurement():
    g = reference.published_match("gemma-3-270m", "glove100k")          # by the last part of the hub name
    assert (g["model"], g["dataset"], g["slope"], g["points"]) == ("google/gemma-3-270m", "Random", 22.97, None)
    assert g["targets"].startswith("the same targets") and "[A]" in g["source"]
    assert reference.published_match("Google/Gemma-3-270M", "words100k")["targets"].startswith("similar targets")
    assert reference.published_match("gemma-3-270m", "words")["targets"].startswith("easier targets")
    p = reference.published_match("EleutherAI/pythia-160m", "natural")
    assert (p["dataset"], p["slope"]) == ("PG19", 90.37) and p["points"] == {1: 90, 2: 183, 3: 278, 4: 367, 5: 450}
    assert reference.published_match("pythia-160m", "glove100k")["points"][1] == 53
    t = reference.published_match("pythia-160m", "tokens")               # [A] measured no random tokens
    assert t["dataset"] is None and t["slope"] is None and t["points"] is None and "not tokens" in t["targets"]
    assert reference.published_match("smollm2-135m", "tokens") is None    # not one of [A]'s models
    assert reference.published_match("tiny-d32-v257", "natural") is None
