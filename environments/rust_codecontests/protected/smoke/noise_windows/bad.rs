use std::io::{self, Read};

fn main() {
    let mut input = String::new();
    io::stdin().read_to_string(&mut input).unwrap();
    let mut it = input.split_ascii_whitespace().map(|x| x.parse::<i64>().unwrap());
    let n = it.next().unwrap() as usize;
    let k = it.next().unwrap() as usize;
    let t = it.next().unwrap();
    let r: Vec<i64> = (0..n).map(|_| it.next().unwrap()).collect();
    let loud = r.windows(k).filter(|w| w.iter().sum() > t).count();
    println!("{}", loud);
}
