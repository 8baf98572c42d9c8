"""refined.measured_eps_slopes: the counting bound at a measured precision (box and cells on top)."""
import math

import pytest

from accesslib.results import bundles
from accesslib.theory import refined


def test_hand_values_and_what_r_moves():
    d, V, rel, r = 4, 100, 0.01, 2.0
    s = refined.measured_eps_slopes(d, V, rel, r, widths=[1.0, 2.0, 0.5, 4.0], s_conv=-6.0)
    assert s["ball"].C == pytest.approx(4 * math.log(201) / math.log(100))       # d ln(1 + 2/eps_rel) / ln|V|
    box = sum(math.log(1 + w / 0.02) for w in (1.0, 2.0, 0.5, 4.0))
    assert s["box"].C == pytest.approx(box / math.log(100))
    assert s["cells"].C == pytest.approx(4 * math.log(201) / 6.0)
    assert s["box+cells"].C == pytest.approx(box / 6.0)
    moved = refined.measured_eps_slopes(d, V, rel, 2 * r, widths=[1.0, 2.0, 0.5, 4.0], s_conv=-6.0)
    assert moved["ball"].C == pytest.approx(s["ball"].C) and moved["box"].C < s["box"].C   # only the box sees r
    assert set(refined.measured_eps_slopes(d, V, rel, r)) == {"ball"}
    assert set(refined.measured_eps_slopes(d, V, rel, r, s_conv=-6.0)) == {"ball", "cells"}
    with pytest.raises(ValueError, match="eps_rel must be"):
        refined.measured_eps_slopes(d, V, 0.0, r)


@pytest.mark.parametrize("name", bundles.available("cram"))
def test_at_the_dtypes_eps_it_gives_the_stored_slopes(name):
    """eps_rel = eps / r_inf of the geometry record (fp16's 2^-11) gives back the slopes the geometry
    report stored at that eps: the same count, only the precision changes."""
    b = bundles.load("cram", name)
    geo = b["geometry"]
    s = refined.measured_eps_slopes(b["facts"]["d"], b["facts"]["vocab_size"], geo["eps"] / geo["r_inf"],
                                    geo["r_inf"], widths=geo["widths"], s_conv=geo["s_conv"])
    assert set(s) == {"ball", "box", "cells", "box+cells"}
    for k, v in s.items():
        assert v.C == pytest.approx(geo["slopes"][k], rel=1e-9), k
