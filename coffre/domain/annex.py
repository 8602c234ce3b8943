"""The example events of annex 1.4.3 (poker, référentiel 2), read from the annex text.

A cross-check tool only: coffre does not ship the regulator's texts, and nothing it runs
reads them. Its demo publishes its own files (:mod:`coffre.demo`), whose annex events carry
these examples' facts; the tests check them against the annex's Markdown rendering when one is
at hand (:func:`reference_annex_path`). The POJEU example (1.4.3.f) is printed across several
pages: its code blocks are page fragments that repeat or invent closing tags at the page
breaks, and :func:`stitch_fragments` reassembles the document.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ANNEX_ENV = "COFFRE_DET_ANNEX"
"""Environment variable naming the annex's Markdown rendering."""
ANNEX_NAME = "det-annexe-poker-decision-2016-064.md"
_SECTION = re.compile(r"^#+\s*(?:\*\*)?1\.4\.3\.([a-z])\b", re.MULTILINE)
_CODE_BLOCK = re.compile(r"```[a-z]*\n(.*?)```", re.DOTALL)
_TOKEN = re.compile(r"<(/?)([A-Za-z_][\w.-]*)([^<>]*?)(/?)>|[^<]+", re.DOTALL)


def reference_annex_path() -> Path:
    """For the cross-checks: ``$COFFRE_DET_ANNEX``, else the regulator's texts kept beside a
    clone of the project (``../shared/spec/``), which may well be absent."""
    env = os.environ.get(ANNEX_ENV)
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2].parent / "shared" / "spec" / ANNEX_NAME


def annex_examples(path: Path | str) -> dict[str, bytes]:
    """Letter (``a`` … ``f``) -> the example's XML bytes, in the annex's order."""
    text = Path(path).read_text(encoding="utf-8")
    start = text.find("1.4.3 Poker")
    if start < 0:
        raise ValueError("no section 1.4.3 in this annex")
    body = text[start:]
    headings = list(_SECTION.finditer(body))
    examples: dict[str, bytes] = {}
    for i, heading in enumerate(headings):
        end = headings[i + 1].start() if i + 1 < len(headings) else len(body)
        fragments = [m.group(1) for m in _CODE_BLOCK.finditer(body, heading.end(), end)]
        fragments = [f for f in fragments if f.strip()]
        if fragments:
            examples[heading.group(1)] = stitch_fragments(fragments).encode("utf-8")
    return examples


def stitch_fragments(fragments: list[str]) -> str:
    """One XML document from page fragments.

    At each page break the rendering may add closing tags (the first POJEU page ends with
    ``</Participants></POJEU>`` although more players follow) or repeat them (the last
    page starts again with ``</Reveal></Tour>``). So the closing tags that end a page are
    held back; the next page decides: an opening tag closes the open elements until one
    that has already been seen holding an element of that name, and a closing tag is
    applied only when it closes an open element (held-back closings included). Whatever
    is still open at the end is closed.
    """
    out: list[str] = []
    stack: list[str] = []
    parents: dict[str, set[str]] = {}
    pending: list[str] = []  # closing tags held back at the end of a page

    def close_to(name: str) -> bool:
        if name not in stack:
            return False
        while stack:
            top = stack.pop()
            out.append(f"</{top}>")
            if top == name:
                return True
        return True  # pragma: no cover

    for number, fragment in enumerate(fragments):
        tokens = list(_TOKEN.finditer(fragment))
        last = number == len(fragments) - 1
        # the run of closing tags (and blanks) that ends this page
        tail_start = len(tokens)
        while not last and tail_start > 0:
            t = tokens[tail_start - 1]
            if t.group(2) is None and t.group(0).strip():
                break
            if t.group(2) is not None and not t.group(1):
                break
            tail_start -= 1
        for index, token in enumerate(tokens):
            name = token.group(2)
            if index >= tail_start:
                if name is not None:
                    pending.append(name)
                continue
            if name is None:
                out.append(token.group(0))
                continue
            closing, self_closing = bool(token.group(1)), bool(token.group(4))
            if closing:
                if (stack and stack[-1] == name) or (
                    name in stack and all(n in pending for n in stack[stack.index(name) + 1 :])
                ):
                    close_to(name)
                # otherwise a closing repeated from the previous page: dropped
                continue
            if pending:
                known = parents.get(name)
                if known:
                    while stack and stack[-1] not in known:
                        close_to(stack[-1])
                else:
                    for held in pending:
                        if stack and stack[-1] == held and len(stack) > 1:
                            close_to(held)
                pending = []
            if stack:
                parents.setdefault(name, set()).add(stack[-1])
            out.append(token.group(0))
            if not self_closing:
                stack.append(name)
    while stack:
        close_to(stack[-1])
    return "".join(out).strip() + "\n"
