"""The maths of the paper (docs/paper.md, sections 2-4 and 7): counting bounds, refined bounds,
packings, the mean-field view and the statistics of measurements. numpy and scipy only.
"""
