"""Progress that moves (issue 21 item 3): pairs done / in flight / queued, calls and tokens done, tokens/s and an
ETA, as plain periodic lines off a terminal and one rewritten line on one; the same for one-time steps.
Clocks and intervals are injected: nothing here is timed."""

from __future__ import annotations

import io
import re
import threading
import time

import pytest

from commands.cli import main
from harness import progress as console_progress
from harness.progress import Ticker, duration, step
from harness.testing.fake_openai import FakeOpenAIServer, Reply
from harness.testing.faults import FakeModel
from runners.progress_line import PairProgress
from tests.support.tagged_run import MODES, N_CASES, answer
from tests.support.tagged_run import args as endpoint_args
from tests.support.tagged_run import dataset as tagged_dataset


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class Stats:
    """A client's CallStats.snapshot, scripted."""

    def __init__(self) -> None:
        self.snap = {
            "calls": 0,
            "cache_hits": 0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "network_tokens": 0,
            "in_flight": 0,
            "oldest_in_flight_s": None,
        }

    def snapshot(self) -> dict:
        return dict(self.snap)


def test_plain_lines_every_interval_with_pairs_calls_tokens_throughput_and_eta():
    clock, stats, out = Clock(), Stats(), io.StringIO()
    prog = PairProgress(9, [stats], clock=clock)
    ticker = Ticker(out, tty=False, interval_s=10.0, clock=clock)
    prog.started()
    stats.snap.update(calls=1, in_flight=1, oldest_in_flight_s=4.0)
    assert ticker.tick(prog.line)  # the first line at once
    clock.t += 5
    assert not ticker.tick(prog.line)  # not before the interval
    clock.t += 5
    stats.snap.update(calls=3, prompt_tokens=1000, completion_tokens=200, network_tokens=1200)
    assert ticker.tick(prog.line)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "\r" not in out.getvalue()
    assert lines[0].startswith("pairs 0/9 done, 1 in flight, 8 queued")
    assert "1 request(s) in flight, oldest 4s" in lines[0] and "ETA after the first pair" in lines[0]
    assert "calls 3, tokens 1,200 (1,000 prompt + 200 completion)" in lines[1]
    assert "120.0 tokens/s" in lines[1]  # 1,200 tokens computed in 10 s

    for _ in range(3):  # three pairs done at t+30 s: 10 s a pair, 6 left -> 60 s
        prog.finished()
        prog.started()
    clock.t += 20
    assert ticker.tick(prog.line)
    last = out.getvalue().splitlines()[-1]
    assert last.startswith("pairs 3/9 done, 1 in flight, 5 queued")
    assert "elapsed 30s, ETA 1m00s" in last
    assert "40.0 tokens/s" in last  # no token in the last 20 s: the rate over the minute falls


def test_a_terminal_gets_one_rewritten_line():
    clock, out = Clock(), io.StringIO()
    ticker = Ticker(out, tty=True, interval_s=1.0, clock=clock)
    for i in range(3):
        ticker.tick(lambda i=i: f"state {i}")
        clock.t += 1
    assert "\n" not in out.getvalue() and out.getvalue().count("\r\x1b[2K") == 3
    ticker.close()
    assert out.getvalue().endswith("state 2\n")


def test_disabled_progress_writes_nothing():
    out = io.StringIO()
    ticker = Ticker(out, enabled=False, tty=False)
    assert not ticker.tick(lambda: "x", force=True)
    with step("model load", ticker):
        pass
    assert out.getvalue() == ""


def test_a_one_time_step_shows_its_elapsed_time_while_it_blocks():
    clock, out = Clock(), io.StringIO()
    ticker = Ticker(out, tty=False, interval_s=10.0, clock=clock)
    with step("model m: loading", ticker, poll_s=0.01):
        clock.t += 12
        deadline = time.monotonic() + 30
        while out.getvalue().count("\n") < 2 and time.monotonic() < deadline:
            time.sleep(0.01)  # the step's thread notices the clock moved
    lines = out.getvalue().splitlines()
    assert lines[0] == "model m: loading: 0s elapsed"
    assert lines[1] == "model m: loading: 12s elapsed"
    assert lines[-1] == "model m: loading: done in 12s"
    assert duration(3725) == "1h02m" and duration(185) == "3m05s" and duration(None) == "?"


@pytest.mark.e2e
def test_a_run_prints_progress_lines_while_a_slow_endpoint_works(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(console_progress, "NON_TTY_INTERVAL_S", 0.0)  # a line at every poll of the main loop
    data = tagged_dataset(tmp_path)
    model = FakeModel(answer=answer)
    first = threading.Event()

    def responder(req):
        r = model(req)
        first.set()
        return Reply(r.status, r.body, r.headers, 0.2)

    with FakeOpenAIServer(responder) as srv:
        args = [a for a in endpoint_args(tmp_path, srv.base_url, data, "run") if a != "run.progress=false"]
        assert main([*args, "run.progress=true"]) == 0
        err = capsys.readouterr().err
        assert main([*endpoint_args(tmp_path, srv.base_url, data, "quiet")]) == 0
        assert "pairs " not in capsys.readouterr().err  # run.progress=false turns it off
    lines = [ln for ln in err.splitlines() if ln.startswith("pairs ")]
    total = N_CASES * len(MODES)
    pattern = re.compile(
        rf"pairs (\d+)/{total} done, (\d+) in flight, (\d+) queued \| calls (\d+), tokens ([\d,]+) "
        r"\([\d,]+ prompt \+ [\d,]+ completion\) \| \d+ request\(s\) in flight.* \| [\d.]+ tokens/s \| "
        r"elapsed \S+, ETA \S+"
    )
    assert lines and all(pattern.match(ln) for ln in lines), lines[:3]
    assert any(int(pattern.match(ln).group(2)) > 0 for ln in lines)  # a pair seen in flight
    assert lines[-1].startswith(f"pairs {total}/{total} done, 0 in flight, 0 queued")
    assert int(pattern.match(lines[-1]).group(4)) > 0  # calls counted by the client layer
