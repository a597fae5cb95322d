"""Progress as the stages report it and a person sees it: the counts the observer collects, the
lines the bar renders, and real conversions drawing it: on a terminal (a pseudo-terminal),
finished or stopped with Ctrl-C, and in a log, on the local runner and on Beam's, whose shard
writers run in processes of their own."""

import io
import os
import pty
import re
import select
import signal
import sys
import threading
from pathlib import Path

import pytest
from conftest import arguments, make_images, write_manifest

from tfrecord_pipeline.cli.main import main
from tfrecord_pipeline.transforms.progress import Converted, FolderProgress
from tfrecord_pipeline.transforms.progress_bar import (
    MIN_SPAN_S,
    RATE_WINDOW_S,
    WARM_UP_S,
    ProgressBar,
    RecentRate,
    clock,
    render_bar,
    render_end,
)

ROOT = Path(__file__).resolve().parents[1]
DONE_LINE = (
    r"\[#{30}\] ([\d,]+)/\1 images  done in \d+:\d\d(?:  \(([\d,]+) converted at [\d,.]+ img/s\))?"
)


def test_the_folder_sums_every_shards_count_under_the_planned_total(tmp_path):
    progress = FolderProgress(str(tmp_path))
    assert progress.counts() == (0, None)  # the manifests are still being read
    assert progress.converted() is None  # no shard writer began
    progress.planned(1000)

    def write(name: str) -> None:
        count = progress.shard(name)
        for _ in range(300):
            count.add(1)
        count.flush()  # the last count, however recently the one before was left

    writers = [threading.Thread(target=write, args=(f"shard-{n}",)) for n in range(3)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    progress.carried("past-shard", 100)
    assert progress.counts() == (1000, 1000)
    converted = progress.converted()
    assert converted.rows == 900 and converted.seconds >= 0  # carried records not converted
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".")]  # no temp files


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_bars_last_line_has_the_counts_the_stages_reported():
    terminal = _Terminal()
    with ProgressBar(terminal) as progress:
        progress.planned(5)
        count = progress.shard("train-00000-of-00001.tfrecord.0")
        count.add(3)
        count.flush()
        progress.carried("past-shard", 2)
        folder = progress.folder
    last = terminal.getvalue().split("\r\x1b[K")[-1]
    assert re.fullmatch(r"\[#{30}\] 5/5 images  done in 0:00.*\n", last), last
    assert not os.path.exists(folder)


def test_clock_is_minutes_and_seconds_then_hours():
    assert [clock(s) for s in (0, 9.9, 61, 3599, 3600, 36061)] == [
        "0:00",
        "0:09",
        "1:01",
        "59:59",
        "1:00:00",
        "10:01:01",
    ]


def test_lines_while_reading_writing_and_at_the_end():
    assert render_bar(0, None, 3.2, None) == "reading manifests...  0:03"
    assert render_bar(120, 5000, 4, None) == f"[{'.' * 30}] 120/5,000 images  0:04"
    assert render_bar(2500, 5000, 14, 312.5) == (
        f"[{'#' * 15}{'.' * 15}] 2,500/5,000 images  0:14  312.5 img/s  ETA 0:08"
    )
    assert render_bar(2500, 5000, 40, 0.0).endswith("0:40  0.0 img/s")  # stalled: no ETA
    # The rate is of the rows converted over the writers' time, not of the run's start-up.
    converted = Converted(4000, 20.0)
    assert re.fullmatch(DONE_LINE, render_end(5000, 5000, 26.4, True, converted))
    assert render_end(5000, 5000, 26.4, True, converted).endswith(
        "done in 0:26  (4,000 converted at 200.0 img/s)"
    )
    assert render_end(5000, 5000, 2.1, True, Converted(0, 1.0)).endswith("done in 0:02")
    assert render_end(5000, 5000, 2.1, True, None).endswith("done in 0:02")
    stopped = render_end(1234, 5000, 75, False, converted)
    assert stopped == f"[{'#' * 7}{'.' * 23}] 1,234/5,000 images  stopped after 1:15"


