#!/usr/bin/env python3
"""task: the session from inside the shell (standard library only; installed as /usr/local/bin/task).

    task status          the working time, the clock, the scorings and the score that counts
    task score           score the files as they are now (waits for the result)
    task note TEXT       write a note into the session's record
    task submit [VALUE]  one last scoring, then the session finishes (asks first; --yes skips)
    task pause           pause the working clock
    task resume          resume it

Nothing is done here: this script only asks. It writes one request file into the session's
spool folder ($REBENCH_TASK_DIR/in; /run/rebench-task in a container) and waits for the answer
the app writes back beside it. The app checks the request and runs the same session command as its key
(s, n, x, p), so every rule and every record is the same as the key's. One request at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import time

DIR = os.environ.get("REBENCH_TASK_DIR") or "/run/rebench-task"
INBOX = os.path.join(DIR, "in")  # the participant writes here; the app writes answers into DIR, which only root can
REQUEST = "request"
TAKE_WAIT_S = 15.0  # how long the app may take to pick a request up (it looks every second)
ANSWER_WAIT_S = {"status": 60.0, "note": 60.0, "pause": 60.0, "resume": 60.0}  # score, submit: no limit
MAX_TEXT = 4000  # characters of a note or a submission value

RULE = ("Submitting ends the session: one last scoring of your files as they are now, then the session "
        "finishes and takes no more scorings or notes.")


def _say(text: str, err: bool = False) -> None:
    print(text, file=sys.stderr if err else sys.stdout, flush=True)


def _publish(request: dict) -> str | None:
    """Write the request and publish it under the one request name; None where one is waiting already."""
    path = os.path.join(INBOX, REQUEST)
    tmp = os.path.join(INBOX, f".request-{request['id']}")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(request, fh)
    try:
        for _ in range(2):
            try:
                os.link(tmp, path)  # atomic and exclusive: never overwrites a waiting request
                return path
            except FileExistsError:
                try:
                    age = time.time() - os.stat(path).st_mtime
                except OSError:
                    continue  # it was just taken: try once more
                if age < TAKE_WAIT_S:
                    return None
                os.unlink(path)  # left behind by a task command whose app was not reading (ours to remove)
        return None
    finally:
        os.unlink(tmp)


def _wait(verb: str, path: str, answer_path: str) -> int | None:
    """Wait for the app to take the request, then for its answer; an exit status where none comes."""
    deadline = time.monotonic() + TAKE_WAIT_S
    taken = False
    limit = ANSWER_WAIT_S.get(verb)
    try:
        while not os.path.exists(answer_path):
            if not taken and not os.path.exists(path):
                taken = True
                deadline = time.monotonic() + limit if limit else None
                if verb in ("score", "submit"):
                    _say("scoring… (the app is scoring your files; the shell waits)", err=True)
            if not taken and time.monotonic() > deadline:
                try:
                    os.unlink(path)
                except OSError:
                    pass
                _say("task: the app did not pick the request up: is rebench-tui open on this session? "
                     "Nothing was done.", err=True)
                return 4
            if taken and deadline is not None and time.monotonic() > deadline:
                _say("task: no answer from the app yet; it may still carry the request out (see `task status`).",
                     err=True)
                return 4
            time.sleep(0.2)
    except KeyboardInterrupt:
        _say("\ntask: stopped waiting. The app still carries the request out; see `task status`.", err=True)
        return 130
    return None


def ask(verb: str, text: str = "") -> int:
    if not os.path.isdir(INBOX):
        _say(f"task: no session spool folder at {DIR}: this shell is not in a rebench-tui session. "
             "Nothing was done. Use the app's keys instead.", err=True)
        return 2
    rid = secrets.token_hex(8)
    path = _publish({"v": 1, "id": rid, "verb": verb, "text": text})
    if path is None:
        _say("task: another task command is waiting for the app. Nothing was done; try again when it has "
             "answered.", err=True)
        return 3
    answer_path = os.path.join(DIR, f"answer-{rid}")
    waited = _wait(verb, path, answer_path)
    if waited is not None:
        return waited
    try:
        with open(answer_path, encoding="utf-8") as fh:
            answer = json.load(fh)
    except (OSError, ValueError) as exc:
        _say(f"task: the app's answer could not be read ({exc}). See `task status`.", err=True)
        return 4
    ok = bool(answer.get("ok"))
    _say(str(answer.get("text", "")), err=not ok)
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="task", description="The rebench-tui session from inside the shell. Each command asks the app, "
        "which carries it out exactly as its key would (same rules, same records).",
        epilog="The time left is also in your prompt; warnings print before the next prompt.")
    sub = ap.add_subparsers(dest="verb", metavar="COMMAND")
    sub.required = True
    sub.add_parser("status", help="working time, clock, scorings, the score that counts",
                   description="Show the working time left and used, whether the clock runs, the scorings so far "
                   "and the score that counts now.")
    sub.add_parser("score", help="score the files as they are now (like the s key)",
                   description="Run the protected scorer on your files as they are now, exactly as the s key "
                   "does, and print the result. The shell waits; Ctrl-C stops waiting (the scoring goes on).")
    p = sub.add_parser("note", help="write a note into the record (like the n key)",
                       description="Write TEXT into the session's record as a note, exactly as the n key does.")
    p.add_argument("text", nargs="+", help="the note (the words are joined with spaces)")
    p = sub.add_parser("submit", help="one last scoring, then the session finishes (like the x key)",
                       description=RULE + " Exactly as the x key does.")
    p.add_argument("value", nargs="*", help="an optional submission text (the words are joined with spaces)")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    sub.add_parser("pause", help="pause the working clock (like the p key)",
                   description="Pause the working clock, exactly as the p key does.")
    sub.add_parser("resume", help="resume the working clock (like the p key)",
                   description="Resume the working clock, exactly as the p key does.")
    a = ap.parse_args(argv)
    text = ""
    if a.verb == "note":
        text = " ".join(a.text)
    elif a.verb == "submit":
        text = " ".join(a.value)
        if not a.yes:
            _say(RULE)
            try:
                reply = input("Submit now? [y/N] ")
            except EOFError:
                reply = ""
            if reply.strip().lower() not in ("y", "yes"):
                _say("Not submitted.")
                return 1
    if len(text) > MAX_TEXT:
        _say(f"task: the text is {len(text)} characters; at most {MAX_TEXT} fit. Nothing was done; shorten it.",
             err=True)
        return 2
    return ask(a.verb, text)


if __name__ == "__main__":
    sys.exit(main())
