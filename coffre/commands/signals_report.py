"""``coffre signals --html FILE``: one self-contained HTML report of a signals run (its JSON result,
:meth:`coffre.commands.signals.SignalsRun.as_json`).

As ``coffre audit``'s report (:mod:`coffre.commands.audit.report`): opened by a regulator in a
browser, offline, with no script, no external asset and only inline CSS, under a
Content-Security-Policy that forbids anything else. Every text that comes from an operator (an
IDOper, an IDJoueur, a path, a detail sentence naming them, a metric keyed by a player) is untrusted
and escaped where it is written.

Each evidence event is named ``IDOper/IDCoffre/IDEvt``. With ``--console URL`` (the regulator's
console) it links to the event's page and its inclusion proof there; without, the report gives the
``coffre proof`` command that proves it from the archive.
"""

from __future__ import annotations

import shlex
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from coffre.hand_picture import esc

from .audit.report import STYLE as AUDIT_STYLE

STYLE = (
    AUDIT_STYLE
    + """
.banner { border-left: 0.4em solid #8a5a00; background: #fff4df; padding: 0.6em 1em; max-width: 60em; }
.subject { margin: 0.5em 0 1.5em; padding: 0.6em 1em; background: #fff; border: 1px solid #ccc; }
.subject h3 { margin: 0.2em 0 0.5em; }
.signal { margin: 0.6em 0 0.8em; padding-left: 0.8em; border-left: 3px solid #ccc; }
.signal.crossed { border-left-color: #b00020; }
.signal h4 { margin: 0.2em 0; }
.source { color: #444; font-size: 0.85em; max-width: 60em; }
.evidence li { margin-bottom: 0.2em; }
.near .subject { background: #fbfbf9; }
"""
)

CSP = "default-src 'none'; style-src 'unsafe-inline'"
"""The report's own inline styles and nothing else: no script, no request anywhere (links are
navigations the reader chooses, not requests of the page)."""

PROOF_CERT = "PEM"
"""What the ``coffre proof`` command names the certificate it needs (the run's are not in its result)."""


def console_base(url: str) -> str:
    """The console's root URL as given to ``--console`` (``https://host:port``, a path allowed),
    without its trailing slash; ValueError unless it is an http(s) URL with a host."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("https", "http") or not parts.netloc or parts.query or parts.fragment:
        raise ValueError(f"--console {url!r}: the console's URL, such as https://regulator.example:8443")
    return url.strip().rstrip("/")


def _number(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return esc(value)
    return esc(f"{value:.4g}" if isinstance(value, float) else f"{value}")


def _moment(seconds: int | None) -> str:
    return "" if seconds is None else datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _value(value: Any) -> str:
    """A metric's value: a number, a text, a list (comma-separated), or a table of its own (a dict:
    soft play's metrics per player)."""
    if isinstance(value, dict):
        return _metrics_table(value)
    if isinstance(value, list | tuple):
        return ", ".join(_value(v) for v in value) if value else "–"
    if value is None:
        return "–"
    return _number(value)


def _metrics_table(metrics: dict[str, Any]) -> str:
    rows = "".join(
        f"<tr><th>{esc(name)}</th><td>{_value(value)}</td></tr>" for name, value in metrics.items()
    )
    return f'<table class="metrics">{rows}</table>'


class _Links:
    """How the report names an evidence event and a player: links to the console, or commands."""

    def __init__(self, console_url: str | None, archives: list[str]) -> None:
        self.base = console_base(console_url) if console_url else None
        self.archive = archives[0] if len(archives) == 1 else "ARCHIVE"

    def event(self, oper: str, coffre: int, id_evt: int) -> str:
        name = esc(f"{oper}/{coffre}/{id_evt}")
        if self.base is not None:
            page = f"{self.base}/console/event/{quote(str(oper), safe='')}/{int(coffre)}/{int(id_evt)}"
            return (
                f'<a href="{esc(page)}"><code>{name}</code></a> '
                f'(<a href="{esc(page)}/proof.json">proof.json</a>)'
            )
        command = shlex.join(
            [
                "coffre",
                "proof",
                self.archive,
                "--cert",
                PROOF_CERT,
                "--coffre",
                f"{oper}/{coffre}",
                "--id-evt",
                str(id_evt),
            ]
        )
        return f"<code>{name}</code>: <code>{esc(command)}</code>"

    def player(self, key: str) -> str:
        if self.base is None:
            return f"<code>{esc(key)}</code>"
        oper, _, player = key.partition("/")
        page = f"{self.base}/console/player?{urlencode({'oper': oper, 'id': player})}"
        return f'<a href="{esc(page)}"><code>{esc(key)}</code></a>'


