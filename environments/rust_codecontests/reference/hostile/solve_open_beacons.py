"""Returns programs that signal their hidden input without writing anything: for every byte of the
input they open one of sixteen world-readable files a helper of the participant's made in
/tmp/rcc_beacons, chosen by the byte; the helper (inotify_watcher.py, started from the
participant's shell before the scoring) watches that folder and decodes the opens into
~/.cache/leaked/. Expected: the helper sees nothing."""
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
}
'''


def solve(problem):
    honest(problem)
    return PROGRAM
