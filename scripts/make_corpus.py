"""Build the shipped corpus accesslib/data/corpus/kjv.txt.gz from Debian's King James Bible.

Source: Debian packages ``bible-kjv`` (the ``bible`` retrieval program, GPL-2+) and
``bible-kjv-text`` (its data file /usr/lib/bible.data). The King James Version text (1611) is in
the public domain; see accesslib/data/corpus/README.md.

The data file is compressed in the program's own format, so the text is dumped through the
program itself (``bible -l100000 Gen1:1-Rev22:21``: one verse per line, no wrapping) and then
cleaned: chapter headings ("Genesis 1") and verse numbers are stripped. The output keeps one
verse per line and one blank line between chapters (1189 chapters, 31102 verses), so that
``accesslib.models.embedded.corpus_split`` can split by chapter.

    apt-get install -y bible-kjv bible-kjv-text     # only needed to rebuild the corpus
    python scripts/make_corpus.py [--out accesslib/data/corpus/kjv.txt.gz]

The gzip header carries no timestamp or file name (mtime=0), so the output is byte-identical
on every run.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "accesslib" / "data" / "corpus" / "kjv.txt.gz"
N_CHAPTERS, N_VERSES = 1189, 31102          # the Protestant KJV canon
_HEADING = re.compile(r"^(?:[123] )?[A-Z][A-Za-z ]+ \d+$")   # "Genesis 1", "1 Samuel 3", "Song of Solomon 2"
_VERSE = re.compile(r"^\s+(\d+) (.*)$")


def dump_bible() -> str:
    """Whole KJV as printed by Debian's ``bible`` program (headings + numbered verses)."""
    exe = shutil.which("bible")
    if exe is None:
        raise RuntimeError("the `bible` program is missing: apt-get install -y bible-kjv bible-kjv-text")
    out = subprocess.run([exe, "-l100000", "Gen1:1-Rev22:21"], check=True, capture_output=True, text=True)
    return out.stdout


def clean(raw: str) -> str:
    """Strip headings and verse numbers: one verse per line, a blank line between chapters."""
    chapters: list[list[str]] = []
    expect = 0
    for line in raw.splitlines():
        if not line.strip():
            continue
        if _HEADING.match(line):
            chapters.append([])
            expect = 1
            continue
        m = _VERSE.match(line)
        if m is None or not chapters:
            raise ValueError(f"unexpected line in the bible dump: {line!r}")
        if int(m.group(1)) != expect:
            raise ValueError(f"verse {m.group(1)} out of order (expected {expect}): {line!r}")
        expect += 1
        chapters[-1].append(" ".join(m.group(2).split()))
    n_verses = sum(len(c) for c in chapters)
    if len(chapters) != N_CHAPTERS or n_verses != N_VERSES:
        raise ValueError(f"got {len(chapters)} chapters and {n_verses} verses, "
                         f"expected {N_CHAPTERS} and {N_VERSES}")
    return "\n\n".join("\n".join(c) for c in chapters) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    text = clean(dump_bible())
    data = text.encode("utf-8")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "wb") as f:
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, compresslevel=9, mtime=0) as gz:
            gz.write(data)
    print(f"wrote {args.out}: {len(data)} bytes of text, {args.out.stat().st_size} bytes gzipped, "
          f"sha256(text) = {hashlib.sha256(data).hexdigest()}")


if __name__ == "__main__":
    main()