def _first_eta(run: list[tuple[float, int]], total: int) -> tuple[float, float]:
    """When the bar first shows an ETA over `run`'s (time, done) polls, and the ETA."""
    rate = RecentRate()
    for now, done in run:
        rate.add(now, done)
        eta = re.search(r"ETA (\d+):(\d\d)$", render_bar(done, total, now, rate.rate()))
        if eta:
            return now, int(eta[1]) * 60 + int(eta[2])
    raise AssertionError("no ETA shown")


def test_eta_waits_for_work_then_follows_the_recent_rate():
    """A four-minute run: 20 s reading manifests and starting writers, 5 s of slow warm-up,
    then a steady 200 images a second to the end."""
    total, polls = 44_000, [n / 2 for n in range(2 * 245)]

    def done(now: float) -> int:
        if now < 20:
            return 0
        return int(20 * (now - 20)) if now < 25 else 100 + int(200 * (now - 25))

    shown_at, eta = _first_eta([(now, done(now)) for now in polls], total)
    assert shown_at - 20 >= WARM_UP_S + MIN_SPAN_S  # nothing while start-up dominates
    true_remaining = (total - done(shown_at)) / 200
    assert abs(eta - true_remaining) / true_remaining < 0.05, (eta, true_remaining)

    # Halfway the writers slow to 50 a second: one window later the rate is the new one.
    rate = RecentRate()
    for now in polls:
        rate.add(now, done(min(now, 120)) + int(50 * max(0, now - 120)))
        if now >= 120 + RATE_WINDOW_S:
            assert rate.rate() == pytest.approx(50, rel=0.05)


SLOW_ROWS = 400


def _slow_manifest(tmp_path: Path) -> Path:
    """Rows that keep one writer busy for seconds, long past the bar's first redraw: the
    512x512 astronaut PNG, decoded and re-encoded once a row, under 400 keys."""
    photo = ROOT / "sample" / "photos" / "astronaut.png"
    manifest = tmp_path / "manifest.csv"
    rows = "".join(f"{photo},astronaut,row-{n}\n" for n in range(SLOW_ROWS))
    manifest.write_text("image_uri,label,key\n" + rows)
    return manifest


ONE_WRITER = ["--processes", "1", "--threads", "1"]


def _in_terminal(argv: list[str], until: bytes, then) -> tuple[int, str]:
    """Runs `tfrecord-pipeline` with a pseudo-terminal as its terminal; once `until` has been
    printed, calls `then(terminal)`. Returns the exit status and everything printed."""
    pid, terminal = pty.fork()
    if pid == 0:
        # A shell starts background jobs with SIGINT ignored, and an ignored SIGINT survives
        # exec: the command must get the terminal's Ctrl-C however this suite was started.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.execv(sys.executable, [sys.executable, "-m", "tfrecord_pipeline.cli.main", *argv])
    printed, acted = b"", False
    try:
        while True:
            ready, _, _ = select.select([terminal], [], [], 60)
            assert ready, f"the command printed nothing more: {printed!r}"
            try:
                chunk = os.read(terminal, 4096)
            except OSError:  # EIO: the command exited and the terminal closed
                break
            if not chunk:
                break
            printed += chunk
            if not acted and until in printed:
                acted = True
                then(terminal)
    finally:
        if not acted:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        os.close(terminal)
    return os.waitstatus_to_exitcode(status), printed.decode()


def test_bar_redraws_then_ends_with_the_elapsed_time(tmp_path):
    manifest = _slow_manifest(tmp_path)
    status, printed = _in_terminal(
        ["convert", "--manifest", str(manifest), "--output", str(tmp_path / "out"), *ONE_WRITER],
        until=b"/400 images",
        then=lambda _: None,
    )
    assert status == 0, printed
    redraws = printed.split("\r\x1b[K")[1:]
    assert len(redraws) >= 2 and all(re.match(r"\[[#.]{30}\] \d+/400 images", r) for r in redraws)
    last, summary = redraws[-1].split("\r\n", 1)
    assert re.fullmatch(DONE_LINE, last), last
    assert summary.startswith("split  examples"), summary


