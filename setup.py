"""Build hook: the wheel ships the notebooks as ``accesslib/notebooks/*.ipynb``.

The notebooks have one home, ``notebooks/`` at the top of the repository (JupyterLab, nbval and
the browser tests use them there). When a wheel is built, ``build_py`` copies them into the
package, so ``accesslib app`` serves them from an installed wheel. An editable install
(``pip install -e .``) copies nothing: there ``accesslib app`` serves ``notebooks/`` itself.
All other settings are in pyproject.toml.
"""
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

NOTEBOOKS = Path(__file__).resolve().parent / "notebooks"


class build_py_with_notebooks(build_py):
    def _notebooks(self):
        if getattr(self, "editable_mode", False):
            return []
        found = sorted(NOTEBOOKS.glob("*.ipynb"))
        if not found:
            raise RuntimeError(f"no notebooks in {NOTEBOOKS}: build from the repository or its sdist")
        return [(nb, Path(self.build_lib) / "accesslib" / "notebooks" / nb.name) for nb in found]

    def run(self):
        super().run()
        for src, dest in self._notebooks():
            self.mkpath(str(dest.parent))
            self.copy_file(str(src), str(dest))

    def get_outputs(self, include_bytecode=True):
        return super().get_outputs(include_bytecode) + [str(d) for _, d in self._notebooks()]


setup(cmdclass={"build_py": build_py_with_notebooks})
