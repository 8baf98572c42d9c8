"""`import accesslib` stays light: no torch, transformers, ipywidgets or matplotlib (Voila's
first paint and the bounds notebook stay fast). Checked in a fresh interpreter."""
import json
import subprocess
import sys

import pytest

HEAVY = ["torch", "transformers", "ipywidgets", "matplotlib"]


@pytest.mark.parametrize("stmt", ["import accesslib", "import accesslib.theory.bounds",
                                  "import accesslib.results.reference", "import accesslib.config"])
def test_light_import(stmt):
    code = (f"import sys, json; {stmt}; "
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [], f"{stmt} imported heavy modules"


def test_widgets_module_imports_without_torch():
    # the bounds app needs matplotlib and ipywidgets, but never torch
    code = ("import sys; import accesslib.apps.base; "
            "print('torch' in sys.modules, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"MPLBACKEND": "Agg", "PATH": ""})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]
