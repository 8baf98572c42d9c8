"""The built package works on its own: sdist -> wheel -> a fresh virtual environment.

Builds the sdist and, from it, the wheel (``python -m build``: this also checks that MANIFEST.in
carries what setup.py needs), creates an empty virtual environment, installs the CPU torch
(``torch==2.13.0``, as the Makefile does) and the wheel without extras and without ``-e``, then
checks, in this order (the tests share one environment and run in file order):

1. ``accesslib --version``;
2. ``import accesslib`` and a tiny cramming run on the default embedded model work while
   Jupyter, Voila, ipywidgets and Dask are not importable;
3. ``accesslib cram`` on the default model, with ``--store`` in a temporary folder, and
   ``accesslib store export --csv`` of that store; ``accesslib bound`` from the shipped data;
4. ``accesslib app`` and ``accesslib sweep`` say in one line which extra to install;
5. after ``pip install "accesslib[apps]"``: ``accesslib app`` serves the notebooks shipped in the
   wheel until the index page answers 200, then is stopped (its whole process group).

It installs packages (pip's cache makes reruns fast): about 2 minutes with a warm cache.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.wheel

ROOT = Path(__file__).resolve().parents[1]
TORCH_CPU = "torch==2.13.0"
#: not importable after installing the wheel without extras
EXTRAS_ONLY = ("jupyterlab", "jupyter_server", "voila", "ipywidgets", "ipympl", "dask", "distributed")


class Venv:
    def __init__(self, root: Path, wheel: Path):
        self.root, self.wheel = root, wheel
        self.dir = root / "venv"
        self.bin = self.dir / "bin"
        self.python = self.bin / "python"
        self.work = root / "work"       # every command runs here: never the checkout (no stray imports)
        self.work.mkdir()
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        env.update(PATH=f"{self.bin}{os.pathsep}{env.get('PATH', '')}", PYTHONNOUSERSITE="1",
                   PIP_DISABLE_PIP_VERSION_CHECK="1", ACCESSLIB_HOME=str(root / "home"),
                   ACCESSLIB_FAST="1", JUPYTER_RUNTIME_DIR=str(root / "runtime"), MPLBACKEND="Agg")
        self.env = env

    def run(self, *argv, timeout=600, check=True, **kw):
        r = subprocess.run([str(a) for a in argv], cwd=self.work, env=self.env, capture_output=True,
                           text=True, timeout=timeout, **kw)
        if check:
            assert r.returncode == 0, f"{' '.join(map(str, argv))} -> {r.returncode}\n{r.stdout[-3000:]}\n" \
                                      f"{r.stderr[-3000:]}"
        return r

    def pip(self, *args):
        # --no-compile: byte-compiling torch's thousands of modules would double the install time;
        # Python compiles the few that run on import
        return self.run(self.python, "-m", "pip", "install", "-q", "--no-compile", *args, timeout=900)

    def py(self, code: str, **kw):
        return self.run(self.python, "-c", code, **kw)


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    pytest.importorskip("build", reason="python -m build is not installed (it is in accesslib[test])")
    root = tmp_path_factory.mktemp("wheel")
    dist = root / "dist"
    r = subprocess.run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    wheels = sorted(dist.glob("accesslib-*.whl"))
    assert len(wheels) == 1, wheels
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True, timeout=300)
    v = Venv(root, wheels[0])
    v.pip(TORCH_CPU)            # the CPU build first, as the Makefile does; the wheel asks a range
    v.pip(str(v.wheel))         # no extras, no -e
    yield v
    shutil.rmtree(root, ignore_errors=True)


def test_version(venv):
    import accesslib
    r = venv.run(venv.bin / "accesslib", "--version")
    assert r.stdout.strip() == f"accesslib {accesslib.__version__}"
    assert venv.wheel.name.startswith(f"accesslib-{accesslib.__version__}-")


def test_library_crams_without_the_extras(venv):
    code = f"""
