"""Getting results out of the store: CSV (standard library), pandas and Parquet (optional, with a
one-line message when missing), the per-curve summary and merging another store in."""
import csv
import io
import json
import math
import sys

import numpy as np
import pytest

from accesslib.results.store import EXPORT_COLUMNS, ResultsStore
from accesslib.theory.stats import fit_n50


def _fill(path):
    st = ResultsStore(path)
    rows = []
    for m in (1, 2):
        for n in (2, 4, 6, 8):
            for i in range(4):
                ok = n < 3 * m + (i % 3)   # a falling curve per m
                rows.append(dict(model="tiny", m=m, n=n, source="natural", target_ids=list(range(i, i + n)), seed=0,
                                 protocol_hash="p0", success=ok, tf_success=None if i == 0 else ok, steps=10 * n + i,
                                 final_loss=0.25 * i, sample=i, memory=np.full((m, 3), i, dtype=np.float32),
                                 target_text=f"t,{i} \"q\""))
    rows.append(dict(model="other", m=1, n=3, source="words", target_ids=[1, 2, 3], seed=1, protocol_hash="p1",
                     success=True))
    st.add_many(rows, settings={"lr": 0.01})
    return st


def test_to_csv_writes_every_column_but_memory_and_reads_back(tmp_path):
    st = _fill(tmp_path / "r.sqlite")
    n = st.to_csv(tmp_path / "out.csv", model="tiny", m=[2])
    with open(tmp_path / "out.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert n == len(rows) == 16
    assert tuple(rows[0]) == EXPORT_COLUMNS and "memory" not in rows[0]
    want = st.rows(model="tiny", m=2)
    for got, r in zip(rows, want):
        assert int(got["id"]) == r["id"] and int(got["n"]) == r["n"] and got["model"] == "tiny"
        assert json.loads(got["target_ids"]) == r["target_ids"]
        assert got["success"] == str(r["success"]) and int(got["steps"]) == r["steps"]
        assert float(got["final_loss"]) == r["final_loss"] and got["target_text"] == r["target_text"]
        assert got["tf_success"] == ("" if r["tf_success"] is None else str(r["tf_success"]))
    buf = io.StringIO()
    assert st.to_csv(buf) == 33 and buf.getvalue().count("\n") == 34


def test_to_pandas_one_row_per_string(tmp_path):
    pd = pytest.importorskip("pandas")
    st = _fill(tmp_path / "r.sqlite")
    df = st.to_pandas()
    assert len(df) == st.count() == 33 and list(df.columns) == list(EXPORT_COLUMNS)
    assert df["success"].dtype == "boolean" and df["m"].dtype == "int64"
    assert df["tf_success"].isna().sum() == 8 + 1
    assert isinstance(df.loc[0, "created_at"], pd.Timestamp)
    sub = st.to_pandas(memory=True, model="tiny", m=2, n=[4, 6])
    assert len(sub) == 8 and set(sub["n"]) == {4, 6}
    assert sub["memory"].iloc[0].shape == (2, 3) and sub["memory"].iloc[0].dtype == np.float32
    assert sub["target_ids"].iloc[0] == st.rows(model="tiny", m=2, n=[4, 6])[0]["target_ids"]
    empty = st.to_pandas(model="nobody")
    assert len(empty) == 0 and list(empty.columns) == list(EXPORT_COLUMNS)


def test_to_parquet_round_trips(tmp_path):
    pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    import pandas as pd
    st = _fill(tmp_path / "r.sqlite")
    assert st.to_parquet(tmp_path / "r.parquet", source="natural") == 32
    back = pd.read_parquet(tmp_path / "r.parquet")
    assert len(back) == 32 and list(back["target_ids"].iloc[0]) == st.rows(source="natural")[0]["target_ids"]


def test_without_pandas_the_message_is_one_line_naming_pip(tmp_path, monkeypatch):
    st = _fill(tmp_path / "r.sqlite")
    monkeypatch.setitem(sys.modules, "pandas", None)   # import pandas -> ImportError
    with pytest.raises(ImportError) as e:
        st.to_pandas()
    assert str(e.value) == "ResultsStore.to_pandas needs pandas: pip install pandas"
    with pytest.raises(ImportError, match=r"^writing Parquet needs pandas and pyarrow: pip install pandas pyarrow$"):
        st.to_parquet(tmp_path / "x.parquet")
    assert not (tmp_path / "x.parquet").exists()
    assert st.to_csv(tmp_path / "ok.csv") == 33   # CSV needs nothing


def test_summary_one_row_per_curve_with_its_n50(tmp_path):
    st = _fill(tmp_path / "r.sqlite")
    rows = st.summary({"p0": "fast"})
    assert [(r["model"], r["m"], r["source"]) for r in rows] == [("other", 1, "words"), ("tiny", 1, "natural"),
                                                                  ("tiny", 2, "natural")]
    other, m1, m2 = rows
    assert other["protocol"] == "" and m1["protocol"] == "fast" and m1["protocol_hash"] == "p0"
    for r in (m1, m2):
        counts = st.curve("tiny", r["m"], "natural", "p0")
        fit = fit_n50(counts)
        assert r["strings"] == 16 and r["successes"] == sum(s for s, _ in counts.values())
        assert (r["n_min"], r["n_max"], r["lengths"]) == (2, 8, 4)
        assert r["n50"] == pytest.approx(fit.n50) and r["n50_stderr"] == pytest.approx(fit.stderr)
    assert other["fit"] == "all_success" and math.isnan(other["n50"]) and other["message"]
    assert [r["m"] for r in st.summary(model="tiny", m=[2])] == [2]


def test_merge_copies_new_rows_and_protocols_once(tmp_path):
    a = _fill(tmp_path / "a.sqlite")
    b = ResultsStore(tmp_path / "b.sqlite")
    b.add(dict(model="b", m=1, n=1, source="tokens", target_ids=[1], seed=0, protocol_hash="pb", success=False))
    assert b.merge(a.path) == 33 and b.count() == 34 and b.merge(a.path) == 0
    assert b.settings("p0") == {"lr": 0.01}
    assert b.rows(memory=True, model="tiny", m=2)[0]["memory"].shape == (2, 3)
    with pytest.raises(ValueError, match="other must be an existing results store file"):
        b.merge(tmp_path / "nope.sqlite")
    with pytest.raises(ValueError, match="other must be a different file"):
        b.merge(b.path)


def test_a_store_written_before_accuracy_histories_gains_the_column_and_merges(tmp_path):
    """Files written before the accuracy_history column existed: opened, they gain it (their
    strings read None: unknown); merged into a newer store, their strings come over without it."""
    import shutil
    import sqlite3

    path = tmp_path / "old.sqlite"
    st = ResultsStore(path)
    st.add(dict(model="t", m=1, n=2, source="tokens", target_ids=[1, 2], seed=0, protocol_hash="p", success=True,
                accuracy_history=[[0, 0.5], [3, 1.0]]))
    assert st.rows()[0]["accuracy_history"] == [[0, 0.5], [3, 1.0]]
    st.close()
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE strings DROP COLUMN accuracy_history")
    conn.close()   # the last connection: its write-ahead log goes into the file copied below
    shutil.copy(path, tmp_path / "old-copy.sqlite")
    new = ResultsStore(tmp_path / "new.sqlite")
    assert new.merge(tmp_path / "old-copy.sqlite") == 1 and new.rows()[0]["accuracy_history"] is None
    reopened = ResultsStore(path)
    assert reopened.rows()[0]["accuracy_history"] is None and reopened.rows()[0]["success"] is True
    reopened.add(dict(model="t", m=1, n=3, source="tokens", target_ids=[1, 2, 3], seed=0, protocol_hash="p",
                      success=False, accuracy_history=[[0, 0.0]]))
    assert [r["accuracy_history"] for r in reopened.rows()] == [None, [[0, 0.0]]]
    with pytest.raises(ValueError, match=r"accuracy_history must be a list of \[step, accuracy\] pairs"):
        reopened.add(dict(model="t", m=1, n=4, source="tokens", target_ids=[1, 2, 3, 4], seed=0, protocol_hash="p",
                          success=False, accuracy_history=[1, 2]))
