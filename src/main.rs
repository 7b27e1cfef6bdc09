fn main() -> std::process::ExitCode {
    changeflow::cli::main()
}
