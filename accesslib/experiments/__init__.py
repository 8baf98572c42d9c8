"""Measurements made of engine runs: accessibility curves and length searches, making results
bundles, and Dask sweeps. May import engine, models, results and theory.
"""
