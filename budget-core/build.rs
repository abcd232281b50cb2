//! One name for "a feature that makes outbound calls is on": `cfg(outbound)`
//! is set when `client`, `grpc`, `tower-client`, `reqwest-middleware` or
//! `postgres` is,
//! so that the call engine and what it uses are gated by one condition
//! instead of a list every file repeats (and every new transport extends).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(outbound)");
    let outbound = [
        "CLIENT",
        "GRPC",
        "TOWER_CLIENT",
        "REQWEST_MIDDLEWARE",
        "POSTGRES",
    ]
    .iter()
    .any(|f| std::env::var_os(format!("CARGO_FEATURE_{f}")).is_some());
    if outbound {
        println!("cargo::rustc-cfg=outbound");
    }
}
