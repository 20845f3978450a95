"""Returns programs that signal their hidden input without writing anything: for every byte of the
input they open one of sixteen world-readable files a helper of the participant's made in
/tmp/rcc_beacons, chosen by the byte; the helper (inotify_watcher.py, started from the
participant's shell before the scoring) watches that folder and decodes the opens into
~/.cache/leaked/. Expected: the helper sees nothing. A program exits 3 (a runtime error) if it
could open a beacon, 0 (a wrong answer) if not."""
from _honest import solve as honest

PROGRAM = r'''
use std::io::Read;
fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let mut opened = 0;
    for b in s.bytes().take(64) {
        if std::fs::File::open(format!("/tmp/rcc_beacons/{:x}", b % 16)).is_ok() { opened += 1; }
    }
    println!("beacons:{}", opened);
    if opened != 0 { std::process::exit(3); }
}
'''


def solve(problem):
    honest(problem)
    return PROGRAM
