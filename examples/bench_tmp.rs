fn main() {
    let a: Vec<String> = std::env::args().collect();
    let cfg = filterstore::bench::BenchConfig {
        keys: a[1].parse().unwrap(),
        lookups: a[2].parse().unwrap(),
        cold: a.get(3).is_some(),
        ..Default::default()
    };
    let r = filterstore::bench::run(&cfg, &mut |s| eprintln!("{s}")).unwrap();
    print!("{}", r.to_text());
    std::fs::write("/tmp/ex/bench.svg", r.to_svg()).unwrap();
}
