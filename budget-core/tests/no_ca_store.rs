//! A machine with no CA store (a container built `FROM scratch`, a minimal
//! image): a dependency called over plain HTTP still gets its client, and
//! an `https` one is a config error naming `url` with rustls (with
//! native-tls the store is read only at the handshake). The store is taken away
//! from a child process of this test (`SSL_CERT_FILE` and `SSL_CERT_DIR`
//! pointed at nothing, which the platform verifier then reads instead of
//! the system's): the environment is the process's, not a test's.

use std::process::Command;

use budget_core::client::DependencyConfig;

const CHILD: &str = "BUDGET_CORE_NO_CA_STORE_CHILD";
const NAME: &str = "without_a_ca_store_an_http_dependency_builds_and_an_https_one_names_its_url";

#[test]
fn without_a_ca_store_an_http_dependency_builds_and_an_https_one_names_its_url() {
    if std::env::var_os(CHILD).is_some() {
        let mut http = DependencyConfig::new("inventory", "http://127.0.0.1:9/");
        http.endpoints = vec![
            "http://127.0.0.1:9001".into(),
            "http://127.0.0.1:9002".into(),
        ];
        let http = http.build();
        assert!(http.is_ok(), "{:?}", http.err());
        let https = DependencyConfig::new("payments", "https://127.0.0.1:9/").build();
        let mut listed = DependencyConfig::new("payments", "http://127.0.0.1:9/");
        listed.endpoints = vec!["https://127.0.0.1:9443".into()];
        let listed = listed.build();
        if cfg!(feature = "native-tls") {
            // reqwest's native-tls (its choice when both TLS features are
            // on) reads the store at the handshake, not when the client
            // is built: the client builds, and its calls would fail then.
            assert!(https.is_ok(), "{:?}", https.err());
            assert!(listed.is_ok(), "{:?}", listed.err());
        } else {
            // rustls's platform verifier reads it when the client is built.
            let err = https.unwrap_err();
            assert_eq!(err.field(), "url", "{err}");
            assert!(err.to_string().contains("is https"), "{err}");
            assert_eq!(listed.unwrap_err().field(), "url");
        }
        return;
    }
    let nothing = std::env::temp_dir().join(format!("budget-no-ca-{}", std::process::id()));
    std::fs::create_dir_all(&nothing).unwrap();
    let empty = nothing.join("none.pem");
    std::fs::write(&empty, "").unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", NAME, "--test-threads=1", "--nocapture"])
        .env(CHILD, "1")
        .env("SSL_CERT_FILE", &empty)
        .env("SSL_CERT_DIR", &nothing)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&nothing);
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "the child ran the test"
    );
}
