//! Takes budget-core/README.md's example from the README itself: the first
//! ```` ```rust ```` block, written to `$OUT_DIR/readme_example.rs` for
//! `src/main.rs` to `include!`, so that a README change that breaks the
//! example breaks this check. Lines rustdoc hides (`# ...`) are kept, as a
//! doctest compiles them.

use std::path::Path;

fn main() {
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("../budget-core/README.md");
    println!("cargo:rerun-if-changed={}", readme.display());
    let text = std::fs::read_to_string(&readme)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", readme.display()));
    let code = first_rust_block(&text)
        .unwrap_or_else(|| panic!("no closed ```rust block in {}", readme.display()));
    let out_dir = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR for build scripts");
    let out = Path::new(&out_dir).join("readme_example.rs");
    std::fs::write(&out, code).unwrap_or_else(|e| panic!("cannot write {}: {e}", out.display()));
}

/// The code of the first fenced block whose info string starts with `rust`
/// (`rust`, `rust,no_run`), rustdoc's hidden-line marks taken off.
fn first_rust_block(text: &str) -> Option<String> {
    let mut lines = text.lines();
    lines.by_ref().find(|line| {
        let info = line.trim_start().strip_prefix("```");
        info.is_some_and(|info| info == "rust" || info.starts_with("rust,"))
    })?;
    let mut code = String::new();
    for line in lines {
        if line.trim_start().starts_with("```") {
            return Some(code);
        }
        let shown = match line.trim_start() {
            "#" => "",
            hidden if hidden.starts_with("# ") => &hidden[2..],
            _ => line,
        };
        code.push_str(shown);
        code.push('\n');
    }
    None
}
