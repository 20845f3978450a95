"""The kiosk's decisions (a study participant's forced ssh command): what a request may be, what
the kiosk file must say, who the participant is, and which session a request opens. The whole
login over a real sshd is tests/integration/test_kiosk_over_ssh.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rebench_tui.errors import RebenchError, UsageError
from rebench_tui.study.kiosk.identity import participant_id
from rebench_tui.study.kiosk.plan import Plan, decide
from rebench_tui.study.kiosk.policy import Place, load_policy
from rebench_tui.study.kiosk.request import Request, parse_request
from rebench_tui.study.kiosk.sessions import Held, own_sessions
from rebench_tui.trajectory.records import Participant
from tests.conftest import ROOT


@pytest.mark.parametrize("asked, want", [
    (None, Request("enter")), ("  ", Request("enter")), ("start triton_cumsum", Request("start", "triton_cumsum")),
    ("resume", Request("resume")), ("resume toy_score-2026", Request("resume", "toy_score-2026")),
])
def test_the_three_requests(asked, want):
    assert parse_request(asked) == want


@pytest.mark.parametrize("asked", [
    "ls /", "bash", "sh -c id", "start", "start a b", "start ../../etc", "start --runtime=local toy_score",
    "resume --sessions-dir /tmp", "resume a b", "start toy; id", "internal-sftp", "scp -t /srv/sessions",
    "start 'unterminated", "rebench-tui start toy_score",
])
def test_anything_else_is_refused_in_one_line(asked):
    with pytest.raises(UsageError) as exc:
        parse_request(asked)
    assert "\n" not in str(exc.value) and "only starts or resumes your own session" in exc.value.what


ADA = Place("ada", ("toy_score", "toy_assets"))


def held(sid, env="toy_score", finished=False, isolated=True, at=1):
    return Held(sid, env, finished, isolated, at)


def test_a_plain_login_resumes_the_open_session_else_starts_the_one_environment_left():
    assert decide(Request("enter"), ADA, [held("s1", finished=True), held("s2", "toy_assets", at=2)]) == Plan("resume", "s2")
    assert decide(Request("enter"), ADA, [held("s1", finished=True)]) == Plan("start", "toy_assets")
    with pytest.raises(RebenchError, match="say which environment to start.*toy_score, toy_assets"):
        decide(Request("enter"), ADA, [])
    with pytest.raises(RebenchError, match="no environment left"):
        decide(Request("enter"), ADA, [held("s1", finished=True), held("s2", "toy_assets", finished=True)])


def test_start_is_refused_for_another_environment_a_second_time_and_beside_an_open_session():
    assert decide(Request("start", "toy_score"), ADA, []) == Plan("start", "toy_score")
    with pytest.raises(RebenchError, match="'triton_cumsum' is not an environment of yours"):
        decide(Request("start", "triton_cumsum"), ADA, [])
    with pytest.raises(RebenchError, match="already worked on toy_score in session s1"):
        decide(Request("start", "toy_score"), ADA, [held("s1", finished=True)])
    with pytest.raises(RebenchError, match="your session s1 is not finished"):
        decide(Request("start", "toy_assets"), ADA, [held("s1")])


def test_resume_opens_only_ones_own_unfinished_isolated_session():
    mine = [held("toy_score-1-aaaa", finished=True), held("toy_assets-2-bbbb", "toy_assets", at=2)]
    assert decide(Request("resume"), ADA, mine) == Plan("resume", "toy_assets-2-bbbb")
    assert decide(Request("resume", "toy_assets-2"), ADA, mine) == Plan("resume", "toy_assets-2-bbbb")
    with pytest.raises(RebenchError, match="toy_score-1-aaaa is finished"):
        decide(Request("resume", "toy_score-1"), ADA, mine)
    with pytest.raises(RebenchError, match="give more of its id"):
        decide(Request("resume", "toy"), ADA, mine)
    # bob's session is not in ada's list: the same words as a session that does not exist
    with pytest.raises(RebenchError, match=r"^you have no session 'toy_score-9-bob0'$"):
        decide(Request("resume", "toy_score-9-bob0"), ADA, mine)
    with pytest.raises(RebenchError, match="not opened from this login"):
        decide(Request("resume"), ADA, [held("s1", isolated=False)])
    with pytest.raises(RebenchError, match="no unfinished session to resume"):
        decide(Request("resume"), ADA, mine[:1])


def test_the_kiosk_file(tmp_path):
    path = tmp_path / "kiosk.toml"
    path.write_text('sessions_dir = "/srv/s"\nstudy = "https://c:8765"\ntime_limit = "90m"\n'
                    '[participants.ada]\nenvironments = ["toy_score"]\n'
                    '[participants.bob]\nenvironments = ["toy_assets"]\n')
    policy = load_policy(path)
    assert policy.time_limit_s == 5400 and str(policy.sessions_dir) == "/srv/s" and policy.study == "https://c:8765"
    assert policy.place("ada").environments == ("toy_score",)
    with pytest.raises(RebenchError, match="participant 'eve' has no place"):
        policy.place("eve")
    for text, why in [("[participants.ada]\nenvironments = []\n", "must list at least one"),
                      ("runtime = 'local'\n[participants.ada]\nenvironments = ['x']\n", "unknown key.*runtime"),
                      ("[participants.ada]\nenvironments = ['x']\ntoken_file = '/t'\n", "participants.ada: unknown key.*token_file"),
                      ("time_limit = 'soon'\n[participants.ada]\nenvironments = ['x']\n", "time_limit"),
                      ("study = 3\n", "study must be a string"), ("[x", "not usable"), ("", "no \\[participants")]:
        path.write_text(text)
        with pytest.raises(RebenchError, match=why):
            load_policy(path)


def test_the_participant_is_never_what_they_typed():
    assert participant_id("ada", {"SUDO_USER": "bob"}) == "ada"
    assert participant_id(None, {"SUDO_USER": "bob"}) == "bob"
    assert participant_id(None, {}, uid=0) == "root"


def test_own_sessions_are_found_by_the_recorded_participant(toy_session, tmp_path):
    a = toy_session(participant=Participant(id="ada"))
    toy_session(participant=Participant(id="bob"))
    (tmp_path / "sessions" / "not-a-session").mkdir()
    (found,) = own_sessions(tmp_path / "sessions", "ada")
    assert found.id == a.id and not found.finished and not found.isolated  # the local runtime: never resumed here
    assert own_sessions(tmp_path / "nowhere", "ada") == []


def test_the_command_refuses_before_reading_anything(tmp_path):
    """The real command line: an arbitrary command is one line on stderr, exit 2, nothing else run."""
    r = subprocess.run([sys.executable, "-m", "rebench_tui.cli", "kiosk", "--config", str(tmp_path / "none.toml")],
                       capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(ROOT), "SSH_ORIGINAL_COMMAND": "cat /etc/shadow"})
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        "error: this login only starts or resumes your own session, so 'cat /etc/shadow' was refused: use `ssh HOST` "
        "(your session), `ssh HOST start ENV` or `ssh HOST resume`"]


def test_a_login_without_a_terminal_is_told_to_ask_for_one_before_anything_starts(tmp_path):
    config = tmp_path / "config"
    config.mkdir()
    (config / "kiosk.toml").write_text(f'sessions_dir = "{tmp_path / "sessions"}"\n'
                                       '[participants.ada]\nenvironments = ["toy_score"]\n')
    r = subprocess.run([sys.executable, "-m", "rebench_tui.cli", "kiosk", "--participant", "ada"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(ROOT), "REBENCH_CONFIG_DIR": str(config),
                            "SSH_ORIGINAL_COMMAND": "start toy_score"})
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == "error: your session needs a terminal: log in with `ssh -t HOST start toy_score`"
    assert not (tmp_path / "sessions").exists()
