"""The package's layers: every import points down, and the light layers stay light.

Layers (CONTRIBUTING.md): _checks and config at the bottom; theory; models, results and plots on
theory; engine on models; experiments on engine and results; apps on everything but the command
line; cli on everything. The test reads every module's imports (top-level and inside functions:
a lazy import is an arrow too).
"""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "accesslib"

BOTTOM = {"_checks", "config"}
ALLOWED = {
    "theory": {"theory"},
    "models": {"models", "theory"},
    "results": {"results", "theory"},
    "plots": {"plots", "theory"},
    "engine": {"engine", "models", "theory"},
    "experiments": {"experiments", "engine", "models", "results", "theory"},
    "apps": {"apps", "plots", "experiments", "engine", "models", "results", "theory"},
    "cli": {"cli", "apps", "plots", "experiments", "engine", "models", "results", "theory", "__init__"},
    "__init__": {"theory", "results"},
    "__main__": {"cli"},
    "_checks": set(),
    "config": set(),
}


def _modules():
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).with_suffix("")
        yield ".".join(("accesslib",) + rel.parts), path


def _layer(module: str) -> str:
    """'accesslib.engine.cramming' -> 'engine'; 'accesslib' -> '__init__'."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(module: str, path: Path):
    """(line, imported module, imported names) for every import of an accesslib module."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "accesslib":
                    yield node.lineno, a.name, []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] == "accesslib":
                yield node.lineno, target, [a.name for a in node.names]


def _target_layer(target: str, names: list[str]) -> list[str]:
    """Layers an import reaches: 'from accesslib import config' reaches config."""
    if target == "accesslib":
        return [n if n in ALLOWED else "__init__" for n in names]
    return [_layer(target)]


def test_every_module_has_a_layer():
    unknown = sorted({_layer(m) for m, _ in _modules()} - set(ALLOWED))
    assert not unknown, f"modules outside the known layers: {unknown}"


def test_imports_point_down_the_layers():
    bad = []
    for module, path in _modules():
        own = _layer(module)
        for line, target, names in _imports(module, path):
            for layer in _target_layer(target, names):
                if layer not in BOTTOM and layer not in ALLOWED[own] and layer != own:
                    bad.append(f"{path.relative_to(PKG.parent)}:{line}: {own} imports {target} ({layer})")
    assert not bad, "imports against the layers:\n" + "\n".join(bad)


def test_no_module_imports_another_modules_private_names():
    bad = []
    for module, path in _modules():
        for line, target, names in _imports(module, path):
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if private and target != module:
                bad.append(f"{path.relative_to(PKG.parent)}:{line}: {', '.join(private)} from {target}")
    assert not bad, "private names imported across modules:\n" + "\n".join(bad)


def test_the_layer_check_catches_an_upward_import(tmp_path):
    """The parser sees relative, absolute and lazy imports (so the test above can fail)."""
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from accesslib.engine import cramming\n"
                   "from ..apps import base\nimport accesslib.models.loading\n")
    got = [(t, _target_layer(t, n)) for _, t, n in _imports("accesslib.theory.m", src)]
    assert ("accesslib.engine", ["engine"]) in got
    assert ("accesslib.apps", ["apps"]) in got
    assert ("accesslib.models.loading", ["models"]) in got


HEAVY = ("torch", "transformers", "ipywidgets", "matplotlib")


@pytest.mark.parametrize("modules, forbidden", [
    (["accesslib"], HEAVY),
    (["accesslib.theory", "accesslib.theory.bounds", "accesslib.theory.refined", "accesslib.theory.stats",
      "accesslib.theory.packing", "accesslib.theory.meanfield", "accesslib._checks", "accesslib.config"], HEAVY),
    (["accesslib.results.store", "accesslib.results.bundles", "accesslib.results.reference"], HEAVY),
    (["accesslib.plots"] + [f"accesslib.plots.{p.stem}" for p in sorted((PKG / "plots").glob("*.py"))
                            if p.stem != "__init__"], ("torch", "transformers", "ipywidgets")),
])
def test_light_layers_do_not_load_heavy_packages(modules, forbidden):
    code = ("import importlib, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            f"print(sorted(set({list(forbidden)!r}) & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", f"importing {modules} loaded {out.stdout.strip()}"


def test_the_bounds_app_loads_without_torch():
    """Notebook 01 needs matplotlib and ipywidgets, never torch."""
    code = ("import sys; from accesslib.apps import BoundsApp; "
            "print('torch' in sys.modules, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"MPLBACKEND": "Agg", "PATH": ""})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "False"]
