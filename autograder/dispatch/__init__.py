"""Trusted worker processes that grade notebooks side by side: a local pool, or a Dask cluster."""
