"""Launching runs: subprocesses, their pipes, process trees, watchdogs, ranks, consent."""