def _signal_block(signal: dict[str, Any], links: _Links) -> str:
    crossed = bool(signal.get("crossed"))
    verdict = '<span class="bad">crossed</span>' if crossed else '<span class="ok">not crossed</span>'
    out = [
        f'<div class="signal{" crossed" if crossed else ""}">',
        f"<h4><code>{esc(signal.get('signal', '?'))}</code>: score {_number(signal.get('score'))}, "
        f"threshold {esc(signal.get('comparison', ''))} {_number(signal.get('threshold'))}: {verdict}</h4>",
        f"<p>{esc(signal.get('detail', ''))}</p>",
    ]
    metrics = signal.get("metrics") or {}
    if metrics:
        out.append(_metrics_table(metrics))
    if signal.get("source"):
        out.append(f'<p class="source">Source: {esc(signal["source"])}</p>')
    evidence, listed = [], set()
    for e in signal.get("evidence") or []:  # an event kept twice (two decisions of one hand): once
        ref = (e["id_oper"], e["id_coffre"], e["id_evt"])
        if ref not in listed:
            listed.add(ref)
            evidence.append(e)
    if evidence:
        weighted = signal.get("signal") == "chip_dumping"
        items = "".join(
            f"<li>{links.event(e['id_oper'], e['id_coffre'], e['id_evt'])}"
            + (f" ({_number(e.get('weight'))} chips)" if weighted else "")
            + "</li>"
            for e in evidence
        )
        out.append(f'<p>Evidence ({len(evidence)} event(s)):</p><ol class="evidence">{items}</ol>')
    out.append("</div>")
    return "".join(out)


def _subject_block(rank: int, subject: dict[str, Any], links: _Links, anchor: str) -> str:
    players = " &amp; ".join(links.player(p) for p in subject.get("players", []))
    signals = subject.get("signals", [])
    return (
        f'<article class="subject" id="{anchor}-{rank}"><h3>{rank}. {esc(subject.get("kind", ""))} {players}: '
        f"{int(subject.get('signals_crossed', 0))} of {len(signals)} signal(s) crossed, strength "
        f"{_number(subject.get('strength'))}</h3>"
        + "".join(_signal_block(s, links) for s in signals)
        + "</article>"
    )


