"""The dependency lists agree: pyproject.toml (core + extras), environment.yml, binder/.

pyproject.toml gives torch and transformers as ranges (an environment that has a CUDA torch
keeps it); the Makefile, binder/ and environment.yml pin torch to the CPU build, inside that
range. The version is one number in pyproject.toml and accesslib.__version__.
"""
import re
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # python 3.10
    import tomli as tomllib
import yaml
from packaging.specifiers import SpecifierSet

import accesslib

ROOT = Path(__file__).resolve().parents[1]
_REQ = re.compile(r"^\s*([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*(.*?)\s*$")
# conda-forge splits dask[distributed] into two packages
CONDA_SPLIT = {"dask[distributed]": ("dask", "distributed")}
TORCH_CPU = "==2.13.0"
#: what each file lists besides the core dependencies
BINDER_EXTRAS = ("apps", "sweep")                 # Binder runs the apps, not the tests
CONDA_EXTRAS = ("apps", "sweep", "export", "test")  # = [all]
ALL = "accesslib[apps,sweep,export,test]"          # [real] stays out: Gemma's terms of use


def _norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def parse(req):
    """'dask[distributed]>=2024.1' -> ('dask[distributed]', '>=2024.1'); conda '=' kept."""
    m = _REQ.match(req)
    assert m, f"cannot parse requirement {req!r}"
    return _norm(m.group(1)) + (m.group(2) or ""), m.group(3).replace(" ", "")


def project():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def pyproject():
    """(core dependencies, {extra: dependencies})"""
    data = project()
    extras = {k: dict(parse(r) for r in v) for k, v in data["optional-dependencies"].items()}
    return dict(parse(r) for r in data["dependencies"]), extras


def expected(extras):
    """Core + the given extras, torch pinned to the CPU build as the environment files have it."""
    deps, opt = pyproject()
    out = dict(deps)
    for e in extras:
        for name, spec in opt[e].items():
            assert name not in out, f"{name} is both a core dependency and in [{e}]"
            out[name] = spec
    out["torch"] = TORCH_CPU
    return out


def conda_env():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda, pip = {}, {}
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            for p in dep["pip"]:
                if not p.startswith("-"):
                    pip.update([parse(p)])
        else:
            conda.update([parse(dep)])
    return conda, pip, env


def binder():
    lines = (ROOT / "binder" / "requirements.txt").read_text().splitlines()
    return dict(parse(l) for l in lines if l.strip() and not l.lstrip().startswith(("#", "-")))


def test_extras_and_all():
    deps, opt = pyproject()
    assert set(opt) == {"apps", "sweep", "export", "real", "test", "all"}
    assert project()["optional-dependencies"]["all"] == [ALL]
    # the apps and Dask are extras: the library and the command line do without them
    light = {"jupyterlab", "voila", "ipywidgets", "ipympl", "dask[distributed]", "pytest"}
    assert not light & set(deps)
    assert {"voila", "ipywidgets", "ipympl", "jupyterlab"} <= set(opt["apps"])
    assert "dask[distributed]" in opt["sweep"] and "build" in opt["test"]
    assert "platformdirs" in deps


def test_binder_matches_pyproject():
    assert binder() == expected(BINDER_EXTRAS)


def test_environment_yml_matches_pyproject():
    conda, pip, env = conda_env()
    want = expected(CONDA_EXTRAS)
    merged = dict(pip)
    for name, spec in conda.items():
        if name in ("python", "pip"):
            continue
        assert name not in merged, f"{name} listed twice in environment.yml"
        merged[name] = spec
    for joined, parts in CONDA_SPLIT.items():
        if joined in want:
            specs = {merged.pop(p, None) for p in parts}
            assert specs == {want[joined]}, f"environment.yml: {parts} must be {want[joined]}"
            merged[joined] = want[joined]
    assert merged == want
    assert "accesslib" == env["name"]


def test_torch_is_a_range_in_pyproject_and_pinned_to_the_cpu_build_elsewhere():
    deps, _ = pyproject()
    for name, major in (("torch", 3), ("transformers", 6)):
        spec = SpecifierSet(deps[name])
        assert not any(s.operator in ("==", "===") for s in spec), f"{name} must be a range: {spec}"
        assert any(s.operator == ">=" for s in spec) and f"<{major}" in str(spec), spec
    assert "2.13.0" in SpecifierSet(deps["torch"]), "the tested CPU torch must satisfy the range"
    assert "5.25.0" in SpecifierSet(deps["transformers"]), "the tested transformers must satisfy the range"
    _, pip, _ = conda_env()
    assert pip["torch"] == binder()["torch"] == TORCH_CPU
    for text in ((ROOT / "environment.yml").read_text(), (ROOT / "binder/requirements.txt").read_text()):
        assert "download.pytorch.org/whl/cpu" in text
    make = (ROOT / "Makefile").read_text()
    pin, install = make.find(f"pip install -q torch{TORCH_CPU}\n"), make.find('pip install -q -e ".[all]"')
    assert 0 <= pin < install, "the Makefile installs the CPU torch first, then accesslib[all]"


def test_version_is_one_number():
    assert project()["version"] == accesslib.__version__
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert str(cff["version"]) == accesslib.__version__


def test_citation_names_the_paper():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"].startswith("1.2") and cff["license"] == project()["license"]
    paper = cff["references"][0]
    assert "How Many Different Outputs Can a Transformer Generate?" == paper["title"]
    assert [a["family-names"] for a in paper["authors"]] == ["Meyer", "Michelessa", "Chaux", "Tan"]
    assert "2605.22223" in str(paper.get("identifiers") or paper.get("url"))
    assert "How to cite" in (ROOT / "README.md").read_text()


def test_typed_marker_and_notebooks_are_shipped():
    assert (ROOT / "accesslib" / "py.typed").is_file()
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "py.typed" in data["accesslib"]
    assert "build_py" in (ROOT / "setup.py").read_text()
    assert "recursive-include notebooks *.ipynb" in (ROOT / "MANIFEST.in").read_text()


def test_binder_installs_the_package_and_readme_gives_voila_url():
    post = ROOT / "binder" / "postBuild"
    assert post.exists() and "pip install" in post.read_text()
    assert "urlpath=voila/render/notebooks/00-index.ipynb" in (ROOT / "binder" / "README.md").read_text()
