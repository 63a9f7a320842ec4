"""The Textual app of tuimon: the live pair view, the browser of past pairs, their modals.

This package is the only place that imports textual; `run_app` in `tuimon.ui.app` is its entry.
"""
