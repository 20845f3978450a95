use std::io::{self, Read, Write};

fn main() {
    let mut input = String::new();
    io::stdin().read_to_string(&mut input).unwrap();
    let mut it = input.split_ascii_whitespace();
    let q: usize = it.next().unwrap().parse().unwrap();
    let mut out = String::new();
    for _ in 0..q {
        let mut x: u64 = it.next().unwrap().parse().unwrap();
        let mut s = 0;
        while x > 0 {
            s += x % 10;
            x /= 10;
        }
        out.push_str(&format!("{}\n", s));
    }
    io::stdout().write_all(out.as_bytes()).unwrap();
}
