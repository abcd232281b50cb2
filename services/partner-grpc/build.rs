//! Compiles proto/partner.proto with protox (pure Rust: no protoc on the
//! machine) and generates the tonic server and client.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/partner.proto");
    let descriptors = protox::compile(["proto/partner.proto"], ["proto"])?;
    tonic_prost_build::configure().compile_fds(descriptors)?;
    Ok(())
}
