//! `service_kit::prometheus::install_prometheus` when the process already
//! has another `metrics` recorder: a typed error, never a panic. A binary
//! of its own, since a global recorder is set once per process.

use service_kit::prometheus::{self, PrometheusError};

#[test]
fn another_global_recorder_is_a_typed_error_not_a_panic() {
    metrics::set_global_recorder(metrics::NoopRecorder).unwrap();
    assert!(matches!(
        prometheus::install_prometheus(),
        Err(PrometheusError::OtherRecorder)
    ));
    let err = prometheus::prometheus_router::<()>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "another metrics recorder is already installed"
    );
}