import importlib.util, sys
import accesslib
from pathlib import Path
assert Path(accesslib.__file__).resolve().is_relative_to(Path(sys.prefix).resolve()), accesslib.__file__
present = [m for m in {EXTRAS_ONLY!r} if importlib.util.find_spec(m) is not None]
assert not present, f"installed without extras, yet importable: {{present}}"
import torch
from accesslib.cli import notebooks_dir
from accesslib.engine.cramming import cram
from accesslib.models import embedded
from accesslib.models.loading import load_model
nb = notebooks_dir()
assert nb == Path(accesslib.__file__).parent / "notebooks" and (nb / "00-index.ipynb").is_file(), nb
assert (Path(accesslib.__file__).parent / "py.typed").is_file()
lm = load_model(embedded.DEFAULT)
res = cram(lm, torch.tensor([[72, 101, 108]]), 1, max_steps=20, patience=20)
assert len(res.strings) == 1 and res.strings[0].steps >= 1
loaded = sorted(m for m in ("ipywidgets", "voila", "dask", "distributed", "IPython") if m in sys.modules)
print(lm.facts.name, res.strings[0].steps, torch.__version__, loaded)
"""
    out = venv.py(code).stdout.split()
    assert out[0] == "tiny-d32-v257" and out[2].startswith("2.13.0") and out[3] == "[]"


def test_cli_cram_with_a_store(venv):
    store = venv.root / "results" / "r.sqlite"
    store.parent.mkdir()
    r = venv.run(venv.bin / "accesslib", "cram", "--model", "tiny-d32-v257", "--m", "1", "--lengths", "2",
                 "--samples", "1", "--max-steps", "5", "--store", store, "--no-progress")
    assert "m=1:" in r.stdout and "1 crammed, 0 from store" in r.stdout, r.stdout
    assert store.is_file()
    csv = venv.root / "results" / "r.csv"   # the store's export needs no extra either
    venv.run(venv.bin / "accesslib", "store", "export", "--csv", csv, "--store", store)
    lines = csv.read_text().strip().splitlines()
    assert len(lines) == 2 and "model" in lines[0] and "tiny-d32-v257" in lines[1], lines


def test_cli_bound_reads_the_shipped_table_and_bundles(venv):
    """`accesslib bound` needs no extra: [A]'s table and the bundles are package data."""
    r = venv.run(venv.bin / "accesslib", "bound", "--model", "pythia-160m", "--m", "1")
    assert "= 590.09 tokens per prompt vector" in r.stdout and "C / a = 6.5" in r.stdout, r.stdout
    r = venv.run(venv.bin / "accesslib", "bound", "--bundle", "tiny-d32-v257", "--m", "1")
    assert "budget check: converged" in r.stdout, r.stdout


@pytest.mark.parametrize("argv, extra", [
    (["app", "--port", "8866"], "apps"),
    (["sweep", str(ROOT / "examples" / "sweep-tiny.yaml")], "sweep"),
])
def test_missing_extra_is_one_line(venv, argv, extra):
    r = venv.run(venv.bin / "accesslib", *argv, check=False, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and f'pip install "accesslib[{extra}]"' in err[0], r.stderr


def test_app_serves_the_shipped_notebooks(venv, servers):
    venv.pip(f"{venv.wheel}[apps]")
    port = servers.free_port()
    log = open(venv.root / "app.log", "w+")
    proc = subprocess.Popen([str(venv.bin / "accesslib"), "app", "--port", str(port)], cwd=venv.work,
                            env=venv.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/voila/render/00-index.ipynb"
    try:
        deadline, status, body = time.monotonic() + 180, None, ""
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(url, timeout=60) as resp:
                    status, body = resp.status, resp.read().decode("utf-8", "replace")
                    break
            except urllib.error.HTTPError as e:  # the server is up but the page failed: retry
                status = e.code
                time.sleep(1)
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.5)
        log.seek(0)
        text = log.read()
        assert status == 200, f"{url} did not answer (voila exit {proc.poll()}):\n{text[-3000:]}"
        assert "01-counting-bound.ipynb" in body
        assert url in text  # accesslib app prints the index address
    finally:
        servers.stop(proc, timeout=20)
        log.close()
