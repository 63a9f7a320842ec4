"""Analyses of saved pairs: compare, explain, spread."""
