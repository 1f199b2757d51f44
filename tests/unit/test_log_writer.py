"""LoopBatchedWriter: one write per event-loop iteration on a loop, at once elsewhere."""

from __future__ import annotations

import asyncio
import io

import pytest

from expert_booking.edge.log_writer import LoopBatchedWriter

pytestmark = pytest.mark.anyio


class CountingStream(io.StringIO):
    """A text stream that counts ``write`` and ``flush`` calls."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.flushes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)

    def flush(self) -> None:
        self.flushes += 1
        super().flush()


async def next_iteration() -> None:
    """Return after every callback already scheduled on the running loop has run."""
    done = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_soon(done.set_result, None)
    await done


def log(writer: LoopBatchedWriter, line: str) -> None:
    """What ``logging.StreamHandler`` does per record."""
    writer.write(line + "\n")
    writer.flush()


def test_without_an_event_loop_each_line_is_written_at_once() -> None:
    target = CountingStream()
    writer = LoopBatchedWriter(target)
    log(writer, "one")
    assert target.getvalue() == "one\n"
    log(writer, "two")
    assert (target.getvalue(), target.writes, target.flushes) == ("one\ntwo\n", 2, 2)


async def test_lines_of_one_loop_iteration_are_written_together_at_its_end() -> None:
    target = CountingStream()
    writer = LoopBatchedWriter(target)
    for line in ("a", "b", "c"):
        log(writer, line)
    assert target.getvalue() == ""
    await next_iteration()
    assert (target.getvalue(), target.writes, target.flushes) == ("a\nb\nc\n", 1, 1)
    log(writer, "d")
    await next_iteration()
    assert (target.getvalue(), target.writes) == ("a\nb\nc\nd\n", 2)


async def test_drain_writes_what_is_kept_at_once() -> None:
    target = CountingStream()
    writer = LoopBatchedWriter(target)
    log(writer, "kept")
    writer.drain()
    assert target.getvalue() == "kept\n"
    await next_iteration()  # the scheduled write finds nothing left
    assert (target.getvalue(), target.writes) == ("kept\n", 1)


def test_lines_kept_for_a_loop_that_stopped_are_written_before_later_ones() -> None:
    target = CountingStream()
    writer = LoopBatchedWriter(target)
    stopped = asyncio.new_event_loop()
    try:

        def log_and_stop() -> None:
            log(writer, "first")
            stopped.stop()  # before the iteration that would write "first"

        stopped.call_soon(log_and_stop)
        stopped.run_forever()
        assert target.getvalue() == ""

        async def later() -> None:
            log(writer, "second")  # finds "first" kept for the stopped loop: writes it now
            assert target.getvalue().startswith("first\n")
            await next_iteration()

        asyncio.run(later())
    finally:
        stopped.close()
    assert target.getvalue() == "first\nsecond\n"


async def test_a_line_from_a_thread_without_a_loop_is_written_after_the_kept_ones() -> None:
    target = CountingStream()
    writer = LoopBatchedWriter(target)
    log(writer, "on the loop")
    await asyncio.to_thread(log, writer, "from a worker")
    assert target.getvalue() == "on the loop\nfrom a worker\n"


async def test_a_failed_scheduled_write_drops_the_batch_and_never_raises_into_the_loop() -> None:
    loop_errors: list[dict[str, object]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: loop_errors.append(ctx))
    target = CountingStream()
    writer = LoopBatchedWriter(target)
    log(writer, "lost")
    target.close()  # writing now raises ValueError
    await next_iteration()  # the scheduled write fails quietly (reported on the real stderr)
    assert loop_errors == []
    target2 = CountingStream()
    writer.target = target2
    log(writer, "after")
    await next_iteration()
    assert target2.getvalue() == "after\n"
