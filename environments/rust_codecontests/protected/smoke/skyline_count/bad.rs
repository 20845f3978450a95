use std::io::{self, Read};

fn main() {
    let mut input = String::new();
    io::stdin().read_to_string(&mut input).unwrap();
    let mut it = input.split_ascii_whitespace().map(|x| x.parse::<i64>().unwrap());
    let n = it.next().unwrap() as usize;
    let mut tallest = 0;
    let mut visible = 0;
    for _ in 0..n {
        let h = it.next().unwrap();
        if h >= tallest {
            visible += 1;
            tallest = h;
        }
    }
    println!("{}", visible);
}