def render_report(result: dict[str, Any], console_url: str | None = None) -> str:
    """The whole report of a signals run's JSON result, one HTML document; links to the console at
    ``console_url`` when given (:func:`console_base`)."""
    inputs = result.get("inputs", [])
    links = _Links(console_url, [i["path"] for i in inputs if i.get("kind") == "archive"])
    alerts, near = result.get("alerts", []), result.get("near_misses", [])
    problems, verifications = result.get("problems", []), result.get("verifications", [])
    scope = result.get("scope") or {}
    title = "coffre signals"
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        f"<title>{title}</title><style>{STYLE}</style></head><body>",
        f"<h1>{title}</h1>",
        '<p class="banner" role="note"><strong>A signal is a reason to look, not a finding.</strong> Each '
        "statistic below compares what the sealed events show with a threshold; crossing it says where an "
        "investigator should read the hands and accounts, never that a rule was broken "
        "(docs/signals.md).</p>",
        f"<p>Written {datetime.now(UTC).isoformat(timespec='seconds')}"
        + (f"; evidence links to the console at <code>{esc(links.base)}</code>" if links.base else "")
        + ".</p>",
        '<section id="summary"><h2>Summary</h2>',
        "<table><tr><th>input</th><th>kind</th><th>verification</th></tr>",
    ]
    verdicts = {v["archive"]: v for v in verifications}
    for item in inputs:
        verification = verdicts.get(item["path"])
        cell = ""
        if item.get("kind") == "archive" and verification is not None:
            cell = (
                '<span class="ok">verified</span>'
                if verification["ok"]
                else '<span class="bad">does not verify: not read</span>'
            )
        out.append(
            f"<tr><td><code>{esc(item['path'])}</code></td><td>{esc(item.get('kind', ''))}</td><td>{cell}</td></tr>"
        )
    out.append("</table>")
    opers = ", ".join(scope.get("opers") or []) or "every operator"
    out.append(
        f"<p>{_number(result.get('events', 0))} event(s) ({_number(result.get('fed_by_this_run', 0))} read by "
        f"this run), {_number(result.get('hands', 0))} hand(s) (POJEU), {_number(result.get('players', 0))} "
        f"player(s), {_number(result.get('pairs', 0))} pair(s) of players; scope: {esc(opers)}"
        + (f", from {esc(_moment(scope['since']))}" if scope.get("since") is not None else "")
        + (f", before {esc(_moment(scope['until']))}" if scope.get("until") is not None else "")
        + ".</p>"
    )
    verdict = (
        f'<span class="bad">{len(alerts)} subject(s) crossed a threshold</span>'
        if alerts
        else '<span class="ok">no signal crossed its threshold</span>'
    )
    out.append(f"<p>{verdict}; {len(problems)} problem(s).</p>")
    thresholds = result.get("thresholds") or {}
    if thresholds:
        out.append(
            "<details><summary>Thresholds and judging</summary><table><tr><th>threshold</th><th>value</th></tr>"
            + "".join(
                f"<tr><td><code>{esc(name)}</code></td><td>{_number(value)}</td></tr>"
                for name, value in thresholds.items()
            )
            + "".join(
                f"<tr><td><code>judging.{esc(name)}</code></td><td>{_number(value)}</td></tr>"
                for name, value in (result.get("judging") or {}).items()
            )
            + "</table></details>"
        )
    out.append("</section>")
    out.append(f'<section id="alerts"><h2>Alerts ({len(alerts)})</h2>')
    if alerts:
        out.append(
            "<p>Ranked by the number of signals crossed, then by strength (the highest score as a multiple "
            "of its threshold).</p>"
        )
        out += [_subject_block(rank, subject, links, "alert") for rank, subject in enumerate(alerts, start=1)]
    else:
        out.append("<p>No subject crossed a threshold.</p>")
    out.append("</section>")
    out.append(f'<section id="near-misses" class="near"><h2>Near misses ({len(near)})</h2>')
    if near:
        out.append(
            "<p>The strongest subjects below every threshold: how far the rest of the players are from "
            "an alert.</p>"
        )
        out += [_subject_block(rank, subject, links, "near") for rank, subject in enumerate(near, start=1)]
    else:
        out.append("<p>None.</p>")
    out.append("</section>")
    if problems or verifications:
        out.append('<section id="problems"><h2>Problems and verifications</h2>')
    if problems:
        out.append(f"<h3>{len(problems)} problem(s): inputs not read</h3><table>")
        out.append("<tr><th>source</th><th>kind</th><th>codes</th><th>message</th></tr>")
        for p in problems:
            out.append(
                f"<tr><td><code>{esc(p.get('source', ''))}</code></td><td>{esc(p.get('kind', ''))}</td>"
                f"<td>{esc(' '.join(p.get('codes', [])))}</td><td>{esc(p.get('message', ''))}</td></tr>"
            )
        out.append("</table>")
    for v in verifications:
        lines = "\n".join(v.get("report", []))
        state = "verified" if v.get("ok") else "does not verify"
        out.append(
            f"<details><summary>verification of <code>{esc(v['archive'])}</code>: {state}</summary>"
            f"<pre>{esc(lines)}</pre></details>"
        )
    if problems or verifications:
        out.append("</section>")
    sources = result.get("sources") or {}
    if sources:
        out.append("<details><summary>Every signal and its source</summary><table>")
        out.append("<tr><th>signal</th><th>source</th></tr>")
        for name, source in sources.items():
            out.append(f"<tr><td><code>{esc(name)}</code></td><td>{esc(source)}</td></tr>")
        out.append("</table></details>")
    out.append("</body></html>")
    return "\n".join(out)
