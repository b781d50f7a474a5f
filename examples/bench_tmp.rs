fn main() {
    let a: Vec<String> = std::env::args().collect();
    let mut cfg = filterstore::bench::BenchConfig::default();
    cfg.keys = a[1].parse().unwrap();
    cfg.lookups = a[2].parse().unwrap();
    cfg.cold = a.get(3).is_some();
    let r = filterstore::bench::run(&cfg, &mut |s| eprintln!("{s}")).unwrap();
    print!("{}", r.to_text());
    std::fs::write("/tmp/ex/bench.svg", r.to_svg()).unwrap();
}
