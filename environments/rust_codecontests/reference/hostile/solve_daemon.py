"""Leaves a daemon behind (double fork, new session), and programs that leave one too."""
import os
import time

from _honest import solve as honest


def daemon():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            for _ in range(3000):
                with open(os.path.expanduser("~/daemon_alive"), "w") as fh:
                    fh.write(str(time.time()))
                time.sleep(0.2)
            os._exit(0)
        os._exit(0)
    os.wait()


daemon()

PROGRAM = r'''
use std::process::Command;
fn main() {
    let _ = Command::new("sh").arg("-c").arg("setsid sleep 1000 >/dev/null 2>&1 < /dev/null &").status();
    let _ = Command::new("sh").arg("-c").arg("(sleep 1000 &) ; true").status();
    println!("0");
}
'''


def solve(problem):
    honest(problem)
    return PROGRAM
