"""accesslib: how many different outputs can a transformer generate?

An interactive explainer of the accessibility bounds of Meyer et al. (ICML 2026) and a tool
to measure them by cramming. ``import accesslib`` stays light (numpy only): torch,
transformers, matplotlib and ipywidgets load only when their modules are imported.
"""
from accesslib.results import reference  # noqa: F401  (pure numpy / json)
from accesslib.theory import bounds  # noqa: F401  (pure numpy / json)

__version__ = "0.2.0"  # keep equal to pyproject.toml's version (tests/test_packaging.py)
__all__ = ["bounds", "reference", "__version__"]
