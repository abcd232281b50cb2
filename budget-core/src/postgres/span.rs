//! A statement's span, as OpenTelemetry's database conventions name it:
//! `db.system.name`, `db.operation.name` and `db.query.summary` (the
//! operation and the statement's label), never the statement's text or
//! its parameters.

use tracing::Span;
use tracing::field::Empty;

use super::error::QueryError;
use crate::telemetry::semconv::{
    BUDGET_DEPENDENCY, DB_OPERATION_NAME, DB_QUERY_SUMMARY, DB_RESPONSE_STATUS_CODE,
    DB_SYSTEM_NAME, DB_SYSTEM_POSTGRESQL, ERROR_TYPE, KIND_CLIENT, OTEL_KIND, OTEL_NAME,
    OTEL_STATUS_CODE, SPAN_TARGET, STATEMENT_SPAN, STATUS_ERROR,
};

/// The span of statement `sql`, labelled `label`, on `database`.
pub(crate) fn statement(database: &str, label: &str, sql: &str) -> Span {
    if !tracing::level_enabled!(tracing::Level::INFO) {
        return Span::none();
    }
    let operation = operation_of(sql);
    let summary = format!("{operation} {label}");
    tracing::info_span!(
        target: SPAN_TARGET,
        STATEMENT_SPAN,
        { OTEL_KIND } = KIND_CLIENT,
        { OTEL_NAME } = summary.as_str(),
        { OTEL_STATUS_CODE } = Empty,
        { DB_SYSTEM_NAME } = DB_SYSTEM_POSTGRESQL,
        { DB_OPERATION_NAME } = operation.as_str(),
        { DB_QUERY_SUMMARY } = summary.as_str(),
        { DB_RESPONSE_STATUS_CODE } = Empty,
        { ERROR_TYPE } = Empty,
        { BUDGET_DEPENDENCY } = database,
    )
}

/// Records how the statement ended on its span.
pub(crate) fn ended<T>(span: &Span, answer: &Result<T, QueryError>) {
    let Err(e) = answer else {
        return;
    };
    span.record(OTEL_STATUS_CODE, STATUS_ERROR);
    match e {
        QueryError::Sql { source, .. } => {
            let code = source.code().map_or("", |c| c.code());
            span.record(DB_RESPONSE_STATUS_CODE, code);
            span.record(ERROR_TYPE, code);
        }
        QueryError::Call(call) => {
            span.record(ERROR_TYPE, call.kind().as_str());
        }
        QueryError::Config(_) | QueryError::Lost => {
            span.record(ERROR_TYPE, "_OTHER");
        }
    }
}

/// The statement's first keyword, upper case (`SELECT`); `_OTHER` when it
/// starts with none.
fn operation_of(sql: &str) -> String {
    let word: String = sql
        .trim_start()
        .chars()
        .take_while(char::is_ascii_alphabetic)
        .take(16)
        .collect();
    if word.is_empty() {
        "_OTHER".to_owned()
    } else {
        word.to_ascii_uppercase()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operation_is_the_first_keyword_and_nothing_of_the_rest() {
        assert_eq!(
            operation_of("  select id from t where x = 'secret'"),
            "SELECT"
        );
        assert_eq!(operation_of("update stock set held = 1"), "UPDATE");
        assert_eq!(operation_of("(select 1)"), "_OTHER");
    }
}
