"""Seaborn figures, one module per study (``width``, ``mechanism``, ``identifiability``, ``swap_costs``), each
figure written as PNG and PDF by ``common.save_figure``; this package's ``__init__`` imports nothing."""
