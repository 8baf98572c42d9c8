"""The committed notebooks are clean: valid nbformat, every cell with its own id (nbformat 4.5;
a cell without one is a warning today and an error in later nbformat), and no outputs or
execution counts committed (the guide: outputs are not committed)."""
import json
import warnings
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_a_notebook_is_valid_with_ids_and_without_outputs(path):
    raw = json.loads(path.read_text(encoding="utf-8"))
    ids = [c.get("id") for c in raw["cells"]]
    assert None not in ids, f"{path.name}: cells {[i for i, x in enumerate(ids) if x is None]} have no id"
    assert len(set(ids)) == len(ids), f"{path.name}: two cells share an id"
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # MissingIDFieldWarning and the like fail here
        nbformat.validate(nbformat.reads(path.read_text(encoding="utf-8"), as_version=4))
    for i, c in enumerate(raw["cells"]):
        if c["cell_type"] == "code":
            assert c["outputs"] == [] and c["execution_count"] is None, f"{path.name}: cell {i} has outputs"


def test_the_check_sees_a_cell_without_an_id(tmp_path):
    nb = json.loads(NOTEBOOKS[0].read_text(encoding="utf-8"))
    del nb["cells"][0]["id"]
    bad = tmp_path / "x.ipynb"
    bad.write_text(json.dumps(nb), encoding="utf-8")
    with pytest.raises(AssertionError, match="have no id"):
        test_a_notebook_is_valid_with_ids_and_without_outputs(bad)
