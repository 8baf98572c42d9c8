"""Every ``accesslib.…`` name that the notebooks and docs cite in code spans exists, and every
relative link of theirs leads to a file.

The notebooks' "Under the hood" sections and the docs send readers to functions by their dotted
names; a rename in the package must not leave them pointing at nothing. A name followed by ``*``
(``spec.MAX_*``) stands for a family and is not checked."""
import importlib
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "docs").glob("*.md")) + [
    ROOT / "README.md", ROOT / "CONTRIBUTING.md"]
NAME = re.compile(r"`(accesslib(?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?!\*)[`(\[ ,:]")


def text_of(path: Path) -> str:
    if path.suffix == ".ipynb":
        return "\n".join("".join(c["source"]) for c in json.loads(path.read_text(encoding="utf-8"))["cells"])
    return path.read_text(encoding="utf-8")


def cited(path: Path) -> list[str]:
    return sorted({m.group(1) for m in NAME.finditer(text_of(path))})


def resolves(name: str) -> bool:
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        try:
            for attr in parts[k:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


def test_the_check_sees_a_missing_name():
    assert resolves("accesslib.theory.bounds.slope") and not resolves("accesslib.theory.bounds.no_such_thing")
    assert NAME.findall("see `accesslib.a.b` and `accesslib.c.MAX_*`") == ["accesslib.a.b"]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_every_cited_name_exists(path):
    missing = [n for n in cited(path) if not resolves(n)]
    assert missing == [], f"{path.name} cites names that do not exist: {missing}"


LINK = re.compile(r"\]\(([^)\s]+)\)")


def local_links(path: Path) -> list[str]:
    """The relative links of a page (no web address, no anchor alone), without their anchors."""
    out = []
    for target in LINK.findall(text_of(path)):
        if not target.startswith(("http://", "https://", "mailto:", "#")):
            out.append(target.split("#")[0])
    return [t for t in out if t]


@pytest.mark.parametrize("path", SOURCES + sorted((ROOT / "binder").glob("*.md")), ids=lambda p: p.name)
def test_every_relative_link_leads_to_a_file(path):
    missing = [t for t in local_links(path) if not (path.parent / t).exists()]
    assert missing == [], f"{path.name} links to files that do not exist: {missing}"


def test_the_link_check_sees_a_missing_file(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("[a](p.md) [b](gone.md#x) [c](https://example.org) [d](#top)")
    assert local_links(page) == ["p.md", "gone.md"]
