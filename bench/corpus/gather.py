"""Gather the real-log corpus listed in bench/corpus/SOURCES into a folder, checking every sha256.

    python bench/corpus/gather.py OUT              # fetch each log from GitHub's raw files
    python bench/corpus/gather.py OUT --from DIR   # take each log from DIR (by its file name)

Each log is fetched from https://raw.githubusercontent.com/{repository}/{commit}/{path}
(or read from DIR/{file}) and written to OUT/{file} only when its sha256 is the listed one.
A log that cannot be had, or whose bytes differ, is reported on one line and skipped; the
others are still gathered. A file already in OUT with the right sha256 is kept.
Exit status: 0 when every log is in OUT, 1 when some are missing.
Then: python bench/corpus.py OUT
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

HERE = Path(__file__).resolve().parent
RAW = "https://raw.githubusercontent.com/{repo}/{commit}/{path}"


class Source(NamedTuple):
    repo: str
    path: str
    commit: str
    sha256: str
    note: str
    file: str


def read_sources(listing: Path) -> list[Source]:
    """The SOURCES lines (comments and blank lines skipped); a malformed line is an error."""
    out = []
    for n, line in enumerate(listing.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 6 or len(parts[2]) != 40 or len(parts[3]) != 64:
            raise SystemExit(f"{listing}:{n}: expected 6 tab-separated fields: {line[:80]!r}")
        src = Source(*parts)
        if "/" in src.file or src.file.startswith("."):
            raise SystemExit(f"{listing}:{n}: file name must be a plain name: {src.file!r}")
        out.append(src)
    return out


def fetch(src: Source, timeout: float) -> bytes:
    url = RAW.format(
        repo=src.repo, commit=src.commit, path=urllib.request.quote(src.path, safe="/")
    )
    req = urllib.request.Request(url, headers={"User-Agent": "tuimon-corpus-gather"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.read()


def gather_one(src: Source, out: Path, from_dir: Path | None, timeout: float) -> str | None:
    """Put one log in out; None when done, else the one-line reason it is not."""
    dst = out / src.file
    if dst.is_file() and hashlib.sha256(dst.read_bytes()).hexdigest() == src.sha256:
        return None
    try:
        data = (from_dir / src.file).read_bytes() if from_dir else fetch(src, timeout)
    except urllib.error.HTTPError as e:
        return f"HTTP {e.code} {e.reason}"
    except urllib.error.URLError as e:
        return f"cannot fetch: {e.reason}"
    except (OSError, ValueError) as e:
        return f"cannot read: {e}"
    got = hashlib.sha256(data).hexdigest()
    if got != src.sha256:
        return f"sha256 {got[:16]}... is not the listed {src.sha256[:16]}... ({len(data)} bytes)"
    tmp = dst.with_name(dst.name + ".part")
    tmp.write_bytes(data)
    tmp.replace(dst)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path, help="folder to gather the logs into")
    ap.add_argument("--from", dest="from_dir", type=Path, help="take the logs from this folder")
    ap.add_argument("--sources", type=Path, default=HERE / "SOURCES")
    ap.add_argument("--only", default="", help="logs whose file name contains this")
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args(argv)
    sources = [s for s in read_sources(args.sources) if args.only in s.file]
    args.out.mkdir(parents=True, exist_ok=True)
    missing = 0
    for src in sources:
        why = gather_one(src, args.out, args.from_dir, args.timeout)
        if why is not None:
            missing += 1
            print(f"MISSING {src.file}: {src.repo}/{src.path}@{src.commit[:10]}: {why}")
    print(f"{len(sources) - missing} of {len(sources)} logs in {args.out}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
