"""Rebuild accesslib/data/words100k.txt.gz and its licence file from Debian's SCOWL word list.

The "words100k" target source (accesslib/engine/targets.py) draws random words from a list of
about 100k English words, as [A] and [K] do (docs/paper.md, section 5). The list is Debian's
package ``wamerican-large`` (SCOWL size 70, American spelling; version 2020.12.07-2 in Debian 12
"bookworm"), filtered to lowercase ASCII words of two letters or more: no capitalised names, no
possessives ("'s"), no accented letters, no single letters. That keeps 115,162 of its 170,421
lines; the next size down (``wamerican``, SCOWL 50) keeps 63,849 and the next up
(``wamerican-huge``, SCOWL 80) 247,007, so size 70 is the one closest to 100k.

    apt-get install -y wamerican-large
    python scripts/make_wordlist.py            # writes the two files
    python scripts/make_wordlist.py --check    # rebuilds in memory, compares with the shipped ones

The gzip stream carries no name and no time stamp, so the same package gives the same bytes.
"""
from __future__ import annotations

import argparse
import gzip
import io
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "accesslib" / "data"
PACKAGE = "wamerican-large"
SOURCE = Path("/usr/share/dict/american-english-large")
COPYRIGHT = Path(f"/usr/share/doc/{PACKAGE}/copyright")
LISTS_USED = Path(f"/usr/share/doc/{PACKAGE}/{PACKAGE}.scowl-word-lists-used")
WORD = re.compile(r"[a-z]{2,}")


def package_version() -> str:
    """The installed version of the Debian package (dpkg-query), or a message to install it."""
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", PACKAGE], capture_output=True,
                             text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        sys.exit(f"Debian package {PACKAGE} is not installed: apt-get install -y {PACKAGE}")
    return out.stdout.strip()


def select(lines) -> list[str]:
    """Lowercase ASCII words of 2+ letters, sorted bytewise (LC_ALL=C sort -u), no duplicates."""
    return sorted({w for w in (x.strip() for x in lines) if WORD.fullmatch(w)})


def word_file(words: list[str], version: str) -> bytes:
    """The gzip bytes of the list: three '#' header lines, then one word per line."""
    head = [f"# {len(words):,} English words (lowercase a-z, 2+ letters, no possessives) from Debian's",
            f"# '{PACKAGE}' {version} ({SOURCE}, SCOWL size 70); rebuilt by scripts/make_wordlist.py.",
            "# Copyright 2000-2011 by Kevin Atkinson and others; permissive licence: see words100k.LICENSE.txt."]
    text = "\n".join(head + words) + "\n"
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=9, mtime=0) as f:
        f.write(text.encode("ascii"))
    return buf.getvalue()


def licence_file(n_words: int, n_lines: int, version: str) -> str:
    lists = LISTS_USED.read_text(encoding="utf-8").strip() if LISTS_USED.is_file() else "(list not found)"
    return f"""accesslib/data/words100k.txt.gz: source and licence
=====================================================

What: {n_words:,} English words, lowercase ASCII letters only, two letters or more, one per line,
sorted bytewise; gzip-compressed; lines starting with '#' are comments. The "words100k" target
source (accesslib.engine.targets) draws random words from it: the protocol of [A] and [K], who
draw "random words" from a list of about 100k English words.

Source: Debian's package `{PACKAGE}`, version {version} (Debian 12 "bookworm"), file
{SOURCE} ({n_lines:,} lines): SCOWL (Spell Checker Oriented Word Lists) up to size 70,
American spelling. Selected (and rebuilt reproducibly) by scripts/make_wordlist.py:

    grep -E '^[a-z]{{2,}}$' {SOURCE} | LC_ALL=C sort -u

which drops capitalised words (names, abbreviations), possessives ("'s"), words with accented
letters and single letters. Sizes compared: `wamerican` (SCOWL 50) keeps 63,849 words,
`{PACKAGE}` (SCOWL 70) {n_words:,}, `wamerican-huge` (SCOWL 80) 247,007: size 70 is the one
closest to 100k.

The Debian package's own note on the SCOWL lists it joins:

{lists}

Licence: the Debian copyright file of the `{PACKAGE}` package follows verbatim.

----------------------------------------------------------------------------------------------
{COPYRIGHT.read_text(encoding="utf-8")}"""


def build() -> tuple[bytes, str, int]:
    version = package_version()
    if not SOURCE.is_file() or not COPYRIGHT.is_file():
        sys.exit(f"{SOURCE} or {COPYRIGHT} missing: apt-get install -y {PACKAGE}")
    lines = SOURCE.read_text(encoding="utf-8").splitlines()
    words = select(lines)
    return word_file(words, version), licence_file(len(words), len(lines), version), len(words)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(DATA), help="folder for the two files (default: the package data)")
    p.add_argument("--check", action="store_true", help="compare a fresh build with the files in --out")
    a = p.parse_args(argv)
    data, licence, n = build()
    out = Path(a.out)
    paths = (out / "words100k.txt.gz", out / "words100k.LICENSE.txt")
    if a.check:
        same = [paths[0].read_bytes() == data, paths[1].read_text(encoding="utf-8") == licence]
        print(f"{paths[0]}: {'same' if same[0] else 'DIFFERS'}; {paths[1]}: {'same' if same[1] else 'DIFFERS'}")
        return 0 if all(same) else 1
    out.mkdir(parents=True, exist_ok=True)
    paths[0].write_bytes(data)
    paths[1].write_text(licence, encoding="utf-8")
    print(f"{n:,} words -> {paths[0]} ({len(data):,} bytes); licence -> {paths[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
