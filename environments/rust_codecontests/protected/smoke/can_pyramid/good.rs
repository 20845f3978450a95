use std::io::{self, Read, Write};

fn holds(k: u128) -> u128 {
    k * (k + 1) / 2
}

fn main() {
    let mut input = String::new();
    io::stdin().read_to_string(&mut input).unwrap();
    let mut it = input.split_ascii_whitespace().map(|x| x.parse::<u128>().unwrap());
    let q = it.next().unwrap() as usize;
    let mut out = String::new();
    for _ in 0..q {
        let n = it.next().unwrap();
        let (mut lo, mut hi) = (1u128, 2_000_000_000u128);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if holds(mid) >= n {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        out.push_str(&lo.to_string());
        out.push('\n');
    }
    io::stdout().write_all(out.as_bytes()).unwrap();
}
