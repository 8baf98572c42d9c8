"""matplotlib figures drawn from data they are given: ``plot_x(ax, ...) -> artists`` creates,
``update_x(artists, ...)`` moves them in place; colours and styles in :mod:`accesslib.plots.style`.
May import theory; never torch or ipywidgets.
"""
