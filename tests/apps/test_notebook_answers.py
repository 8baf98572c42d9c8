"""The folded answers of every notebook render as markdown in the Voila apps, not as raw text.

A ``<details>`` line starts an HTML block, which in CommonMark runs to the next blank line with its
markdown left as it is: without a blank line after ``<summary>Answer</summary>`` the apps showed
``*budget-limited*`` and ```make app``` with their asterisks and backticks. Rendered here with the
markdown renderer Voila uses (nbconvert's mistune filter)."""
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def answers_html(path: Path) -> list[str]:
    """Each folded answer of a notebook as Voila renders it: the HTML between its summary and the
    closing tag."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    nb = json.loads(path.read_text(encoding="utf-8"))
    found = []
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown" and "<details>" in "".join(cell["source"]):
            html = markdown2html_mistune("".join(cell["source"]))
            found += re.findall(r"<summary>Answer</summary>(.*?)</details>", html, flags=re.S)
    return found


def raw_markdown(html: str) -> list[str]:
    """What is left of markdown syntax in rendered HTML, outside code and math: emphasis
    asterisks and backticks."""
    text = re.sub(r"<code>.*?</code>|\$[^$]*\$", "", html, flags=re.S)
    return re.findall(r"\*\*?[^\s*][^*]*\*\*?|`[^`]+`", text)


def test_a_raw_answer_is_caught():
    """The check itself: an answer written without the blank line shows its asterisks."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    bare = "1. Q?\n   <details><summary>Answer</summary>\n   It is *budget-limited*.\n   </details>\n"
    assert raw_markdown(markdown2html_mistune(bare)) == ["*budget-limited*"]
    fixed = bare.replace("</summary>\n", "</summary>\n\n")
    html = markdown2html_mistune(fixed)
    assert raw_markdown(html) == [] and "<em>budget-limited</em>" in html


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if "<details>" in p.read_text(encoding="utf-8")],
                         ids=lambda p: p.stem)
def test_answers_render_as_markdown(path):
    found = answers_html(path)
    text = path.read_text(encoding="utf-8")
    assert len(found) == text.count("<summary>Answer</summary>") > 0       # every answer found, closed
    for html in found:
        assert raw_markdown(html) == [], f"{path.name}: an answer shows raw markdown: {html[:200]!r}"
        assert html.strip().startswith("<p>")                                   # rendered as paragraphs
