"""What is kept: the results store (SQLite), the shipped results bundles with the slopes
predicted from them, and the published numbers with their sources. May import theory.
"""
