"""Small hand-written poker events for unit tests (coffre's own, not the regulator's)."""

from __future__ import annotations

POINSCRIT = """<POINSCRIT>
  <IDOper>0099</IDOper>
  <IDCoffre>7</IDCoffre>
  <DateEvt>2026-03-01T10:00:00+01:00</DateEvt>
  <IDEvt>12</IDEvt>
  <IDJoueur>p-1</IDJoueur>
  <HashJoueur>a94a8fe5ccb19ba61c4c0873d391e987982fbbd3</HashJoueur>
  <IPJoueur>2001:0DB8:0000:0000:0000:0000:0000:0001</IPJoueur>
  <IDSession>s-1</IDSession>
  <Inscription>ins-1</Inscription>
  <Tech>T-1</Tech>
  <Description>Tournoi du dimanche</Description>
  <Format>T /AS</Format>
  <SoldeAvant>100.10</SoldeAvant>
  <SoldeMouvement>10.05</SoldeMouvement>
  <SoldeAprès>90.05</SoldeAprès>
</POINSCRIT>""".encode()


def pojeu(
    *, participants: int = 2, cards: tuple[int, ...] = (12, 51), regle: str = "THNL", extra_round: str = ""
) -> bytes:
    players = "".join(
        f"""<Joueur><IDOper>0099</IDOper><IDJoueur>p-{i}</IDJoueur><IPJoueur>192.0.2.{i}</IPJoueur>
        <Siege>{i}</Siege><Inscription>ins-{i}</Inscription>
        <Finance><Net>-1.00</Net><Total>1.00</Total><CaveAvant>10</CaveAvant><CaveApres>9</CaveApres></Finance></Joueur>"""
        for i in range(1, participants + 1)
    )
    draws = "".join(f"<Draw><Siege>1</Siege><Valeur>{c}</Valeur></Draw>" for c in cards)
    return f"""<POJEU><IDOper>0099</IDOper><IDCoffre>7</IDCoffre><DateEvt>260301100000</DateEvt><IDEvt>13</IDEvt>
    <Tech>T-1</Tech><Pool>1</Pool><Participants>{players}</Participants><Regle>{regle}</Regle>
    <Description>THNL 1/2</Description><Jeu>
    <Tour name="bet"><Timestamp>260301100001</Timestamp><Bet name="small blind"><Siege>1</Siege><Valeur>1</Valeur></Bet>
    <Bet name="big blind"><Siege>2</Siege><Valeur>2</Valeur></Bet><Total>3</Total></Tour>
    <Tour name="pre-flop"><Timestamp>260301100002</Timestamp>{draws}<Fold><Siege>1</Siege></Fold></Tour>{extra_round}
    </Jeu></POJEU>""".encode()
