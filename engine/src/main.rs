fn main() {
    std::process::exit(engine::cli::main());
}
