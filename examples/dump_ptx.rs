fn main() {
    let dir = std::env::args().nth(1).unwrap();
    for v in fp4probe::isa::catalog() {
        let t = fp4probe::probe::ptx::fragment_kernel(&v, v.min_target, Default::default());
        std::fs::write(format!("{dir}/{}__{}.ptx", v.file_stem(), v.min_target), t).unwrap();
    }
}
