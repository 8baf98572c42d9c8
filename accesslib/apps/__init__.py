"""The ipywidgets apps, one module per notebook; import them from here.

``from accesslib.apps import BoundsApp`` loads only that app's module (and its plots), so a
page pays for what it shows.
"""
from __future__ import annotations

import importlib

_APPS = {
    "App": "base",
    "BoundsApp": "nb01_bounds",
    "CrammingApp": "nb02_cramming",
    "PredictedApp": "nb03_predicted",
    "SweepApp": "nb03_predicted",
    "BudgetMapApp": "nb03_predicted",
    "SlopeApp": "nb04_slope",
    "GeometryApp": "nb05_geometry",
    "ModelGeometryApp": "nb05_geometry",
    "CopyApp": "nb06_copy",
    "PackingApp": "nb07_packing",
    "PrecisionApp": "nb07_packing",
    "MeanFieldApp": "nb08_meanfield",
    "BeyondApp": "nb09_beyond",
}

__all__ = sorted(_APPS)


def __getattr__(name):
    if name in _APPS:
        return getattr(importlib.import_module(f"accesslib.apps.{_APPS[name]}"), name)
    raise AttributeError(f"module 'accesslib.apps' has no attribute {name!r}")


def __dir__():
    return __all__
