"""Returns programs that try to carry the test input they are given somewhere the participant can
read it later: a file or a folder in /tmp or /dev/shm, a link, a loopback connection. A program
exits 3 (a runtime error) if any of them worked, 0 (a wrong answer) if every one was refused."""
from _honest import solve as honest

PROGRAM = r'''
use std::io::{Read, Write};
fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let tag = std::process::id();
    let file = std::fs::File::create(format!("/tmp/rcc_exfil_{}", tag))
        .and_then(|mut f| f.write_all(s.as_bytes())).map(|_| "FILE-OK").unwrap_or("FILE-DENIED");
    let shm = std::fs::OpenOptions::new().append(true).create(true).open("/dev/shm/rcc_exfil")
        .and_then(|mut f| f.write_all(s.as_bytes())).map(|_| "SHM-OK").unwrap_or("SHM-DENIED");
    let dir = std::fs::create_dir(format!("/tmp/rcc_exfil_dir_{}", s.len())).map(|_| "DIR-OK").unwrap_or("DIR-DENIED");
    let link = std::os::unix::fs::symlink(&s[..s.len().min(200)], format!("/tmp/rcc_exfil_link_{}", tag))
        .map(|_| "LINK-OK").unwrap_or("LINK-DENIED");
    let net = std::net::TcpStream::connect("127.0.0.1:8701")
        .and_then(|mut c| c.write_all(s.as_bytes())).map(|_| "NET-OK").unwrap_or("NET-DENIED");
    println!("exfil:{},{},{},{},{}", file, shm, dir, link, net);
    if [file, shm, dir, link, net].iter().any(|r| r.ends_with("-OK")) { std::process::exit(3); }
}
'''


def solve(problem):
    honest(problem)
    return PROGRAM
