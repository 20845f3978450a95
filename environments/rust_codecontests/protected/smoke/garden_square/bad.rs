use std::io::{self, Read, Write};

fn main() {
    let mut input = String::new();
    io::stdin().read_to_string(&mut input).unwrap();
    let mut it = input.split_ascii_whitespace().map(|x| x.parse::<u64>().unwrap());
    let q = it.next().unwrap() as usize;
    let mut out = String::new();
    for _ in 0..q {
        let x = it.next().unwrap();
        // largest k with k * k <= x
        let (mut lo, mut hi) = (1u64, 1_000_000_000u64);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if mid * mid <= x {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        out.push_str(&format!("{}\n", lo));
    }
    io::stdout().write_all(out.as_bytes()).unwrap();
}
