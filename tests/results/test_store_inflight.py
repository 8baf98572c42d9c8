"""The store's inflight table: the state of strings still being crammed (see
tests/engine/test_checkpoint.py for the engine that writes it)."""
import sqlite3

from accesslib.results.store import ResultsStore


def test_save_load_replace_drop(tmp_path):
    st = ResultsStore(tmp_path / "s.sqlite")
    assert st.inflight() == [] and st.load_inflight("a") is None
    st.save_inflight({"a": (b"\x00state-a", 10), "b": (b"state-b", 20)})
    assert st.load_inflight("a") == b"\x00state-a"
    st.save_inflight({"a": (b"later", 30)})                      # replaced, not duplicated
    assert st.load_inflight("a") == b"later"
    assert sorted((k["key"], k["steps"]) for k in st.inflight()) == [("a", 30), ("b", 20)]
    st.drop_inflight(["a", "absent"])
    assert [k["key"] for k in st.inflight()] == ["b"]
    st.save_inflight({})
    st.drop_inflight([])
    assert ResultsStore(tmp_path / "s.sqlite").load_inflight("b") == b"state-b"   # another handle sees it
    assert st.count() == 0                                       # finished strings are another table


def test_a_store_written_before_the_table_existed_gains_it(tmp_path):
    path = tmp_path / "old.sqlite"
    ResultsStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE inflight")
    st = ResultsStore(path)
    st.save_inflight({"k": (b"s", 1)})
    assert st.load_inflight("k") == b"s"
