"""``stop_consumer(leave_as_leader=False)``: the group's leader lets its session expire instead of
leaving (Tansu 0.6.0 keeps a leader that leaves a forming group as its leader, and the group never
forms again); any other member leaves as aiokafka would."""

from __future__ import annotations

import asyncio

from coffre.adapters.kafka import stop_consumer, track_leadership


class FakeCoordinator:
    """The few aiokafka GroupCoordinator members that track_leadership and stop_consumer use."""

    def __init__(self) -> None:
        self.generation = 0
        self.member_id = ""
        self._group_instance_id = "static"  # no generation-0 LeaveGroup of coffre's own
        self.left = False
        self.reset = False

    async def _perform_assignment(self, response: object) -> dict:
        return {}

    async def _maybe_leave_group(self) -> None:
        self.left = True

    def reset_generation(self) -> None:
        self.reset = True


class FakeConsumer:
    def __init__(self) -> None:
        self._coordinator = FakeCoordinator()

    async def stop(self) -> None:  # aiokafka's stop() ends with the coordinator's leave
        await self._coordinator._maybe_leave_group()


def joined(led: bool, generation: int = 5) -> FakeConsumer:
    consumer = FakeConsumer()
    track_leadership(consumer)  # type: ignore[arg-type]
    coordinator = consumer._coordinator
    coordinator.generation = generation
    if led:
        asyncio.run(coordinator._perform_assignment(object()))
    return consumer


def test_the_leader_of_its_generation_does_not_leave():
    consumer = joined(led=True)
    asyncio.run(stop_consumer(consumer, leave_as_leader=False))  # type: ignore[arg-type]
    assert not consumer._coordinator.left and consumer._coordinator.reset


def test_a_follower_leaves():
    consumer = joined(led=False)
    asyncio.run(stop_consumer(consumer, leave_as_leader=False))  # type: ignore[arg-type]
    assert consumer._coordinator.left


def test_a_former_leader_that_joined_a_later_generation_as_follower_leaves():
    consumer = joined(led=True)
    consumer._coordinator.generation = 6  # a rebalance since, where another member led
    asyncio.run(stop_consumer(consumer, leave_as_leader=False))  # type: ignore[arg-type]
    assert consumer._coordinator.left


def test_by_default_even_the_leader_leaves():
    consumer = joined(led=True)
    asyncio.run(stop_consumer(consumer))  # type: ignore[arg-type]
    assert consumer._coordinator.left
