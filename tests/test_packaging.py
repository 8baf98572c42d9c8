"""environment.yml and binder/requirements.txt list the same dependencies as pyproject.toml."""
import re
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # python 3.10
    import tomli as tomllib
import yaml

ROOT = Path(__file__).resolve().parents[1]
_REQ = re.compile(r"^\s*([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*(.*?)\s*$")
# conda-forge splits dask[distributed] into two packages
CONDA_SPLIT = {"dask[distributed]": ("dask", "distributed")}


def _norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def parse(req):
    """'dask[distributed]>=2024.1' -> ('dask[distributed]', '>=2024.1'); conda '=' kept."""
    m = _REQ.match(req)
    assert m, f"cannot parse requirement {req!r}"
    return _norm(m.group(1)) + (m.group(2) or ""), m.group(3).replace(" ", "")


def pyproject():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return dict(parse(r) for r in data["dependencies"]), dict(
        parse(r) for r in data["optional-dependencies"]["test"])


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


def test_binder_matches_pyproject():
    deps, _ = pyproject()
    assert binder() == deps


def test_environment_yml_matches_pyproject():
    deps, test = pyproject()
    conda, pip, env = conda_env()
    merged = dict(pip)
    for name, spec in conda.items():
        if name in ("python", "pip"):
            continue
        assert name not in merged, f"{name} listed twice in environment.yml"
        merged[name] = spec
    for joined, parts in CONDA_SPLIT.items():
        if joined in deps:
            specs = {merged.pop(p, None) for p in parts}
            assert specs == {deps[joined]}, f"environment.yml: {parts} must be {deps[joined]}"
            merged[joined] = deps[joined]
    assert merged == {**deps, **test}
    assert "accesslib" == env["name"]


def test_torch_is_pinned_cpu_everywhere():
    deps, _ = pyproject()
    assert deps["torch"].startswith("==")
    _, pip, _ = conda_env()
    assert pip["torch"] == deps["torch"] == binder()["torch"]
    for text in ((ROOT / "environment.yml").read_text(), (ROOT / "binder/requirements.txt").read_text()):
        assert "download.pytorch.org/whl/cpu" in text


def test_binder_installs_the_package_and_readme_gives_voila_url():
    post = ROOT / "binder" / "postBuild"
    assert post.exists() and "pip install" in post.read_text()
    assert "urlpath=voila/render/notebooks/00-index.ipynb" in (ROOT / "binder" / "README.md").read_text()
