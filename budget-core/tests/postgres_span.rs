//! A statement's span, in a test binary of its own.
//!
//! `tracing` caches each callsite's interest for the whole process. While a
//! test's scoped subscriber is the only one registered, a callsite first
//! reached on another test's thread (one with no subscriber) can be cached
//! as never enabled, and the scoped subscriber then misses that span (the
//! same reason as `stale_span.rs`). With this test alone in its binary, no
//! other thread reaches the callsite first. The rest of `postgres::Database`
//! is tested in `postgres.rs`.

mod postgres_common;

use postgres_common::{db, ms, start, within};

/// Goal 3: a statement's span follows OpenTelemetry's database
/// conventions, and carries neither its text nor its parameters.
#[tokio::test]
async fn a_statements_span_names_the_system_operation_and_summary_only() {
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::layer::SubscriberExt;

    #[derive(Clone, Default)]
    struct Fields(Arc<Mutex<Vec<(String, String)>>>);
    impl tracing::field::Visit for Fields {
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            let mut fields = self.0.lock().unwrap();
            fields.push((field.name().to_owned(), format!("{value:?}")));
        }
    }
    /// An attempt's fields, prefixed `attempt.`.
    struct Attempt(Arc<Mutex<Vec<(String, String)>>>);
    impl tracing::field::Visit for Attempt {
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            let mut fields = self.0.lock().unwrap();
            fields.push((format!("attempt.{}", field.name()), format!("{value:?}")));
        }
    }
    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Fields {
        fn on_new_span(
            &self,
            attrs: &tracing::span::Attributes<'_>,
            _: &tracing::span::Id,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            match attrs.metadata().name() {
                "budget.statement" => attrs.record(&mut self.clone()),
                "budget.attempt" => {
                    let mut fields = self.0.lock().unwrap();
                    fields.push(("attempt".to_owned(), String::new()));
                    drop(fields);
                    attrs.record(&mut Attempt(self.0.clone()));
                }
                _ => {}
            }
        }
    }

    let cluster = start();
    let db = db(&cluster, 1);
    let fields = Fields::default();
    let subscriber = tracing_subscriber::registry().with(fields.clone());
    let _guard = tracing::subscriber::set_default(subscriber);
    let sql = "update pg_settings set setting = setting where name = $1 and 'secret-text' <> ''";
    let (result, _) = within(ms(1000), db.execute("touch", sql, &[&"secret-param"])).await;
    assert!(result.is_ok(), "{result:?}");
    let fields = fields.0.lock().unwrap().clone();
    let get = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim_matches('"').to_owned())
    };
    assert_eq!(
        get("db.system.name").as_deref(),
        Some("postgresql"),
        "{fields:?}"
    );
    assert_eq!(get("db.operation.name").as_deref(), Some("UPDATE"));
    assert_eq!(get("db.query.summary").as_deref(), Some("UPDATE touch"));
    assert!(!format!("{fields:?}").contains("secret"), "{fields:?}");
    // Its attempt is a database's too: named by the statement, no HTTP
    // method.
    assert_eq!(
        get("attempt.otel.name").as_deref(),
        Some("orders-db.touch"),
        "{fields:?}"
    );
    assert_eq!(get("attempt.db.system.name").as_deref(), Some("postgresql"));
    assert!(get("attempt.http.request.method").is_none(), "{fields:?}");
}
