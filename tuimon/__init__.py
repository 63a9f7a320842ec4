"""tuimon: a terminal monitor for the reproducibility of training runs."""

__version__ = "0.1.0"
