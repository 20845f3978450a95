use std::io::{self, Read};

fn main() {
    let mut input = String::new();
    io::stdin().read_to_string(&mut input).unwrap();
    let mut it = input.split_ascii_whitespace().map(|x| x.parse::<i64>().unwrap());
    let n = it.next().unwrap() as usize;
    let mut spans: Vec<(i64, i64)> = (0..n).map(|_| (it.next().unwrap(), it.next().unwrap())).collect();
    spans.sort();
    let mut blocks = 0;
    let mut end = -1i64;
    for (l, r) in spans {
        if blocks == 0 || l > end {
            blocks += 1;
            end = r;
        } else if r > end {
            end = r;
        }
    }
    println!("{}", blocks);
}
