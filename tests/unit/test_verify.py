"""`verify` finds any change to a session's records and names where."""

from __future__ import annotations

import random

import pytest

from rebench_tui.trajectory.verify import verify


@pytest.fixture
def finished_session(toy_session, fake_clock):
    s = toy_session()
    for answer in ("8", "nan", "5"):
        (s.workspace / "solution" / "answer.txt").write_text(answer)
        fake_clock.advance(60)
        s.score()
    s.note("a note with unicode: é ✓")
    s.pause()
    fake_clock.advance(30)
    s.resume()
    s.submit("final")
    s.close()
    return s


def failing(report):
    return [f for f in report.findings if not f.ok]


def test_an_untouched_session_verifies(finished_session):
    report = verify(finished_session.folder)
    assert report.ok, [str(f) for f in report.findings]
    assert {f.check for f in report.findings} >= {"hash chain", "score log", "final score", "files at finish"}


def test_every_single_byte_edit_is_found_on_its_line(finished_session):
    path = finished_session.folder / "audit.jsonl"
    original = path.read_bytes()
    line_of = []
    n = 1
    for b in original:
        line_of.append(n)
        n += b == 0x0A
    rng = random.Random(7)
    positions = sorted(set(range(0, len(original), 11)) | {0, len(original) - 1, len(original) - 2})
    for pos in positions:
        data = bytearray(original)
        data[pos] = rng.choice([c for c in b"0123456789abcdefxyz {}\",:" if c != original[pos]])
        path.write_bytes(bytes(data))
        bad = failing(verify(finished_session.folder))
        assert bad, f"an edit at byte {pos} went unnoticed"
        assert bad[0].line == line_of[pos], (pos, str(bad[0]))
    path.write_bytes(original)
    assert verify(finished_session.folder).ok


def test_a_deleted_line_is_found(finished_session):
    path = finished_session.folder / "audit.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    for k in (0, 3, len(lines) - 1):
        path.write_text("".join(lines[:k] + lines[k + 1:]))
        bad = failing(verify(finished_session.folder))
        assert bad, f"deleting line {k + 1} went unnoticed"
        if k < len(lines) - 1:
            assert bad[0].check == "hash chain" and bad[0].line == k + 1
    path.write_text("".join(lines))


def test_a_reordered_pair_is_found(finished_session):
    path = finished_session.folder / "audit.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    for k in (0, 4):
        swapped = lines[:k] + [lines[k + 1], lines[k]] + lines[k + 2:]
        path.write_text("".join(swapped))
        bad = failing(verify(finished_session.folder))
        assert bad and bad[0].line == k + 1, [str(f) for f in bad]
    path.write_text("".join(lines))


def test_an_edited_score_log_is_found(finished_session):
    path = finished_session.folder / "score_log.csv"
    text = path.read_text()
    path.write_text(text.replace(",5.0,", ",4.0,"))
    bad = failing(verify(finished_session.folder))
    assert bad[0].check == "score log" and bad[0].line == 4


def test_workspace_changed_after_the_finish_is_found(finished_session):
    (finished_session.workspace / "solution" / "answer.txt").write_text("1")
    bad = failing(verify(finished_session.folder))
    assert bad[0].check == "files at finish" and "workspace/solution/answer.txt" in bad[0].detail


def test_a_cut_last_line_is_found(finished_session):
    path = finished_session.folder / "audit.jsonl"
    data = path.read_bytes()
    path.write_bytes(data[:-20])
    bad = failing(verify(finished_session.folder))
    assert bad and bad[0].line == data.count(b"\n")


def test_final_score_of_rows_with_and_without_fingerprints(tmp_path):
    """An older session's rows carry no fingerprint: each is an attempt of its own (the best
    scoring counts, as it did); rows that share one count with their median."""
    import json

    from rebench_tui.trajectory.verify import Report, check_final

    def rows(*scorings):
        return [{"content": {"type": "intermediateScore", "score": v, "message": {},
                             "details": {} if fp is None else {"attempt": {"fingerprint": fp, "n_files": 1}}}}
                for v, fp in scorings]

    def final_ok(stated, scorings):
        (tmp_path / "session.json").write_text(json.dumps({"status": "finished", "aggregation": "min", "final_score": stated}))
        report = Report(tmp_path)
        check_final(tmp_path, rows(*scorings), report)
        (f,) = [f for f in report.findings if f.check == "final score"]
        return f.ok

    old = [(-1.462, None), (-1.663, None), ("NaN", None), (-1.628, None)]
    assert final_ok(-1.663, old) and not final_ok(-1.628, old)
    new = [(-1.462, "a"), (-1.663, "a"), ("NaN", "a"), (-1.628, "a")]
    assert final_ok(-1.628, new) and not final_ok(-1.663, new)
    mixed = [(-1.7, None), (-1.462, "a"), (-1.663, "a"), (-1.628, "a")]
    assert final_ok(-1.7, mixed)
    assert final_ok(None, [("NaN", "a")])
