fn main() {
    // First, while the engine has one thread: its environment (the store's
    // place, API keys) out of `/proc/PID/environ`, where a provider could
    // read it (docs/sandbox.md, "Environment").
    if let Err(e) = providers::sandbox::hide_engine_environment() {
        eprintln!("engine: the engine's environment could not be hidden from providers: {e}");
    }
    std::process::exit(engine::cli::main());
}
