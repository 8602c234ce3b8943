"""The vault's rebalance listener, without Kafka: a coffre whose journal a vault opened before the
group gave it the coffre's partition (at start, :meth:`Sealer.start`) continues from the archive as
it is when the partition comes, not as it was at start.

Found by bench/soak.py (issue 30): vault SIGKILLed and started again; at its start it aligned coffre
24 with the archive (lot 2, IDEvt 2000); 0.4 s later vault-2, which held the coffre, sealed lot 3
(2001..3000); then the group gave coffre 24's partition to the restarted vault, which took IDEvt 3001
for an event "ahead of the chain" (its chain ended at 2000), passed it and every later one over, and
committed past them: the coffre's events were never recorded again, on either vault."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from aiokafka import TopicPartition
from coffre_vault.recorder import Recorder
from coffre_vault.sealer import Sealer, SealerThread
from coffre_vault.service import GroupLease, Handover

from coffre.adapters.journal import JournalSet
from coffre.adapters.storage import LocalStorage
from coffre.domain.signing import Signer, generate_key_and_certificate
from services.test_recorder import TOPICS, normalized

PARTITIONS = 3
T0 = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)


def signer() -> Signer:
    private, cert = generate_key_and_certificate("handover", "ecdsa", not_before=T0 - timedelta(days=1))
    return Signer.from_pem(private, cert)


def archive(tmp_path) -> LocalStorage:
    (tmp_path / "archive").mkdir()
    return LocalStorage(tmp_path / "archive")


def vault(tmp_path, name: str, storage: LocalStorage, key: Signer) -> tuple[JournalSet, Sealer, Recorder]:
    journals = JournalSet(tmp_path / name)
    sealer = Sealer(storage, key, journals, max_events=1000, max_age=3600)
    recorder = Recorder(
        journals, partitions=PARTITIONS, sealed=sealer.sealed_id_evt, sealed_event=sealer.sealed_event
    )
    return journals, sealer, recorder


def test_a_coffre_loaded_at_start_continues_from_what_another_vault_sealed_before_the_assignment(tmp_path):
    storage = archive(tmp_path)
    key = signer()
    messages = normalized(tmp_path, 11)  # coffre 0099/7, IDEvt 1..11

    # vault 1 held the coffre: 1..5 recorded and sealed (lot 1); then it stops
    journals, sealer, recorder = vault(tmp_path, "one", storage, key)
    assert [r.id_evt for r in recorder.append(messages[:5])] == [1, 2, 3, 4, 5]
    recorder.sync()
    sealer.recorded("0099", 7)
    assert sealer.seal_all() == 1
    journals.close()

    # vault 1 starts again: its journal of the coffre is opened, aligned with the archive (IDEvt 5)
    journals, sealer, recorder = vault(tmp_path, "one", storage, key)
    sealer.start()
    assert sealer.sealed_id_evt("0099", 7) == 5

    # meanwhile vault 2, which holds the coffre's partition, records 6..10 and seals them (lot 2)
    other_journals, other_sealer, other = vault(tmp_path, "two", storage, key)
    assert [r.id_evt for r in other.append(messages[5:10])] == [6, 7, 8, 9, 10]
    other.sync()
    other_sealer.recorded("0099", 7)
    assert other_sealer.seal_all() == 1
    other_journals.close()

    # the group gives the coffre's partition to vault 1, which reads from vault 2's committed offset
    lease = GroupLease(3000)
    handover = Handover(asyncio.Lock(), recorder, journals, SealerThread(sealer), lease, PARTITIONS)
    home = recorder.home(7)
    asyncio.run(handover.on_partitions_assigned([TopicPartition(TOPICS.normalized, home)]))
    assert handover.held == {home} and lease.current()
    receipts = recorder.append(messages[10:])
    assert [r.id_evt for r in receipts] == [11], "IDEvt 11 passed over: the coffre's alignment was stale"
    assert recorder.counts.ahead == 0
    assert journals.journal("0099", 7).last_id_evt == 11
    journals.close()


def test_revoked_partitions_let_their_coffres_go_and_are_no_longer_held(tmp_path):
    storage = archive(tmp_path)
    journals, sealer, recorder = vault(tmp_path, "one", storage, signer())
    moved: list[set[int]] = []
    handover = Handover(
        asyncio.Lock(), recorder, journals, SealerThread(sealer), GroupLease(3000), PARTITIONS, moved.append
    )
    home = recorder.home(7)
    tp = TopicPartition(TOPICS.normalized, home)

    async def rebalance() -> None:
        await handover.on_partitions_assigned([tp])
        recorder.append(normalized(tmp_path, 1))
        assert journals.opened() == [("0099", 7)]
        await handover.on_partitions_revoked([tp])

    asyncio.run(rebalance())
    assert journals.opened() == [] and handover.held == set() and moved == [{home}]
    journals.close()