def test_ctrl_c_ends_the_bar_line_before_the_message(tmp_path):
    manifest = _slow_manifest(tmp_path)
    status, printed = _in_terminal(
        ["convert", "--manifest", str(manifest), "--output", str(tmp_path / "out"), *ONE_WRITER],
        until=b"/400 images",
        then=lambda terminal: os.write(terminal, b"\x03"),  # the terminal's Ctrl-C
    )
    assert status == 130, printed
    last_bar = printed.split("\r\x1b[K")[-1]
    assert re.fullmatch(
        r"\[[#.]{30}\] \d+/400 images  stopped after \d+:\d\d\r\n"
        r"tfrecord-pipeline: interrupted\r\n",
        last_bar,
    ), printed


def _last_line_counts(argv: list[str], capsys) -> int:
    """Runs `tfrecord-pipeline convert` with a log as stderr; the count its bar's last line
    reached (the warnings a run prints after it aside), that line showing every row planned
    done."""
    assert main(["convert", *argv]) == 0
    err = capsys.readouterr().err
    assert "\r" not in err and "\x1b" not in err  # a log file gets plain lines
    bar = [line for line in err.splitlines() if not line.startswith("tfrecord-pipeline: ")]
    done = re.fullmatch(DONE_LINE, bar[-1])
    assert done, err
    return int(done[1].replace(",", ""))


def test_without_a_terminal_the_last_line_is_the_elapsed_time(tmp_path, capsys):
    manifest = ROOT / "sample" / "manifest.csv"
    rows = len(manifest.read_text().splitlines()) - 1
    assert (
        _last_line_counts(["--manifest", str(manifest), "--output", str(tmp_path)], capsys) == rows
    )


def test_rejected_rows_are_done_but_not_counted_converted(tmp_path, capsys):
    """The last line said `42 converted` of 42 rows, 2 of them rejected (an empty file and a
    cut one): rejected rows are done, and said apart."""
    rows = make_images(tmp_path, per_class=2)
    (tmp_path / "images" / "empty.jpg").write_bytes(b"")
    (tmp_path / "images" / "cut.jpg").write_bytes(
        (tmp_path / rows[0]["image_uri"]).read_bytes()[:300]
    )
    rows += [
        {"image_uri": f"images/{name}", "label": "coffee"} for name in ("empty.jpg", "cut.jpg")
    ]
    manifest = write_manifest(tmp_path / "m.csv", rows)
    argv = ["convert", "--manifest", str(manifest), "--output", str(tmp_path / "out")]
    assert main([*argv, "--max_error_rate", "0.5"]) == 0
    (end,) = [line for line in capsys.readouterr().err.splitlines() if "done in" in line]
    done = len(rows)
    assert f"{done}/{done} images" in end and f"({done - 2} converted, 2 rejected, at " in end
    progress = FolderProgress(str(tmp_path / "counts"))
    os.mkdir(progress.folder)
    count = progress.shard("train-00000-of-00001.tfrecord.0")
    count.add(1)
    count.add(1, rejected=1)
    count.flush()
    assert progress.counts() == (2, None) and progress.converted()[::2] == (1, 1)


TWO_HARNESSES = arguments(
    "--runner FnApiRunner --direct_num_workers 2 --direct_running_mode multi_processing"
)


@pytest.mark.slow
def test_beams_shard_writers_in_processes_of_their_own_report_every_row(tmp_path, capsys):
    """The FnApiRunner's two SDK harness processes, each shard written in pieces; the next
    night, with --incremental, past shards carried and new rows converted."""
    rows = make_images(tmp_path, per_class=4)
    more = make_images(tmp_path / "more", per_class=1, seed=11)
    grown = rows[1:] + [{**row, "image_uri": f"more/{row['image_uri']}"} for row in more]
    flags = ["--output", str(tmp_path / "out"), "--num_shards", "2", "--target_shard_mb", "0.003"]
    for night, listed in enumerate([rows, grown]):
        manifest = write_manifest(tmp_path / f"night{night}.csv", listed)
        argv = ["--manifest", str(manifest), *flags, *TWO_HARNESSES, *(["--incremental"] * night)]
        assert _last_line_counts(argv, capsys) == len(listed)
