"""What is kept: the results store (SQLite, in the user data folder; exported as CSV, pandas or
Parquet, summarised per curve), the shipped results bundles with the slopes
predicted from them, and the published numbers with their sources. May import theory.
"""
