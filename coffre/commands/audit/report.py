"""``coffre audit --html``: one self-contained HTML report, each flagged hand drawn in inline SVG
(:mod:`coffre.hand_picture`).

The report is opened by a regulator in a browser, offline: no script, no external asset (no URL,
font, image or stylesheet from elsewhere), inline CSS only, and a Content-Security-Policy that
forbids anything else. Every text that comes from an operator (identifiers, round names,
descriptions, messages naming them) is untrusted and escaped where it is written.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path

from coffre.domain.audit.findings import CODES
from coffre.hand_picture import FLAGGED, FLAGGED_ROUND, esc, hand_svg, sentence

from .run import MAX_PICTURES, AuditRun, FlaggedHand, Located

MAX_ROWS_PER_CODE = 1000
"""Findings listed under one code in the HTML; the JSON output lists them all."""


STYLE = """
body { font-family: "DejaVu Sans", "Liberation Sans", Arial, sans-serif; margin: 1.5em; color: #1a1a1a;
       background: #f6f6f3; }
h1 { margin-top: 0; }
table { border-collapse: collapse; margin: 0.5em 0 1em; background: #fff; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; font-size: 0.9em; }
th { background: #e8e8e4; }
td.n { text-align: right; }
.ok { color: #1d6b2f; font-weight: bold; }
.bad { color: #b00020; font-weight: bold; }
.hand-block { display: flex; flex-wrap: wrap; gap: 1.5em; align-items: flex-start; margin: 0.5em 0 2em;
              padding: 1em; background: #fff; border: 1px solid #ccc; }
.hand-block svg { max-width: 100%; height: auto; }
.hand-findings { flex: 1 1 18em; max-width: 36em; }
.hand-findings li { margin-bottom: 0.4em; }
code { background: #eee; padding: 0 0.2em; }
.legend span { display: inline-block; width: 1em; height: 1em; vertical-align: middle; margin: 0 0.3em 0 1em;
               border: 1px solid #333; }
"""


def _finding_rows(items: list[Located]) -> str:
    rows = []
    for located in items:
        f = located.finding
        rows.append(
            "<tr>"
            + "".join(
                f"<td>{esc(value)}</td>"
                for value in (
                    located.source,
                    located.id_evt,
                    located.event_type,
                    f.round if f.round is not None else "",
                    f.seat if f.seat is not None else "",
                    f.player if f.player is not None else "",
                    f.message,
                )
            )
            + "</tr>"
        )
    return "".join(rows)


def _hand_block(index: int, hand: FlaggedHand) -> str:
    event = hand.event
    items = "".join(
        f"<li><code>{esc(f.code)}</code>"
        + (f" round <b>{esc(f.round)}</b>" if f.round is not None else "")
        + (f" seat <b>{esc(f.seat)}</b>" if f.seat is not None else "")
        + (f" player <b>{esc(f.player)}</b>" if f.player is not None else "")
        + f": {esc(f.message)}</li>"
        for f in hand.findings
    )
    title = (
        f"POJEU IDEvt {event.id_evt}, coffre {event.id_oper}/{event.id_coffre}: {event.Regle} "
        f"({event.variant.name}), Tech {event.Tech}"
    )
    return (
        f'<article id="hand-{index}"><h3>{esc(title)}</h3>'
        f"<p>{esc(sentence(event.Description + (' — ' + event.Info if event.Info else '')))} Source: "
        f"<code>{esc(hand.source)}</code></p>"
        f'<div class="hand-block">{hand_svg(event, hand.findings)}'
        f'<div class="hand-findings"><h4>{len(hand.findings)} finding(s)</h4><ul>{items}</ul></div></div></article>'
    )


def render_report(run: AuditRun, max_pictures: int = MAX_PICTURES, title: str = "coffre audit") -> str:
    """The whole report, one HTML document."""
    codes = run.codes
    families = Counter()
    for code, count in codes.items():
        families[CODES.get(code, ("?", ""))[0]] += count
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        # nothing but this document's own inline styles: no script, no request anywhere
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">",
        f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        f"<p>Written {datetime.now(UTC).isoformat(timespec='seconds')}. Findings are evidence of inconsistencies "
        "in what the operator declared; the events were recorded as declared.</p>",
        '<section id="summary"><h2>Summary</h2>',
        "<table><tr><th>input</th><th>kind</th><th>verification</th></tr>",
    ]
    verdicts = {v.archive: v for v in run.verifications}
    for path, kind in run.inputs:
        verification = verdicts.get(str(Path(path)))
        cell = ""
        if kind == "archive" and verification is not None:
            cell = (
                '<span class="ok">verified</span>'
                if verification.ok
                else '<span class="bad">does not verify: not audited</span>'
            )
        out.append(f"<tr><td><code>{esc(path)}</code></td><td>{esc(kind)}</td><td>{cell}</td></tr>")
    out.append("</table>")
    verdict = (
        '<span class="ok">no finding, no problem</span>'
        if run.clean
        else f'<span class="bad">{len(run.findings)} finding(s), {len(run.problems)} problem(s)</span>'
    )
    out.append(
        f"<p>{run.events} event(s) audited, {run.hands} hand(s) (POJEU), {run.flagged_total} flagged hand(s): "
        f"{verdict}.</p>"
    )
    if codes:
        out.append("<table><tr><th>family</th><th>code</th><th>count</th><th>meaning</th></tr>")
        for code, count in sorted(codes.items(), key=lambda item: (CODES.get(item[0], ("?",))[0], item[0])):
            family, meaning = CODES.get(code, ("?", "(a code this coffre does not know)"))
            out.append(
                f'<tr><td>{esc(family)} ({families[family]})</td><td><a href="#code-{esc(code)}"><code>{esc(code)}'
                f'</code></a></td><td class="n">{count}</td><td>{esc(meaning)}</td></tr>'
            )
        out.append("</table>")
    if run.not_checked:
        out.append(
            f'<h3 id="not-checked">{sum(run.not_checked.values())} check(s) not made: context absent</h3>'
            "<p>Rules that need events outside the audited set (a registration, the previous event of a "
            "player or of a hand) are not judged where those events may be missing: the set does not "
            "begin at the coffre's IDEvt 1, or has a gap. They are counted here, never reported as "
            "findings.</p><table><tr><th>code</th><th>times not checked</th><th>meaning</th></tr>"
        )
        for code, count in sorted(run.not_checked.items()):
            meaning = CODES.get(code, ("?", "(a code this coffre does not know)"))[1]
            out.append(
                f'<tr><td><code>{esc(code)}</code></td><td class="n">{count}</td><td>{esc(meaning)}</td></tr>'
            )
        out.append("</table>")
    if run.problems:
        out.append(f"<h3>{len(run.problems)} problem(s): inputs not audited</h3><table>")
        out.append("<tr><th>source</th><th>kind</th><th>codes</th><th>message</th></tr>")
        for p in run.problems:
            out.append(
                f"<tr><td><code>{esc(p.source)}</code></td><td>{esc(p.kind)}</td><td>{esc(' '.join(p.codes))}</td>"
                f"<td>{esc(p.message)}</td></tr>"
            )
        out.append("</table>")
    for v in run.verifications:
        lines = "\n".join(v.lines)
        out.append(
            f"<details><summary>verification of <code>{esc(v.archive)}</code></summary><pre>{esc(lines)}</pre></details>"
        )
    out.append("</section>")
    if run.findings:
        out.append('<section id="findings"><h2>Findings by code</h2>')
        by_code: dict[str, list[Located]] = defaultdict(list)
        for located in run.findings:
            by_code[located.finding.code].append(located)
        for code in sorted(by_code):
            items = by_code[code]
            family, meaning = CODES.get(code, ("?", "(a code this coffre does not know)"))
            out.append(
                f'<h3 id="code-{esc(code)}"><code>{esc(code)}</code> ({esc(family)}): {len(items)}</h3><p>{esc(meaning)}</p>'
                "<table><tr><th>source</th><th>IDEvt</th><th>type</th><th>round</th><th>seat</th><th>player</th>"
                f"<th>message</th></tr>{_finding_rows(items[:MAX_ROWS_PER_CODE])}</table>"
            )
            if len(items) > MAX_ROWS_PER_CODE:
                out.append(
                    f"<p>… and {len(items) - MAX_ROWS_PER_CODE} more (coffre audit --json lists them all).</p>"
                )
        out.append("</section>")
    if run.flagged_total:
        out.append('<section id="hands"><h2>Flagged hands</h2>')
        out.append(
            '<p class="legend">Seats a finding names are outlined<span style="background:#fff;border:3px solid '
            f'{FLAGGED}"></span>, rounds a finding names are shaded<span style="background:{FLAGGED_ROUND}"></span>; '
            "a card with a dashed edge and faded face was dealt face down and never revealed (the POJEU records it), "
            "a crossed card was discarded. S<i>n</i> is seat <i>n</i>; ← a card dealt; the pot is cumulative, net of an uncalled bet given back.</p>"
        )
        for index, hand in enumerate(run.flagged, start=1):
            out.append(_hand_block(index, hand))
        left_out = run.flagged_total - len(run.flagged)
        if left_out:
            out.append(
                f"<p>{left_out} more flagged hand(s) not pictured (at most {max_pictures}: "
                "coffre audit --max-pictures N); their findings are listed above.</p>"
            )
        out.append("</section>")
    out.append("<details><summary>Every code coffre checks</summary><table>")
    out.append("<tr><th>family</th><th>code</th><th>meaning</th></tr>")
    for code, (family, meaning) in sorted(CODES.items(), key=lambda item: (item[1][0], item[0])):
        out.append(f"<tr><td>{esc(family)}</td><td><code>{esc(code)}</code></td><td>{esc(meaning)}</td></tr>")
    out.append("</table></details></body></html>")
    return "\n".join(out)
