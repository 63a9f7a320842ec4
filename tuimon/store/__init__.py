"""Pair directories on disk: streamed raw logs, atomic save, an index of past pairs, load.

A store is a directory (default ``./tuimon_pairs``, like ``mlruns/``) holding one directory per
pair::

    20261130-091502_s0_cpu-mps_3fa2/
        a.jsonl  b.jsonl        raw stdout lines of each side, appended as they arrive
        a.stderr b.stderr       raw stderr of each side (only when a side wrote any)
        aligned.jsonl           the aligned record, written once at the end
        pair.json               metadata + summary, written last: a pair without it was
                                interrupted (or is still running)

``aligned.jsonl`` and ``pair.json`` are written to a temp file in the same directory and moved
into place with ``os.replace``, so a reader never sees half of either. Nothing here imports
textual or torch.
"""

__all__ = [
    "ALIGNED_JSONL",
    "DEFAULT_STORE",
    "LOCK_FILE",
    "NO_PAIR_JSON",
    "PAIR_FORMAT",
    "PAIR_JSON",
    "SIDES",
    "STORE_ENV",
    "LockHeld",
    "PairDoc",
    "PairInfo",
    "PairWriter",
    "RunDoc",
    "SavedLogs",
    "StoreError",
    "check_writable",
    "delete_pair",
    "hold_lock",
    "is_pair_dir",
    "is_running",
    "list_newest",
    "list_pairs",
    "lock_owner",
    "open_pair_dir",
    "open_regular",
    "other_side",
    "pair_file",
    "pair_files",
    "read_pair",
    "read_regular",
    "release_lock",
    "resolve_store",
    "special",
    "write_json_atomic",
]

from tuimon.errors import StoreError
from tuimon.store.doc import PairDoc, RunDoc, SavedLogs, pair_files, read_pair
from tuimon.store.files import (
    ALIGNED_JSONL,
    DEFAULT_STORE,
    LOCK_FILE,
    NO_PAIR_JSON,
    PAIR_FORMAT,
    PAIR_JSON,
    SIDES,
    STORE_ENV,
    LockHeld,
    check_writable,
    hold_lock,
    is_running,
    lock_owner,
    open_pair_dir,
    open_regular,
    other_side,
    pair_file,
    read_regular,
    release_lock,
    resolve_store,
    special,
    write_json_atomic,
)
from tuimon.store.index import PairInfo, delete_pair, is_pair_dir, list_newest, list_pairs
from tuimon.store.writer import PairWriter
