"""Judging: aligning two step logs, fingerprints, artifacts, hints, arrays."""
