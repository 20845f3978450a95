"""`rebench-tui kiosk`: what sshd runs for every login of a study participant (a forced command).

It starts or resumes the participant's own session through the ordinary `start` and `resume`
commands (found on the command group, so the kiosk adds no second way of opening a session), with
the settings of the kiosk file and the participant's request from ``SSH_ORIGINAL_COMMAND``;
anything else is refused with one line. Sessions always run in a container (the docker runtime):
the local runtime's shell key would open a shell on the host.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import click

from ...config import Settings
from ...errors import UsageError
from .identity import participant_id
from .plan import decide
from .policy import load_policy
from .request import parse_request
from .sessions import own_sessions
from .takeover import end_earlier_login


@click.command("kiosk")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="the kiosk file (default: kiosk.toml in the config folder)")
@click.option("--participant", default=None,
              help="who logs in with this key (set in each participant's forced command; default: sudo's user, "
                   "else the account the kiosk runs as)")
@click.pass_context
def kiosk(ctx: click.Context, config_path: Path | None, participant: str | None) -> None:
    """A study participant's login: start or resume their own session, nothing else (see docs/study.md)."""
    request = parse_request(os.environ.get("SSH_ORIGINAL_COMMAND"))  # refused before anything is read
    settings = Settings()
    policy = load_policy(config_path or settings.config_dir / "kiosk.toml")
    who = participant_id(participant, os.environ)
    place = policy.place(who)
    sessions = policy.sessions_dir or settings.sessions
    plan = decide(request, place, own_sessions(sessions, who))
    if not sys.stdin.isatty():  # before a session is made that no screen could show
        raise UsageError(f"your session needs a terminal: log in with `ssh -t HOST {plan.action}"
                         + (f" {plan.target}`" if plan.action == "start" else "`"))
    group = ctx.find_root().command
    assert isinstance(group, click.Group)
    click.echo(f"kiosk: {who}, {plan.action} {plan.target}", err=True)
    if plan.action == "start":
        ctx.invoke(group.commands["start"], env_id=plan.target, profile=policy.profile, time_limit=policy.time_limit_s,
                   runtime_kind="docker", host=policy.host, study_url=policy.study, participant_id=who,
                   sessions_dir=sessions)
    else:
        if (said := end_earlier_login(sessions / plan.target, socket.gethostname())) is not None:
            click.echo(said, err=True)
        ctx.invoke(group.commands["resume"], session_id=plan.target, sessions_dir=sessions)
    click.echo("kiosk: log in again to go on (`ssh HOST` resumes your unfinished session)", err=True)
