fn main() {
    // First, while the engine has one thread: its environment (the store's
    // place, API keys) out of `/proc/PID/environ`, where a provider could
    // read it (docs/sandbox.md, "Environment").
    if let Err(e) = providers::sandbox::hide_engine_environment() {
        engine::say_line!("engine: the engine's environment could not be hidden from providers: {e}");
    }
    let code = engine::cli::main();
    // The cgroup made ahead for a next provider process, and the emptied
    // ones whose removal waited for one (providers::spawn).
    providers::tidy_processes();
    std::process::exit(code);
}
