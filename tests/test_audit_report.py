"""``coffre audit --html``: a self-contained report whose operator-supplied text is escaped."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

import pytest
from lxml import html as lxml_html

from coffre.cli import main
from coffre.commands.audit.report import render_report
from coffre.commands.audit.run import audit_paths
from coffre.domain.audit.findings import Finding
from coffre.domain.catalogue.poker import POJEU
from coffre.domain.normalize import normalize
from coffre.hand_picture import CARD_FACE, FLAGGED, RED_SUIT, hand_svg, hand_view

from audit_hands import TOURNAMENT, build_archive, duplicated_card_hand

HOSTILE = "<script>alert('x')</script>&\"é"


def report_of(tmp_path: Path, raw: bytes, capsys: pytest.CaptureFixture[str]) -> str:
    hand = tmp_path / "hand.xml"
    hand.write_bytes(raw)
    target = tmp_path / "report.html"
    assert main(["audit", str(hand), "--html", str(target)]) == 1
    assert str(target) in capsys.readouterr().err
    return target.read_text(encoding="utf-8")


def test_operator_text_is_escaped_everywhere(tmp_path, capsys):
    page = report_of(tmp_path, duplicated_card_hand(player_of_seat_7=HOSTILE), capsys)
    assert "<script" not in page.lower()
    assert (
        "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    )  # shortened in the seat, whole in its title
    document = lxml_html.fromstring(page)
    assert document.xpath("//script") == []
    titles = [t.text_content() for t in document.xpath("//*[local-name()='title']")]
    assert any(HOSTILE in title for title in titles), titles
    seat_labels = [t.text_content() for t in document.xpath("//*[local-name()='text']")]
    assert any(label.startswith("Siège 7 · <script>") for label in seat_labels)


def test_the_report_is_self_contained(tmp_path, capsys):
    page = report_of(tmp_path, duplicated_card_hand(), capsys)
    lowered = page.lower()
    for external in (
        "http:",
        "https:",
        "//",
        "src=",
        "url(",
        "@import",
        "<link",
        "<img",
        "<iframe",
        "@font-face",
    ):
        assert external not in lowered.replace("<!--", ""), external
    assert "default-src 'none'" in page
    document = lxml_html.fromstring(page)
    assert all(a.get("href", "").startswith("#") for a in document.xpath("//a"))


def test_the_summary_findings_and_the_flagged_hand_picture(tmp_path, capsys):
    page = report_of(tmp_path, duplicated_card_hand(), capsys)
    document = lxml_html.fromstring(page)
    summary = document.get_element_by_id("summary").text_content()
    assert "1 event(s) audited, 1 hand(s) (POJEU), 1 flagged hand(s)" in summary
    assert "CARD_DEALT_TWICE" in summary and "dealt (Draw) more than once" in summary
    assert document.get_element_by_id("code-CARD_DEALT_TWICE") is not None
    [svg] = document.xpath("//article[@id='hand-1']//svg")
    seats = svg.xpath(".//g[contains(@class, 'seat')]")
    assert len(seats) == 6
    assert [s.get("class") for s in seats].count("seat flagged") == 1
    flagged = next(s for s in seats if s.get("class") == "seat flagged").text_content()
    assert "Siège 3 · 123-test-456" in flagged and "6.18 → 6.13" in flagged and "Net -0.05" in flagged
    # 12 hole cards and 5 on the board, plus seat 3's revealed card 32 it already holds (one card view)
    cards = svg.xpath(".//g[contains(@class, 'card')]")
    assert len(cards) == 12 + 5
    hidden = [c for c in cards if "hidden" in c.get("class")]
    assert len(hidden) == 8  # seats 5, 7, 8 and 10 never showed their cards
    assert all("never revealed" in c.xpath("string(title)") for c in hidden)
    assert {r.get("class") for r in svg.xpath(".//rect[contains(@class, 'round')]")} == {"round flagged"}
    texts = " ".join(t.text_content() for t in svg.xpath(".//text"))
    # the pot is net of the uncalled 0.85 given back to seat 3 on the river (annex 1.4.3.f)
    assert "preflop — pot 0.22 · Total 0.16" in texts and "river — pot 4.96 · Total 3.86" in texts
    assert "S3 raise 2.78" in texts


def test_red_suits_are_red_and_black_suits_black():
    event = normalize(duplicated_card_hand())
    assert isinstance(event, POJEU)
    svg = hand_svg(event, ())
    assert svg.count(f'fill="{CARD_FACE}"') == 17
    # the board: V♠ D♠ 8♦ R♣ 9♦ (codes 39, 43, 25, 44, 29): two red suits, three black
    board = re.findall(r'<g fill="(#[0-9a-f]{6})">', svg)
    assert board.count(RED_SUIT) == sum(
        1 for code in (32, 26, 32, 38, 14, 23, 10, 19, 16, 13, 5, 8, 39, 43, 25, 44, 29) if code % 4 in (1, 2)
    )
    assert FLAGGED not in svg  # nothing flagged without findings


def test_a_finding_naming_a_player_outlines_that_players_seat():
    event = normalize(duplicated_card_hand())
    assert isinstance(event, POJEU)
    view = hand_view(event, (Finding("X", "m", player="000-test-001"),))
    assert [s.seat for s in view.seats.values() if s.flagged] == [8]


def test_pictures_are_bounded_and_the_others_counted(tmp_path):
    for n in range(3):
        (tmp_path / f"hand-{n}.xml").write_bytes(duplicated_card_hand())
    run = audit_paths([str(tmp_path)], max_pictures=2)
    assert (run.flagged_total, len(run.flagged)) == (3, 2)
    page = render_report(run, max_pictures=2)
    assert page.count("<svg") == 2
    assert "1 more flagged hand(s) not pictured (at most 2" in page


def test_a_clean_run_says_so_and_draws_nothing():
    run = audit_paths([str(TOURNAMENT)])
    page = render_report(run)
    assert "no finding, no problem" in page and "<svg" not in page


def test_an_archive_input_shows_its_verification(tmp_path, capsys):
    root, cert = build_archive(tmp_path)
    run = audit_paths([f"{root}/"], [cert])
    assert run.verifications and run.verifications[0].ok
    page = render_report(run)
    assert '<td>archive</td><td><span class="ok">verified</span>' in page


def test_the_checks_not_made_for_want_of_context_are_shown():
    """Issue 20 item 4: a lone hand's registrations are not in the set; the report counts the checks
    that were not made, and they are no finding."""
    run = audit_paths([str(TOURNAMENT / "09-POJEU-hand-2.xml")])
    page = lxml_html.fromstring(render_report(run))
    [heading] = page.xpath('//h3[@id="not-checked"]')
    assert "9 check(s) not made: context absent" in heading.text_content()
    rows = {
        r.xpath("td")[0].text_content(): r.xpath("td")[1].text_content()
        for r in heading.getnext().getnext().xpath("tr[td]")
    }
    assert rows == {
        "PARTICIPANT_NOT_REGISTERED": "4",
        "POOL_REUSED": "1",
        "BLINDS_DECREASED": "1",
        "BLIND_DODGED": "1",
        "STARTING_STACK_WRONG": "1",
        "HAND_OUT_OF_ORDER": "1",
    }
    assert "no finding, no problem" in page.text_content()


def _stepped(until_round: int | None, findings: tuple[Finding, ...] = ()) -> lxml_html.HtmlElement:
    event = normalize(duplicated_card_hand())
    assert isinstance(event, POJEU)
    return lxml_html.fromstring(hand_svg(event, findings, until_round=until_round))


def _middle_pot(svg: lxml_html.HtmlElement) -> Decimal:
    [pot] = [
        t.text_content()
        for t in svg.xpath(".//text[@text-anchor='middle']")
        if t.text_content()[:4] == "pot "
    ]
    return Decimal(pot[4:])


def _card_codes(svg: lxml_html.HtmlElement) -> list[int]:
    titles = [c.xpath("string(title)") for c in svg.xpath(".//g[contains(@class, 'card')]")]
    return [int(re.search(r"\(code (\d+)\)", title).group(1)) for title in titles]


def test_a_hand_stepped_round_by_round():
    """The annex hand's rounds: blinds, preflop, flop (board 39 43 25), turn (44), river (29), reveal."""
    flop = [39, 43, 25]
    pots = []
    for k in range(6):
        svg = _stepped(k)
        headers = [t.text_content() for t in svg.xpath(".//text[tspan]") if " — pot " in t.text_content()]
        assert len(headers) == k + 1, (k, headers)
        codes = _card_codes(svg)
        board = svg.xpath(".//g[contains(@class, 'card')][not(ancestor::g[contains(@class, 'seat')])]")
        assert len(board) == [0, 0, 3, 4, 5, 5][k]
        assert all(code in codes for code in flop) == (k >= 2), (k, codes)
        assert (44 in codes, 29 in codes) == (k >= 3, k >= 4)
        # the hole cards are dealt in the preflop
        assert len(svg.xpath(".//g[contains(@class, 'seat')]//g[contains(@class, 'card')]")) == (
            12 if k else 0
        )
        pots.append(_middle_pot(svg))
        assert headers[-1].split(" — pot ")[1].split(" ")[0] == f"{pots[-1]}"
    assert pots == sorted(pots) and pots[0] < pots[4]
    assert pots[:5] == [Decimal("0.06"), Decimal("0.22"), Decimal("0.54"), Decimal("1.10"), Decimal("4.96")]
    # seats 2, 3, 6 and 9 show their cards only in the last round
    hidden = [len(_stepped(k).xpath(".//g[contains(@class, 'card hidden')]")) for k in (4, 5)]
    assert hidden == [12, 8]


def test_a_stepped_hand_outlines_a_later_rounds_finding_only_from_that_round():
    finding = (Finding("X", "m", round="river", seat=3),)
    for k in range(6):
        svg = _stepped(k, finding)
        flagged_rounds = svg.xpath(".//rect[contains(@class, 'round flagged')]")
        flagged_seats = svg.xpath(".//g[@class='seat flagged']")
        assert (len(flagged_rounds), len(flagged_seats)) == ((1, 1) if k >= 4 else (0, 0)), k
    # a finding naming no round outlines its seat at every step
    assert len(_stepped(0, (Finding("X", "m", seat=3),)).xpath(".//g[@class='seat flagged']")) == 1


def test_until_round_none_the_last_or_beyond_draws_the_whole_hand():
    event = normalize(duplicated_card_hand())
    assert isinstance(event, POJEU)
    findings = (Finding("X", "m", round="river", seat=3),)
    whole = hand_svg(event, findings)
    assert hand_svg(event, findings, until_round=5) == whole
    assert hand_svg(event, findings, until_round=99) == whole
    assert hand_view(event, findings, until_round=99) == hand_view(event, findings)
    with pytest.raises(ValueError):
        hand_svg(event, findings, until_round=-1)
