"""Notebook 04's slope app, headless: the family table and its panels."""
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from accesslib.apps.nb04_slope import SlopeApp  # noqa: E402
from accesslib.models import embedded  # noqa: E402
from accesslib.results import bundles  # noqa: E402
from accesslib.results.bundles import family_table  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_slope_app_family_table(tmp_path, monkeypatch):
    """Two synthetic bundles (made by hand here, for the maths only): C/a and the groups."""
    out = tmp_path / "b"
    base = dict(kind="cram", version=1, source="natural", samples=1, search="grid", seed=0, protocol="fast",
                settings={}, curves=[], examples=[], created="x", hardware={}, wall_time=1.0, command="")
    for name, d, a in [("fam-a", 32, 4.0), ("fam-b", 64, 10.0)]:
        bundles.save(dict(base, model=name, facts=dict(d=d, vocab_size=1024, dtype="float32", family="gpt_neox",
                                                       max_context=128),
                          slope=dict(slope=a, intercept=0.0, r2=0.99, slope_stderr=0.1, n_points=4),
                          geometry=dict(r_inf=3.0)), out)
    monkeypatch.setattr(bundles, "bundle_dir", lambda: out)
    rows = family_table(["fam-a", "fam-b"])
    C32 = 32 * math.log(4097) / math.log(1024)
    assert rows[0]["C"] == pytest.approx(C32) and rows[0]["ratio"] == pytest.approx(C32 / 4.0)
    assert rows[1]["ratio"] == pytest.approx(2 * C32 / 10.0)
    monkeypatch.setattr(embedded, "names", lambda: ["fam-a", "fam-b"])
    app = SlopeApp(canvas="agg")
    assert app.last_error is None, app.last_error
    assert app.values["ratio_spread"] == pytest.approx((C32 / 4.0) / (2 * C32 / 10.0))
    before = app._art[0]["C"].get_ydata().copy()
    app.dtype.value = "float32"
    assert app._art[0]["C"].get_ydata()[0] == pytest.approx(
        before[0] * math.log1p(2 * 2.0**24) / math.log(4097))
