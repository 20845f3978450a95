use std::io::{self, Read};

fn main() {
    let mut input = String::new();
    io::stdin().read_to_string(&mut input).unwrap();
    let mut it = input.split_ascii_whitespace().map(|x| x.parse::<i64>().unwrap());
    let n = it.next().unwrap() as usize;
    let b: Vec<i64> = (0..n).map(|_| it.next().unwrap()).collect();
    let mut peaks = 0;
    for i in 0..n {
        let left_ok = i == 0 || b[i] > b[i - 1];
        let right_ok = i + 1 == n || b[i] > b[i + 1];
        if left_ok && right_ok {
            peaks += 1;
        }
    }
    println!("{}", peaks);
}
